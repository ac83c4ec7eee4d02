//! Every metric `GET /metrics` exports, with its labels: the catalogue the
//! metrics reference is generated from. The docs test compares its names
//! with the names the control crate registers, both ways.

use std::fmt::Write as _;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}
use Kind::{Counter, Gauge};

/// One metric family: its registered name, kind, labels and help.
struct Metric {
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
}

const fn m(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    help: &'static str,
) -> Metric {
    Metric {
        name,
        kind,
        labels,
        help,
    }
}

const METRICS: &[Metric] = &[
    m("vecgate_interface_rx_packets", Counter, &["interface"], "Packets received on an interface"),
    m("vecgate_interface_rx_bytes", Counter, &["interface"], "Bytes received on an interface"),
    m("vecgate_interface_tx_packets", Counter, &["interface"], "Packets transmitted on an interface"),
    m("vecgate_interface_tx_bytes", Counter, &["interface"], "Bytes transmitted on an interface"),
    m("vecgate_interface_drops", Counter, &["interface"], "Packets lost at an interface: transmit shortfall plus rx_missed plus rx_errors"),
    m("vecgate_interface_rx_missed", Counter, &["interface"], "Frames the kernel dropped because the gateway's receive ring was full"),
    m("vecgate_interface_rx_errors", Counter, &["interface"], "Frames received on an interface but unusable (bad descriptor or virtio-net header)"),
    m("vecgate_interface_tx_errors", Counter, &["interface"], "Packets the kernel rejected as malformed on transmit"),
    m("vecgate_tunnel_rx_packets", Counter, &["tunnel"], "Packets received from a tunnel (decapsulated)"),
    m("vecgate_tunnel_rx_bytes", Counter, &["tunnel"], "Inner bytes received from a tunnel"),
    m("vecgate_tunnel_tx_packets", Counter, &["tunnel"], "Packets handed to a tunnel for encapsulation"),
    m("vecgate_tunnel_tx_bytes", Counter, &["tunnel"], "Inner bytes handed to a tunnel"),
    m("vecgate_tunnel_drops", Counter, &["tunnel"], "Packets a tunnel could not encapsulate"),
    m("vecgate_sa_packets", Counter, &["spi", "direction", "tunnel"], "Packets protected (out) or accepted (in) by an IPsec SA"),
    m("vecgate_sa_bytes", Counter, &["spi", "direction", "tunnel"], "Bytes through an IPsec SA"),
    m("vecgate_sa_drops", Counter, &["spi", "direction", "tunnel", "reason"], "Packets an IPsec SA refused, by reason"),
    m("vecgate_sa_engine", Gauge, &["spi", "direction", "tunnel", "engine"], "The engine that runs an IPsec SA's cipher (label engine), always 1"),
    m("vecgate_node_vectors", Counter, &["node"], "Vectors a graph node processed"),
    m("vecgate_node_packets", Counter, &["node"], "Packets a graph node processed"),
    m("vecgate_node_drops", Counter, &["node", "reason"], "Packets a graph node dropped, by reason"),
    m("vecgate_ike_state", Gauge, &["tunnel", "state"], "IKEv2 tunnel state: 1 for the current state, 0 for the others"),
    m("vecgate_ike_sas", Gauge, &["tunnel"], "IKE SAs of an IKEv2 tunnel"),
    m("vecgate_ike_child_sas", Gauge, &["tunnel"], "Child (ESP) SAs of an IKEv2 tunnel"),
    m("vecgate_ike_rekeys", Counter, &["tunnel", "kind"], "Rekeys of an IKEv2 tunnel's IKE SA (kind=ike) or child SAs (kind=child)"),
    m("vecgate_ike_half_open", Gauge, &["tunnel"], "Half-open IKE SAs of an IKEv2 tunnel (responder, before IKE_AUTH)"),
    m("vecgate_ike_inits_received", Counter, &["tunnel"], "IKE_SA_INIT requests an IKEv2 tunnel received (unauthenticated)"),
    m("vecgate_ike_cookies_sent", Counter, &["tunnel"], "IKE_SA_INIT requests answered with a COOKIE notify instead of state (RFC 7296 2.6)"),
    m("vecgate_ike_inits_refused", Counter, &["tunnel"], "IKE_SA_INIT requests answered NO_PROPOSAL_CHOSEN or INVALID_KE_PAYLOAD"),
    m("vecgate_ike_inits_dropped", Counter, &["tunnel", "reason"], "IKE_SA_INIT requests dropped unanswered, by reason"),
    m("vecgate_ike_auths_refused", Counter, &["tunnel", "reason"], "IKE_AUTH requests refused before the peer was authenticated, by reason"),
    m("vecgate_ike_cert_expiry_days", Gauge, &["tunnel", "cert"], "Whole days until an IKEv2 tunnel's certificate expires, ours (cert=local) or the authenticated peer's (cert=peer)"),
    m("vecgate_worker_cpu_seconds", Counter, &["worker"], "CPU time a dataplane worker thread has run, from /proc/self/task/*/schedstat"),
    m("vecgate_workers", Gauge, &[], "Dataplane worker threads"),
    m("vecgate_tables_generation", Gauge, &[], "Generation of the published dataplane tables"),
    m("vecgate_routes", Gauge, &["vrf"], "Static routes per VRF"),
    m("vecgate_api_auth_failures", Counter, &[], "API requests refused with 401 (no or wrong bearer token)"),
    m("vecgate_api_auth_throttled", Counter, &[], "Of the 401s, those over their source's or the global budget (answered late, with Retry-After)"),
    m("vecgate_api_tls_handshake_failures", Counter, &[], "TCP connections to the TLS API that did not complete a TLS handshake"),
    m("vecgate_vrrp_state", Gauge, &["interface", "vrid", "family", "state"], "VRRP virtual router state: 1 for the current state (init, backup, master), 0 for the others"),
    m("vecgate_vrrp_effective_priority", Gauge, &["interface", "vrid", "family"], "VRRP priority advertised now: configured less the tracking penalty"),
    m("vecgate_vrrp_configured_priority", Gauge, &["interface", "vrid", "family"], "VRRP priority as configured"),
    m("vecgate_vrrp_transitions", Counter, &["interface", "vrid", "family", "to"], "VRRP state changes into master or backup (label to)"),
    m("vecgate_vrrp_adverts_sent", Counter, &["interface", "vrid", "family"], "VRRP advertisements sent (priority 0 included)"),
    m("vecgate_vrrp_adverts_received", Counter, &["interface", "vrid", "family"], "VRRP advertisements received from other routers of the group"),
    m("vecgate_vrrp_priority_zero_adverts", Counter, &["interface", "vrid", "family", "direction"], "VRRP priority-0 (master resigns) advertisements, by direction (sent, received)"),
    m("vecgate_ha_sync_up", Gauge, &["peer"], "1 when a state sync message from the peer arrived within 3 intervals"),
    m("vecgate_ha_sync_synced_sas", Gauge, &["peer", "direction"], "Static ESP SAs whose state the peer synced to this gateway, by direction"),
    m("vecgate_ha_sync_routes", Gauge, &["peer"], "Static routes in the last route set applied from the active"),
    m("vecgate_ha_sync_ike_sas", Gauge, &["peer", "set"], "IKE SAs of the active held as this standby's shadow (set=shadow), and adopted at the last takeover without renegotiation (set=adopted)"),
    m("vecgate_ha_sync_tunnels", Gauge, &["peer"], "Tunnels in the last tunnel set applied from the active"),
    m("vecgate_ha_sync_unsafe_sas", Gauge, &["peer"], "Static outbound SAs a takeover retired (sync link down too long): they send nothing until re-keyed"),
    m("vecgate_ha_sync_lag_ms", Gauge, &["peer"], "This gateway's clock minus the send time of the peer's last state sync message"),
    m("vecgate_ha_sync_messages_sent", Counter, &["peer"], "State sync messages sent to the peer"),
    m("vecgate_ha_sync_messages_received", Counter, &["peer"], "State sync messages from the peer that authenticated and were fresh"),
    m("vecgate_ha_sync_send_errors", Counter, &["peer"], "State sync messages that could not be sealed or sent"),
    m("vecgate_ha_sync_takeovers", Counter, &["peer"], "Takeovers of the synced state (this gateway became master)"),
    m("vecgate_ha_sync_route_changes", Counter, &["peer"], "Static routes added or removed to follow the active's"),
    m("vecgate_ha_sync_route_errors", Counter, &["peer"], "Static routes of the active this gateway refused (e.g. via a tunnel it lacks)"),
    m("vecgate_ha_sync_tunnel_changes", Counter, &["peer"], "Tunnels added, replaced or removed to follow the active's"),
    m("vecgate_ha_sync_tunnel_errors", Counter, &["peer"], "Tunnel changes of the active this gateway refused (e.g. a key file it lacks, a tunnel still routed)"),
    m("vecgate_pool_serving", Gauge, &["pool"], "1 while this member's fence lets it serve its connections"),
    m("vecgate_pool_holding", Gauge, &["pool"], "1 while this member serves past its lease's deadline because etcd has no quorum"),
    m("vecgate_pool_leader", Gauge, &["pool"], "1 while this member is the pool's leader"),
    m("vecgate_pool_etcd_up", Gauge, &["pool"], "1 while etcd answers this member (no error since the last answer)"),
    m("vecgate_pool_members", Gauge, &["pool"], "Members registered in the pool"),
    m("vecgate_pool_connections", Gauge, &["pool", "member"], "Connections placed on each member of the pool"),
    m("vecgate_pool_move_seconds", Gauge, &["pool", "connection", "step"], "Seconds from the detection of a connection's last move (a lease gone, a drain asked for) to each step: decide (the leader placed it), program (the new owner programmed it), first_packet (it forwarded into it)"),
    m("vecgate_ha_sync_messages_rejected", Counter, &["peer", "reason"], "State sync datagrams rejected, by reason (malformed, version, auth, replay, stale_epoch, skew, reflected, source)"),
    m("vecgate_fpm_messages", Counter, &["type"], "Netlink messages received from zebra over FPM, by type"),
    m("vecgate_fpm_frames", Counter, &[], "FPM frames received"),
    m("vecgate_fpm_connections", Counter, &[], "zebra connections accepted"),
    m("vecgate_fpm_publishes", Counter, &[], "Table publishes for learned-route changes"),
    m("vecgate_fpm_swept_routes", Counter, &[], "Stale learned routes removed after a zebra replay"),
    m("vecgate_fpm_patches", Counter, &[], "Publishes that patched only the changed VRFs' FIBs (the rest of vecgate_fpm_publishes rebuilt every table)"),
    m("vecgate_fpm_update_delay_seconds", Gauge, &[], "Time from the arrival of the oldest route change a publish carried to the FIB publish, last publish"),
    m("vecgate_fpm_update_delay_max_seconds", Gauge, &[], "Largest vecgate_fpm_update_delay_seconds since start"),
    m("vecgate_fpm_connected", Gauge, &[], "1 while zebra is connected"),
    m("vecgate_fpm_install_failures", Counter, &["reason"], "Learned routes (and next-hop objects) that could not be installed, by reason"),
    m("vecgate_learned_routes", Gauge, &["vrf", "state"], "Routes learned over FPM per VRF, by state (installed; inactive: shadowed by a lower distance or no next hop resolves)"),
];

pub fn page() -> String {
    let mut s = String::from(super::GENERATED);
    s.push_str("# Metrics\n\n");
    s.push_str(
        "Every metric `GET /metrics` exports (Prometheus text format; it passes `promtool check \
         metrics`), with its labels. Counters are summed over the workers at scrape time and carry \
         the `_total` suffix; nothing is counted on the fast path beyond the workers' own counters. \
         Families that depend on configuration (IKE, VRRP, the state sync, FPM) appear once it is \
         configured. `examples/grafana/vecgate.json` is a dashboard over them (see \
         [Operating it](../guide/operating.md#metrics-and-grafana)).\n\n",
    );
    s.push_str("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for m in METRICS {
        let (name, kind) = match m.kind {
            Counter => (format!("{}_total", m.name), "counter"),
            Gauge => (m.name.to_string(), "gauge"),
        };
        let labels = m
            .labels
            .iter()
            .map(|l| format!("`{l}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "| `{name}` | {kind} | {labels} | {} |",
            m.help.replace('|', "\\|")
        );
    }
    s
}
