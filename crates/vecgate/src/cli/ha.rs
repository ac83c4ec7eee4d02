//! `vecgate ha …` and `vecgate show ha`: the VRRP virtual routers and the
//! state sync with the peer gateway, read as the API's
//! [`HaGroupInfo`] / [`HaSyncInfo`].

use super::client::Client;
use super::table::{table, Cell};
use super::{finish, json, print_or_json, resolve, typed, Target};
use std::process::ExitCode;
use vecgate_control::model::{HaGroupInfo, HaSwitchover, HaSyncInfo};

/// `vecgate ha …`: high-availability verbs.
#[derive(clap::Subcommand, Debug)]
pub enum HaCmd {
    /// Planned switchover: every VRRP group this gateway is master of (or
    /// the one named) sends priority 0 and becomes backup, so the peer
    /// takes over at once; preemption is then held back for --hold-secs.
    Switchover {
        #[arg(long)]
        interface: Option<String>,
        #[arg(long)]
        vrid: Option<u8>,
        /// Seconds without preemption afterwards (default 60).
        #[arg(long)]
        hold_secs: Option<u64>,
    },
}

pub fn ha(t: &Target, cmd: &HaCmd) -> ExitCode {
    finish(ha_inner(t, cmd))
}

fn ha_inner(t: &Target, cmd: &HaCmd) -> Result<(), String> {
    let c = resolve(t)?;
    match cmd {
        HaCmd::Switchover {
            interface,
            vrid,
            hold_secs,
        } => {
            let body = HaSwitchover {
                interface: interface.clone(),
                vrid: *vrid,
                hold_secs: *hold_secs,
            };
            let body = serde_json::to_string(&body).map_err(|e| e.to_string())?;
            let r = c.ok(c.request("POST", "/ha/switchover", Some(&body))?)?;
            let v = json(&r)?;
            let groups: Vec<HaGroupInfo> = typed(&v)?;
            print_or_json(t, &v, |_| {
                groups
                    .iter()
                    .map(|g| {
                        format!(
                            "vrid {} on {}: sent priority 0, now {} (preemption held {}s)\n",
                            g.vrid, g.interface, g.state, g.preempt_held_secs
                        )
                    })
                    .collect()
            });
            Ok(())
        }
    }
}

/// `show ha`: one line per virtual router.
pub(super) fn show_ha(t: &Target, c: &Client) -> Result<(), String> {
    let v = json(&c.get("/ha")?)?;
    let groups: Vec<HaGroupInfo> = typed(&v)?;
    print_or_json(t, &v, |_| ha_table(&groups, unix_now()));
    Ok(())
}

/// Now as Unix time, seconds.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

fn ha_table(groups: &[HaGroupInfo], now: f64) -> String {
    let rows: Vec<Vec<String>> = groups.iter().map(|g| ha_row(g, now)).collect();
    let mut out = table(
        &[
            "Interface",
            "VRID",
            "AF",
            "State",
            "Prio(cfg/eff)",
            "Preempt",
            "Interval",
            "Master",
            "Last transition",
            "Tracked",
            "Addresses",
        ],
        &rows,
    );
    if let Some(y) = groups.iter().find_map(|g| g.sync.as_ref()) {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&ha_sync_line(y, now));
    }
    out
}

/// One virtual router's row of `show ha`.
fn ha_row(g: &HaGroupInfo, now: f64) -> Vec<String> {
    let last = match &g.last_transition {
        Some(l) => format!(
            "{} ({}) {:.0}s ago",
            l.to,
            l.reason,
            (now - l.at_unix).max(0.0)
        ),
        None => "-".into(),
    };
    let tracked: Vec<String> = g
        .tracked
        .iter()
        .map(|t| format!("{}:{}", t.interface, if t.up { "up" } else { "down" }))
        .collect();
    let mut preempt = g.preempt.cell();
    if g.preempt_held_secs > 0 {
        preempt.push_str(&format!(" (held {}s)", g.preempt_held_secs));
    }
    vec![
        g.interface.clone(),
        g.vrid.to_string(),
        g.family.clone(),
        g.state.clone(),
        format!("{}/{}", g.priority, g.effective_priority),
        preempt,
        format!("{}cs", g.advert_interval_cs),
        g.master.cell(),
        last,
        if tracked.is_empty() {
            "-".into()
        } else {
            tracked.join(",")
        },
        g.addresses.join(","),
    ]
}

/// The state-sync line of `show ha` (`now`: Unix time, seconds).
fn ha_sync_line(y: &HaSyncInfo, now: f64) -> String {
    let last = y.last_sync_unix.map_or("never".to_owned(), |at| {
        format!("{:.1}s ago", (now - at).max(0.0))
    });
    let rejected: u64 = y.rejected.values().sum();
    let why: Vec<String> = y
        .rejected
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, n)| format!("{k} {n}"))
        .collect();
    format!(
        "State sync {} -> {}: {}, peer {}, last sync {last}, lag {} ms; synced SAs {} outbound, {} inbound, routes {}, tunnels {}, IKE SAs {}; messages sent {}, received {}, rejected {rejected}{}; takeovers {}{}\n",
        y.local,
        y.peer,
        y.state,
        y.peer_role.cell(),
        y.lag_ms.cell(),
        y.synced_outbound_sas,
        y.synced_inbound_sas,
        y.synced_routes,
        y.synced_tunnels,
        y.synced_ike_sas,
        y.messages_sent,
        y.messages_received,
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join(", "))
        },
        y.takeovers,
        if y.adopted_ike_sas > 0 {
            format!(" (the last adopted {} IKE SAs)", y.adopted_ike_sas)
        } else {
            String::new()
        },
    ) + &unsafe_line(y)
}

/// The SAs a takeover retired, if any: the operator must re-key them.
fn unsafe_line(y: &HaSyncInfo) -> String {
    if y.unsafe_sas.is_empty() {
        return String::new();
    }
    format!(
        "  UNSAFE after takeover (send nothing until re-keyed with a new key file): {}\n",
        y.unsafe_sas.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use vecgate_control::model::HaTrackedInfo;

    #[test]
    fn ha_table_shows_each_router_and_the_sync_line() {
        let g = HaGroupInfo {
            interface: "lan0".into(),
            vrid: 7,
            family: "ipv4".into(),
            state: "master".into(),
            priority: 200,
            effective_priority: 190,
            preempt: true,
            preempt_held_secs: 30,
            advert_interval_cs: 100,
            master: Some("10.1.0.1".into()),
            tracked: vec![HaTrackedInfo {
                interface: "wan".into(),
                up: false,
            }],
            addresses: vec!["10.1.0.254".into()],
            sync: Some(HaSyncInfo {
                local: "a".into(),
                peer: "b".into(),
                state: "up".into(),
                peer_role: Some("backup".into()),
                lag_ms: Some(3),
                synced_outbound_sas: 1,
                synced_inbound_sas: 2,
                synced_routes: 4,
                synced_tunnels: 3,
                synced_ike_sas: 7,
                adopted_ike_sas: 1,
                messages_sent: 5,
                messages_received: 6,
                rejected: [("auth".to_owned(), 2), ("stale".to_owned(), 0)].into(),
                takeovers: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        let out = ha_table(&[g], 0.0);
        let row = out.lines().nth(1).unwrap();
        for cell in [
            "lan0",
            "master",
            "200/190",
            "on (held 30s)",
            "100cs",
            "wan:down",
        ] {
            assert!(row.contains(cell), "{cell} missing in {row}");
        }
        assert!(out.ends_with(
            "State sync a -> b: up, peer backup, last sync never, lag 3 ms; synced SAs 1 outbound, 2 inbound, routes 4, tunnels 3, IKE SAs 7; messages sent 5, received 6, rejected 2 (auth 2); takeovers 1 (the last adopted 1 IKE SAs)\n"
        ), "{out}");
    }

    /// What the API sends reads back as the model (the CLI's view of
    /// `GET /ha` is the server's type, not a guess at its keys).
    #[test]
    fn the_apis_answer_reads_as_the_model() {
        let g = HaGroupInfo {
            sync: Some(HaSyncInfo {
                unsafe_sas: vec!["t 0x1001".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        let v = serde_json::to_value(vec![g.clone()]).unwrap();
        let back: Vec<HaGroupInfo> = typed(&v).unwrap();
        assert_eq!(back, [g]);
        assert!(ha_table(&back, 0.0).contains("UNSAFE after takeover"));
    }
}
