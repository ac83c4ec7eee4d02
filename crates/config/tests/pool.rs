//! `[pool]`: the shape, the defaults, and a clear error naming the line
//! and the key for each way to get it wrong.

use vecgate_config::{parse, pool::DEFAULT_LEASE_TTL, Diagnostic};

const HEAD: &str = "[gateway]\nname = \"gw-a\"\n";

fn cfg(pool: &str) -> String {
    format!("{HEAD}{pool}")
}

const GOOD: &str = r#"
[pool]
name = "edge-1"
etcd = ["http://127.0.0.1:2379", "http://127.0.0.1:22379", "http://127.0.0.1:32379"]
pool_key_file = "/etc/vecgate/pool.key"

[pool.capacity]
ipsec_mbps = 5000
gre_mbps = 15000
tunnels = 500
"#;

fn errors(text: &str) -> Vec<Diagnostic> {
    parse(&cfg(text)).expect_err("should be refused")
}

fn one_error(text: &str, line: usize, has: &str) {
    let d = errors(text);
    assert!(
        d.iter().any(|d| d.line == line && d.message.contains(has)),
        "want line {line} with {has:?}, got {d:#?}"
    );
}

#[test]
fn minimal_pool_and_defaults() {
    let c = parse(&cfg(GOOD)).expect("valid");
    let p = c.pool.as_ref().expect("pool");
    assert_eq!(p.name, "edge-1");
    assert_eq!(p.member_name(&c), "gw-a");
    assert_eq!(p.lease_ttl, DEFAULT_LEASE_TTL);
    assert_eq!(p.redundant, 1);
    assert_eq!(p.etcd.len(), 3);
    assert_eq!(p.capacity.gre_mbps, 15000);
    // Emitted and read back, it is the same.
    assert_eq!(parse(&c.to_toml()), Ok(c));
}

#[test]
fn missing_keys_are_named() {
    one_error(
        "\n[pool]\nname = \"p\"\npool_key_file = \"/k\"\n[pool.capacity]\nipsec_mbps = 1\ngre_mbps = 1\ntunnels = 1\n",
        4,
        "missing required key \"etcd\"",
    );
    one_error(
        "\n[pool]\nname = \"p\"\netcd = [\"http://127.0.0.1:2379\"]\npool_key_file = \"/k\"\n",
        4,
        "missing required key \"capacity\"",
    );
    one_error(
        "\n[pool]\nname = \"p\"\netcd = [\"http://127.0.0.1:2379\"]\npool_key_file = \"/k\"\n[pool.capacity]\nipsec_mbps = 1\n",
        8,
        "missing required key \"gre_mbps\"",
    );
    one_error(
        "\n[pool]\netcd = [\"http://127.0.0.1:2379\"]\npool_key_file = \"/k\"\n[pool.capacity]\nipsec_mbps = 1\ngre_mbps = 1\ntunnels = 1\n",
        4,
        "missing required key \"name\"",
    );
}

#[test]
fn bad_values_are_refused_at_their_line() {
    let with = |old: &str, new: &str| GOOD.replacen(old, new, 1);
    one_error(
        &with("pool_key_file", "lease_ttl = 0\npool_key_file"),
        7,
        "lease_ttl = 0 is out of range",
    );
    one_error(
        &with("name = \"edge-1\"", "name = \"a/b\""),
        5,
        "may contain only",
    );
    one_error(
        &with("http://127.0.0.1:2379\"", "127.0.0.1:2379\""),
        6,
        "must start with http:// or https://",
    );
    one_error(
        &with("\"http://127.0.0.1:2379\"", "\"https://127.0.0.1:2379\""),
        6,
        "all http:// or all https://",
    );
    one_error(
        &with("pool_key_file", "etcd_ca_file = \"/ca\"\npool_key_file"),
        6,
        "need https:// endpoints",
    );
    one_error(
        &with("tunnels = 500", "tunnels = 0"),
        9,
        "must carry something",
    );
    one_error(
        &with("gre_mbps = 15000", "gre_mbps = -1"),
        11,
        "out of range",
    );
    one_error(
        &with("tunnels = 500", "tunnels = 5\nspeed = 3"),
        13,
        "unknown key \"speed\"",
    );
    one_error(
        &with("name = \"edge-1\"", "name = \"edge-1\"\nttl = 3"),
        6,
        "unknown key \"ttl\"",
    );
    one_error(
        &GOOD.replace(
            "etcd = [\"http://127.0.0.1:2379\", \"http://127.0.0.1:22379\", \"http://127.0.0.1:32379\"]",
            "etcd = []",
        ),
        6,
        "etcd lists 0 endpoint(s)",
    );
    // The first error does not hide the others.
    let d = errors(&with("tunnels = 500", "tunnels = 0").replace("http://127.0.0.1:2379", "x"));
    assert!(d.len() >= 2, "{d:#?}");
}

#[test]
fn https_needs_a_ca_and_cert_needs_key() {
    let tls = GOOD
        .replace("http://", "https://")
        .replace("pool_key_file", "etcd_cert_file = \"/c\"\npool_key_file");
    let d = errors(&tls);
    assert!(
        d.iter().any(|d| d.message.contains("need etcd_ca_file")),
        "{d:#?}"
    );
    assert!(
        d.iter()
            .any(|d| d.message.contains("etcd_cert_file needs etcd_key_file")),
        "{d:#?}"
    );
    let ok = GOOD.replace("http://", "https://").replace(
        "pool_key_file",
        "etcd_ca_file = \"/ca\"\netcd_cert_file = \"/c\"\netcd_key_file = \"/k\"\npool_key_file",
    );
    let c = parse(&cfg(&ok)).expect("valid");
    assert_eq!(parse(&c.to_toml()), Ok(c));
}
