//! Prometheus text exposition of the counters (summed over workers at
//! scrape time; a fresh registry per scrape, nothing on the fast path).

use crate::state::Control;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

mod pool;

type Labels = Vec<(String, String)>;

fn counter_family(reg: &mut Registry, name: &str, help: &str) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    reg.register(name, help, f.clone());
    f
}

/// Renders every metric (OpenMetrics text, Prometheus-compatible).
pub fn render(ctl: &Control) -> String {
    let mut reg = Registry::default();
    let sum = ctl.counters();

    let ifl = |name: &str| vec![("interface".to_owned(), name.to_owned())];
    let rxp = counter_family(
        &mut reg,
        "vecgate_interface_rx_packets",
        "Packets received on an interface",
    );
    let rxb = counter_family(
        &mut reg,
        "vecgate_interface_rx_bytes",
        "Bytes received on an interface",
    );
    let txp = counter_family(
        &mut reg,
        "vecgate_interface_tx_packets",
        "Packets transmitted on an interface",
    );
    let txb = counter_family(
        &mut reg,
        "vecgate_interface_tx_bytes",
        "Bytes transmitted on an interface",
    );
    let drp = counter_family(
        &mut reg,
        "vecgate_interface_drops",
        "Packets lost at an interface: transmit shortfall plus rx_missed plus rx_errors",
    );
    let rxm = counter_family(
        &mut reg,
        "vecgate_interface_rx_missed",
        "Frames the kernel dropped because the gateway's receive ring was full",
    );
    let rxe = counter_family(
        &mut reg,
        "vecgate_interface_rx_errors",
        "Frames received on an interface but unusable (bad descriptor or virtio-net header)",
    );
    let txe = counter_family(
        &mut reg,
        "vecgate_interface_tx_errors",
        "Packets the kernel rejected as malformed on transmit",
    );
    for (name, p) in ctl.interface_counters() {
        let l = ifl(&name);
        rxp.get_or_create(&l).inc_by(p.rx_packets);
        rxb.get_or_create(&l).inc_by(p.rx_bytes);
        txp.get_or_create(&l).inc_by(p.tx_packets);
        txb.get_or_create(&l).inc_by(p.tx_bytes);
        drp.get_or_create(&l).inc_by(p.drops);
        rxm.get_or_create(&l).inc_by(p.rx_missed);
        rxe.get_or_create(&l).inc_by(p.rx_errors);
        txe.get_or_create(&l).inc_by(p.tx_errors);
    }

    // Tunnels: their virtual ports, since creation.
    let tl = |name: &str| vec![("tunnel".to_owned(), name.to_owned())];
    let t_rxp = counter_family(
        &mut reg,
        "vecgate_tunnel_rx_packets",
        "Packets received from a tunnel (decapsulated)",
    );
    let t_rxb = counter_family(
        &mut reg,
        "vecgate_tunnel_rx_bytes",
        "Inner bytes received from a tunnel",
    );
    let t_txp = counter_family(
        &mut reg,
        "vecgate_tunnel_tx_packets",
        "Packets handed to a tunnel for encapsulation",
    );
    let t_txb = counter_family(
        &mut reg,
        "vecgate_tunnel_tx_bytes",
        "Inner bytes handed to a tunnel",
    );
    let t_drp = counter_family(
        &mut reg,
        "vecgate_tunnel_drops",
        "Packets a tunnel could not encapsulate",
    );
    for t in ctl.tunnel_counters() {
        let l = tl(&t.tunnel);
        t_rxp.get_or_create(&l).inc_by(t.traffic.rx_packets);
        t_rxb.get_or_create(&l).inc_by(t.traffic.rx_bytes);
        t_txp.get_or_create(&l).inc_by(t.traffic.tx_packets);
        t_txb.get_or_create(&l).inc_by(t.traffic.tx_bytes);
        t_drp.get_or_create(&l).inc_by(t.traffic.drops);
    }

    // IPsec SAs (labels: SPI in hex, direction in / out).
    let sa_p = counter_family(
        &mut reg,
        "vecgate_sa_packets",
        "Packets protected (out) or accepted (in) by an IPsec SA",
    );
    let sa_b = counter_family(&mut reg, "vecgate_sa_bytes", "Bytes through an IPsec SA");
    let sa_d = counter_family(
        &mut reg,
        "vecgate_sa_drops",
        "Packets an IPsec SA refused, by reason",
    );
    // Which code runs each SA's cipher: 1 with the engine as a label (the
    // usual Prometheus info encoding).
    let sa_e = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_sa_engine",
        "The engine that runs an IPsec SA's cipher (label engine), always 1",
        sa_e.clone(),
    );
    for sa in ctl.sas() {
        let spi = crate::model::parse_spi(&sa.spi).map_or(sa.spi.clone(), |v| format!("{v:#x}"));
        let dir = if sa.direction == "outbound" {
            "out"
        } else {
            "in"
        };
        let l = vec![
            ("spi".to_owned(), spi.clone()),
            ("direction".to_owned(), dir.to_owned()),
            ("tunnel".to_owned(), sa.tunnel.clone()),
        ];
        let mut le = l.clone();
        le.push(("engine".to_owned(), sa.engine.clone()));
        sa_e.get_or_create(&le).set(1);
        sa_p.get_or_create(&l).inc_by(sa.packets);
        sa_b.get_or_create(&l).inc_by(sa.bytes);
        for d in &sa.drop_reasons {
            let mut l = l.clone();
            l.push(("reason".to_owned(), d.reason.clone()));
            sa_d.get_or_create(&l).inc_by(d.count);
        }
    }

    let vec = counter_family(
        &mut reg,
        "vecgate_node_vectors",
        "Vectors a graph node processed",
    );
    let pk = counter_family(
        &mut reg,
        "vecgate_node_packets",
        "Packets a graph node processed",
    );
    let dr = counter_family(
        &mut reg,
        "vecgate_node_drops",
        "Packets a graph node dropped, by reason",
    );
    for n in &sum.nodes {
        let l = vec![("node".to_owned(), n.name.clone())];
        vec.get_or_create(&l).inc_by(n.vectors);
        pk.get_or_create(&l).inc_by(n.packets);
        for (reason, c) in &n.errors {
            let l = vec![
                ("node".to_owned(), n.name.clone()),
                ("reason".to_owned(), reason.clone()),
            ];
            dr.get_or_create(&l).inc_by(*c);
        }
    }

    // IKEv2 tunnels: state as a 0/1 gauge per state name (the usual
    // Prometheus enum encoding), SA counts and rekeys since start.
    let ike_state = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ike_state",
        "IKEv2 tunnel state: 1 for the current state, 0 for the others",
        ike_state.clone(),
    );
    let ike_sas = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ike_sas",
        "IKE SAs of an IKEv2 tunnel",
        ike_sas.clone(),
    );
    let child_sas = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ike_child_sas",
        "Child (ESP) SAs of an IKEv2 tunnel",
        child_sas.clone(),
    );
    let rekeys = counter_family(
        &mut reg,
        "vecgate_ike_rekeys",
        "Rekeys of an IKEv2 tunnel's IKE SA (kind=ike) or child SAs (kind=child)",
    );
    let half_open = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ike_half_open",
        "Half-open IKE SAs of an IKEv2 tunnel (responder, before IKE_AUTH)",
        half_open.clone(),
    );
    let inits = counter_family(
        &mut reg,
        "vecgate_ike_inits_received",
        "IKE_SA_INIT requests an IKEv2 tunnel received (unauthenticated)",
    );
    let cookies = counter_family(
        &mut reg,
        "vecgate_ike_cookies_sent",
        "IKE_SA_INIT requests answered with a COOKIE notify instead of state (RFC 7296 2.6)",
    );
    let refused = counter_family(
        &mut reg,
        "vecgate_ike_inits_refused",
        "IKE_SA_INIT requests answered NO_PROPOSAL_CHOSEN or INVALID_KE_PAYLOAD",
    );
    let dropped = counter_family(
        &mut reg,
        "vecgate_ike_inits_dropped",
        "IKE_SA_INIT requests dropped unanswered, by reason",
    );
    let auths_refused = counter_family(
        &mut reg,
        "vecgate_ike_auths_refused",
        "IKE_AUTH requests refused before the peer was authenticated, by reason",
    );
    let expiry = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ike_cert_expiry_days",
        "Whole days until an IKEv2 tunnel's certificate expires, ours (cert=local) or the authenticated peer's (cert=peer)",
        expiry.clone(),
    );
    for t in ctl.ike() {
        let peer = t.auth.as_ref().and_then(|a| a.peer_cert.as_ref());
        for (which, c) in [("local", t.local_cert.as_ref()), ("peer", peer)] {
            if let Some(c) = c {
                let l = vec![
                    ("tunnel".to_owned(), t.tunnel.clone()),
                    ("cert".to_owned(), which.to_owned()),
                ];
                expiry.get_or_create(&l).set(c.days_left);
            }
        }
        let l = vec![("tunnel".to_owned(), t.tunnel.clone())];
        half_open
            .get_or_create(&l)
            .set(i64::try_from(t.half_open).unwrap_or(i64::MAX));
        inits.get_or_create(&l).inc_by(t.inits_received);
        cookies.get_or_create(&l).inc_by(t.cookies_sent);
        refused.get_or_create(&l).inc_by(t.inits_refused);
        for d in &t.inits_dropped {
            let mut l = l.clone();
            l.push(("reason".to_owned(), d.reason.clone()));
            dropped.get_or_create(&l).inc_by(d.count);
        }
        for d in &t.auths_refused {
            let mut l = l.clone();
            l.push(("reason".to_owned(), d.reason.clone()));
            auths_refused.get_or_create(&l).inc_by(d.count);
        }
        for st in ["connecting", "waiting", "established", "failed", "down"] {
            let l = vec![
                ("tunnel".to_owned(), t.tunnel.clone()),
                ("state".to_owned(), st.to_owned()),
            ];
            ike_state.get_or_create(&l).set(i64::from(t.state == st));
        }
        let l = vec![("tunnel".to_owned(), t.tunnel.clone())];
        ike_sas.get_or_create(&l).set(t.ike_sas.len() as i64);
        child_sas.get_or_create(&l).set(t.child_sas.len() as i64);
        for (kind, n) in [("ike", t.ike_rekeys), ("child", t.child_rekeys)] {
            let mut l = l.clone();
            l.push(("kind".to_owned(), kind.to_owned()));
            rekeys.get_or_create(&l).inc_by(n);
        }
    }

    // CPU time of each worker thread (the kernel's own account, so a
    // dashboard shows busy cores without trusting the gateway's counters).
    let cpu = Family::<Labels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
    reg.register(
        "vecgate_worker_cpu_seconds",
        "CPU time a dataplane worker thread has run, from /proc/self/task/*/schedstat",
        cpu.clone(),
    );
    for (worker, secs) in worker_cpu_seconds() {
        cpu.get_or_create(&vec![("worker".to_owned(), worker)])
            .inc_by(secs);
    }

    let workers = Gauge::<i64>::default();
    workers.set(ctl.workers() as i64);
    reg.register("vecgate_workers", "Dataplane worker threads", workers);
    let st = ctl.status();
    let generation = Gauge::<i64>::default();
    generation.set(i64::try_from(st.tables_generation).unwrap_or(i64::MAX));
    reg.register(
        "vecgate_tables_generation",
        "Generation of the published dataplane tables",
        generation,
    );
    let routes = Family::<Labels, Gauge>::default();
    reg.register("vecgate_routes", "Static routes per VRF", routes.clone());
    for v in ctl.vrfs() {
        routes
            .get_or_create(&vec![("vrf".to_owned(), v.name)])
            .set(v.routes as i64);
    }

    // The API's access control (RFC 6750 §3.1 401s, throttled per source
    // and globally; TLS handshakes that never completed).
    let a = ctl.auth_stats();
    for (name, help, v) in [
        (
            "vecgate_api_auth_failures",
            "API requests refused with 401 (no or wrong bearer token)",
            &a.failures,
        ),
        (
            "vecgate_api_auth_throttled",
            "Of the 401s, those over their source's or the global budget (answered late, with Retry-After)",
            &a.throttled,
        ),
        (
            "vecgate_api_tls_handshake_failures",
            "TCP connections to the TLS API that did not complete a TLS handshake",
            &a.tls_handshake_failures,
        ),
    ] {
        let c = Counter::<u64>::default();
        c.inc_by(v.load(std::sync::atomic::Ordering::Relaxed));
        reg.register(name, help, c);
    }
    fpm(ctl, &mut reg);
    vrrp(ctl, &mut reg);
    pool::pool(ctl, &mut reg);

    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    text_004(&out)
}

/// VRRP virtual routers (RFC 5798), labelled by interface, VRID and
/// address family: state as a 0/1 gauge per state name, priorities, and
/// counters since start.
fn vrrp(ctl: &Control, reg: &mut Registry) {
    let state = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_vrrp_state",
        "VRRP virtual router state: 1 for the current state (init, backup, master), 0 for the others",
        state.clone(),
    );
    let eff = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_vrrp_effective_priority",
        "VRRP priority advertised now: configured less the tracking penalty",
        eff.clone(),
    );
    let conf = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_vrrp_configured_priority",
        "VRRP priority as configured",
        conf.clone(),
    );
    let transitions = counter_family(
        reg,
        "vecgate_vrrp_transitions",
        "VRRP state changes into master or backup (label to)",
    );
    let sent = counter_family(
        reg,
        "vecgate_vrrp_adverts_sent",
        "VRRP advertisements sent (priority 0 included)",
    );
    let received = counter_family(
        reg,
        "vecgate_vrrp_adverts_received",
        "VRRP advertisements received from other routers of the group",
    );
    let zero = counter_family(
        reg,
        "vecgate_vrrp_priority_zero_adverts",
        "VRRP priority-0 (master resigns) advertisements, by direction (sent, received)",
    );
    let groups = ctl.ha();
    if let Some(y) = groups.iter().find_map(|g| g.sync.as_ref()) {
        ha_sync(y, reg);
    }
    for g in groups {
        let l = vec![
            ("interface".to_owned(), g.interface.clone()),
            ("vrid".to_owned(), g.vrid.to_string()),
            ("family".to_owned(), g.family.clone()),
        ];
        for st in ["init", "backup", "master"] {
            let mut l = l.clone();
            l.push(("state".to_owned(), st.to_owned()));
            state.get_or_create(&l).set(i64::from(g.state == st));
        }
        eff.get_or_create(&l).set(i64::from(g.effective_priority));
        conf.get_or_create(&l).set(i64::from(g.priority));
        for (to, n) in [("master", g.became_master), ("backup", g.became_backup)] {
            let mut l = l.clone();
            l.push(("to".to_owned(), to.to_owned()));
            transitions.get_or_create(&l).inc_by(n);
        }
        sent.get_or_create(&l).inc_by(g.adverts_sent);
        received.get_or_create(&l).inc_by(g.adverts_received);
        for (dir, n) in [
            ("sent", g.priority_zero_sent),
            ("received", g.priority_zero_received),
        ] {
            let mut l = l.clone();
            l.push(("direction".to_owned(), dir.to_owned()));
            zero.get_or_create(&l).inc_by(n);
        }
    }
}

/// The HA state sync (labelled by `peer`): link up, messages sent,
/// received and rejected by reason, synced SAs, lag, takeovers.
fn ha_sync(y: &crate::model::HaSyncInfo, reg: &mut Registry) {
    let l = vec![("peer".to_owned(), y.peer.clone())];
    let up = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_up",
        "1 when a state sync message from the peer arrived within 3 intervals",
        up.clone(),
    );
    up.get_or_create(&l).set(i64::from(y.state == "up"));
    let sas = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_synced_sas",
        "Static ESP SAs whose state the peer synced to this gateway, by direction",
        sas.clone(),
    );
    for (dir, n) in [
        ("outbound", y.synced_outbound_sas),
        ("inbound", y.synced_inbound_sas),
    ] {
        let mut l = l.clone();
        l.push(("direction".to_owned(), dir.to_owned()));
        sas.get_or_create(&l)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    let routes = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_routes",
        "Static routes in the last route set applied from the active",
        routes.clone(),
    );
    routes
        .get_or_create(&l)
        .set(i64::try_from(y.synced_routes).unwrap_or(i64::MAX));
    let ike = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_ike_sas",
        "IKE SAs of the active held as this standby's shadow (set=shadow), and adopted at the last takeover without renegotiation (set=adopted)",
        ike.clone(),
    );
    for (set, n) in [("shadow", y.synced_ike_sas), ("adopted", y.adopted_ike_sas)] {
        let mut l = l.clone();
        l.push(("set".to_owned(), set.to_owned()));
        ike.get_or_create(&l)
            .set(i64::try_from(n).unwrap_or(i64::MAX));
    }
    let tunnels = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_tunnels",
        "Tunnels in the last tunnel set applied from the active",
        tunnels.clone(),
    );
    tunnels
        .get_or_create(&l)
        .set(i64::try_from(y.synced_tunnels).unwrap_or(i64::MAX));
    let unsafe_sas = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_ha_sync_unsafe_sas",
        "Static outbound SAs a takeover retired (sync link down too long): they send nothing until re-keyed",
        unsafe_sas.clone(),
    );
    unsafe_sas
        .get_or_create(&l)
        .set(i64::try_from(y.unsafe_sas.len()).unwrap_or(i64::MAX));
    if let Some(lag) = y.lag_ms {
        let g = Family::<Labels, Gauge>::default();
        reg.register(
            "vecgate_ha_sync_lag_ms",
            "This gateway's clock minus the send time of the peer's last state sync message",
            g.clone(),
        );
        g.get_or_create(&l).set(lag);
    }
    for (name, help, n) in [
        (
            "vecgate_ha_sync_messages_sent",
            "State sync messages sent to the peer",
            y.messages_sent,
        ),
        (
            "vecgate_ha_sync_messages_received",
            "State sync messages from the peer that authenticated and were fresh",
            y.messages_received,
        ),
        (
            "vecgate_ha_sync_send_errors",
            "State sync messages that could not be sealed or sent",
            y.send_errors,
        ),
        (
            "vecgate_ha_sync_takeovers",
            "Takeovers of the synced state (this gateway became master)",
            y.takeovers,
        ),
        (
            "vecgate_ha_sync_route_changes",
            "Static routes added or removed to follow the active's",
            y.route_changes,
        ),
        (
            "vecgate_ha_sync_route_errors",
            "Static routes of the active this gateway refused (e.g. via a tunnel it lacks)",
            y.route_errors,
        ),
        (
            "vecgate_ha_sync_tunnel_changes",
            "Tunnels added, replaced or removed to follow the active's",
            y.tunnel_changes,
        ),
        (
            "vecgate_ha_sync_tunnel_errors",
            "Tunnel changes of the active this gateway refused (e.g. a key file it lacks, a tunnel still routed)",
            y.tunnel_errors,
        ),
    ] {
        let f = counter_family(reg, name, help);
        f.get_or_create(&l).inc_by(n);
    }
    let rej = counter_family(
        reg,
        "vecgate_ha_sync_messages_rejected",
        "State sync datagrams rejected, by reason (malformed, version, auth, replay, stale_epoch, skew, reflected, source)",
    );
    for (why, n) in &y.rejected {
        let mut l = l.clone();
        l.push(("reason".to_owned(), why.clone()));
        rej.get_or_create(&l).inc_by(*n);
    }
}

/// The encoder writes OpenMetrics, where a counter family `x` has samples
/// `x_total`; the endpoint serves the Prometheus text format 0.0.4 (its
/// Content-Type), where HELP and TYPE name the samples themselves — so
/// promtool and 0.0.4 scrapers see the metadata of every sample. Sample
/// names and values are unchanged; the OpenMetrics `# EOF` goes.
fn text_004(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len() + 16 * counters.len());
    for line in om.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| Some((p, line.strip_prefix(p)?)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                if counters.contains(name) {
                    out.push_str(&format!("{p}{name}_total {tail}\n"));
                } else {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// The FPM server's counters and the learned routes per VRF.
fn fpm(ctl: &Control, reg: &mut Registry) {
    use std::sync::atomic::Ordering::Relaxed;
    let st = ctl.fpm_stats();
    let msgs = counter_family(
        reg,
        "vecgate_fpm_messages",
        "Netlink messages received from zebra over FPM, by type",
    );
    for (t, c) in [
        ("newroute", &st.route_adds),
        ("delroute", &st.route_dels),
        ("newnexthop", &st.nexthop_adds),
        ("delnexthop", &st.nexthop_dels),
        ("ignored", &st.ignored),
    ] {
        msgs.get_or_create(&vec![("type".to_owned(), t.to_owned())])
            .inc_by(c.load(Relaxed));
    }
    for (name, help, c) in [
        ("vecgate_fpm_frames", "FPM frames received", &st.frames),
        (
            "vecgate_fpm_connections",
            "zebra connections accepted",
            &st.connections,
        ),
        (
            "vecgate_fpm_publishes",
            "Table publishes for learned-route changes",
            &st.publishes,
        ),
        (
            "vecgate_fpm_swept_routes",
            "Stale learned routes removed after a zebra replay",
            &st.swept,
        ),
        (
            "vecgate_fpm_patches",
            "Publishes that patched only the changed VRFs' FIBs (the rest of vecgate_fpm_publishes rebuilt every table)",
            &st.patches,
        ),
    ] {
        let m = Counter::<u64>::default();
        m.inc_by(c.load(Relaxed));
        reg.register(name, help, m);
    }
    for (name, help, us) in [
        (
            "vecgate_fpm_update_delay_seconds",
            "Time from the arrival of the oldest route change a publish carried to the FIB publish, last publish",
            &st.last_delay_us,
        ),
        (
            "vecgate_fpm_update_delay_max_seconds",
            "Largest vecgate_fpm_update_delay_seconds since start",
            &st.max_delay_us,
        ),
    ] {
        let g = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
        g.set(us.load(Relaxed) as f64 / 1e6);
        reg.register(name, help, g);
    }
    let up = Gauge::<i64>::default();
    up.set(st.connected.load(Relaxed) as i64);
    reg.register("vecgate_fpm_connected", "1 while zebra is connected", up);
    let fails = counter_family(
        reg,
        "vecgate_fpm_install_failures",
        "Learned routes (and next-hop objects) that could not be installed, by reason",
    );
    for (f, n) in st.failures() {
        fails
            .get_or_create(&vec![("reason".to_owned(), f.as_str().to_owned())])
            .inc_by(n);
    }
    // Learned routes per VRF by state: in the FIB, shadowed by a route of
    // lower distance, or with no next hop that resolves.
    let routes = Family::<Labels, Gauge>::default();
    reg.register(
        "vecgate_learned_routes",
        "Routes learned over FPM per VRF, by state (installed; inactive: shadowed by a lower distance or no next hop resolves)",
        routes.clone(),
    );
    let mut per: std::collections::BTreeMap<(String, &'static str), i64> = Default::default();
    for (vrf, installed, inactive) in ctl.learned_counts() {
        per.insert((vrf.clone(), "installed"), installed as i64);
        per.insert((vrf, "inactive"), inactive as i64);
    }
    for ((vrf, state), n) in per {
        routes
            .get_or_create(&vec![
                ("vrf".to_owned(), vrf),
                ("state".to_owned(), state.to_owned()),
            ])
            .set(n);
    }
}

/// (worker index, seconds on CPU) of the threads named `vg-worker-N` in
/// this process: the first field of schedstat is nanoseconds run.
fn worker_cpu_seconds() -> Vec<(String, f64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let Some(w) = comm.trim().strip_prefix("vg-worker-") else {
            continue;
        };
        let ns = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
        if let Some(ns) = ns {
            out.push((w.to_owned(), ns as f64 / 1e9));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn counters_metadata_names_their_samples() {
        let om = "# HELP a_b Things.\n# TYPE a_b counter\na_b_total{x=\"1\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            super::text_004(om),
            "# HELP a_b_total Things.\n# TYPE a_b_total counter\na_b_total{x=\"1\"} 3\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n"
        );
    }
}
