//! SA lifetime events (RFC 4301 §4.4.2.1) as an operator reads them:
//! which SA, how far it got, and what happens next.

use vecgate_ipsec::EspRegistry;

/// Logs a lifetime event of an SA (RFC 4301 §4.4.2.1) so an operator sees
/// which SA, how far it got and what happens next: a soft limit is a
/// warning (IKEv2 rekeys its child SAs by CREATE_CHILD_SA; a static SA
/// needs a new key), a hard limit an error (the SA refuses traffic,
/// counted as `lifetime-hard` by the esp nodes).
pub fn log_event(reg: Option<&EspRegistry>, e: &vecgate_ipsec::SaEvent) {
    let name = reg
        .and_then(|r| r.tunnel_name(e.tunnel))
        .unwrap_or_else(|| format!("#{}", e.tunnel));
    let text = message(&name, e);
    match e.event {
        vecgate_ipsec::LifetimeEvent::Soft => tracing::warn!(
            tunnel = %name,
            spi = format_args!("{:#010x}", e.spi),
            outbound = e.outbound,
            "{text}"
        ),
        vecgate_ipsec::LifetimeEvent::Hard => tracing::error!(
            tunnel = %name,
            spi = format_args!("{:#010x}", e.spi),
            outbound = e.outbound,
            "{text}"
        ),
    }
}

/// The text of [`log_event`].
pub fn message(tunnel: &str, e: &vecgate_ipsec::SaEvent) -> String {
    let dir = if e.outbound { "outbound" } else { "inbound" };
    let l = &e.limits;
    let limit = |what: &str, soft: u64, hard: u64| {
        (soft != 0 || hard != 0).then(|| format!("{what} soft {soft} / hard {hard}"))
    };
    let limits: Vec<String> = [
        limit("packets", l.soft_packets, l.hard_packets),
        limit("bytes", l.soft_bytes, l.hard_bytes),
        limit("seconds", l.soft_seconds, l.hard_seconds),
    ]
    .into_iter()
    .flatten()
    .collect();
    let limits = if limits.is_empty() {
        "no configured limit; its 32-bit sequence numbers are nearly used up".to_owned()
    } else {
        limits.join(", ")
    };
    let head = format!(
        "IPsec SA {:#010x} ({dir}) of tunnel {tunnel}: {} packets, {} bytes ({limits})",
        e.spi, e.packets, e.bytes,
    );
    match e.event {
        vecgate_ipsec::LifetimeEvent::Soft => format!(
            "{head}: soft lifetime reached, a new key is due (IKEv2 rekeys its child SAs by CREATE_CHILD_SA; a static SA needs `vecgate sa switch` to a new key before its hard lifetime stops it)"
        ),
        vecgate_ipsec::LifetimeEvent::Hard => format!(
            "{head}: hard lifetime reached, the SA refuses all further traffic (counted as lifetime-hard drops) until it is replaced"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vecgate_ipsec::{Lifetime, LifetimeEvent, SaEvent};

    #[test]
    fn lifetime_lines_name_the_sa_its_traffic_and_limits() {
        let mut e = SaEvent {
            tunnel: 3,
            outbound: true,
            spi: 0x1001,
            event: LifetimeEvent::Soft,
            packets: 850,
            bytes: 85_000,
            limits: Lifetime {
                soft_packets: 850,
                hard_packets: 1000,
                ..Lifetime::default()
            },
        };
        let s = message(
            "t0",
            &SaEvent {
                limits: Lifetime::default(),
                ..e
            },
        );
        assert!(
            s.contains("(no configured limit; its 32-bit sequence numbers are nearly used up): soft lifetime reached"),
            "{s}"
        );
        let s = message("t0", &e);
        assert!(s.starts_with("IPsec SA 0x00001001 (outbound) of tunnel t0: 850 packets, 85000 bytes (packets soft 850 / hard 1000)"), "{s}");
        assert!(s.contains("soft lifetime reached"), "{s}");
        e.event = LifetimeEvent::Hard;
        e.outbound = false;
        let s = message("t0", &e);
        assert!(
            s.contains("(inbound)")
                && s.contains("hard lifetime reached")
                && s.contains("lifetime-hard"),
            "{s}"
        );
    }
}
