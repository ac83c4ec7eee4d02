//! What each configuration key means, beside the key sets the config
//! crate's parser accepts: `reference::config_page` fails when the two
//! disagree, so a key added to the parser without a line here (or the other
//! way round) fails `vecgate gen-reference` and the docs test.

use vecgate_config::{ha, ipsec, pool};

/// One key: its section, name, type, default, range and meaning.
pub struct Key {
    pub section: &'static str,
    pub name: &'static str,
    pub ty: &'static str,
    pub default: String,
    pub range: String,
    pub meaning: &'static str,
}

fn k(
    section: &'static str,
    name: &'static str,
    ty: &'static str,
    default: impl ToString,
    range: impl ToString,
    meaning: &'static str,
) -> Key {
    Key {
        section,
        name,
        ty,
        default: default.to_string(),
        range: range.to_string(),
        meaning,
    }
}

fn admission(name: &str) -> (u32, u32) {
    ipsec::ADMISSION_DEFAULTS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map_or((0, 0), |(_, d, max)| (*d, *max))
}

fn choices(all: &[&str]) -> String {
    all.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every key of every section, in the sections' order.
pub fn keys() -> Vec<Key> {
    use vecgate_config::{Driver, TunnelKind, DEFAULT_MAX_NEXTHOP_GROUPS, DEFAULT_MAX_ROUTES};
    let drivers: Vec<&str> = Driver::ALL.iter().map(|d| d.as_str()).collect();
    let kinds: Vec<&str> = TunnelKind::ALL.iter().map(|d| d.as_str()).collect();
    let dv = format!("`{}`", vecgate_config::DEFAULT_VRF);
    let (ct, ct_max) = admission("cookie_threshold");
    let (cs, cs_max) = admission("cookie_threshold_per_source");
    let (cr, cr_max) = admission("cookie_rate");
    let (ho, ho_max) = admission("half_open_per_source");
    let (mh, mh_max) = admission("max_half_open");
    let g = "[gateway]";
    let i = "[[interface]]";
    let t = "[[tunnel]]";
    let ike = "[tunnel.ike]";
    let sa = "[[tunnel.sa]]";
    let r = "[[route]]";
    let ro = "[routing]";
    let rt = "[[routing.table]]";
    let rp = "[[routing.punt]]";
    let h = "[ha]";
    let hg = "[[ha.group]]";
    let p = "[pool]";
    let pc = "[pool.capacity]";
    vec![
        k(g, "name", "string", "required", "", "The gateway's name: its API socket, state directory and log lines are named after it."),
        k(g, "workers", "integer", 1, "1..=64", "Dataplane worker threads, each pinned to one of the CPUs the gateway may use."),
        k(g, "api", "string", "`unix:/run/vecgate/<name>.sock`", "`unix:PATH` or `tcp:ADDR:PORT`", "Where the REST API listens. A TCP API needs `api_token_file` and TLS (or `api_insecure_loopback`)."),
        k(g, "api_token_file", "path", "none", "secret file, token ≥ 32 bytes", "The admin bearer token of a TCP API (may change things)."),
        k(g, "api_readonly_token_file", "path", "none", "secret file, token ≥ 32 bytes", "A read-only bearer token (GET only: metrics, dashboards)."),
        k(g, "api_tls_cert_file", "path", "none", "PEM chain", "The TCP API's TLS certificate chain."),
        k(g, "api_tls_key_file", "path", "none", "secret file, PEM", "The TCP API's TLS private key."),
        k(g, "api_insecure_loopback", "boolean", false, "", "Plain HTTP instead of TLS for a TCP API on a loopback address only."),
        k(g, "state_dir", "path", "`/var/lib/vecgate/<name>`", "", "Where static SAs' sequence-number ceilings and replay windows are kept across restarts (created 0700, locked while running)."),
        k(g, "busy_poll", "boolean", false, "", "Workers poll their ports without ever sleeping: for CPUs given to vecgate alone."),
        k(g, "idle_spin_us", "integer (µs)", 50, "0..=10000", "How long a worker keeps polling after its last packet, yielding its CPU between polls, before it sleeps; 0 sleeps at once."),
        k(i, "name", "string", "required", "", "vecgate's own name for the interface: routes and groups name it."),
        k(i, "host", "string", "required", "netdev name, ≤ 15 bytes", "The Linux netdev vecgate takes over (created, for `driver = \"tap\"`)."),
        k(i, "driver", "string", "required", choices(&drivers), "How frames move: AF_PACKET with virtio-net headers (super-packets), AF_XDP (no skb on receive), or a TAP device vecgate creates."),
        k(i, "addresses", "array of prefixes", "none", "IPv4 or IPv6 `ADDR/LEN`", "The gateway's addresses on the interface; their subnets become connected routes."),
        k(i, "vrf", "string", &dv, "", "The VRF the interface belongs to."),
        k(i, "mtu", "integer", "the netdev's MTU", "68..=65535 (≥ 1280 with IPv6 addresses)", "The interface's MTU."),
        k(i, "rsc", "boolean", true, "", "Receive segment coalescing towards this interface's hosts (switchable live)."),
        k(i, "offloads", "boolean", true, "", "Exchange super-packets and partial checksums with the kernel (switchable live)."),
        k(t, "name", "string", "required", "", "The tunnel's name: routes point `via` it."),
        k(t, "kind", "string", "required", choices(&kinds), "The encapsulation."),
        k(t, "local", "address", "required", "same family as `remote`", "The outer source address: one of the gateway's addresses (or a VRRP virtual address) in the underlay VRF."),
        k(t, "remote", "address", "required", "", "The other end's outer address."),
        k(t, "key", "integer", "none (gre); required (nvgre, vxlan)", "gre 0..=4294967295; nvgre 4096..=16777214; vxlan 0..=16777215", "GRE key (RFC 2890), NVGRE VSID (RFC 7637) or VXLAN VNI (RFC 7348)."),
        k(t, "vrf", "string", &dv, "", "The overlay VRF: routes in it may point at the tunnel; what arrives on it is routed there."),
        k(t, "underlay_vrf", "string", &dv, "", "The VRF whose FIB reaches `remote`."),
        k(t, "mtu", "integer", "the underlay's MTU less the encapsulation", "68..=65535", "The overlay MTU: larger packets get ICMP fragmentation needed / packet too big."),
        k(t, "checksum", "boolean", false, "gre only", "GRE checksums (RFC 2784 §2.5)."),
        k(t, "sequence", "boolean", false, "gre only", "GRE sequence numbers (RFC 2890 §2.2)."),
        k(t, "port", "integer", vecgate_config::VXLAN_PORT, "1..=65535, vxlan only", "The VXLAN UDP destination port."),
        k(t, "addresses", "array of prefixes", "none", "tunnels carrying Ethernet", "The gateway's addresses on an Ethernet overlay (ARP/ND target), or a BGP session's end on an IP tunnel."),
        k(t, "inner", "string", "`ip`", "`ip`, `ethernet`; gre only", "GRE payload: IP packets, or Ethernet frames (protocol 0x6558)."),
        k(t, "nat_t", "boolean", false, "ipsec only", "ESP in UDP 4500 (RFC 3948) from the start; IKE moves there by itself when it detects a NAT."),
        k(t, "traffic", "array of prefixes", "none", "ipsec only", "The SPD: remote prefixes routed into the tunnel, proposed to the peer, and the only inner sources accepted from it."),
        k(t, "sa", "array of tables", "none", "ipsec only", "Static SAs: see `[[tunnel.sa]]`."),
        k(t, "ike", "table", "none", "ipsec only", "IKEv2 keying: see `[tunnel.ike]`."),
        k(ike, "auth", "string", "`psk`", "`psk`, `pubkey`", "How we authenticate: the PSK, or a signature with our certificate's key (RFC 7427)."),
        k(ike, "remote_auth", "string", "as `auth`", "`psk`, `pubkey`", "How the peer must authenticate."),
        k(ike, "psk_file", "path", "required with `psk`", "secret file", "The pre-shared key (raw bytes; a trailing newline is ignored)."),
        k(ike, "cert_file", "path", "required with `auth = \"pubkey\"`", "PEM or DER", "Our certificate, then its intermediates, sent in CERT payloads."),
        k(ike, "key_file", "path", "required with `auth = \"pubkey\"`", "secret file; PKCS#8, RSA or EC PEM, or DER", "The certificate's private key (RSA ≥ 2048, ECDSA P-256/384/521, Ed25519)."),
        k(ike, "ca_files", "array of paths", "none", "PEM or DER", "Trust anchors the peer's chain must reach (with `remote_auth = \"pubkey\"`)."),
        k(ike, "crl_files", "array of paths", "none", "PEM or DER", "Certificate revocation lists, re-read on reload."),
        k(ike, "remote_cert_file", "path", "none", "PEM or DER", "The peer's own certificate, trusted as is (for a peer that sends none)."),
        k(ike, "local_id", "string", "`local`; with a certificate its subject", "an address, an FQDN, an e-mail, a DN or `keyid:…`", "Our IKE identity (with a certificate: one it carries)."),
        k(ike, "remote_id", "string", "`remote`", "an address, an FQDN, an e-mail, a DN (`*` per attribute), `%any` or `keyid:…`", "The identity the peer must prove (with a certificate: one it carries)."),
        k(ike, "ike_proposals", "array of strings", "vecgate's default suites", "strongSwan notation, e.g. `aes128gcm16-prfsha256-x25519`", "IKE SA proposals, in order of preference."),
        k(ike, "esp_proposals", "array of strings", "vecgate's default suites", "e.g. `aes128gcm16`, `aes256-sha256`", "Child SA (ESP) proposals, in order of preference."),
        k(ike, "initiate", "boolean", true, "", "Start (and re-establish) the negotiation instead of waiting for the peer."),
        k(ike, "dpd_interval", "integer (s)", "none", "≥ 1", "Seconds of silence before a liveness check (RFC 7296 §2.4)."),
        k(ike, "ike_lifetime", "integer (s)", 14400, "≥ 1", "Seconds until the IKE SA is rekeyed, less up to 10 % at random."),
        k(ike, "child_lifetime", "integer (s)", 3600, "≥ 1", "Seconds until each child SA is rekeyed, less up to 10 % at random."),
        k(ike, "child_lifetime_packets", "integer", "2^32 − 2^24", "≥ 1", "Packets after which a child SA stops; its rekey starts at the soft limit."),
        k(ike, "child_lifetime_bytes", "integer", "none", "≥ 1", "Bytes after which a child SA stops; its rekey starts at the soft limit."),
        k(ike, "local_traffic", "array of prefixes", "the tunnel VRF's interface networks", "", "Our traffic selectors."),
        k(ike, "cookie_threshold", "integer", ct, format!("1..={ct_max}"), "Half-open SAs from which IKE_SA_INITs must carry a COOKIE (RFC 7296 §2.6)."),
        k(ike, "cookie_threshold_per_source", "integer", cs, format!("1..={cs_max}"), "The same, counted per source address."),
        k(ike, "cookie_rate", "integer (per s)", cr, format!("1..={cr_max}"), "IKE_SA_INITs a second above which every one must carry a COOKIE."),
        k(ike, "half_open_per_source", "integer", ho, format!("1..={ho_max}"), "Half-open SAs one source address may hold (RFC 8019)."),
        k(ike, "max_half_open", "integer", mh, format!("1..={mh_max}"), "Half-open SAs the tunnel holds at most."),
        k(sa, "direction", "string", "required", "`in`, `out`", "Exactly one `out` SA, one or more `in` SAs (two during a rekey)."),
        k(sa, "spi", "integer", "required", "256..=0xffffffff", "The SA's SPI: the peer's `in` SA is this side's `out` SA."),
        k(sa, "algorithm", "string", "required", "`aes128gcm16`, `aes256gcm16`, `aes128-sha1`, `aes256-sha256`, `chacha20poly1305`", "The ESP transform."),
        k(sa, "key_file", "path", "required", "secret file, hex", "The key: cipher key and 4-byte salt (AEAD, RFC 4106 §8.1), or cipher key and integrity key (CBC with HMAC)."),
        k(sa, "esn", "boolean", true, "", "64-bit extended sequence numbers (RFC 4303 §2.2.1)."),
        k(sa, "replay_window", "integer", ipsec::DEFAULT_REPLAY_WINDOW, format!("0..={}", ipsec::MAX_REPLAY_WINDOW), "Anti-replay window of an `in` SA, in packets; 0 turns it off."),
        k(sa, "lifetime_bytes", "integer", "none", "≥ 1", "Hard limit in bytes; a warning at the soft limit."),
        k(sa, "lifetime_packets", "integer", "none", "≥ 1", "Hard limit in packets; a warning at the soft limit."),
        k(sa, "lifetime_seconds", "integer", "none", "≥ 1", "Hard limit in seconds; a warning at the soft limit."),
        k(r, "vrf", "string", &dv, "", "The VRF the route belongs to."),
        k(r, "prefix", "prefix", "required", "host bits zero", "The destination."),
        k(r, "via", "string", "required", "an interface, a tunnel or an address of the prefix's family", "Where the route goes."),
        k(ro, "fpm", "address", "none", "`ADDR:PORT`", "The FPM server zebra (`dplane_fpm_nl`) connects to and streams its routes over."),
        k(ro, "max_routes", "integer", DEFAULT_MAX_ROUTES, "1..=4294967295", "Learned routes a VRF holds at most."),
        k(ro, "max_nexthop_groups", "integer", DEFAULT_MAX_NEXTHOP_GROUPS, "1..=4294967295", "Next-hop objects zebra may hold at most."),
        k(ro, "table", "array of tables", "table 254 → `default`", "", "Kernel table ids mapped to VRFs: see `[[routing.table]]`."),
        k(ro, "punt", "array of tables", "none", "", "A VRF's control plane given to the host: see `[[routing.punt]]`."),
        k(rt, "id", "integer", "required", "1..=4294967295", "The kernel table id zebra reports."),
        k(rt, "vrf", "string", "required", "", "The VRF its routes go into."),
        k(rp, "vrf", "string", "required", "", "The VRF whose BGP and BFD go to the host."),
        k(rp, "tap", "string", "required", "≤ 15 bytes", "The TUN device vecgate creates for it, with the VRF's addresses."),
        k(rp, "netns", "string", "none", "", "A network namespace for the TUN (created when missing): a tenant VRF's own routing domain."),
        k(rp, "fpm", "address", "none", "`ADDR:PORT` inside `netns`", "An FPM listener for that namespace's zebra; its routes go into this VRF."),
        k(h, "priority", "integer", ha::DEFAULT_PRIORITY, "1..=255 (255 = owner)", "VRRP priority of every group; the higher one is master."),
        k(h, "interval_cs", "integer (cs)", ha::DEFAULT_INTERVAL_CS, "1..=4095", "Advertisement interval; a backup takes over after 3 × interval + skew."),
        k(h, "preempt", "boolean", true, "", "A higher priority takes the addresses from a lower master."),
        k(h, "track", "array of strings", "none", "interface names", "Interfaces whose link going down lowers every group's priority."),
        k(h, "track_penalty", "integer", ha::DEFAULT_TRACK_PENALTY, "0..=255", "How much each tracked interface that is down lowers the priority."),
        k(h, "group", "array of tables", "none", "", "VRRP groups: see `[[ha.group]]`."),
        k(h, "sync_local", "address", "none", "`ADDR:PORT`", "This member's end of the state sync (a kernel UDP socket)."),
        k(h, "sync_peer", "address", "none", "`ADDR:PORT`", "The other member's `sync_local`."),
        k(h, "sync_key_file", "path", "none", "secret file, 64 hex digits", "The key the sync is sealed under (AES-256-GCM, keys derived per boot)."),
        k(h, "sync_interval_ms", "integer (ms)", ha::DEFAULT_SYNC_INTERVAL_MS, "10..=10000", "How often the active sends its state, and the standby its heartbeat."),
        k(h, "max_sa_pps", "integer", ha::DEFAULT_MAX_SA_PPS, format!("{}..={}", ha::MIN_MAX_SA_PPS, ha::MAX_MAX_SA_PPS), "Packets a second one SA may reserve while the sync runs: bounds what a takeover must skip."),
        k(hg, "vrid", "integer", "required", "1..=255", "The virtual router id, one per segment and family."),
        k(hg, "interface", "string", "required", "an interface with an address of the group's family", "The segment the group runs on."),
        k(hg, "addresses", "array of addresses", "required", "one family", "The virtual addresses the master holds."),
        k(hg, "priority", "integer", "`[ha] priority`", "1..=255", "This group's priority."),
        k(hg, "track", "array of strings", "none", "interface names", "Interfaces tracked by this group too."),
        k(hg, "track_penalty", "integer", "`[ha] track_penalty`", "0..=255", "This group's penalty per tracked interface down."),
        k(p, "name", "string", "required", "a name", "The pool; the same on every member."),
        k(p, "member", "string", "`[gateway] name`", "a name", "This member's name in the pool."),
        k(p, "etcd", "array of strings", "required", format!("1..={} URLs, `http://` or `https://`", pool::MAX_ENDPOINTS), "Every member of the etcd cluster: the fence probes each when keepalives fail."),
        k(p, "etcd_ca_file", "path", "none", "PEM", "The CA of etcd's certificates (`https://` endpoints need it)."),
        k(p, "etcd_cert_file", "path", "none", "PEM", "A client certificate for etcd (with `etcd_key_file`)."),
        k(p, "etcd_key_file", "path", "none", "secret file, PEM", "The client certificate's key."),
        k(p, "lease_ttl", "integer (s)", pool::DEFAULT_LEASE_TTL, format!("1..={}", pool::MAX_LEASE_TTL), "The member's lease: keepalive every TTL/6; it stops serving at its last answered keepalive + TTL."),
        k(p, "pool_key_file", "path", "required", "secret file, 64 hex digits", "The key the connections' SA state is sealed under in etcd; the same on every member."),
        k(p, "redundant", "integer", pool::DEFAULT_REDUNDANT, "0..=16", "N of M+N: connections are admitted only while any N members may fail."),
        k(p, "max_sa_pps", "integer", ha::DEFAULT_MAX_SA_PPS, format!("{}..={}", ha::MIN_MAX_SA_PPS, ha::MAX_MAX_SA_PPS), "Packets a second one SA may reserve: bounds what a failover's new owner skips."),
        k(p, "capacity", "table", "required", "", "What the member carries: see `[pool.capacity]`."),
        k(pc, "ipsec_mbps", "integer (Mbit/s)", "required", "0..=10000000", "ESP throughput the member may be given."),
        k(pc, "gre_mbps", "integer (Mbit/s)", "required", "0..=10000000", "GRE, NVGRE and VXLAN throughput the member may be given."),
        k(pc, "tunnels", "integer", "required", "0..=1000000", "Connections the member may be given."),
    ]
}
