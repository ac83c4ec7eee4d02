//! Prometheus text exposition of the counters (summed over workers at
//! scrape time; a fresh registry per scrape, nothing on the fast path).

use crate::state::Control;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
    let cfg = ctl.config();

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
    for (i, ifc) in cfg.interfaces.iter().enumerate() {
        let p = sum.ports.get(i).copied().unwrap_or_default();
        let l = ifl(&ifc.name);
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
        t_rxp.get_or_create(&l).inc_by(t.rx_packets);
        t_rxb.get_or_create(&l).inc_by(t.rx_bytes);
        t_txp.get_or_create(&l).inc_by(t.tx_packets);
        t_txb.get_or_create(&l).inc_by(t.tx_bytes);
        t_drp.get_or_create(&l).inc_by(t.drops);
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

    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut out, &reg);
    out
}
