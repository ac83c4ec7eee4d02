//! Access control. On a unix socket the file's permissions decide (0660,
//! root); on TCP every request needs `Authorization: Bearer TOKEN`: the
//! admin token may do anything, the read-only token only GET/HEAD (403
//! otherwise); a missing or wrong token is 401 (RFC 6750 §3.1). Tokens are
//! compared in constant time, never logged, and zeroized when dropped.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Longest token file accepted.
pub const MAX_TOKEN_LEN: usize = vecgate_config::secret::MAX_SECRET_LEN;
/// Shortest token accepted: 32 bytes (e.g. `openssl rand -hex 16` gives
/// 32 characters) leave nothing to guess within any throttled rate.
pub const MIN_TOKEN_LEN: usize = 32;

/// A bearer token (zeroized on drop; `Debug` does not show it).
pub struct Token(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A token from its text; surrounding whitespace (a trailing newline
    /// in the file) is not part of it. Tokens shorter than
    /// [`MIN_TOKEN_LEN`] are refused with the reason.
    pub fn new(text: &[u8]) -> Result<Token, String> {
        let t = text.trim_ascii();
        if t.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is {} bytes: at least {MIN_TOKEN_LEN} are needed (e.g. openssl rand -hex 32)",
                t.len()
            ));
        }
        if t.len() > MAX_TOKEN_LEN {
            return Err(format!("the token is longer than {MAX_TOKEN_LEN} bytes"));
        }
        if !t.iter().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the token must be printable ASCII without spaces (it travels in an HTTP header)"
                    .into(),
            );
        }
        Ok(Token(Zeroizing::new(t.to_vec())))
    }

    /// Reads a token file: a regular file that neither group nor others
    /// may read ([`vecgate_config::secret`]), holding a token
    /// [`Token::new`] accepts. Errors name the file and the reason.
    pub fn from_file(path: &std::path::Path) -> Result<Token, String> {
        let buf = vecgate_config::secret::read_secret_file(path, MAX_TOKEN_LEN)
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        Token::new(&buf).map_err(|e| format!("token file {}: {e}", path.display()))
    }

    /// Constant-time comparison (length leaks, content does not).
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_slice().ct_eq(presented).into()
    }
}

/// Who may do what.
#[derive(Debug)]
pub enum Auth {
    /// No tokens (unix socket: the socket's permissions decide).
    None,
    /// Bearer tokens required.
    Bearer {
        admin: Token,
        readonly: Option<Token>,
    },
}

/// The outcome of checking a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// 401: no or wrong token.
    Unauthenticated,
    /// 403: the read-only token on a write.
    Forbidden,
}

impl Auth {
    /// Checks the `Authorization` header value for a request that `writes`.
    pub fn check(&self, header: Option<&[u8]>, writes: bool) -> Verdict {
        let Auth::Bearer { admin, readonly } = self else {
            return Verdict::Allow;
        };
        let Some(token) = header.and_then(|h| {
            let h = h.trim_ascii();
            (h.len() > 7 && h[..7].eq_ignore_ascii_case(b"bearer ")).then(|| h[7..].trim_ascii())
        }) else {
            return Verdict::Unauthenticated;
        };
        // Evaluate both comparisons so timing does not tell which matched.
        let is_admin = admin.matches(token);
        let is_ro = readonly.as_ref().is_some_and(|r| r.matches(token));
        if is_admin {
            Verdict::Allow
        } else if is_ro {
            if writes {
                Verdict::Forbidden
            } else {
                Verdict::Allow
            }
        } else {
            Verdict::Unauthenticated
        }
    }
}

/// Counters of the API's access control (`/metrics`).
#[derive(Debug, Default)]
pub struct AuthStats {
    /// Requests refused with 401 (no or wrong token).
    pub failures: AtomicU64,
    /// Of those, the ones over their source's or the global budget
    /// (answered after [`THROTTLED_DELAY`]).
    pub throttled: AtomicU64,
    /// TCP connections that did not complete a TLS handshake (plain HTTP
    /// to the TLS port, scanners, timeouts).
    pub tls_handshake_failures: AtomicU64,
}

/// Every 401 is answered after this long: a guess costs the guesser time,
/// not the gateway (the wait is a timer, other requests go on).
pub const FAIL_DELAY: Duration = Duration::from_millis(200);
/// A 401 over budget is answered after this long (with `Retry-After`).
pub const THROTTLED_DELAY: Duration = Duration::from_secs(1);
/// Failed attempts a source may make at once, then per second.
const SOURCE_BURST: f64 = 10.0;
const SOURCE_RATE: f64 = 2.0;
/// The same for all sources together (many spoofed or borrowed sources).
const GLOBAL_BURST: f64 = 100.0;
const GLOBAL_RATE: f64 = 20.0;
/// Sources remembered at most (a full table evicts refilled buckets; past
/// that, unknown sources share one bucket).
const MAX_SOURCES: usize = 4096;
/// 401s waiting out their delay at once; more wait in line behind them,
/// so many connections do not buy more guesses per second.
const MAX_WAITING: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn full(burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            at: now,
        }
    }

    fn refill(&mut self, burst: f64, rate: f64, now: Instant) {
        let dt = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.at = now;
    }

    /// Takes one token if there is one.
    fn take(&mut self, burst: f64, rate: f64, now: Instant) -> bool {
        self.refill(burst, rate, now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Throttles failed authentications (401s) per source address (IPv6 by
/// its /64, what one host usually holds) and globally. Only failures are
/// counted: a request with a valid token is never delayed, whoever else
/// is guessing.
#[derive(Debug)]
pub struct Throttle {
    sources: Mutex<HashMap<IpAddr, Bucket>>,
    overflow: Mutex<Bucket>,
    global: Mutex<Bucket>,
    waiting: tokio::sync::Semaphore,
    pub stats: Arc<AuthStats>,
}

fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

impl Throttle {
    pub fn new(stats: Arc<AuthStats>) -> Throttle {
        let now = Instant::now();
        Throttle {
            sources: Mutex::new(HashMap::new()),
            overflow: Mutex::new(Bucket::full(SOURCE_BURST, now)),
            global: Mutex::new(Bucket::full(GLOBAL_BURST, now)),
            waiting: tokio::sync::Semaphore::new(MAX_WAITING),
            stats,
        }
    }

    /// Records a failed attempt from `source` (unknown: `None`) and
    /// returns whether it is over budget.
    pub fn fail(&self, source: Option<IpAddr>) -> bool {
        let now = Instant::now();
        self.stats.failures.fetch_add(1, Ordering::Relaxed);
        let lock = |m: &'_ Mutex<Bucket>| -> bool {
            let mut b = m.lock().unwrap_or_else(|e| e.into_inner());
            b.take(SOURCE_BURST, SOURCE_RATE, now)
        };
        let by_source = match source.map(source_key) {
            None => lock(&self.overflow),
            Some(k) => {
                let mut map = self.sources.lock().unwrap_or_else(|e| e.into_inner());
                if !map.contains_key(&k) && map.len() >= MAX_SOURCES {
                    // Forget sources whose budget is whole again.
                    map.retain(|_, b| {
                        b.refill(SOURCE_BURST, SOURCE_RATE, now);
                        b.tokens < SOURCE_BURST
                    });
                }
                if map.len() < MAX_SOURCES || map.contains_key(&k) {
                    map.entry(k)
                        .or_insert_with(|| Bucket::full(SOURCE_BURST, now))
                        .take(SOURCE_BURST, SOURCE_RATE, now)
                } else {
                    drop(map);
                    lock(&self.overflow)
                }
            }
        };
        let global = self.global.lock().unwrap_or_else(|e| e.into_inner()).take(
            GLOBAL_BURST,
            GLOBAL_RATE,
            now,
        );
        let over = !(by_source && global);
        if over {
            self.stats.throttled.fetch_add(1, Ordering::Relaxed);
        }
        over
    }

    /// Waits out a failed attempt's delay (in line behind at most
    /// `MAX_WAITING` others): a timer, not a blocked thread.
    pub async fn delay(&self, over: bool) {
        let _permit = self.waiting.acquire().await;
        tokio::time::sleep(if over { THROTTLED_DELAY } else { FAIL_DELAY }).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &[u8] = b"adm1n-0123456789abcdef0123456789abcdef";
    const RO: &[u8] = b"r3ad-0123456789abcdef0123456789abcdef";

    fn bearer(t: &[u8]) -> Vec<u8> {
        [&b"Bearer "[..], t].concat()
    }

    #[test]
    fn bearer_rules() {
        let a = Auth::Bearer {
            admin: Token::new(&[ADMIN, b"\n"].concat()).unwrap(),
            readonly: Token::new(RO).ok(),
        };
        assert_eq!(a.check(Some(&bearer(ADMIN)), true), Verdict::Allow);
        let lower = [&b"bearer "[..], ADMIN].concat();
        assert_eq!(a.check(Some(&lower), false), Verdict::Allow);
        assert_eq!(a.check(Some(&bearer(RO)), false), Verdict::Allow);
        assert_eq!(a.check(Some(&bearer(RO)), true), Verdict::Forbidden);
        assert_eq!(
            a.check(Some(&bearer(&ADMIN[..ADMIN.len() - 1])), false),
            Verdict::Unauthenticated
        );
        let basic = [&b"Basic "[..], ADMIN].concat();
        assert_eq!(a.check(Some(&basic), false), Verdict::Unauthenticated);
        assert_eq!(a.check(None, false), Verdict::Unauthenticated);
        assert_eq!(Auth::None.check(None, true), Verdict::Allow);
        assert_eq!(format!("{:?}", Token::new(ADMIN).unwrap()), "Token(..)");
    }

    #[test]
    fn failures_are_throttled_per_source_and_globally() {
        let t = Throttle::new(Arc::default());
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "2001:db8::1".parse().unwrap();
        let b2: IpAddr = "2001:db8::2".parse().unwrap();
        let over: Vec<bool> = (0..12).map(|_| t.fail(Some(a))).collect();
        assert!(over[..10].iter().all(|o| !o) && over[10..].iter().all(|o| *o));
        // Another source has its own budget; a /64 is one source.
        assert!(!t.fail(Some(b)));
        assert!((0..9).all(|_| !t.fail(Some(b2))));
        assert!(t.fail(Some(b)));
        assert_eq!(t.stats.failures.load(Ordering::Relaxed), 23);
        assert_eq!(t.stats.throttled.load(Ordering::Relaxed), 3);
        // The global budget: many sources together.
        let many = (0..200u32)
            .filter(|i| t.fail(Some(IpAddr::from((0x0a00_0000 + i).to_be_bytes()))))
            .count();
        assert!(many >= 200 - (GLOBAL_BURST as usize - 20), "{many}");
    }

    #[test]
    fn short_and_odd_tokens_are_refused() {
        assert!(Token::new(b" \n").is_err());
        let short = Token::new(b"secret").unwrap_err();
        assert!(
            short.contains("6 bytes") && short.contains("at least 32"),
            "{short}"
        );
        assert!(Token::new(&[b'a'; 31]).is_err());
        assert!(Token::new(&[b'a'; 32]).is_ok());
        assert!(Token::new(b"0123456789abcdef 0123456789abcdef").is_err());
    }

    #[test]
    fn token_files_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("vg-token-{}", std::process::id()));
        std::fs::write(&p, [ADMIN, b"\n"].concat()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::from_file(&p).unwrap_err();
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Token::from_file(&p).unwrap().matches(ADMIN));
        std::fs::write(&p, b"short\n").unwrap();
        assert!(Token::from_file(&p).unwrap_err().contains("at least 32"));
        let _ = std::fs::remove_file(&p);
    }
}
