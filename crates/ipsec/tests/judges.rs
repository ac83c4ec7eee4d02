//! Independent judges: tshark (Wireshark's ESP dissector) and scapy
//! (`SecurityAssociation`) decrypt what vecgate encrypted, and scapy
//! encrypts what vecgate must decrypt. Neither may be missing: a missing
//! tool fails the test.

mod common;

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use common::*;
use packet::{Packet, Pool};
use vecgate_ipsec::{Algorithm, Engine, EspError, InboundSa, OutboundSa, SaConfig};
use wire::pcap::{LinkType, Writer};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A scratch directory removed on drop, even when the test fails.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let p = std::env::temp_dir().join(format!(
            "vecgate-ipsec-{tag}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("VECGATE_KEEP_TMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn hexs(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Ethernet header for an outer packet.
fn ether(v6: bool) -> Vec<u8> {
    let mut e = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    e.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    e
}

/// Encrypts `inners` with `out` and writes Ethernet frames into `path`.
fn write_pcap(out: &OutboundSa, outer_v6: bool, inners: &[(Vec<u8>, bool)], path: &Path) {
    let mut pool = Pool::new(2);
    let mut w = Writer::new(
        BufWriter::new(File::create(path).unwrap()),
        LinkType::Ethernet,
        262_144,
    )
    .unwrap();
    for (i, (inner, v6)) in inners.iter().enumerate() {
        let mut p = pool.alloc().unwrap();
        assert!(p.set_data(inner));
        let seq = out.reserve(1).unwrap().start;
        out.encrypt(&mut p, *v6, seq).unwrap();
        let mut frame = ether(outer_v6);
        frame.extend_from_slice(p.data());
        w.write_packet(Duration::from_millis(i as u64), &frame)
            .unwrap();
        pool.free(p);
    }
    w.flush().unwrap();
}

/// `inners` sealed by `out` as one vector, as esp-encrypt hands it over
/// (the CBC transforms run it side by side on the multi-buffer engine
/// where the CPU has it): the packets, from `pool`, and each one's result.
fn seal_vector(
    pool: &mut Pool,
    out: &OutboundSa,
    inners: &[(Vec<u8>, bool)],
) -> (Vec<Packet>, Vec<Result<(), EspError>>) {
    let mut pkts: Vec<_> = inners
        .iter()
        .map(|(inner, _)| {
            let mut p = pool.alloc().unwrap();
            assert!(p.set_data(inner));
            p
        })
        .collect();
    let mut st = vec![Ok(()); pkts.len()];
    out.encrypt_batch(&mut pkts, &mut st).unwrap();
    (pkts, st)
}

/// One SA of the judge runs and the packets vecgate made with it.
struct Case {
    alg: Algorithm,
    outer_v6: bool,
    encap: bool,
    esn: bool,
    spi: u32,
}

fn cases(algs: &[Algorithm]) -> Vec<Case> {
    let mut v = Vec::new();
    let mut spi = 0x0001_0000;
    for &alg in algs {
        for outer_v6 in [false, true] {
            for encap in [false, true] {
                for esn in [false, true] {
                    spi += 1;
                    v.push(Case {
                        alg,
                        outer_v6,
                        encap,
                        esn,
                        spi,
                    });
                }
            }
        }
    }
    v
}

impl Case {
    fn config(&self) -> SaConfig {
        config(self.alg, self.spi, self.outer_v6, self.encap, self.esn)
    }

    fn outbound(&self) -> OutboundSa {
        let out = OutboundSa::new(self.config()).unwrap();
        if self.esn {
            // Start in the second epoch so the high ESN bits matter.
            let _ = out.reserve(1 << 32).unwrap();
        }
        out
    }

    fn esn_hi(&self) -> u64 {
        u64::from(self.esn)
    }
}

/// The inner packets every case carries: ICMPv4, UDPv6, a large ICMPv4.
fn inners() -> Inners {
    vec![
        (inner_v4(40, 0x1111), false),
        (inner_v6(30), true),
        (inner_v4(1400, 0x2222), false),
    ]
}

fn tshark_algo(alg: Algorithm) -> (&'static str, &'static str) {
    match alg {
        Algorithm::AesGcm128 | Algorithm::AesGcm256 => {
            ("AES-GCM with 16 octet ICV [RFC4106]", "NULL")
        }
        Algorithm::AesCbc128HmacSha1_96 => ("AES-CBC [RFC3602]", "HMAC-SHA-1-96 [RFC2404]"),
        Algorithm::AesCbc256HmacSha256_128 => ("AES-CBC [RFC3602]", "HMAC-SHA-256-128 [RFC4868]"),
        Algorithm::ChaCha20Poly1305 => unreachable!("tshark 4.0 has no ESP ChaCha20-Poly1305"),
    }
}

/// tshark decrypts vecgate's packets: inner addresses, protocol and
/// payload must appear, and for CBC+HMAC (32-bit sequence numbers; tshark
/// 4.0's SA table has no ESN) the ICV must be reported good.
#[test]
fn tshark_decrypts_vecgate_packets() {
    // ChaCha20-Poly1305 is not in tshark 4.0's ESP algorithm list.
    let cs = cases(&[
        Algorithm::AesGcm128,
        Algorithm::AesGcm256,
        Algorithm::AesCbc128HmacSha1_96,
        Algorithm::AesCbc256HmacSha256_128,
    ]);
    let dir = TempDir::new("tshark");
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-o".into(),
        "esp.enable_encryption_decode:TRUE".into(),
        "-o".into(),
        "esp.enable_authentication_check:TRUE".into(),
    ];
    let mut files = Vec::new();
    for c in &cs {
        let path = dir.0.join(format!("{:x}.pcap", c.spi));
        write_pcap(&c.outbound(), c.outer_v6, &inners(), &path);
        files.push(path);
        let key = c.config().key;
        let (enc, auth) = tshark_algo(c.alg);
        let ek = c.alg.enc_key_len() + c.alg.salt_len();
        let auth_key = if c.alg.is_aead() {
            String::new()
        } else {
            format!("0x{}", hexs(&key[ek..]))
        };
        args.push("-o".into());
        args.push(format!(
            "uat:esp_sa:\"{}\",\"*\",\"*\",\"0x{:08x}\",\"{enc}\",\"0x{}\",\"{auth}\",\"{auth_key}\"",
            if c.outer_v6 { "IPv6" } else { "IPv4" },
            c.spi,
            hexs(&key[..ek]),
        ));
    }
    let inn = inners();
    for (c, f) in cs.iter().zip(&files) {
        let out = Command::new("tshark")
            .args(&args)
            .arg("-r")
            .arg(f)
            .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=l"])
            .args([
                "-e",
                "esp.spi",
                "-e",
                "esp.sequence",
                "-e",
                "ip.src",
                "-e",
                "ip.dst",
            ])
            .args([
                "-e",
                "ipv6.src",
                "-e",
                "icmp.type",
                "-e",
                "udp.dstport",
                "-e",
                "data.data",
            ])
            .args([
                "-e",
                "esp.icv_good",
                "-e",
                "esp.pad_len",
                "-e",
                "_ws.malformed",
            ])
            .output()
            .expect("tshark must be installed (apt-get install tshark)");
        assert!(
            out.status.success(),
            "tshark: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let what = format!(
            "{} ov6={} encap={} esn={}",
            c.alg, c.outer_v6, c.encap, c.esn
        );
        assert_eq!(lines.len(), inn.len(), "{what}: {text}");
        for (i, (line, (inner, v6))) in lines.iter().zip(&inn).enumerate() {
            let f: Vec<&str> = line.split('|').collect();
            assert_eq!(f[0], format!("0x{:08x}", c.spi), "{what}: {line}");
            let seq = (c.esn_hi() << 32) + 1 + i as u64;
            assert_eq!(f[1], (seq as u32).to_string(), "{what}: {line}");
            if *v6 {
                assert_eq!(f[4], "fd00:1::1", "{what}: inner v6 not decrypted: {line}");
                assert_eq!(f[6], "9", "{what}: {line}");
                assert_eq!(f[7], hexs(&inner[48..]), "{what}: payload {line}");
            } else {
                assert_eq!(
                    (f[2], f[3]),
                    ("10.1.0.1", "10.2.0.1"),
                    "{what}: inner v4 not decrypted: {line}"
                );
                assert_eq!(f[5], "8", "{what}: {line}");
                assert_eq!(f[7], hexs(&inner[28..]), "{what}: payload {line}");
            }
            if !c.alg.is_aead() && !c.esn {
                assert_eq!(f[8], "1", "{what}: ICV not good: {line}");
            }
            assert_eq!(f[10], "", "{what}: malformed: {line}");
        }
    }
}

/// The CBC transforms' batches as tshark sees them, on aws-lc and on the
/// multi-buffer engine: one vector of 70 packets (two chunks of the
/// engine) whose inner packets take every padding length (0-15), a
/// 1400-byte one, IPv6 ones, and the largest an IPv4 outer header holds.
/// Every packet must decrypt with its ICV good, its padding length the
/// one RFC 4303 §2.4 gives, and its payload byte for byte.
#[test]
fn tshark_judges_cbc_batches_of_every_length_on_every_engine() {
    let dir = TempDir::new("tshark-batch");
    let mut pool = Pool::new(80);
    let mut spi = 0x0002_0000;
    for alg in [
        Algorithm::AesCbc128HmacSha1_96,
        Algorithm::AesCbc256HmacSha256_128,
    ] {
        let best = Engine::best(alg);
        let engines = if best == Engine::AwsLc {
            vec![best]
        } else {
            vec![best, Engine::AwsLc]
        };
        for engine in engines {
            spi += 1;
            let cfg = config(alg, spi, false, false, false);
            let key = cfg.key.clone();
            let out = OutboundSa::with_engine(cfg, engine).unwrap();
            assert_eq!(out.engine(), engine);
            // The largest inner packet whose ESP packet fits IPv4's 64 KB.
            let largest = (28..65_535)
                .rev()
                .find(|&n| 20 + out.esp_len(n) <= 65_535)
                .unwrap();
            let mut inn: Inners = (0..34)
                .map(|n| (inner_v4(n, 0x100 + n as u16), false))
                .collect();
            inn.push((inner_v4(1400 - 28, 0x7777), false));
            inn.push((inner_v4(largest - 28, 0x8888), false));
            inn.extend((0..32).map(|n| (inner_v6(n * 7), true)));
            inn.push((inner_v4(largest - 28 - 1, 0x9999), false));
            inn.push((inner_v4(1401 - 28, 0x7778), false));
            let (pkts, st) = seal_vector(&mut pool, &out, &inn);
            let path = dir.0.join(format!("{spi:x}.pcap"));
            let mut w = Writer::new(
                BufWriter::new(File::create(&path).unwrap()),
                LinkType::Ethernet,
                262_144,
            )
            .unwrap();
            for (i, (p, r)) in pkts.iter().zip(&st).enumerate() {
                assert_eq!(*r, Ok(()), "{alg} {engine} packet {i}");
                check_outer(p.data(), false, false);
                let mut frame = ether(false);
                frame.extend_from_slice(p.data());
                w.write_packet(Duration::from_millis(i as u64), &frame)
                    .unwrap();
            }
            w.flush().unwrap();
            drop(w);
            for p in pkts {
                pool.free(p);
            }
            let ek = alg.enc_key_len();
            let (enc, auth) = tshark_algo(alg);
            let out = Command::new("tshark")
                .args(["-n", "-o", "esp.enable_encryption_decode:TRUE"])
                .args(["-o", "esp.enable_authentication_check:TRUE", "-o"])
                .arg(format!(
                    "uat:esp_sa:\"IPv4\",\"*\",\"*\",\"0x{spi:08x}\",\"{enc}\",\"0x{}\",\"{auth}\",\"0x{}\"",
                    hexs(&key[..ek]),
                    hexs(&key[ek..])
                ))
                .arg("-r")
                .arg(&path)
                .args(["-T", "fields", "-E", "separator=|", "-E", "occurrence=l"])
                .args(["-e", "esp.sequence", "-e", "esp.icv_good", "-e", "esp.pad_len"])
                .args(["-e", "ip.src", "-e", "ipv6.src", "-e", "data.data", "-e", "_ws.malformed"])
                .output()
                .expect("tshark must be installed (apt-get install tshark)");
            assert!(
                out.status.success(),
                "tshark: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            let what = format!("{alg} on {engine}");
            assert_eq!(lines.len(), inn.len(), "{what}: {text}");
            for (i, (line, (inner, v6))) in lines.iter().zip(&inn).enumerate() {
                let f: Vec<&str> = line.split('|').collect();
                assert_eq!(f[0], (i + 1).to_string(), "{what}: sequence");
                assert_eq!(f[1], "1", "{what} #{i}: ICV not good");
                let pad = wire::esp::padding_len(inner.len(), 16);
                assert_eq!(f[2], pad.to_string(), "{what} #{i}: padding");
                let payload = if *v6 {
                    assert_eq!(f[4], "fd00:1::1", "{what} #{i}: not decrypted");
                    &inner[48..]
                } else {
                    assert_eq!(f[3], "10.1.0.1", "{what} #{i}: not decrypted");
                    &inner[28..]
                };
                assert_eq!(f[5], hexs(payload), "{what} #{i}: payload");
                assert_eq!(f[6], "", "{what} #{i}: malformed");
            }
        }
    }
}

/// Inner packets (bytes, is IPv6) of one case.
type Inners = Vec<(Vec<u8>, bool)>;

fn judge_input(cs: &[Case]) -> (serde_json::Value, Vec<Inners>) {
    let mut pool = Pool::new(4);
    let mut jcases = Vec::new();
    let mut scapy_inners = Vec::new();
    for c in cs {
        let out = c.outbound();
        let inn = inners();
        let (pkts, st) = seal_vector(&mut pool, &out, &inn);
        let mut packets = Vec::new();
        for ((p, r), (inner, _)) in pkts.into_iter().zip(st).zip(&inn) {
            r.unwrap();
            packets.push(serde_json::json!({"outer": hexs(p.data()), "inner": hexs(inner)}));
            pool.free(p);
        }
        let to_encrypt = vec![
            (inner_v4(64, 0x3333), false),
            (inner_v6(700), true),
            (inner_v4(0, 0x4444), false),
        ];
        let enc: Vec<_> = to_encrypt
            .iter()
            .enumerate()
            .map(|(i, (inner, _))| serde_json::json!({"inner": hexs(inner), "seq": 5 + i}))
            .collect();
        let key = c.config().key;
        let (local, remote) = if c.outer_v6 {
            (V6_LOCAL.to_string(), V6_REMOTE.to_string())
        } else {
            (V4_LOCAL.to_string(), V4_REMOTE.to_string())
        };
        jcases.push(serde_json::json!({
            "alg": c.alg.name(), "spi": c.spi, "key": hexs(&key), "esn": c.esn,
            "esn_hi": c.esn_hi(), "outer_v6": c.outer_v6, "encap": c.encap,
            "local": local, "remote": remote, "packets": packets, "encrypt": enc,
        }));
        scapy_inners.push(to_encrypt);
    }
    (serde_json::json!({ "cases": jcases }), scapy_inners)
}

/// scapy (with its own crypto, python-cryptography) decrypts vecgate's
/// packets with ICV/tag verification and refuses them under a wrong key;
/// vecgate decrypts what scapy encrypted. Every algorithm, IPv4/IPv6
/// outer, NAT-T on/off, ESN on/off.
#[test]
fn scapy_round_trips_both_ways() {
    let cs = cases(&Algorithm::ALL);
    let (input, scapy_inners) = judge_input(&cs);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scapy_judge.py");
    let dir = TempDir::new("scapy");
    let input_path = dir.0.join("job.json");
    std::fs::write(&input_path, serde_json::to_vec(&input).unwrap()).unwrap();
    // Debian's python3-scapy lives in /usr/bin/python3, not in a pyenv
    // python3 on PATH.
    let out = Command::new("/usr/bin/python3")
        .arg(&script)
        .stdin(File::open(&input_path).unwrap())
        .output()
        .expect("/usr/bin/python3 must exist (python3-scapy)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "scapy judge failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let res: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let results = res["results"].as_array().unwrap();
    assert_eq!(results.len(), cs.len());
    let mut pool = Pool::new(2);
    for ((c, r), inn) in cs.iter().zip(results).zip(&scapy_inners) {
        let what = format!(
            "{} ov6={} encap={} esn={}",
            c.alg, c.outer_v6, c.encap, c.esn
        );
        assert_eq!(r["decrypted"], 3, "{what}");
        assert_eq!(r["refused_wrong_key"], 3, "{what}");
        let inb = InboundSa::new(c.config()).unwrap();
        if c.esn {
            inb.set_replay_top(c.esn_hi() << 32 | 1);
        }
        let enc = r["encrypted"].as_array().unwrap();
        assert_eq!(enc.len(), inn.len());
        for (i, (e, (inner, v6))) in enc.iter().zip(inn).enumerate() {
            let bytes = hex_decode(e.as_str().unwrap());
            let off = check_outer_loose(&bytes, c.outer_v6, c.encap);
            let mut p = pool.alloc().unwrap();
            assert!(p.set_data(&bytes[off..]));
            let d = inb
                .decrypt(&mut p)
                .unwrap_or_else(|err| panic!("{what}: scapy packet {i}: {err}"));
            assert_eq!(d.seq, (c.esn_hi() << 32) + 5 + i as u64, "{what}");
            assert_eq!(d.inner_v6, *v6);
            assert_eq!(p.data(), &inner[..], "{what}");
            // And a replay of it is refused.
            assert!(p.set_data(&bytes[off..]));
            assert_eq!(inb.decrypt(&mut p).unwrap_err().as_str(), "replay");
            pool.free(p);
        }
    }
}

fn hex_decode(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Offset of the ESP header in a packet scapy built (its outer header
/// comes from its own template, so only the structure is checked).
fn check_outer_loose(b: &[u8], v6: bool, encap: bool) -> usize {
    let (mut off, proto) = if v6 {
        assert_eq!(b[0] >> 4, 6);
        (40, b[6])
    } else {
        assert_eq!(b[0] >> 4, 4);
        (usize::from(b[0] & 15) * 4, b[9])
    };
    if encap {
        assert_eq!(proto, 17);
        off += 8;
    } else {
        assert_eq!(proto, 50);
    }
    off
}
