//! Semantic checks of `[pool]` (a child of `validate`).

use super::{check_name, V};

/// An etcd client URL: `http://HOST:PORT` or `https://HOST:PORT` (HOST a
/// name, an IPv4 address or a bracketed IPv6 address). Returns whether
/// it is https.
pub(crate) fn etcd_url(u: &str) -> Result<bool, String> {
    let (tls, rest) = if let Some(r) = u.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = u.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!(
            "etcd endpoint \"{u}\" must start with http:// or https://"
        ));
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = rest.rsplit_once(':') else {
        return Err(format!("etcd endpoint \"{u}\" needs a port (e.g. :2379)"));
    };
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(format!(
            "etcd endpoint \"{u}\": port \"{port}\" is not 1..=65535"
        ));
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
    };
    if !host_ok {
        return Err(format!(
            "etcd endpoint \"{u}\": \"{host}\" is not a host name or address"
        ));
    }
    Ok(tls)
}

pub(super) fn check(v: &mut V<'_>) {
    let Some(p) = &v.cfg.pool else {
        return;
    };
    let pos = v.pos.pool.clone();
    let label = "[pool]";
    if let Some(m) = check_name("name", &p.name) {
        v.err(pos.key("name"), label, m);
    }
    if let Some(m) = p.member.as_deref().and_then(|n| check_name("member", n)) {
        v.err(pos.key("member"), label, m);
    }
    let mut https = 0;
    for (i, u) in p.etcd.iter().enumerate() {
        match etcd_url(u) {
            Ok(t) => https += usize::from(t),
            Err(m) => v.err(pos.item(i, "etcd"), label, m),
        }
    }
    if https != 0 && https != p.etcd.len() {
        v.err(
            pos.key("etcd"),
            label,
            "etcd endpoints must be all http:// or all https://".to_owned(),
        );
    }
    let tls_files =
        p.etcd_ca_file.is_some() || p.etcd_cert_file.is_some() || p.etcd_key_file.is_some();
    if https == 0 && tls_files {
        v.err(
            pos.key("etcd"),
            label,
            "etcd_ca_file, etcd_cert_file and etcd_key_file need https:// endpoints".to_owned(),
        );
    }
    if https != 0 && p.etcd_ca_file.is_none() {
        v.err(
            pos.key("etcd"),
            label,
            "https:// endpoints need etcd_ca_file (the CA that signed etcd's certificates)"
                .to_owned(),
        );
    }
    if p.etcd_cert_file.is_some() != p.etcd_key_file.is_some() {
        let (have, need) = if p.etcd_cert_file.is_some() {
            ("etcd_cert_file", "etcd_key_file")
        } else {
            ("etcd_key_file", "etcd_cert_file")
        };
        v.err(pos.key(have), label, format!("{have} needs {need} too"));
    }
    if p.pool_key_file.as_os_str().is_empty() {
        v.err(
            pos.key("pool_key_file"),
            label,
            "pool_key_file is empty".to_owned(),
        );
    }
    let c = &p.capacity;
    if c.tunnels == 0 || (c.ipsec_mbps == 0 && c.gre_mbps == 0) {
        let at = pos.sub(0, "capacity").whole();
        v.err(
            at,
            "[pool.capacity]",
            "a member must carry something: tunnels and ipsec_mbps or gre_mbps above 0".to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::etcd_url;

    #[test]
    fn urls() {
        assert_eq!(etcd_url("http://127.0.0.1:2379"), Ok(false));
        assert_eq!(etcd_url("https://etcd-1.example:2379/"), Ok(true));
        assert_eq!(etcd_url("http://[fd00::1]:2379"), Ok(false));
        for bad in [
            "127.0.0.1:2379",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://:2379",
            "http://[zz]:2379",
            "http://a b:2379",
            "unix:///x",
        ] {
            assert!(etcd_url(bad).is_err(), "{bad}");
        }
    }
}
