//! `kind = "ipsec"` tunnels: static SAs, NAT-T, traffic selectors.

use vecgate_config::*;

const HEAD: &str = r#"[gateway]
name = "gw"

[[interface]]
name = "wan0"
host = "veth0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]
"#;

fn tunnel(name: &str, kind: &str, extra: &str) -> String {
    format!(
        "\n[[tunnel]]\nname = \"{name}\"\nkind = \"{kind}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n{extra}"
    )
}

fn sa(dir: &str, spi: &str, extra: &str) -> String {
    format!(
        "\n[[tunnel.sa]]\ndirection = \"{dir}\"\nspi = {spi}\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k/{spi}.hex\"\n{extra}"
    )
}

fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => Vec::new(),
        Err(d) => d.iter().map(|d| d.to_string()).collect(),
    }
}

#[test]
fn static_sas_parse_and_round_trip() {
    let text = format!(
        "{HEAD}{}{}{}",
        tunnel(
            "t",
            "ipsec",
            "nat_t = true\ntraffic = [\"10.2.0.0/24\", \"fd02::/64\"]\n"
        ),
        sa("out", "0x1001", "lifetime_bytes = 1000\nesn = false\n"),
        sa(
            "in",
            "0x2001",
            "replay_window = 4096\nlifetime_seconds = 60\n"
        ),
    );
    let cfg = parse(&text).unwrap();
    let x = cfg.tunnels[0].ipsec.as_ref().unwrap();
    assert!(x.nat_t);
    assert_eq!(x.traffic.len(), 2);
    let out = x.outbound().unwrap();
    assert_eq!(
        (out.spi, out.esn, out.lifetime_bytes),
        (0x1001, false, Some(1000))
    );
    assert_eq!(out.algorithm, EspAlgorithm::Aes128Gcm16);
    assert_eq!(out.replay_window, 1024, "default window");
    let inb: Vec<_> = x.inbound().collect();
    assert_eq!(
        (inb[0].spi, inb[0].replay_window, inb[0].esn),
        (0x2001, 4096, true)
    );
    assert_eq!(inb[0].lifetime_seconds, Some(60));
    let again = parse(&cfg.to_toml()).unwrap();
    assert_eq!(again, cfg);
    // The key file path is emitted, never key material.
    assert!(cfg.to_toml().contains("key_file = \"/k/0x1001.hex\""));
}

#[test]
fn errors_have_lines() {
    // Line numbers: HEAD is 8 lines, the tunnel starts at line 10.
    let text = format!(
        "{HEAD}{}{}{}",
        tunnel("t", "ipsec", ""),
        sa("out", "255", "colour = \"red\"\n"),
        sa(
            "in",
            "0x2001",
            "replay_window = 70000\nlifetime_packets = 0\n"
        ),
    );
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 18:") && m.contains("reserved")),
        "{e:#?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 21:") && m.contains("unknown key \"colour\"")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|m| m.contains("replay_window = 70000")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|m| m.contains("lifetime_packets = 0")),
        "{e:#?}"
    );
}

#[test]
fn one_out_sa_and_unique_inbound_spis() {
    let text = format!(
        "{HEAD}{}{}{}{}{}",
        tunnel("t1", "ipsec", ""),
        sa("in", "0x2001", ""),
        sa("in", "0x2002", ""),
        tunnel("t2", "ipsec", ""),
        sa("out", "0x3001", "") + &sa("in", "0x2001", ""),
    );
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|m| m.contains("exactly one") && m.contains("t1")),
        "{e:#?}"
    );
    assert!(
        e.iter().any(|m| m.contains("also used by tunnel \"t1\"")),
        "{e:#?}"
    );
}

#[test]
fn ipsec_keys_on_other_kinds_and_bad_values() {
    let text = format!("{HEAD}{}", tunnel("g", "gre", "nat_t = true\n"));
    let e = errors(&text);
    assert!(
        e.iter()
            .any(|m| m.contains("nat_t applies to kind = \"ipsec\" only")),
        "{e:#?}"
    );
    let text = format!(
        "{HEAD}{}{}",
        tunnel("t", "ipsec", "traffic = [\"10.2.0.1/24\"]\n"),
        "\n[[tunnel.sa]]\ndirection = \"sideways\"\nspi = 0x1001\nalgorithm = \"3des\"\nkey_file = \"/k\"\n",
    );
    let e = errors(&text);
    assert!(e.iter().any(|m| m.contains("unknown direction")), "{e:#?}");
    assert!(
        e.iter().any(|m| m.contains("unknown algorithm \"3des\"")),
        "{e:#?}"
    );
}

#[test]
fn hex_key_files() {
    assert_eq!(
        ipsec::parse_key_hex("00ff\n10").unwrap(),
        vec![0, 0xff, 0x10]
    );
    assert_eq!(EspAlgorithm::Aes256Sha256.key_len(), 64);
}

#[test]
fn parallel_esp_tunnels_between_the_same_gateways_are_told_apart_by_spi() {
    let text = format!(
        "{HEAD}{}{}{}{}{}{}",
        tunnel("t0", "ipsec", "traffic = [\"10.2.0.10/32\"]\n"),
        sa("out", "0x1100", ""),
        sa("in", "0x2100", ""),
        tunnel("t1", "ipsec", "traffic = [\"10.2.0.11/32\"]\n"),
        sa("out", "0x1101", ""),
        sa("in", "0x2101", ""),
    );
    assert_eq!(errors(&text), Vec::<String>::new());
    // The same inbound SPI twice is still an error.
    let dup = text.replace("spi = 0x2101", "spi = 0x2100");
    assert!(!errors(&dup).is_empty());
}
