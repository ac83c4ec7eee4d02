//! IKEv2 with certificates (`auth = "pubkey"`) in `vecgate run`, against
//! strongSwan charon (kernel-libipsec), and `vecgate check` on the
//! certificate keys:
//!
//!   h1 10.1.0.2 ── a-lan [gwA: vecgate] a-wan 192.0.2.1 ══ 192.0.2.2 b-wan [gwB: charon] b-lan ── h2 10.2.0.2
//!
//! The PKI (root CA, intermediate CA, one end entity per gateway) is made
//! by `openssl` in the test. Needs root, openssl and strongSwan; fails
//! (never skips) when they are missing.

#[path = "common/charon.rs"]
mod charon;
mod common;

use charon::{wait_established, Auth, Charon, CharonCfg};
use common::pki::Pki;
use common::sites::Sites;
use common::{tcp_transfer, unique, vecgate_bin, wait_until, Capture, Gateway, Netns, TempFiles};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// Two cores for everyone: one topology at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// gwA's configuration: one IKE tunnel to gwB, `ike` its `[tunnel.ike]`
/// body.
fn vecgate_cfg(ike: &str) -> (String, String) {
    site_cfg('a', ike)
}

/// The configuration of gateway `side` (`'a'`: gwA, `'b'`: gwB as vecgate)
/// with one IKE tunnel to the other, `ike` its `[tunnel.ike]` body (an
/// empty `ike`: no tunnel).
fn site_cfg(side: char, ike: &str) -> (String, String) {
    let (n, far) = if side == 'a' { (1, 2) } else { (2, 1) };
    let tunnel = if ike.is_empty() {
        String::new()
    } else {
        format!(
            r#"
[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.{n}"
remote = "192.0.2.{far}"
vrf = "blue"
traffic = ["10.{far}.0.0/24"]

[tunnel.ike]
{ike}
"#
        )
    };
    let sock = std::env::temp_dir().join(format!("{}.sock", unique("ic")));
    let text = format!(
        r#"[gateway]
name = "gw-{side}"
api = "unix:{sock}"

[[interface]]
name = "lan"
host = "{side}-lan"
driver = "af_packet"
addresses = ["10.{n}.0.1/24"]
vrf = "blue"

[[interface]]
name = "wan"
host = "{side}-wan"
driver = "af_packet"
addresses = ["192.0.2.{n}/24"]
{tunnel}"#,
        sock = sock.display(),
    );
    (text, format!("unix:{}", sock.display()))
}

/// `[tunnel.ike]` with vecgate's certificate `a` from `pki`.
fn pubkey_ike(pki: &Pki, initiate: bool) -> String {
    site_ike(pki, "a", "b", initiate)
}

/// `[tunnel.ike]` of the gateway with certificate `me` of `pki`, whose
/// peer has certificate `peer`.
fn site_ike(pki: &Pki, me: &str, peer: &str, initiate: bool) -> String {
    format!(
        "auth = \"pubkey\"\ncert_file = \"{}\"\nkey_file = \"{}\"\nca_files = [\"{}\"]\nlocal_id = \"{me}.vecgate.test\"\nremote_id = \"{peer}.vecgate.test\"\nike_proposals = [\"aes256gcm16-prfsha256-x25519\"]\nesp_proposals = [\"aes256gcm16\"]\ninitiate = {initiate}\n",
        pki.path(&format!("{me}.pem")).display(),
        pki.path(&format!("{me}.key")).display(),
        pki.path("root.pem").display(),
    )
}

/// charon as gwB with certificate `b` of `pki`.
fn charon_with_certs(ns: &Netns, pki: &Pki, initiate: bool) -> Charon {
    charon_signing(
        ns,
        pki,
        pki,
        ("b.crt", "b.key"),
        "b.vecgate.test",
        initiate,
        false,
    )
}

/// charon as gwB trusting `trust`'s root, with identity `id` and the
/// certificate and key `(crt, key)` of `p`; its IKE keys logged with
/// `keys_logged`.
fn charon_signing(
    ns: &Netns,
    trust: &Pki,
    p: &Pki,
    (crt, key): (&str, &str),
    id: &str,
    initiate: bool,
    keys_logged: bool,
) -> Charon {
    let mut files: Vec<(String, Vec<u8>)> = vec![
        ("x509ca/root.pem".into(), trust.read("root.pem")),
        ("x509ca/inter.pem".into(), p.read("inter.pem")),
        ("x509/b.pem".into(), p.read(crt)),
        ("pkcs8/b.key".into(), p.read(key)),
    ];
    // Deeper intermediates (`i2.pem`, `i3.pem`, ...) when `p` has them:
    // charon sends those of its chain in CERT payloads.
    for i in 2.. {
        let f = format!("i{i}.pem");
        if !p.path(&f).exists() {
            break;
        }
        files.push((format!("x509ca/{f}"), p.read(&f)));
    }
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(n, d)| (n.as_str(), d.as_slice()))
        .collect();
    Charon::start_auth(
        ns,
        &CharonCfg {
            local: "192.0.2.2",
            remote: "192.0.2.1",
            local_id: id,
            remote_id: "a.vecgate.test",
            local_ts: "10.2.0.0/24",
            remote_ts: "10.1.0.0/24",
            ike: "aes256gcm16-prfsha256-x25519",
            esp: "aes256gcm16",
            psk: "unused",
            initiate,
        },
        "",
        &Auth {
            local: Some("auth = pubkey\n      certs = b.pem"),
            remote: Some("auth = pubkey"),
            files: &refs,
            ike_keys_logged: keys_logged,
        },
    )
}

/// vecgate and charon authenticate each other with certificates through
/// an intermediate CA (ECDSA P-256 with vecgate initiating, RSA-2048
/// with charon initiating and signing with RSASSA-PSS), then traffic
/// crosses the tunnel byte-exact both ways.
#[test]
fn vecgate_and_charon_authenticate_with_certificates() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (key, who initiates, how charon saw vecgate sign)
    for (newkey, vecgate_initiates, scheme) in [
        (
            "ec -pkeyopt ec_paramgen_curve:P-256",
            true,
            "ECDSA_WITH_SHA256_DER",
        ),
        ("rsa:2048", false, "RSA_EMSA_PSS_SHA2_256"),
    ] {
        let pki = Pki::new(newkey);
        pki.leaf("a", "a.vecgate.test");
        pki.leaf("b", "b.vecgate.test");
        let Sites { h1, h2, ga, gb, .. } = Sites::new();
        charon::router(&gb, &h2, "", &[]);
        let ch = charon_with_certs(&gb, &pki, !vecgate_initiates);
        let (cfg, api) = vecgate_cfg(&pubkey_ike(&pki, vecgate_initiates));
        let gw = Gateway::start(&ga, &cfg);
        if !vecgate_initiates {
            let _ = ch.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
        }
        let st = wait_established(&api, &gw, 30);
        let sas = ch.wait_sas("INSTALLED", 20);
        assert!(sas.contains("ESTABLISHED"), "{sas}");
        let log = ch.log();
        assert!(
            log.contains(&format!("authentication of 'a.vecgate.test' with {scheme}"))
                && log.contains("authentication of 'b.vecgate.test' (myself) with"),
            "charon did not authenticate vecgate's certificate:\n{log}"
        );
        assert_eq!(st["initiator"], vecgate_initiates, "{st:#}");
        // `show routes` lists the route the tunnel's `traffic` makes.
        let routes = charon::cli_json(&api, "routes");
        assert!(
            routes
                .as_array()
                .is_some_and(|v| v.iter().any(|r| r["prefix"] == "10.2.0.0/24"
                    && r["via"] == "ike0"
                    && r["source"] == "ipsec"
                    && r["vrf"] == "blue")),
            "{routes:#}"
        );
        tcp_transfer(&h1, &h2, "10.2.0.2", 1 << 20);
        tcp_transfer(&h2, &h1, "10.1.0.2", 1 << 20);
        assert!(
            gw.log_contains("IKE: child SA installed"),
            "{}",
            gw.log_text()
        );
    }
}

/// `vecgate check` reads every certificate file as the gateway will and
/// names the file and its line: a key readable by others, a key that is
/// not the certificate's, a CA file that holds no certificate; a
/// complete configuration passes.
#[test]
fn check_reads_certificate_files_with_their_lines() {
    let pki = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
    pki.leaf("a", "a.vecgate.test");
    pki.leaf("b", "b.vecgate.test");
    let mut files = TempFiles::default();
    let check = |text: &str, files: &mut TempFiles| {
        let f = files.write("check.toml", text);
        let out = Command::new(vecgate_bin())
            .args(["check", "--config", &f])
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
            f,
        )
    };
    let (good, _) = vecgate_cfg(&pubkey_ike(&pki, true));
    let (code, out, _) = check(&good, &mut files);
    assert_eq!(code, Some(0), "{out}");
    // The complete configuration with path `from` swapped for `to`:
    // refused, the error at `key`'s line in the file; the output.
    let mut refused = |from: &str, to: &Path, key: &str| {
        let (bad, _) = vecgate_cfg(
            &pubkey_ike(&pki, true)
                .replace(&*pki.path(from).to_string_lossy(), &to.to_string_lossy()),
        );
        let (code, out, f) = check(&bad, &mut files);
        assert_eq!(code, Some(1), "{out}");
        let line = line_of(&bad, key);
        assert!(
            out.contains(&format!("{f}:{line}: tunnel ike0: {key}")),
            "{out}"
        );
        out
    };
    // The key of the other certificate.
    refused("a.key", &pki.path("b.key"), "cert_file");
    // A private key others may read.
    let exposed = pki.path("exposed.key");
    std::fs::write(&exposed, pki.read("a.key")).unwrap();
    let out = refused("a.key", &exposed, "key_file");
    assert!(out.contains("chmod 600"), "{out}");
    // A CA file without a certificate.
    refused("root.pem", &pki.path("a.key"), "ca_files");
    // Keys the methods do not use, and a missing one.
    let (bad, _) = vecgate_cfg(&format!(
        "auth = \"pubkey\"\ncert_file = \"{}\"\nkey_file = \"{}\"\nremote_auth = \"psk\"\nca_files = [\"{}\"]\n",
        pki.path("a.pem").display(),
        pki.path("a.key").display(),
        pki.path("root.pem").display(),
    ));
    let (code, out, _) = check(&bad, &mut files);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("missing required key \"psk_file\"")
            && out.contains("ca_files is not used with auth = \"pubkey\", remote_auth = \"psk\""),
        "{out}"
    );
}

/// The 1-based line of `text` that holds `key = `.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| l.starts_with(&format!("{key} = ")))
        .unwrap()
        + 1
}

/// charon (initiating) and vecgate authenticate with certificates; then
/// charon's certificate is revoked in the CRL vecgate reads, and `vecgate
/// reload` makes the next rekey charon asks for fail: vecgate answers
/// AUTHENTICATION_FAILED, deletes the IKE SA with its child SAs, and
/// says why in its log and in `GET /ike`.
#[test]
fn a_revoked_peer_is_refused_at_the_next_rekey_after_a_reload() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pki = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
    pki.leaf("a", "a.vecgate.test");
    pki.leaf("b", "b.vecgate.test");
    pki.crl(&[]);
    let Sites { h1, h2, ga, gb, .. } = Sites::new();
    charon::router(&gb, &h2, "", &[]);
    let ch = charon_with_certs(&gb, &pki, true);
    let ike = format!(
        "{}crl_files = [\"{}\"]\n",
        pubkey_ike(&pki, false),
        pki.path("inter.crl").display()
    );
    let (cfg, api) = vecgate_cfg(&ike);
    let gw = Gateway::start(&ga, &cfg);
    let _ = ch.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
    let st = wait_established(&api, &gw, 30);
    assert_eq!(
        st["auth"]["peer_cert"]["subject"], "C=CH, O=vecgate test, CN=b",
        "{st:#}"
    );
    assert_eq!(st["auth"]["remote_method"], "ecdsa-sha256", "{st:#}");
    assert_eq!(
        st["local_cert"]["subject"], "C=CH, O=vecgate test, CN=a",
        "{st:#}"
    );
    tcp_transfer(&h1, &h2, "10.2.0.2", 256 << 10);
    // Revoked, and the gateway told.
    pki.crl(&["b"]);
    let (ok, out) = gw.reload(&cfg);
    assert!(ok, "{out}");
    assert!(
        wait_until(10, || gw
            .log_contains("certificates, keys and CRLs reloaded")),
        "{}",
        gw.log_text()
    );
    let out = ch.swanctl(&["--rekey", "--child", "net"]);
    eprintln!("charon's rekey: {out}");
    assert!(
        wait_until(20, || {
            let st = charon::ike_state(&api);
            st["state"] != "established" && st["child_sas"].as_array().is_none_or(|c| c.is_empty())
        }),
        "{:#}\n{}",
        charon::ike_state(&api),
        gw.log_text()
    );
    assert!(gw.log_contains("certificate revoked"), "{}", gw.log_text());
    // charon handles our answer and our DELETE that follows it in jobs
    // of their own: when the DELETE's job runs first, the IKE SA is gone
    // and the answer is dropped unparsed.
    assert!(
        wait_until(10, || {
            let log = ch.log();
            log.contains("parsed CREATE_CHILD_SA response 2 [ N(AUTH_FAILED) ]")
                || log.contains("received DELETE for IKE_SA")
        }),
        "charon was not told:\n{}",
        ch.log()
    );
    // No ESP SA left in the dataplane (an inbound SA outlives its child SA
    // for a grace period of stragglers).
    assert!(
        wait_until(10, || charon::cli_json(&api, "sa")
            .as_array()
            .is_some_and(Vec::is_empty)),
        "{:#}",
        charon::cli_json(&api, "sa")
    );
}

/// Both gateways are vecgate and authenticate each other with
/// certificates through an intermediate CA (Ed25519 with gwA initiating,
/// ECDSA P-384 with gwB initiating, gwA's tunnel then added live by
/// `vecgate tunnel add --ike-cert-file ...`): each shows the other's
/// certificate and the scheme it signed with, and traffic crosses
/// byte-exact both ways, every ESP packet one gateway sent counted in by
/// the other.
#[test]
fn vecgate_to_vecgate_with_certificates() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // (key, gwA initiates, the scheme each signs with)
    for (newkey, a_initiates, scheme) in [
        ("ed25519", true, "ed25519"),
        ("ec -pkeyopt ec_paramgen_curve:P-384", false, "ecdsa-sha384"),
    ] {
        let pki = Pki::new(newkey);
        pki.leaf("a", "a.vecgate.test");
        pki.leaf("b", "b.vecgate.test");
        let Sites { h1, h2, ga, gb, .. } = Sites::new();
        let live = !a_initiates;
        let (cfg_b, api_b) = site_cfg('b', &site_ike(&pki, "b", "a", !a_initiates));
        let ike_a = if live {
            String::new()
        } else {
            site_ike(&pki, "a", "b", a_initiates)
        };
        let (cfg_a, api_a) = site_cfg('a', &ike_a);
        let gw_a = Gateway::start(&ga, &cfg_a);
        if live {
            let file = |f: &str| pki.path(f).to_string_lossy().into_owned();
            let (cert, key, ca) = (file("a.pem"), file("a.key"), file("root.pem"));
            let out = Command::new(vecgate_bin())
                .args(["tunnel", "add", "ike0", "ipsec", "192.0.2.1", "192.0.2.2"])
                .args(["--vrf", "blue", "--traffic", "10.2.0.0/24"])
                .args(["--ike-cert-file", &cert, "--ike-key-file", &key])
                .args(["--ike-ca-file", &ca, "--ike-responder"])
                .args(["--ike-local-id", "a.vecgate.test"])
                .args(["--ike-remote-id", "b.vecgate.test"])
                .args(["--ike-proposal", "aes256gcm16-prfsha256-x25519"])
                .args(["--esp-proposal", "aes256gcm16", "--api", &api_a])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let gw_b = Gateway::start(&gb, &cfg_b);
        let a = wait_established(&api_a, &gw_a, 30);
        let b = wait_established(&api_b, &gw_b, 30);
        assert_eq!(a["initiator"], a_initiates, "{a:#}");
        assert_eq!(b["initiator"], !a_initiates, "{b:#}");
        for (me, st, peer) in [("a", &a, "b"), ("b", &b, "a")] {
            let auth = &st["auth"];
            assert_eq!(
                (
                    auth["local_method"].as_str(),
                    auth["remote_method"].as_str()
                ),
                (Some(scheme), Some(scheme)),
                "{me}: {st:#}"
            );
            assert_eq!(
                auth["peer_cert"]["subject"],
                format!("C=CH, O=vecgate test, CN={peer}"),
                "{me}: {st:#}"
            );
            assert_eq!(
                auth["peer_cert"]["issuer"], "C=CH, O=vecgate test, CN=Test Intermediate",
                "{me}: {st:#}"
            );
            assert_eq!(
                st["local_cert"]["subject"],
                format!("C=CH, O=vecgate test, CN={me}"),
                "{me}: {st:#}"
            );
        }
        assert_eq!(a["child_sas"][0]["spi_in"], b["child_sas"][0]["spi_out"]);
        assert_eq!(a["child_sas"][0]["spi_out"], b["child_sas"][0]["spi_in"]);
        tcp_transfer(&h1, &h2, "10.2.0.2", 1 << 20);
        tcp_transfer(&h2, &h1, "10.1.0.2", 1 << 20);
        // What one gateway's outbound SA counted, the other's inbound SA
        // counted in (plain ESP, no loss on a veth).
        let sas = |api: &str| {
            let v = charon::cli_json(api, "sa");
            let mut out = (0, 0);
            for s in v.as_array().cloned().unwrap_or_default() {
                let n = s["packets"].as_u64().unwrap_or(0);
                if s["direction"] == "outbound" {
                    out.0 += n;
                } else {
                    out.1 += n;
                }
            }
            out
        };
        let ((a_out, a_in), (b_out, b_in)) = (sas(&api_a), sas(&api_b));
        eprintln!("{newkey}: ESP packets a out {a_out} in {a_in}, b out {b_out} in {b_in}");
        assert!(a_out > 700 && b_out > 700, "{a_out} {b_out}");
        assert_eq!((a_out, b_out), (b_in, a_in));
    }
}

/// Each way a peer's certificate is refused, judged on the wire: charon
/// initiates with a certificate that is expired, not yet valid, revoked
/// (in the CRL vecgate reads), for another identity, from an unknown CA,
/// or at the end of a chain longer than vecgate accepts. vecgate answers
/// its IKE_AUTH with AUTHENTICATION_FAILED (tshark decrypts the exchange
/// with the keys charon logged), logs the reason, and installs no child
/// SA.
#[test]
fn each_refusal_is_authentication_failed_on_the_wire() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pki = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
    pki.leaf("a", "a.vecgate.test");
    for n in ["b", "brev", "bid"] {
        pki.leaf(
            n,
            if n == "bid" {
                "c.vecgate.test"
            } else {
                "b.vecgate.test"
            },
        );
    }
    pki.redate("b", "bexp", "20200101000000Z", "20200201000000Z");
    pki.redate("b", "bnyv", "21000101000000Z", "21000201000000Z");
    pki.crl(&["brev"]);
    // inter → i2 → i3 → i4 → bdeep: five certificates sent, one more
    // than vecgate's chain bound.
    for (i, ca) in [(2, "inter"), (3, "i2"), (4, "i3")] {
        pki.sign(
            &format!("i{i}"),
            &format!("/C=CH/O=vecgate test/CN=I{i}"),
            ca,
            "ca.ext",
        );
    }
    std::fs::write(
        pki.path("bdeep.ext"),
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=DNS:b.vecgate.test\n",
    )
    .unwrap();
    pki.sign("bdeep", "/C=CH/O=vecgate test/CN=bdeep", "i4", "bdeep.ext");
    let other = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
    other.leaf("b", "b.vecgate.test");
    let Sites {
        ga,
        gb,
        h1: _h1,
        h2,
        ..
    } = Sites::new();
    charon::router(&gb, &h2, "", &[]);
    let ike = format!(
        "{}crl_files = [\"{}\"]\n",
        pubkey_ike(&pki, false),
        pki.path("inter.crl").display()
    );
    let (cfg, api) = vecgate_cfg(&ike);
    let gw = Gateway::start(&ga, &cfg);
    // (charon's certificate: PKI, file, key; its identity; vecgate's reason)
    let cases: [(&Pki, &str, &str, &str, &str); 6] = [
        (
            &pki,
            "bexp.crt",
            "b.key",
            "b.vecgate.test",
            "certificate expired",
        ),
        (&pki, "bnyv.crt", "b.key", "b.vecgate.test", "not yet valid"),
        (
            &pki,
            "brev.crt",
            "brev.key",
            "b.vecgate.test",
            "certificate revoked",
        ),
        (
            &pki,
            "bid.crt",
            "bid.key",
            "c.vecgate.test",
            "identity mismatch",
        ),
        (&other, "b.crt", "b.key", "b.vecgate.test", "unknown CA"),
        (
            &pki,
            "bdeep.crt",
            "bdeep.key",
            "b.vecgate.test",
            "chain too long",
        ),
    ];
    for (p, crt, key, id, reason) in cases {
        let ch = charon_signing(&gb, &pki, p, (crt, key), id, true, true);
        let mut cap = Capture::start_with(&gb, "b-wan", "", "udp port 500 or udp port 4500");
        let _ = ch.swanctl(&["--initiate", "--child", "net", "--timeout", "20"]);
        assert!(
            wait_until(20, || gw.log_contains(reason)),
            "{reason}: {}\ncharon:\n{}",
            gw.log_text(),
            ch.log()
        );
        assert!(
            wait_until(10, || ch
                .log()
                .contains("received AUTHENTICATION_FAILED notify error")),
            "{reason}: charon was not told:\n{}",
            ch.log()
        );
        let pcap = cap.stop().to_path_buf();
        // The IKE SA's SPIs from the capture, its keys from charon's log.
        let spis = common::tshark(
            &pcap,
            "isakmp.exchangetype == 35",
            "-e isakmp.ispi -e isakmp.rspi",
        );
        let (ispi, rspi) = spis
            .last()
            .and_then(|l| l.split_once('\t'))
            .map(|(i, r)| (i.replace(':', ""), r.replace(':', "")))
            .unwrap_or_else(|| panic!("{reason}: no IKE_AUTH captured"));
        let keys = ch.ike_keys();
        let (sk_ei, sk_er) = keys.last().expect("charon logged the IKE SA's keys");
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let uat = format!(
            "-o 'uat:ikev2_decryption_table:{ispi},{rspi},{},{},\"AES-GCM-256 with 16 octet ICV [RFC5282]\",,,\"NONE [RFC4306]\"'",
            hex(sk_ei),
            hex(sk_er)
        );
        let answers = common::tshark(
            &pcap,
            "ip.src == 192.0.2.1 && isakmp.exchangetype == 35",
            &format!("{uat} -e isakmp.notify.msgtype"),
        );
        eprintln!("{reason}: vecgate's IKE_AUTH answers, notify types: {answers:?}");
        assert!(
            !answers.is_empty() && answers.iter().all(|l| l.split(',').any(|t| t == "24")),
            "{reason}: no AUTHENTICATION_FAILED (24) in vecgate's IKE_AUTH answer: {answers:?}"
        );
        let st = charon::ike_state(&api);
        assert!(
            st["child_sas"].as_array().is_none_or(|c| c.is_empty()),
            "{reason}: {st:#}"
        );
        assert_eq!(
            charon::cli_json(&api, "sa"),
            serde_json::Value::Array(vec![]),
            "{reason}"
        );
        drop(ch);
    }
}

/// Flooding sources (configured peers) and the flood's length and cap:
/// bounded in count and time.
const FLOOD_SOURCES: u8 = 12;
const FLOOD_SECS: u32 = 20;
const FLOOD_MAX_AUTHS: u32 = 5000;

/// Certificates of `n` SANs each, `CN=filler PREFIX I`, self-signed with
/// one key: the padding of an attacker's certificate set.
fn fillers(pki: &Pki, prefix: &str, count: usize, sans: usize) -> Vec<u8> {
    let names: Vec<String> = (0..sans)
        .map(|i| format!("DNS:filler-{i:04}.padding.vecgate.test"))
        .collect();
    pki.openssl("ecparam -name prime256v1 -genkey -noout -out filler.key");
    let mut out = Vec::new();
    for i in 0..count {
        pki.openssl(&format!(
            "req -x509 -new -key filler.key -days 2 -subj '/CN=filler {prefix} {i}' \
             -addext 'subjectAltName={}' -out f.pem",
            names.join(",")
        ));
        out.extend(pki.read("f.pem"));
    }
    out
}

/// A flood of IKE_AUTH requests with oversized certificate sets, past
/// IKE_SA_INIT and its cookie (every INIT must carry one), from twelve
/// addresses that are each a configured peer (tunnels trusting the same
/// CA, the attacker holding a certificate of it), while the certificate
/// tunnel to charon carries a TCP transfer with liveness checks every
/// 2 s. The attacker's sets: a hundred certificates (55 KB in ~46 RFC
/// 7383 fragments, over the payload bound once reassembled) and a dozen
/// of 4 KB (over the chain bound). Referees in the same run: the
/// transfer's SHA-256 at both ends, charon's log (our liveness checks
/// parsed, no retransmission given up) and SAs, the flooder's count,
/// vecgate's per-reason counters, VmRSS and log.
#[test]
fn an_ike_auth_flood_with_large_certificate_sets_costs_counters_not_the_tunnel() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let pki = Pki::new("ec -pkeyopt ec_paramgen_curve:P-256");
    pki.leaf("a", "a.vecgate.test");
    pki.leaf("b", "b.vecgate.test");
    pki.leaf("x", "x.vecgate.test");
    let hundred = [pki.read("x.crt"), fillers(&pki, "h", 99, 4)].concat();
    let dozen = [pki.read("x.crt"), fillers(&pki, "d", 11, 100)].concat();
    std::fs::write(pki.path("hundred.pem"), &hundred).unwrap();
    std::fs::write(pki.path("dozen.pem"), &dozen).unwrap();
    let count = |pem: &[u8]| {
        String::from_utf8_lossy(pem)
            .matches("BEGIN CERTIFICATE")
            .count()
    };
    assert_eq!((count(&hundred), count(&dozen)), (100, 12));
    let Sites { h1, h2, ga, gb, .. } = Sites::new();
    charon::router(&gb, &h2, "", &[]);
    let ch = charon_with_certs(&gb, &pki, false);
    let (mut cfg, api) = vecgate_cfg(&format!("{}dpd_interval = 2\n", pubkey_ike(&pki, true)));
    let mut sources = Vec::new();
    for i in 0..FLOOD_SOURCES {
        let ip = format!("192.0.2.{}", 100 + u32::from(i));
        gb.sh(&format!("ip addr add {ip}/24 dev b-wan"));
        cfg.push_str(&format!(
            r#"
[[tunnel]]
name = "att{i}"
kind = "ipsec"
local = "192.0.2.1"
remote = "{ip}"
vrf = "blue"
traffic = ["10.{net}.0.0/24"]

[tunnel.ike]
auth = "pubkey"
cert_file = "{cert}"
key_file = "{key}"
ca_files = ["{ca}"]
local_id = "a.vecgate.test"
remote_id = "%any"
ike_proposals = ["aes256gcm16-prfsha256-x25519"]
esp_proposals = ["aes256gcm16"]
initiate = false
cookie_threshold = 1
half_open_per_source = 64
"#,
            net = 100 + u32::from(i),
            cert = pki.path("a.pem").display(),
            key = pki.path("a.key").display(),
            ca = pki.path("root.pem").display(),
        ));
        sources.push(ip);
    }
    let gw = Gateway::start(&ga, &cfg);
    let first = wait_established(&api, &gw, 40);
    assert_eq!(first["tunnel"], "ike0", "{first:#}");
    ch.wait_sas("INSTALLED", 20);
    let _ = h1.try_sh("ping -c 1 -W 2 10.2.0.2");
    let pid = gw.pid();
    let rss_before = common::vm_rss_kib(pid);
    let log_before = gw.log.lock().unwrap().len();
    let dpd = |log: &str| log.matches("parsed INFORMATIONAL request").count();
    let dpd_before = dpd(&ch.log());
    let mut files = TempFiles::default();
    let rx = h2.spawn(&format!(
        "python3 {} 0.0.0.0 7300",
        files.write("frx", common::TCP_RX)
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tx = h1.spawn(&format!(
        "python3 {} 10.2.0.2 7300 {}",
        files.write("ftx", common::SLOW_TX),
        FLOOD_SECS + 6
    ));
    let t0 = std::time::Instant::now();
    let flood = gb.spawn(&format!(
        "{} --target 192.0.2.1 --sources {} --sets {},{} --key {} \
         --ike aes256gcm16-prfsha256-x25519 --secs {FLOOD_SECS} --max {FLOOD_MAX_AUTHS}",
        env!("CARGO_BIN_EXE_vecgate-ike-auth-flood"),
        sources.join(","),
        pki.path("hundred.pem").display(),
        pki.path("dozen.pem").display(),
        pki.path("x.key").display(),
    ));
    let mut states = Vec::new();
    while t0.elapsed() < std::time::Duration::from_secs(u64::from(FLOOD_SECS)) {
        states.push(
            charon::ike_state(&api)["state"]
                .as_str()
                .unwrap_or("?")
                .to_string(),
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let out = flood.wait_with_output().unwrap();
    let flood_out = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "flooder failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |k: &str| -> u64 {
        let f: Vec<&str> = flood_out.split_whitespace().collect();
        f.iter()
            .position(|w| *w == k)
            .and_then(|i| f.get(i + 1)?.parse().ok())
            .unwrap_or(0)
    };
    let (auths, datagrams) = (field("auths"), field("datagrams"));
    // The transfer completes byte-exact.
    let sent = tx.wait_with_output().unwrap();
    let got = rx.wait_with_output().unwrap();
    let s = String::from_utf8_lossy(&sent.stdout).trim().to_string();
    assert!(
        !s.is_empty(),
        "sender failed: {}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&got.stdout).trim(),
        s,
        "receiver saw different bytes"
    );
    // Let the last refusals be counted and summarized.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let rss_after = common::vm_rss_kib(pid);
    let log_after = gw.log.lock().unwrap().len();
    let all = charon::cli_json(&api, "ike");
    let tunnels = all.as_array().cloned().unwrap_or_default();
    let legit = &tunnels[0];
    let mut refused = std::collections::BTreeMap::<String, u64>::new();
    let mut inits = 0;
    for t in tunnels.iter().skip(1) {
        inits += t["inits_received"].as_u64().unwrap_or(0);
        for d in t["auths_refused"].as_array().into_iter().flatten() {
            *refused
                .entry(d["reason"].as_str().unwrap_or("?").to_string())
                .or_default() += d["count"].as_u64().unwrap_or(0);
        }
        // Nothing authenticated, nothing installed, half-open bounded.
        assert!(
            t["ike_sas"].as_array().is_none_or(Vec::is_empty)
                && t["child_sas"].as_array().is_none_or(Vec::is_empty),
            "{t:#}"
        );
        assert!(t["half_open"].as_u64().unwrap_or(999) <= 64, "{t:#}");
    }
    let chlog = ch.log();
    let dpd_during = dpd(&chlog) - dpd_before;
    let counted: u64 = refused.values().sum();
    eprintln!(
        "flood: {flood_out} in {FLOOD_SECS} s; vecgate: {inits} INITs received, IKE_AUTHs refused {refused:?}; \
         RSS {rss_before} -> {rss_after} KiB; log +{} lines; liveness checks parsed by charon {dpd_during}",
        log_after - log_before
    );
    assert!(
        auths >= 50 && datagrams > auths * 10,
        "the flood hardly ran: {flood_out}"
    );
    // Every refusal counted by its reason, and only the bounds refused
    // them: no certificate of a set was judged, no signature checked.
    let malformed = refused.get("malformed").copied().unwrap_or(0);
    let too_many = refused.get("too-many-certificates").copied().unwrap_or(0);
    assert!(malformed > 0 && too_many > 0, "{refused:?}");
    assert_eq!(malformed + too_many, counted, "{refused:?}");
    // A request is counted once, its retransmissions aside (the flooder
    // never retransmits an IKE_AUTH: it starts over).
    assert!(counted <= auths, "{counted} refusals of {auths} requests");
    // The tunnel never left "established"; its liveness checks were
    // answered (charon parsed them) and nothing was given up on.
    assert!(
        states.iter().all(|s| s == "established"),
        "tunnel state during the flood: {states:?}\n{}",
        gw.log_text()
    );
    assert_eq!(legit["state"], "established", "{legit:#}");
    assert_eq!(legit["auth"]["remote_method"], "ecdsa-sha256", "{legit:#}");
    assert!(
        dpd_during >= 5,
        "charon saw {dpd_during} liveness checks during the flood"
    );
    assert!(
        !chlog.contains("giving up after"),
        "charon gave up a request"
    );
    let sas = ch.swanctl(&["--list-sas"]);
    assert!(
        sas.contains("ESTABLISHED") && sas.contains("INSTALLED"),
        "{sas}"
    );
    // The counters reach /metrics.
    let m = common::sh(&format!(
        "curl -sS --max-time 10 --unix-socket {} http://x/metrics",
        api.trim_start_matches("unix:")
    ));
    assert!(
        m.lines()
            .any(|l| l.starts_with("vecgate_ike_auths_refused_total")
                && l.contains("reason=\"malformed\"")),
        "/metrics lacks the refusals"
    );
    // Bounded memory, and a log line per reason and 10 s at most, with
    // the summary of what was refused.
    assert!(
        rss_after < rss_before + 64 * 1024,
        "RSS grew from {rss_before} to {rss_after} KiB"
    );
    let lines = gw.log.lock().unwrap()[log_before..].join("\n");
    assert!(
        log_after - log_before < 200,
        "the log grew by {} lines during the flood:\n{lines}",
        log_after - log_before,
    );
    assert!(
        lines.contains("IKE_AUTH requests refused before authentication"),
        "{lines}"
    );
    drop(files);
}
