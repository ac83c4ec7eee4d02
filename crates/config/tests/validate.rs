//! One test per validation rule: the right line and the right message.

use std::net::IpAddr;
use vecgate_config::*;

/// Every diagnostic as "line L: message".
fn errs(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => Vec::new(),
        Err(d) => d.iter().map(ToString::to_string).collect(),
    }
}

/// Asserts exactly one diagnostic, on `line`, containing `needle`.
#[track_caller]
fn one(text: &str, line: usize, needle: &str) {
    let e = errs(text);
    assert_eq!(e.len(), 1, "expected one diagnostic, got {e:#?}");
    assert!(
        e[0].starts_with(&format!("line {line}: ")) && e[0].contains(needle),
        "expected line {line} with {needle:?}, got {:?}",
        e[0]
    );
}

const GW: &str = "[gateway]\nname = \"gw\"\n"; // lines 1-2

fn with_gw(rest: &str) -> String {
    format!("{GW}{rest}")
}

#[test]
fn minimal_config_and_defaults() {
    let cfg = parse(&with_gw(
        "[[interface]]\nname = \"lan0\"\nhost = \"veth0\"\ndriver = \"tap\"\n\
         [[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = 7\n\
         [[route]]\nprefix = \"10.9.0.0/16\"\nvia = \"t\"\n",
    ))
    .unwrap();
    assert_eq!(cfg.gateway.workers, 1);
    assert_eq!(
        cfg.gateway.api,
        ApiEndpoint::Unix("/run/vecgate/gw.sock".into())
    );
    let i = &cfg.interfaces[0];
    assert_eq!(
        (i.vrf.as_str(), i.mtu, i.rsc, i.offloads, i.addresses.len()),
        ("default", None, true, true, 0)
    );
    assert_eq!(i.driver, Driver::Tap);
    let t = &cfg.tunnels[0];
    assert_eq!(t.port, 4789);
    assert_eq!(t.underlay_vrf, "default");
    assert!(!t.checksum && !t.sequence);
    assert_eq!(cfg.routes[0].via, Via::Tunnel("t".into()));
    assert_eq!(cfg.routes[0].vrf, "default");
    assert_eq!(cfg.vrfs(), vec!["default".to_owned()]);
}

#[test]
fn vrfs_sorted_default_first() {
    let cfg = parse(&with_gw(
        "[[interface]]\nname = \"a\"\nhost = \"v1\"\ndriver = \"tap\"\nvrf = \"zeta\"\n\
         [[interface]]\nname = \"b\"\nhost = \"v2\"\ndriver = \"tap\"\nvrf = \"alpha\"\n\
         [[interface]]\nname = \"c\"\nhost = \"v3\"\ndriver = \"tap\"\nvrf = \"alpha\"\n",
    ))
    .unwrap();
    assert_eq!(cfg.vrfs(), vec!["default", "alpha", "zeta"]);
}

#[test]
fn syntax_error_has_its_line() {
    let e = errs("[gateway]\nname = \"gw\"\n\n[[interface]\nname = \"x\"\n");
    assert!(!e.is_empty());
    assert!(e[0].starts_with("line 4: TOML syntax error"), "{e:?}");
    // A duplicate key is a syntax error too.
    one(
        "[gateway]\nname = \"a\"\nname = \"b\"\n",
        3,
        "duplicate key",
    );
}

#[test]
fn unknown_keys_all_reported() {
    let e = errs(
        "[gateway]\nname = \"gw\"\nwrokers = 2\n\
         [[interface]]\nname = \"lan0\"\nhost = \"veth0\"\ndriver = \"tap\"\nadress = []\nmut = 1\n\
         [[tunnels]]\nname = \"x\"\n",
    );
    assert_eq!(
        e,
        vec![
            "line 3: [gateway]: unknown key \"wrokers\" (expected one of name, workers, api, api_token_file, api_readonly_token_file, api_tls_cert_file, api_tls_key_file, api_insecure_loopback, state_dir, busy_poll, idle_spin_us)",
            "line 8: [[interface]] \"lan0\": unknown key \"adress\" (expected one of name, host, driver, addresses, vrf, mtu, rsc, offloads)",
            "line 9: [[interface]] \"lan0\": unknown key \"mut\" (expected one of name, host, driver, addresses, vrf, mtu, rsc, offloads)",
            "line 10: unknown top-level key \"tunnels\" (expected [gateway], [[interface]], [[tunnel]], [[route]], [routing], [ha], [pool])",
        ]
    );
}

#[test]
fn unknown_keys_in_tunnel_and_route() {
    let e = errs(&with_gw(
        "[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nvni = 5\n\
         [[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"t\"\nmetric = 5\n",
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with("line 8: [[tunnel]] \"t\": unknown key \"vni\""),
        "{e:?}"
    );
    assert!(
        e[1].starts_with("line 12: [[route]] \"10.0.0.0/8\": unknown key \"metric\""),
        "{e:?}"
    );
}

#[test]
fn wrong_types() {
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\nmtu = \"1500\"\n"),
        7,
        "key \"mtu\" must be an integer, found a string",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\nrsc = 1\n"),
        7,
        "key \"rsc\" must be true or false, found an integer",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\naddresses = \"10.0.0.1/8\"\n"),
        7,
        "key \"addresses\" must be an array of strings, found a string",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\naddresses = [\"10.0.0.1/8\", 5]\n"),
        7,
        "addresses must hold strings, found an integer",
    );
    one(
        "[gateway]\nname = 5\n",
        2,
        "[gateway]: key \"name\" must be a string, found an integer",
    );
    one("gateway = 1\n", 1, "\"gateway\" must be a table");
    one(
        &with_gw("[interface]\nname = \"a\"\n"),
        3,
        "\"interface\" must be an array of tables, written [[interface]]",
    );
}

#[test]
fn missing_required_keys() {
    let e = errs(&with_gw("\n[[interface]]\nname = \"lan0\"\n"));
    assert_eq!(
        e,
        vec![
            "line 4: [[interface]] \"lan0\": missing required key \"host\"",
            "line 4: [[interface]] \"lan0\": missing required key \"driver\"",
        ]
    );
    one(
        &with_gw("[[tunnel]]\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n"),
        3,
        "[[tunnel]] #1: missing required key \"name\"",
    );
    one(
        &with_gw("[[route]]\nprefix = \"10.0.0.0/8\"\n"),
        3,
        "missing required key \"via\"",
    );
    one(
        "[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\n",
        1,
        "missing [gateway] table",
    );
}

#[test]
fn bad_values() {
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.300\"\nremote = \"192.0.2.2\"\n"),
        6,
        "local = \"192.0.2.300\" is not an IPv4 or IPv6 address",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"dpdk\"\n"),
        6,
        "unknown driver \"dpdk\" (expected af_packet, af_xdp or tap)",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"geneve\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n"),
        5,
        "unknown tunnel kind \"geneve\"",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\naddresses = [\"10.0.0.1/24\",\n  \"10.1.0.1/33\"]\n"),
        8,
        "prefix length \"33\" must be 0..=32 for IPv4",
    );
    one(
        &with_gw("[[route]]\nprefix = \"10.0.0.0\"\nvia = \"10.1.1.1\"\n"),
        4,
        "is not ADDRESS/LENGTH",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = 1\nport = 70000\n"),
        9,
        "port = 70000 is out of range (expected 1..=65535)",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = 1\nport = 0\n"),
        9,
        "port = 0 is not a valid UDP port",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nport = 4790\n"),
        8,
        "port = 4790 applies to kind = \"vxlan\" only",
    );
}

#[test]
fn api_endpoint() {
    one(
        "[gateway]\nname = \"gw\"\napi = \"http://x\"\n",
        3,
        "expected \"unix:/path\" or \"tcp:ADDRESS:PORT\"",
    );
    one(
        "[gateway]\nname = \"gw\"\napi = \"tcp:127.0.0.1\"\n",
        3,
        "expected \"tcp:ADDRESS:PORT\"",
    );
    one(
        "[gateway]\nname = \"gw\"\napi = \"unix:gw.sock\"\n",
        3,
        "must be absolute",
    );
    let cfg = parse(
        "[gateway]\nname = \"gw\"\napi = \"tcp:[::1]:9090\"\napi_token_file = \"/etc/t\"\napi_insecure_loopback = true\n",
    )
    .unwrap();
    assert_eq!(
        cfg.gateway.api,
        ApiEndpoint::Tcp("[::1]:9090".parse().unwrap())
    );
    assert_eq!(cfg.gateway.api_token_file, Some("/etc/t".into()));
    assert!(cfg.to_toml().contains("api_token_file = \"/etc/t\""));
    // TCP without a token file; relative token path; read-only alone.
    one(
        "[gateway]\nname = \"gw\"\napi = \"tcp:[::1]:9090\"\napi_insecure_loopback = true\n",
        3,
        "api_token_file (a file holding the admin bearer token) is required",
    );
    one(
        "[gateway]\nname = \"gw\"\napi = \"tcp:[::1]:9090\"\napi_token_file = \"t\"\napi_insecure_loopback = true\n",
        4,
        "api_token_file \"t\" must be an absolute path",
    );
    one(
        "[gateway]\nname = \"gw\"\napi_readonly_token_file = \"/t\"\n",
        3,
        "api_readonly_token_file needs api_token_file too",
    );
}

/// A TCP api speaks TLS, or plain HTTP only when asked for on loopback.
#[test]
fn tcp_api_needs_tls_or_explicit_loopback() {
    let gw = |rest: &str| format!("[gateway]\nname = \"gw\"\napi_token_file = \"/etc/t\"\n{rest}");
    let cfg = parse(&gw(
        "api = \"tcp:192.0.2.1:9090\"\napi_tls_cert_file = \"/etc/c.pem\"\napi_tls_key_file = \"/etc/k.pem\"\n",
    ))
    .unwrap();
    assert_eq!(cfg.gateway.api_tls_key_file, Some("/etc/k.pem".into()));
    let again = parse(&cfg.to_toml()).unwrap();
    assert_eq!(again, cfg);
    let cfg = parse(&gw(
        "api = \"tcp:127.0.0.1:9090\"\napi_insecure_loopback = true\n",
    ))
    .unwrap();
    assert!(cfg.to_toml().contains("api_insecure_loopback = true"));
    one(
        &gw("api = \"tcp:127.0.0.1:9090\"\n"),
        4,
        "api_tls_cert_file and api_tls_key_file are required (TLS), or api_insecure_loopback = true",
    );
    one(
        &gw("api = \"tcp:192.0.2.1:9090\"\napi_insecure_loopback = true\n"),
        5,
        "is not a loopback address",
    );
    one(
        &gw("api = \"tcp:192.0.2.1:9090\"\napi_tls_cert_file = \"/etc/c.pem\"\n"),
        5,
        "api_tls_cert_file needs api_tls_key_file too",
    );
    one(
        &gw("api = \"tcp:192.0.2.1:9090\"\napi_tls_cert_file = \"c.pem\"\napi_tls_key_file = \"/k\"\n"),
        5,
        "api_tls_cert_file \"c.pem\" must be an absolute path",
    );
    one(
        "[gateway]\nname = \"gw\"\napi = \"unix:/run/gw.sock\"\napi_tls_key_file = \"/k\"\n",
        4,
        "applies to a TCP api only",
    );
}

#[test]
fn idle_spin_us_range() {
    one(
        "[gateway]\nname = \"gw\"\nidle_spin_us = 10001\n",
        3,
        "[gateway]: idle_spin_us = 10001 is out of range (expected 0..=10000 (microseconds))",
    );
    one(
        "[gateway]\nname = \"gw\"\nidle_spin_us = -5\n",
        3,
        "idle_spin_us = -5 is out of range",
    );
}

#[test]
fn workers_range() {
    one(
        "[gateway]\nname = \"gw\"\nworkers = 0\n",
        3,
        "[gateway]: workers = 0 is out of range (expected 1..=64)",
    );
    one(
        "[gateway]\nname = \"gw\"\nworkers = 65\n",
        3,
        "workers = 65 is out of range",
    );
    one(
        "[gateway]\nname = \"gw\"\nworkers = -1\n",
        3,
        "workers = -1 is out of range",
    );
    assert_eq!(
        parse("[gateway]\nname = \"gw\"\nworkers = 64\n")
            .unwrap()
            .gateway
            .workers,
        64
    );
}

#[test]
fn prefix_host_bits() {
    one(
        &with_gw("[[route]]\nvia = \"10.0.0.9\"\nprefix = \"10.2.0.1/24\"\n"),
        5,
        "[[route]] \"10.2.0.1/24\": prefix 10.2.0.1/24 has host bits set; did you mean 10.2.0.0/24?",
    );
    one(
        &with_gw("[[route]]\nprefix = \"fd02::1/64\"\nvia = \"fd00::1\"\n"),
        4,
        "did you mean fd02::/64?",
    );
}

fn tunnel(kind: &str, key: &str) -> String {
    with_gw(&format!(
        "[[tunnel]]\nname = \"t\"\nkind = \"{kind}\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n{key}"
    ))
}

#[test]
fn tunnel_keys() {
    // GRE: 32-bit, optional.
    assert!(errs(&tunnel("gre", "")).is_empty());
    assert!(errs(&tunnel("gre", "key = 4294967295\n")).is_empty());
    one(
        &tunnel("gre", "key = 4294967296\n"),
        8,
        "key = 4294967296 is out of range",
    );
    one(&tunnel("gre", "key = -1\n"), 8, "key = -1 is out of range");
    // VXLAN: 24-bit, required (RFC 7348 §5).
    assert!(errs(&tunnel("vxlan", "key = 0xFFFFFF\n")).is_empty());
    one(
        &tunnel("vxlan", "key = 16777216\n"),
        8,
        "key = 16777216 is out of range for a VXLAN VNI",
    );
    one(
        &tunnel("vxlan", ""),
        3,
        "missing required key \"key\" (the VXLAN VNI",
    );
    // NVGRE: 24-bit, 0-0xFFF and 0xFFFFFF reserved (RFC 7637 §3.2), required.
    assert!(errs(&tunnel("nvgre", "key = 4096\n")).is_empty());
    assert!(errs(&tunnel("nvgre", "key = 0xFFFFFE\n")).is_empty());
    one(
        &tunnel("nvgre", "key = 4095\n"),
        8,
        "key = 4095 is a reserved NVGRE VSID",
    );
    one(&tunnel("nvgre", "key = 0\n"), 8, "reserved NVGRE VSID");
    one(
        &tunnel("nvgre", "key = 0xFFFFFF\n"),
        8,
        "reserved NVGRE VSID",
    );
    one(
        &tunnel("nvgre", "key = 0x1000000\n"),
        8,
        "out of range for an NVGRE VSID",
    );
    one(
        &tunnel("nvgre", ""),
        3,
        "missing required key \"key\" (the NVGRE VSID",
    );
}

#[test]
fn ipsec_is_permissive() {
    let cfg = parse(&tunnel("ipsec", "")).unwrap();
    assert_eq!(cfg.tunnels[0].kind, TunnelKind::Ipsec);
    one(
        &tunnel("ipsec", "key = 5\n"),
        8,
        "key has no meaning for kind = \"ipsec\"",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"ipsec\"\nlocal = \"192.0.2.1\"\n"),
        3,
        "missing required key \"remote\"",
    );
}

#[test]
fn gre_only_flags() {
    assert!(errs(&tunnel("gre", "checksum = true\nsequence = true\n")).is_empty());
    let e = errs(&tunnel(
        "nvgre",
        "key = 5000\nchecksum = true\nsequence = true\n",
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].starts_with("line 9:") && e[0].contains("checksum = true is not allowed for kind = \"nvgre\" (NVGRE requires the C and S bits to be zero, RFC 7637 §3.2)"), "{e:?}");
    assert!(
        e[1].starts_with("line 10:") && e[1].contains("sequence = true"),
        "{e:?}"
    );
    one(
        &tunnel("vxlan", "key = 1\nchecksum = true\n"),
        9,
        "applies to kind = \"gre\" only",
    );
}

#[test]
fn tunnel_endpoints() {
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"2001:db8::2\"\n"),
        7,
        "local 192.0.2.1 is IPv4 but remote 2001:db8::2 is IPv6",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.1\"\n"),
        7,
        "local and remote are both 192.0.2.1",
    );
    one(
        &with_gw("[[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"0.0.0.0\"\nremote = \"192.0.2.1\"\n"),
        6,
        "local 0.0.0.0 is not a unicast address",
    );
}

#[test]
fn tunnel_mtu() {
    one(
        &tunnel("gre", "mtu = 67\n"),
        8,
        "mtu = 67 is out of range (expected 68..=65535)",
    );
    one(
        &tunnel("gre", "mtu = 65536\n"),
        8,
        "mtu = 65536 is out of range",
    );
    assert!(errs(&tunnel("gre", "mtu = 1476\n")).is_empty());
}

#[test]
fn interface_mtu() {
    let base = "[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\n";
    one(
        &with_gw(&format!("{base}mtu = 60\n")),
        7,
        "mtu = 60 is out of range (expected 68..=65535)",
    );
    assert!(errs(&with_gw(&format!(
        "{base}mtu = 576\naddresses = [\"10.0.0.1/24\"]\n"
    )))
    .is_empty());
    one(
        &with_gw(&format!("{base}mtu = 576\naddresses = [\"fd00::1/64\"]\n")),
        7,
        "expected 1280..=65535: the interface has IPv6 addresses, RFC 8200 §5",
    );
}

#[test]
fn identical_tunnels() {
    let t = |name: &str, key: u32| {
        format!("[[tunnel]]\nname = \"{name}\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nkey = {key}\n")
    };
    assert!(errs(&with_gw(&(t("a", 1) + &t("b", 2)))).is_empty());
    one(
        &with_gw(&(t("a", 1) + &t("b", 1))),
        9,
        "[[tunnel]] \"b\": same kind, local, remote and key as tunnel \"a\" at line 3",
    );
}

#[test]
fn duplicate_names_and_hosts() {
    let e = errs(&with_gw(
        "[[interface]]\nname = \"x\"\nhost = \"v1\"\ndriver = \"tap\"\n\
         [[interface]]\nname = \"y\"\nhost = \"v1\"\ndriver = \"tap\"\n\
         [[tunnel]]\nname = \"x\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n",
    ));
    assert_eq!(
        e,
        vec![
            "line 9: [[interface]] \"y\": host \"v1\" is already attached by interface \"x\" at line 3",
            "line 12: [[tunnel]] \"x\": name \"x\" is already used by the [[interface]] at line 3 (interfaces and tunnels share one namespace)",
        ]
    );
}

#[test]
fn names_and_hosts_are_checked() {
    one(
        &with_gw("[[interface]]\nname = \"a b\"\nhost = \"v\"\ndriver = \"tap\"\n"),
        4,
        "may contain only letters",
    );
    one(
        &with_gw("[[interface]]\nname = \"10.0.0.1\"\nhost = \"v\"\ndriver = \"tap\"\n"),
        4,
        "looks like an address",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"veth-much-too-long\"\ndriver = \"tap\"\n"),
        5,
        "1 to 15 bytes",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v/1\"\ndriver = \"tap\"\n"),
        5,
        "not a valid Linux interface name",
    );
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\nvrf = \"\"\n"),
        7,
        "vrf must be 1 to 64 characters",
    );
    one(
        "[gateway]\nname = \"gw/a\"\n",
        2,
        "[gateway]: name \"gw/a\" may contain only",
    );
}

const TWO_VRFS: &str = "[[interface]]\nname = \"lan\"\nhost = \"v1\"\ndriver = \"tap\"\nvrf = \"blue\"\naddresses = [\"10.1.0.1/24\"]\n\
    [[tunnel]]\nname = \"t\"\nkind = \"gre\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\nvrf = \"red\"\n"; // lines 3-14

#[test]
fn routes_targets() {
    // Via a name that does not exist.
    one(
        &with_gw("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"nope\"\n"),
        5,
        "via \"nope\": no interface or tunnel has that name",
    );
    // Via an address of the other family.
    one(
        &with_gw("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"fd00::1\"\n"),
        5,
        "via fd00::1 is IPv6 but the prefix is IPv4",
    );
    // Via something in another VRF (tenant isolation).
    one(
        &with_gw(&format!(
            "{TWO_VRFS}[[route]]\nvrf = \"blue\"\nprefix = \"10.2.0.0/24\"\nvia = \"t\"\n"
        )),
        18,
        "route in VRF \"blue\" cannot point at tunnel \"t\" in VRF \"red\"",
    );
    one(
        &with_gw(&format!(
            "{TWO_VRFS}[[route]]\nprefix = \"10.2.0.0/24\"\nvia = \"lan\"\n"
        )),
        17,
        "route in VRF \"default\" cannot point at interface \"lan\" in VRF \"blue\"",
    );
    let cfg = parse(&with_gw(&format!(
        "{TWO_VRFS}[[route]]\nvrf = \"red\"\nprefix = \"10.2.0.0/24\"\nvia = \"t\"\n[[route]]\nvrf = \"blue\"\nprefix = \"10.3.0.0/24\"\nvia = \"lan\"\n"
    )))
    .unwrap();
    assert_eq!(cfg.routes[0].via, Via::Tunnel("t".into()));
    assert_eq!(cfg.routes[1].via, Via::Interface("lan".into()));
    assert_eq!(cfg.vrfs(), vec!["default", "blue", "red"]);
}

#[test]
fn duplicate_route() {
    one(
        &with_gw("[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.1.1.1\"\n[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.1.1.1\"\n"),
        6,
        "duplicate of the route at line 3",
    );
}

#[test]
fn route_to_broken_object_is_not_dangling() {
    // The interface is missing its driver: report that, not the route.
    one(
        &with_gw("[[interface]]\nname = \"lan\"\nhost = \"v\"\n[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"lan\"\n"),
        3,
        "missing required key \"driver\"",
    );
}

#[test]
fn overlapping_addresses() {
    let two = |vrf_a: &str, vrf_b: &str, b: &str| {
        with_gw(&format!(
            "[[interface]]\nname = \"a\"\nhost = \"v1\"\ndriver = \"tap\"\nvrf = \"{vrf_a}\"\naddresses = [\"10.1.0.1/24\"]\n\
             [[interface]]\nname = \"b\"\nhost = \"v2\"\ndriver = \"tap\"\nvrf = \"{vrf_b}\"\naddresses = [\"{b}\"]\n"
        ))
    };
    one(
        &two("x", "x", "10.1.0.2/24"),
        14,
        "address 10.1.0.2/24 overlaps 10.1.0.0/24 of interface \"a\" at line 8 in VRF \"x\"",
    );
    one(&two("x", "x", "10.0.0.1/8"), 14, "overlaps 10.1.0.0/24");
    assert!(errs(&two("x", "x", "10.2.0.1/24")).is_empty());
    // Same subnet in different VRFs: fine (multi-tenant).
    assert!(errs(&two("x", "y", "10.1.0.1/24")).is_empty());
    // Within one interface.
    one(
        &with_gw("[[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"tap\"\naddresses = [\"fd00::1/64\", \"fd00::2/64\"]\n"),
        7,
        "address fd00::2/64 overlaps fd00::/64",
    );
}

#[test]
fn many_errors_reported_at_once_in_line_order() {
    let text = "[gateway]\nname = \"gw\"\nworkers = 0\nbogus = 1\n\
        [[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"nic\"\n\
        [[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"2001:db8::1\"\n\
        [[route]]\nprefix = \"10.0.0.1/8\"\nvia = \"zzz\"\n";
    let d = parse(text).unwrap_err();
    let lines: Vec<usize> = d.iter().map(|d| d.line).collect();
    assert_eq!(lines, vec![3, 4, 8, 9, 13, 15, 16], "{d:#?}");
    assert!(d[3].message.contains("missing required key \"key\""));
    assert!(d[4].message.contains("same address family"));
    assert!(d.iter().all(|d| d.column >= 1));
}

#[test]
fn columns_point_at_the_key() {
    let d = parse("[gateway]\nname = \"gw\"\n  workers = 0\n").unwrap_err();
    assert_eq!((d[0].line, d[0].column), (3, 3));
}

#[test]
fn validate_works_on_code_built_configs() {
    let addr = |s: &str| s.parse::<IpAddr>().unwrap();
    let mut cfg = Config {
        ha: None,
        pool: None,
        gateway: Gateway {
            name: "api".into(),
            workers: 4,
            api: ApiEndpoint::default_for("api"),
            api_token_file: None,
            api_readonly_token_file: None,
            api_tls_cert_file: None,
            api_tls_key_file: None,
            api_insecure_loopback: false,
            state_dir: None,
            busy_poll: false,
            idle_spin_us: None,
        },
        interfaces: vec![Interface {
            name: "lan".into(),
            host: "veth0".into(),
            driver: Driver::AfPacket,
            addresses: vec!["10.0.0.1/24".parse().unwrap()],
            vrf: "default".into(),
            mtu: None,
            rsc: true,
            offloads: true,
        }],
        tunnels: vec![Tunnel {
            name: "t".into(),
            kind: TunnelKind::Vxlan,
            local: addr("192.0.2.1"),
            remote: addr("192.0.2.2"),
            key: Some(10),
            vrf: "default".into(),
            underlay_vrf: "default".into(),
            mtu: None,
            checksum: false,
            sequence: false,
            port: 4789,
            addresses: vec!["10.9.0.1/24".parse().unwrap()],
            inner: TunnelInner::Ip,
            ipsec: None,
        }],
        routes: vec![Route {
            vrf: "default".into(),
            prefix: "10.9.0.0/16".parse().unwrap(),
            via: Via::Tunnel("t".into()),
        }],
        routing: Routing::default(),
    };
    assert_eq!(validate(&cfg), vec![]);
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);

    cfg.routes[0].via = Via::Tunnel("lan".into());
    cfg.routes[0].prefix = "10.9.0.1/16".parse().unwrap();
    cfg.gateway.workers = 0;
    let d = validate(&cfg);
    assert_eq!(d.len(), 3, "{d:#?}");
    assert!(d.iter().all(|d| d.line == 0 && d.column == 0));
    let text: Vec<String> = d.iter().map(ToString::to_string).collect();
    assert!(
        text.contains(
            &"line 0: [gateway]: workers = 0 is out of range (expected 1..=64)".to_owned()
        ),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("via tunnel \"lan\": \"lan\" is an interface")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|t| t.contains("did you mean 10.9.0.0/16?")),
        "{text:?}"
    );
}

/// Every diagnostic names its field by path, as a request names it: the
/// key, an element of a list, a sub-table's key; the index is the
/// object's place in the file (a broken table keeps its number), or in
/// the configuration's list for one built in code.
#[test]
fn diagnostics_name_their_field() {
    let text = with_gw(
        "workers = 0\n\
         [[interface]]\nname = \"a\"\nhost = \"v\"\ndriver = \"nic\"\n\
         [[interface]]\nname = \"b\"\nhost = \"w\"\ndriver = \"af_packet\"\naddresses = [\"10.0.0.1/24\", \"224.0.0.1/24\"]\n\
         [[tunnel]]\nname = \"t\"\nkind = \"vxlan\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.2\"\n\
         [[tunnel]]\nname = \"e\"\nkind = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
         [[tunnel.sa]]\ndirection = \"out\"\nspi = 0x1001\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k\"\nlifetime_bytes = 0\n\
         [[tunnel.sa]]\ndirection = \"in\"\nspi = 0x1002\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k\"\nbogus = 1\n\
         [[route]]\nprefix = \"10.1.0.0/24\"\nvia = \"nowhere\"\n",
    );
    let d = parse(&text).unwrap_err();
    let fields: Vec<&str> = d.iter().map(|d| d.field.as_str()).collect();
    assert_eq!(
        fields,
        [
            "gateway.workers",
            "interface[0].driver",
            "interface[1].addresses[1]",
            "tunnel[0].key",
            "tunnel[1].sa[0].lifetime_bytes",
            "tunnel[1].sa[1].bogus",
            "route[0].via",
        ],
        "{d:#?}"
    );
    // Built in code: the tunnel's place in the list, its SA's sub-path.
    let mut cfg = parse(&with_gw(
        "[[tunnel]]\nname = \"e\"\nkind = \"ipsec\"\nlocal = \"192.0.2.1\"\nremote = \"192.0.2.3\"\n\
         [[tunnel.sa]]\ndirection = \"out\"\nspi = 0x1001\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k\"\n\
         [[tunnel.sa]]\ndirection = \"in\"\nspi = 0x1002\nalgorithm = \"aes128gcm16\"\nkey_file = \"/k\"\n",
    ))
    .unwrap();
    let ipsec = cfg.tunnels[0].ipsec.as_mut().unwrap();
    ipsec.sas[1].replay_window = 1 << 20;
    ipsec.traffic = vec!["10.0.0.1/8".parse().unwrap()];
    let fields: Vec<String> = validate(&cfg).into_iter().map(|d| d.field).collect();
    assert_eq!(
        fields,
        ["tunnel[0].traffic", "tunnel[0].sa[1].replay_window"]
    );
    // A syntax error concerns the file as a whole.
    assert_eq!(parse("[gateway\n").unwrap_err()[0].field, "");
}

#[test]
fn load_reports_io_and_diagnostics() {
    let missing =
        std::env::temp_dir().join(format!("vecgate-cfg-missing-{}.toml", std::process::id()));
    assert!(matches!(load(&missing), Err(LoadError::Io { .. })));
    let bad = std::env::temp_dir().join(format!("vecgate-cfg-bad-{}.toml", std::process::id()));
    std::fs::write(&bad, "[gateway]\nname = \"gw\"\nworkers = 99\n").unwrap();
    let r = load(&bad);
    let _ = std::fs::remove_file(&bad);
    match r {
        Err(LoadError::Invalid { diagnostics, .. }) => assert_eq!(diagnostics[0].line, 3),
        other => panic!("{other:?}"),
    }
}

#[test]
fn serde_json_shape_is_stable() {
    // The control API serialises the model; prefixes and endpoints as strings.
    let cfg = parse(&with_gw(
        "[[route]]\nprefix = \"10.0.0.0/8\"\nvia = \"10.1.1.1\"\n",
    ))
    .unwrap();
    let r = &cfg.routes[0];
    let s: String = r.prefix.into();
    assert_eq!(s, "10.0.0.0/8");
    assert_eq!(
        String::from(cfg.gateway.api.clone()),
        "unix:/run/vecgate/gw.sock"
    );
}

#[test]
fn one_wide_subnet_overlapping_two() {
    let e = errs(&with_gw(
        "[[interface]]\nname = \"a\"\nhost = \"v1\"\ndriver = \"tap\"\naddresses = [\"10.1.0.1/24\", \"10.2.0.1/24\"]\n\
         [[interface]]\nname = \"b\"\nhost = \"v2\"\ndriver = \"tap\"\n\naddresses = [\"10.0.0.1/8\"]\n",
    ));
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e.iter()
            .all(|e| e.starts_with("line 13: [[interface]] \"b\": address 10.0.0.1/8 overlaps")),
        "{e:?}"
    );
    assert!(
        e.iter().any(|e| e.contains("10.1.0.0/24")) && e.iter().any(|e| e.contains("10.2.0.0/24")),
        "{e:?}"
    );
}

#[test]
fn tunnel_overlay_addresses_and_inner() {
    // Lines: 3 [[tunnel]], 4 name, 5 kind, 6 local, 7 remote, 8.. extra.
    let text = tunnel(
        "gre",
        "inner = \"ethernet\"\naddresses = [\"10.9.0.1/24\", \"fd09::1/64\"]\n",
    );
    let cfg = parse(&text).unwrap();
    let t = &cfg.tunnels[0];
    assert_eq!(t.inner, TunnelInner::Ethernet);
    assert!(t.carries_ethernet());
    assert_eq!(t.addresses.len(), 2);
    assert_eq!(t.addresses[1].to_string(), "fd09::1/64");
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);
    // Defaults: IP inner, no addresses; NVGRE / VXLAN always carry Ethernet.
    let cfg = parse(&tunnel("gre", "")).unwrap();
    assert_eq!(cfg.tunnels[0].inner, TunnelInner::Ip);
    assert!(!cfg.tunnels[0].carries_ethernet());
    assert!(parse(&tunnel("vxlan", "key = 5\n")).unwrap().tunnels[0].carries_ethernet());
    one(
        &tunnel("gre", "inner = \"mpls\"\n"),
        8,
        "expected ip or ethernet",
    );
    one(
        &tunnel("gre", "addresses = [\"10.9.0.1/24\", \"224.0.0.1/4\"]\n"),
        8,
        "224.0.0.1/4 is not a unicast address",
    );
    one(
        &tunnel("ipsec", "inner = \"ethernet\"\n"),
        8,
        "not allowed for kind = \"ipsec\"",
    );
}

const ROUTING_BASE: &str = "[gateway]\nname = \"gw\"\n[[interface]]\nname = \"lan\"\nhost = \"v0\"\ndriver = \"af_packet\"\naddresses = [\"10.0.0.1/24\"]\n";

#[test]
fn routing_fpm_and_tables_parse() {
    let c = parse(&format!(
        "{ROUTING_BASE}[routing]\nfpm = \"127.0.0.1:2620\"\nmax_routes = 5000\n[[routing.table]]\nid = 254\nvrf = \"default\"\n[[routing.table]]\nid = 100\nvrf = \"blue\"\n"
    ))
    .unwrap();
    assert_eq!(c.routing.fpm, Some("127.0.0.1:2620".parse().unwrap()));
    assert_eq!(c.routing.max_routes, 5000);
    assert_eq!(c.routing.max_nexthop_groups, DEFAULT_MAX_NEXTHOP_GROUPS);
    assert_eq!(
        c.routing.tables,
        vec![
            RoutingTable {
                id: 254,
                vrf: "default".into()
            },
            RoutingTable {
                id: 100,
                vrf: "blue".into()
            },
        ]
    );
    assert!(c.vrfs().contains(&"blue".to_owned()), "a mapped VRF exists");
    assert_eq!(parse(&c.to_toml()).unwrap(), c);
    // Without tables: main (254) goes to the default VRF.
    let c = parse(&format!("{ROUTING_BASE}[routing]\nfpm = \"[::1]:2620\"\n")).unwrap();
    assert_eq!(
        c.routing.table_map(),
        vec![RoutingTable {
            id: MAIN_TABLE,
            vrf: "default".into()
        }]
    );
    assert_eq!(parse(&c.to_toml()).unwrap(), c);
    // No [routing] at all: nothing emitted, nothing learned.
    let c = parse(ROUTING_BASE).unwrap();
    assert_eq!(c.routing, Routing::default());
    assert!(!c.to_toml().contains("routing"));
}

#[test]
fn routing_mistakes_are_named_with_their_line() {
    let bad = |extra: &str, needle: &str, line: usize| {
        let d = parse(&format!("{ROUTING_BASE}{extra}")).unwrap_err();
        assert!(
            d.iter()
                .any(|d| d.message.contains(needle) && d.line == line),
            "{extra}: wanted \"{needle}\" at line {line}, got {d:?}"
        );
    };
    bad("[routing]\nfpm = \"localhost\"\n", "is not ADDRESS:PORT", 9);
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\nbogus = 1\n",
        "unknown key \"bogus\"",
        10,
    );
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\nmax_routes = 0\n",
        "max_routes = 0 is out of range",
        10,
    );
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\n[[routing.table]]\nid = 254\nvrf = \"a\"\n[[routing.table]]\nid = 254\nvrf = \"b\"\n",
        "table 254 is mapped twice",
        14,
    );
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\n[[routing.table]]\nid = 1\nvrf = \"a\"\n[[routing.table]]\nid = 2\nvrf = \"a\"\n",
        "one table per VRF",
        15,
    );
    bad("[[routing.table]]\nid = 1\nvrf = \"a\"\n", "set fpm", 8);
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\n[[routing.table]]\nvrf = \"a\"\n",
        "missing required key \"id\"",
        10,
    );
    let d = parse(&format!("routing = 3\n{ROUTING_BASE}")).unwrap_err();
    assert!(
        d.iter()
            .any(|d| d.line == 1 && d.message.contains("must be a table ([routing])")),
        "{d:?}"
    );
}

/// `[[routing.punt]]` netns / fpm: a tenant's control plane in its own
/// namespace; fpm only with netns, one route source per VRF.
#[test]
fn routing_punt_in_a_namespace() {
    let c = parse(&format!(
        "{ROUTING_BASE}[[routing.punt]]\nvrf = \"default\"\ntap = \"vg0\"\nnetns = \"vg-t1\"\nfpm = \"127.0.0.1:2620\"\n"
    ))
    .unwrap();
    let p = &c.routing.punt[0];
    assert_eq!(p.netns.as_deref(), Some("vg-t1"));
    assert_eq!(p.fpm, Some("127.0.0.1:2620".parse().unwrap()));
    assert_eq!(parse(&c.to_toml()).unwrap(), c);
    let bad = |extra: &str, needle: &str| {
        let d = parse(&format!("{ROUTING_BASE}{extra}")).unwrap_err();
        assert!(
            d.iter().any(|d| d.message.contains(needle)),
            "{extra}: wanted \"{needle}\", got {d:?}"
        );
    };
    bad(
        "[[routing.punt]]\nvrf = \"default\"\ntap = \"vg0\"\nfpm = \"127.0.0.1:2620\"\n",
        "set netns too",
    );
    bad(
        "[[routing.punt]]\nvrf = \"default\"\ntap = \"vg0\"\nnetns = \"a/b\"\n",
        "is not a namespace name",
    );
    bad(
        "[[routing.punt]]\nvrf = \"default\"\ntap = \"vg0\"\nnetns = \"t\"\nfpm = \"x\"\n",
        "is not ADDRESS:PORT",
    );
    bad(
        "[routing]\nfpm = \"127.0.0.1:2620\"\n[[routing.punt]]\nvrf = \"default\"\ntap = \"vg0\"\nnetns = \"t\"\nfpm = \"127.0.0.1:2620\"\n",
        "one source per VRF",
    );
}

#[test]
fn ha_groups() {
    const LAN: &str = "[[interface]]\nname = \"lan0\"\nhost = \"v0\"\ndriver = \"tap\"\naddresses = [\"10.1.0.1/24\"]\n"; // lines 3-7
    let cfg = parse(&with_gw(&format!(
        "{LAN}[ha]\npriority = 150\ninterval_cs = 50\npreempt = false\ntrack = [\"lan0\"]\n\
         [[ha.group]]\nvrid = 51\ninterface = \"lan0\"\naddresses = [\"10.1.0.254\"]\n"
    )))
    .unwrap();
    let h = cfg.ha.as_ref().unwrap();
    assert_eq!((h.priority, h.interval_cs, h.preempt), (150, 50, false));
    assert_eq!(h.track_penalty, 50);
    assert_eq!(h.groups[0].vrid, 51);
    assert_eq!(h.group_priority(&h.groups[0]), 150);
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);

    one(
        &with_gw(&format!("{LAN}[ha]\ninterval_cs = 5000\n")),
        9,
        "interval_cs = 5000 is out of range",
    );
    one(
        &with_gw(&format!("{LAN}[ha]\ntrack = [\"wan\"]\n")),
        9,
        "no [[interface]] named \"wan\"",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\n[[ha.group]]\nvrid = 1\ninterface = \"lan0\"\naddresses = [\"fd00::1\"]\n"
        )),
        11,
        "has no IPv6 address",
    );
    one(
        &with_gw(&format!("{LAN}[ha]\n[[ha.group]]\nvrid = 1\ninterface = \"lan0\"\naddresses = [\"10.1.0.9\", \"fd00::1\"]\n")),
        12,
        "all be IPv4 or all IPv6",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\n[[ha.group]]\nvrid = 1\ninterface = \"lan0\"\naddresses = []\n"
        )),
        12,
        "at least one address",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\n[[ha.group]]\nvrid = 1\ninterface = \"lan0\"\naddresses = [\"10.1.0.9\"]\n\
             [[ha.group]]\nvrid = 1\ninterface = \"lan0\"\naddresses = [\"10.1.0.8\"]\n"
        )),
        14,
        "vrid 1 is used twice",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\n[[ha.group]]\ninterface = \"lan0\"\naddresses = [\"10.1.0.9\"]\n"
        )),
        9,
        "missing required key \"vrid\"",
    );
    one(
        &with_gw(&format!("{LAN}[ha]\nbogus = 1\n")),
        9,
        "unknown key \"bogus\"",
    );
}

#[test]
fn ha_sync_keys() {
    const LAN: &str = "[[interface]]\nname = \"lan0\"\nhost = \"v0\"\ndriver = \"tap\"\naddresses = [\"10.1.0.1/24\"]\n"; // lines 3-7
    let cfg = parse(&with_gw(&format!(
        "{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"192.0.2.2:4790\"\n\
         sync_key_file = \"/etc/vecgate/ha-sync.key\"\n"
    )))
    .unwrap();
    let y = cfg.ha.as_ref().unwrap().sync.as_ref().unwrap();
    assert_eq!(y.local, "192.0.2.1:4790".parse().unwrap());
    assert_eq!(y.peer, "192.0.2.2:4790".parse().unwrap());
    assert_eq!(y.interval_ms, 100);
    assert_eq!(y.max_sa_pps, 1 << 21);
    assert_eq!(parse(&cfg.to_toml()).unwrap(), cfg);
    // Without the keys there is no sync.
    let cfg = parse(&with_gw(&format!("{LAN}[ha]\n"))).unwrap();
    assert_eq!(cfg.ha.unwrap().sync, None);

    one(
        &with_gw(&format!("{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\n")),
        8,
        "missing sync_peer, sync_key_file",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"192.0.2.1\"\nsync_peer = \"192.0.2.2:4790\"\nsync_key_file = \"/k\"\n"
        )),
        9,
        "is not ADDRESS:PORT",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"0.0.0.0:4790\"\nsync_peer = \"192.0.2.2:4790\"\nsync_key_file = \"/k\"\n"
        )),
        9,
        "must be a unicast address and a non-zero port",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"[2001:db8::2]:4790\"\nsync_key_file = \"/k\"\n"
        )),
        10,
        "one address family",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"192.0.2.1:4790\"\nsync_key_file = \"/k\"\n"
        )),
        10,
        "must differ",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"192.0.2.2:4790\"\nsync_key_file = \"/k\"\nsync_interval_ms = 5\n"
        )),
        12,
        "sync_interval_ms = 5 is out of range",
    );
    one(
        &with_gw(&format!(
            "{LAN}[ha]\nsync_local = \"192.0.2.1:4790\"\nsync_peer = \"192.0.2.2:4790\"\nsync_key_file = \"/k\"\nmax_sa_pps = 10\n"
        )),
        12,
        "max_sa_pps = 10 is out of range",
    );
    // Alone, it asks for the sync it bounds.
    one(
        &with_gw(&format!("{LAN}[ha]\nmax_sa_pps = 100000\n")),
        8,
        "missing sync_local, sync_peer, sync_key_file",
    );
}
