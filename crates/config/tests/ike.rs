//! `[tunnel.ike]`: IKEv2-keyed ipsec tunnels.

use vecgate_config::*;

const HEAD: &str = r#"[gateway]
name = "gw"

[[interface]]
name = "wan0"
host = "veth0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "t"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.2"
traffic = ["10.2.0.0/24"]
"#;

fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => Vec::new(),
        Err(d) => d.iter().map(|d| d.to_string()).collect(),
    }
}

#[test]
fn ike_section_parses_and_round_trips() {
    let text = format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k/psk\"\nremote_id = \"keyid:peer\"\nike_proposals = [\"aes256-sha256-modp2048\", \"aes128gcm16-prfsha256-x25519\"]\nesp_proposals = [\"aes128gcm16\"]\ninitiate = false\ndpd_interval = 10\nike_lifetime = 600\nchild_lifetime = 300\nlocal_traffic = [\"10.1.0.0/24\"]\n"
    );
    let cfg = parse(&text).unwrap_or_else(|d| panic!("{d:?}"));
    let ike = cfg.tunnels[0].ipsec.as_ref().unwrap().ike.clone().unwrap();
    assert_eq!(ike.psk_file.to_str(), Some("/k/psk"));
    assert_eq!(ike.local_id, None);
    assert_eq!(ike.remote_id.as_deref(), Some("keyid:peer"));
    assert_eq!(ike.ike_proposals.len(), 2);
    assert_eq!(ike.esp_proposals, vec!["aes128gcm16".to_string()]);
    assert!(!ike.initiate);
    assert_eq!(
        (ike.dpd_interval, ike.ike_lifetime, ike.child_lifetime),
        (Some(10), Some(600), Some(300))
    );
    assert_eq!(ike.local_traffic[0].to_string(), "10.1.0.0/24");
    let again = parse(&cfg.to_toml()).unwrap_or_else(|d| panic!("{d:?}"));
    assert_eq!(again, cfg);
    // Defaults: initiate, no lifetimes; still round-trips.
    let cfg = parse(&format!("{HEAD}\n[tunnel.ike]\npsk_file = \"/k/psk\"\n")).unwrap();
    let ike = cfg.tunnels[0].ipsec.as_ref().unwrap().ike.clone().unwrap();
    assert!(ike.initiate);
    assert!(ike.ike_proposals.is_empty());
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);
}

#[test]
fn ike_errors_have_lines() {
    // The table header is line 17: HEAD has 15 lines, then a blank one.
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\nike_proposals = [\"aes256-md5-modp2048\"]\nbogus = 1\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 17") && m.contains("missing required key \"psk_file\"")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 19") && m.contains("unknown key \"bogus\"")),
        "{e:?}"
    );
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k\"\nike_proposals = [\"aes256-md5-modp2048\"]\nchild_lifetime = 0\nlocal_traffic = [\"10.1.0.1/24\"]\n"
    ));
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 19") && m.contains("unknown algorithm \"md5\"")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 20") && m.contains("child_lifetime = 0")),
        "{e:?}"
    );
    assert!(
        e.iter()
            .any(|m| m.starts_with("line 21") && m.contains("did you mean 10.1.0.0/24")),
        "{e:?}"
    );
}

#[test]
fn ike_and_static_sas_are_exclusive_and_ike_needs_ipsec() {
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k\"\n\n[[tunnel.sa]]\ndirection = \"out\"\nspi = 0x1000\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k/o\"\n\n[[tunnel.sa]]\ndirection = \"in\"\nspi = 0x1001\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k/i\"\n"
    ));
    assert!(e.iter().any(|m| m.contains("mutually exclusive")), "{e:?}");
    let gre = HEAD
        .replace("kind = \"ipsec\"", "kind = \"gre\"")
        .replace("traffic = [\"10.2.0.0/24\"]\n", "");
    let e = errors(&format!("{gre}\n[tunnel.ike]\npsk_file = \"/k\"\n"));
    assert!(
        e.iter()
            .any(|m| m.contains("ike applies to kind = \"ipsec\" only")),
        "{e:?}"
    );
}

#[test]
fn admission_keys_parse_round_trip_and_are_checked_with_lines() {
    let text = format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k/psk\"\ncookie_threshold = 8\ncookie_threshold_per_source = 2\ncookie_rate = 50\nhalf_open_per_source = 4\nmax_half_open = 128\n"
    );
    let cfg = parse(&text).unwrap_or_else(|d| panic!("{d:?}"));
    let ike = cfg.tunnels[0].ipsec.as_ref().unwrap().ike.clone().unwrap();
    assert_eq!(
        ike.admission(),
        [
            ("cookie_threshold", 8),
            ("cookie_threshold_per_source", 2),
            ("cookie_rate", 50),
            ("half_open_per_source", 4),
            ("max_half_open", 128),
        ]
    );
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);
    // Left out: the defaults, not written back.
    let cfg = parse(&format!("{HEAD}\n[tunnel.ike]\npsk_file = \"/k/psk\"\n")).unwrap();
    let ike = cfg.tunnels[0].ipsec.as_ref().unwrap().ike.clone().unwrap();
    assert_eq!(
        ike.admission().map(|(_, v)| v),
        [16, 3, 20, 5, 64],
        "RFC 8019 defaults"
    );
    assert!(!cfg.to_toml().contains("cookie"));
    // Out of range, wrong type, and thresholds above the limits they
    // precede: each names its key and line (the table header is line 17).
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k\"\nmax_half_open = 0\nhalf_open_per_source = 100000\ncookie_rate = \"fast\"\n"
    ));
    for (line, what) in [
        (19, "max_half_open = 0 is out of range (expected 1..=4096)"),
        (
            20,
            "half_open_per_source = 100000 is out of range (expected 1..=4096)",
        ),
        (21, "cookie_rate"),
    ] {
        assert!(
            e.iter()
                .any(|m| m.starts_with(&format!("line {line}")) && m.contains(what)),
            "{what}: {e:?}"
        );
    }
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k\"\ncookie_threshold = 100\nhalf_open_per_source = 2\nmax_half_open = 32\n"
    ));
    for (line, what) in [
        (
            19,
            "cookie_threshold = 100 is above max_half_open = 32: cookies would never be demanded",
        ),
        (
            20,
            "cookie_threshold_per_source = 3 is above half_open_per_source = 2",
        ),
    ] {
        assert!(
            e.iter()
                .any(|m| m.starts_with(&format!("line {line}")) && m.contains(what)),
            "{what}: {e:?}"
        );
    }
    let e = errors(&format!(
        "{HEAD}\n[tunnel.ike]\npsk_file = \"/k\"\nhalf_open_per_source = 65\n"
    ));
    assert!(
        e.iter().any(|m| m.starts_with("line 19")
            && m.contains("half_open_per_source = 65 is above max_half_open = 64")),
        "{e:?}"
    );
}
