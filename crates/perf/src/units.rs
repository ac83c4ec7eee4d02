//! Sizes with NTttcp-style suffixes (`64K`, `1M`) and rate formatting.
//!
//! Suffixes are binary (K = 1024), as NTttcp's `-b`/`-l`; rates are decimal
//! (Gbit/s = 10^9 bit/s, MB/s = 10^6 B/s), as every throughput tool prints them.

use std::fmt;

/// Why a size or CPU list did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("empty value")]
    Empty,
    #[error("`{0}` is not a number with an optional K/M/G suffix")]
    BadSize(String),
    #[error("`{0}` overflows")]
    Overflow(String),
    #[error("`{0}` is not a CPU list such as `0,2-3`")]
    BadCpuList(String),
}

/// Parses `65536`, `64K`, `64k`, `64KB`, `64KiB`, `1M`, `1G` into bytes.
pub fn parse_size(s: &str) -> Result<u64, ParseError> {
    let t = s.trim();
    if t.is_empty() {
        return Err(ParseError::Empty);
    }
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(ParseError::BadSize(s.to_string()));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| ParseError::Overflow(s.to_string()))?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(ParseError::BadSize(s.to_string())),
    };
    n.checked_mul(mult)
        .ok_or_else(|| ParseError::Overflow(s.to_string()))
}

/// Parses a Linux CPU list (`0`, `0,2`, `0-3,6`) into CPU numbers, in order.
/// At most `max` entries, so a hostile `0-4000000000` cannot allocate unboundedly.
pub fn parse_cpu_list(s: &str, max: usize) -> Result<Vec<usize>, ParseError> {
    let bad = || ParseError::BadCpuList(s.to_string());
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(bad());
        }
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (
                a.trim().parse::<usize>().map_err(|_| bad())?,
                b.trim().parse::<usize>().map_err(|_| bad())?,
            ),
            None => {
                let v = part.parse::<usize>().map_err(|_| bad())?;
                (v, v)
            }
        };
        if lo > hi || hi - lo >= max || out.len() + (hi - lo) >= max {
            return Err(bad());
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}

/// A size printed back with the largest exact binary suffix (`65536` → `64K`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v >= 1 << 30 && v.trailing_zeros() >= 30 {
            write!(f, "{}G", v >> 30)
        } else if v >= 1 << 20 && v.trailing_zeros() >= 20 {
            write!(f, "{}M", v >> 20)
        } else if v >= 1 << 10 && v.trailing_zeros() >= 10 {
            write!(f, "{}K", v >> 10)
        } else {
            write!(f, "{v}")
        }
    }
}

/// Bits per second in Gbit/s (decimal); 0 for an empty or zero-length window.
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 && secs.is_finite() {
        bytes as f64 * 8.0 / secs / 1e9
    } else {
        0.0
    }
}

/// Bytes per second in MB/s (10^6 B/s); 0 for an empty window.
pub fn mbyte_s(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 && secs.is_finite() {
        bytes as f64 / secs / 1e6
    } else {
        0.0
    }
}

/// A rate of events per second; 0 for an empty window.
pub fn per_sec(count: u64, secs: f64) -> f64 {
    if secs > 0.0 && secs.is_finite() {
        count as f64 / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1"), Ok(1));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("256K"), Ok(262144));
        assert_eq!(parse_size("64KB"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size(" 2G "), Ok(2 << 30));
        assert_eq!(parse_size("1500"), Ok(1500));
    }

    #[test]
    fn bad_sizes() {
        assert_eq!(parse_size(""), Err(ParseError::Empty));
        assert!(matches!(parse_size("K"), Err(ParseError::BadSize(_))));
        assert!(matches!(parse_size("12X"), Err(ParseError::BadSize(_))));
        assert!(matches!(parse_size("-1"), Err(ParseError::BadSize(_))));
        assert!(matches!(parse_size("1.5M"), Err(ParseError::BadSize(_))));
        assert!(matches!(
            parse_size("18446744073709551615K"),
            Err(ParseError::Overflow(_))
        ));
        assert!(matches!(
            parse_size("99999999999999999999999"),
            Err(ParseError::Overflow(_))
        ));
    }

    #[test]
    fn size_display_round_trips() {
        for s in ["1", "1500", "1K", "64K", "256K", "1M", "3G"] {
            let v = parse_size(s).unwrap();
            assert_eq!(Size(v).to_string(), s);
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0", 64), Ok(vec![0]));
        assert_eq!(parse_cpu_list("0,2-4, 7", 64), Ok(vec![0, 2, 3, 4, 7]));
        assert!(parse_cpu_list("", 64).is_err());
        assert!(parse_cpu_list("3-1", 64).is_err());
        assert!(parse_cpu_list("a", 64).is_err());
        assert!(parse_cpu_list("0-4000000000", 64).is_err());
        assert!(parse_cpu_list("0-63", 64).is_ok());
        assert!(parse_cpu_list("0-63,64", 64).is_err());
    }

    #[test]
    fn rates() {
        // 1.25 GB in 1 s is exactly 10 Gbit/s.
        assert_eq!(gbps(1_250_000_000, 1.0), 10.0);
        assert_eq!(mbyte_s(1_250_000_000, 2.0), 625.0);
        assert_eq!(per_sec(500, 0.5), 1000.0);
        assert_eq!(gbps(1000, 0.0), 0.0);
        assert_eq!(gbps(0, 3.0), 0.0);
        assert_eq!(per_sec(1, f64::NAN), 0.0);
    }
}
