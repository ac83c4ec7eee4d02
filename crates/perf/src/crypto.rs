//! `vecgate perf crypto`: what ESP's ciphers cost as the graph runs them —
//! `encrypt_batch` / `decrypt_batch` over a vector of packets, framing and
//! all — next to `openssl speed -evp` for the same cipher in the same run,
//! so that the distance to the crypto limit is a figure.
//!
//! Figures are per CPU second of the measuring thread
//! (`CLOCK_THREAD_CPUTIME_ID`, as `openssl speed` counts user time): GB/s
//! of inner packet bytes, and cycles/byte as CPU time × TSC frequency
//! ([`crate::cycles::tsc_hz`], the perf crate's fallback estimate). Each
//! figure is the median of `--runs` runs. On a shared machine another
//! process only stretches the wall clock, not these figures, as long as
//! caches are not thrashed.
//!
//! openssl's references: the cipher alone for the AEADs; for CBC+HMAC the
//! cipher and the hash measured apart (their cycles/byte summed: two
//! passes, as ESP's encrypt-then-MAC needs) and OpenSSL's "stitched"
//! AES-CBC-HMAC (one pass, built for TLS's MAC-then-encrypt, so not usable
//! for ESP, but the fastest engine it shows). `ratio` is vecgate's
//! cycles/byte over the fastest openssl figure of the same operation.

use std::process::Command;
use std::time::Duration;

use packet::{Packet, Pool};
use vecgate_ipsec::{
    Algorithm, Engine, EspError, InboundSa, Lifetime, OutboundSa, SaConfig, TunnelEndpoints,
};
use zeroize::Zeroizing;

use crate::os::thread_cpu_time;
use crate::units::parse_size;

/// Options of `vecgate perf crypto`.
#[derive(clap::Args, Debug, Clone)]
pub struct CryptoArgs {
    /// Inner packet sizes in bytes, comma-separated (K = 1024); an ESP
    /// packet over IPv4 holds at most about 65 450.
    #[arg(long, default_value = "1400,65000")]
    pub sizes: String,
    /// Packets per batch (one vector).
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// CPU seconds per figure and run.
    #[arg(long, default_value_t = 1.0)]
    pub seconds: f64,
    /// Runs per figure; the median is reported.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Ciphers (proposal keywords, comma-separated); default: all five.
    #[arg(long)]
    pub ciphers: Option<String>,
    /// Leave out `openssl speed`.
    #[arg(long)]
    pub no_openssl: bool,
    /// Pin the measuring thread (and openssl) to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Print the figures as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// One measured operation.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Figure {
    /// Inner bytes per CPU second, 10^9.
    pub gbyte_s: f64,
    pub cycles_per_byte: f64,
}

/// vecgate's figures for one cipher, size and engine.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub cipher: &'static str,
    pub size: usize,
    pub engine: &'static str,
    pub seal: Figure,
    pub open: Figure,
    /// cycles/byte over the fastest openssl figure of the same operation.
    pub seal_ratio: Option<f64>,
    pub open_ratio: Option<f64>,
}

/// One `openssl speed -evp` figure (or a sum of two, for the two passes).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Reference {
    pub cipher: &'static str,
    pub size: usize,
    /// `seal` or `open`.
    pub op: &'static str,
    /// What openssl ran, e.g. `aes-128-cbc + sha1`.
    pub what: String,
    pub figure: Figure,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CryptoReport {
    pub schema: u32,
    pub tsc_hz: f64,
    pub batch: usize,
    pub runs: usize,
    pub rows: Vec<Row>,
    pub openssl: Vec<Reference>,
}

/// The openssl runs that stand for `alg`: (what, evp names summed, op).
fn openssl_refs(alg: Algorithm) -> Vec<(&'static str, &'static [&'static str], bool)> {
    match alg {
        Algorithm::AesGcm128 => vec![
            ("seal", &["aes-128-gcm"], false),
            ("open", &["aes-128-gcm"], true),
        ],
        Algorithm::AesGcm256 => vec![
            ("seal", &["aes-256-gcm"], false),
            ("open", &["aes-256-gcm"], true),
        ],
        Algorithm::ChaCha20Poly1305 => vec![
            ("seal", &["chacha20-poly1305"], false),
            ("open", &["chacha20-poly1305"], true),
        ],
        Algorithm::AesCbc128HmacSha1_96 => vec![
            ("seal", &["aes-128-cbc", "sha1"], false),
            ("seal", &["aes-128-cbc-hmac-sha1"], false),
            ("open", &["aes-128-cbc", "sha1"], true),
        ],
        Algorithm::AesCbc256HmacSha256_128 => vec![
            ("seal", &["aes-256-cbc", "sha256"], false),
            ("seal", &["aes-256-cbc-hmac-sha256"], false),
            ("open", &["aes-256-cbc", "sha256"], true),
        ],
    }
}

/// Bytes per CPU second of one `openssl speed -mr -evp` run at one size
/// (rounded up to whole blocks); `None` if openssl is missing, failed or
/// printed no figure.
fn openssl_speed(
    evp: &str,
    size: usize,
    decrypt: bool,
    secs: u64,
    cpu: Option<usize>,
) -> Option<f64> {
    let mut c = match cpu {
        Some(n) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &n.to_string(), "openssl"]);
            c
        }
        None => Command::new("openssl"),
    };
    c.args(["speed", "-mr", "-seconds", &secs.to_string()]);
    // Whole AES blocks, as an ESP payload is: OpenSSL's stitched CBC
    // ciphers fail on anything else.
    c.args(["-bytes", &size.div_ceil(16).saturating_mul(16).to_string()]);
    // A hash has no direction; openssl refuses -decrypt for some of them.
    if decrypt && !evp.starts_with("sha") {
        c.arg("-decrypt");
    }
    c.args(["-evp", evp]);
    let out = c.output().ok()?;
    // A cipher that failed still prints a (meaningless) figure.
    if !out.status.success() || String::from_utf8_lossy(&out.stderr).contains("error") {
        return None;
    }
    parse_speed_mr(&String::from_utf8_lossy(&out.stdout))
}

/// The bytes/s of the last `+F:` line of `openssl speed -mr` output
/// (`+F:<n>:<name>:<bytes/s for each size>`).
pub fn parse_speed_mr(text: &str) -> Option<f64> {
    text.lines()
        .rfind(|l| l.starts_with("+F:"))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
}

fn config(alg: Algorithm) -> SaConfig {
    SaConfig {
        spi: 0x4242,
        algorithm: alg,
        key: Zeroizing::new(
            (0..alg.key_len())
                .map(|i| (i as u8).wrapping_mul(29))
                .collect(),
        ),
        esn: true,
        replay_window: 4096,
        lifetime: Lifetime::default(),
        tunnel: TunnelEndpoints {
            local: [192, 0, 2, 1].into(),
            remote: [192, 0, 2, 2].into(),
        },
        encap: None,
        df: true,
    }
}

/// An IPv4 UDP packet of `len` bytes (at least 28), patterned payload.
fn inner(len: usize) -> Vec<u8> {
    let len = len.max(28);
    let mut p: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    p[0] = 0x45;
    p[1] = 0;
    p[2..4].copy_from_slice(&(len.min(65535) as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&[10, 1, 0, 1]);
    p[16..20].copy_from_slice(&[10, 2, 0, 1]);
    p
}

fn figure(bytes: u64, cpu: Duration, tsc_hz: f64) -> Figure {
    let s = cpu.as_secs_f64();
    if bytes == 0 || s <= 0.0 {
        return Figure::default();
    }
    Figure {
        gbyte_s: bytes as f64 / s / 1e9,
        cycles_per_byte: s * tsc_hz / bytes as f64,
    }
}

/// Seals and opens batches of `size`-byte packets for `secs` of CPU in
/// each direction; checks that every packet came back whole.
fn measure(
    alg: Algorithm,
    engine: Engine,
    size: usize,
    batch: usize,
    secs: f64,
    tsc_hz: f64,
) -> Result<(Figure, Figure), String> {
    let err = |e: EspError| format!("{alg} on {engine}: {e}");
    let out = OutboundSa::with_engine(config(alg), engine).map_err(err)?;
    let inb = InboundSa::with_engine(config(alg), engine).map_err(err)?;
    let mut pool = Pool::new(batch);
    let mut pkts: Vec<Packet> = (0..batch).filter_map(|_| pool.alloc()).collect();
    if pkts.len() != batch {
        return Err("packet pool exhausted".into());
    }
    let data = inner(size);
    let mut st = vec![Ok(()); batch];
    let mut res = vec![Err(EspError::Truncated); batch];
    let (mut seal, mut open) = (Duration::ZERO, Duration::ZERO);
    let mut bytes = 0u64;
    let budget = Duration::from_secs_f64(secs);
    while seal < budget || open < budget {
        for p in pkts.iter_mut() {
            if !p.set_data(&data) {
                return Err(format!("{size} bytes do not fit a packet buffer"));
            }
        }
        let t = thread_cpu_time();
        out.encrypt_batch(&mut pkts, &mut st).map_err(err)?;
        seal += thread_cpu_time().saturating_sub(t);
        if let Some(Err(e)) = st.iter().find(|r| r.is_err()) {
            return Err(err(*e));
        }
        for p in pkts.iter_mut() {
            p.pull_front(20);
        }
        let t = thread_cpu_time();
        inb.decrypt_batch(&mut pkts, &mut res).map_err(err)?;
        open += thread_cpu_time().saturating_sub(t);
        for r in &res {
            r.map_err(err)?;
        }
        if pkts.iter().any(|p| p.data() != &data[..]) {
            return Err(format!("{alg} on {engine}: a packet came back changed"));
        }
        bytes += (batch * data.len()) as u64;
    }
    for p in pkts {
        pool.free(p);
    }
    Ok((figure(bytes, seal, tsc_hz), figure(bytes, open, tsc_hz)))
}

fn median(mut v: Vec<Figure>) -> Figure {
    v.sort_by(|a, b| a.cycles_per_byte.total_cmp(&b.cycles_per_byte));
    v.get(v.len() / 2).copied().unwrap_or_default()
}

/// The engines worth comparing for `alg`: the best one and, where that is
/// not aws-lc, aws-lc too.
fn engines(alg: Algorithm) -> Vec<Engine> {
    let best = Engine::best(alg);
    if best == Engine::AwsLc {
        vec![best]
    } else {
        vec![best, Engine::AwsLc]
    }
}

pub fn run(a: &CryptoArgs) -> Result<CryptoReport, String> {
    if let Some(c) = a.cpu {
        crate::os::pin_current_thread(c).map_err(|e| format!("--cpu {c}: {e}"))?;
    }
    let tsc_hz = crate::cycles::tsc_hz().ok_or("no TSC frequency (cycles/byte)")?;
    let sizes = a
        .sizes
        .split(',')
        .map(|s| {
            parse_size(s.trim())
                .map(|v| v as usize)
                .map_err(|e| format!("--sizes {s}: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let algs: Vec<Algorithm> = match &a.ciphers {
        None => Algorithm::ALL.to_vec(),
        Some(s) => s
            .split(',')
            .map(|c| c.parse().map_err(|_| format!("unknown cipher {c:?}")))
            .collect::<Result<_, _>>()?,
    };
    if a.batch == 0 || a.runs == 0 || a.seconds <= 0.0 {
        return Err("--batch, --runs and --seconds must be positive".into());
    }
    let mut rows = Vec::new();
    let mut openssl = Vec::new();
    for &alg in &algs {
        for &size in &sizes {
            if !a.no_openssl {
                for (op, evps, decrypt) in openssl_refs(alg) {
                    let mut runs = Vec::new();
                    for _ in 0..a.runs {
                        let mut cpb = 0.0;
                        for evp in evps {
                            let secs = a.seconds.ceil().max(1.0) as u64;
                            match openssl_speed(evp, size, decrypt, secs, a.cpu) {
                                Some(bps) => cpb += tsc_hz / bps,
                                None => cpb = f64::NAN,
                            }
                        }
                        if cpb.is_finite() {
                            runs.push(Figure {
                                gbyte_s: tsc_hz / cpb / 1e9,
                                cycles_per_byte: cpb,
                            });
                        }
                    }
                    if !runs.is_empty() {
                        openssl.push(Reference {
                            cipher: alg.name(),
                            size,
                            op,
                            what: evps.join(" + "),
                            figure: median(runs),
                        });
                    }
                }
            }
            for engine in engines(alg) {
                let mut seals = Vec::new();
                let mut opens = Vec::new();
                for _ in 0..a.runs {
                    let (s, o) = measure(alg, engine, size, a.batch, a.seconds, tsc_hz)?;
                    seals.push(s);
                    opens.push(o);
                }
                let best = |op: &str| {
                    openssl
                        .iter()
                        .filter(|r| r.cipher == alg.name() && r.size == size && r.op == op)
                        .map(|r| r.figure.cycles_per_byte)
                        .min_by(f64::total_cmp)
                };
                let (seal, open) = (median(seals), median(opens));
                rows.push(Row {
                    cipher: alg.name(),
                    size,
                    engine: engine.name(),
                    seal,
                    open,
                    seal_ratio: best("seal").map(|b| seal.cycles_per_byte / b),
                    open_ratio: best("open").map(|b| open.cycles_per_byte / b),
                });
            }
        }
    }
    Ok(CryptoReport {
        schema: 1,
        tsc_hz,
        batch: a.batch,
        runs: a.runs,
        rows,
        openssl,
    })
}

/// The report as text tables: vecgate's rows, then openssl's.
pub fn render(r: &CryptoReport) -> String {
    let mut s = format!(
        "ESP seal/open per CPU second, batches of {} packets, median of {} runs, cycles at {:.3} GHz TSC\n",
        r.batch,
        r.runs,
        r.tsc_hz / 1e9
    );
    s.push_str(&format!(
        "{:<17} {:>6} {:<24} {:>9} {:>6} {:>9} {:>6} {:>10} {:>10}\n",
        "cipher",
        "size",
        "engine",
        "seal GB/s",
        "c/B",
        "open GB/s",
        "c/B",
        "seal ratio",
        "open ratio"
    ));
    let ratio = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    for w in &r.rows {
        s.push_str(&format!(
            "{:<17} {:>6} {:<24} {:>9.2} {:>6.2} {:>9.2} {:>6.2} {:>10} {:>10}\n",
            w.cipher,
            w.size,
            w.engine,
            w.seal.gbyte_s,
            w.seal.cycles_per_byte,
            w.open.gbyte_s,
            w.open.cycles_per_byte,
            ratio(w.seal_ratio),
            ratio(w.open_ratio)
        ));
    }
    if !r.openssl.is_empty() {
        s.push_str(
            "\nopenssl speed -evp, same run (ratio = vecgate c/B over the fastest of these)\n",
        );
        s.push_str(&format!(
            "{:<17} {:>6} {:<5} {:<26} {:>6} {:>6}\n",
            "cipher", "size", "op", "openssl", "GB/s", "c/B"
        ));
        for o in &r.openssl {
            s.push_str(&format!(
                "{:<17} {:>6} {:<5} {:<26} {:>6.2} {:>6.2}\n",
                o.cipher, o.size, o.op, o.what, o.figure.gbyte_s, o.figure.cycles_per_byte
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_machine_readable_speed() {
        let out = "+DT:aes-128-cbc:1:1400\n+R:766240:aes-128-cbc:1.000000\n+H:1400\n+F:22:aes-128-cbc:1072736000.00\n";
        assert_eq!(parse_speed_mr(out), Some(1_072_736_000.0));
        assert_eq!(parse_speed_mr("nothing"), None);
        assert_eq!(parse_speed_mr("+F:1:x:0.00"), None);
    }

    #[test]
    fn every_cipher_round_trips_on_every_engine() {
        for alg in Algorithm::ALL {
            for e in engines(alg) {
                let (s, o) = measure(alg, e, 200, 3, 0.0001, 2e9).unwrap();
                assert!(
                    s.cycles_per_byte > 0.0 && o.cycles_per_byte > 0.0,
                    "{alg} {e}"
                );
            }
        }
    }
}
