//! `vecgate pool …`: the pool of gateways this one is a member of, read
//! as the API's [`PoolInfo`]; connections, drain and rebalance sent as
//! its requests.

use super::table::{table, Cell};
use super::{enc, finish, json, print_or_json, resolve, typed, Target};
use std::path::PathBuf;
use std::process::ExitCode;
use vecgate_control::model::{PoolConnectionSpec, PoolDrain, PoolInfo, PoolMove, PoolRebalance};

/// `vecgate pool …`.
#[derive(clap::Subcommand, Debug)]
pub enum PoolCmd {
    /// Members (capacity and load per class), leader and epoch, this
    /// member's fence, etcd's health, and where each connection runs.
    Show,
    /// Add or delete a connection (any member takes it; the leader
    /// places it).
    #[command(subcommand)]
    Connection(ConnectionCmd),
    /// Move every connection off MEMBER make-before-break; it takes
    /// nothing new until --end.
    Drain {
        member: String,
        /// End the drain: the member may take connections again (none
        /// come back by themselves: see rebalance).
        #[arg(long)]
        end: bool,
    },
    /// The moves that would even the load out; applied at a bounded rate
    /// unless --dry-run.
    Rebalance {
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        max_moves: Option<u32>,
        /// Milliseconds between two moves.
        #[arg(long)]
        interval_ms: Option<u64>,
    },
}

#[derive(clap::Subcommand, Debug)]
pub enum ConnectionCmd {
    /// vecgate pool connection add FILE: FILE (or - for stdin) holds the
    /// connection as JSON: {"tunnel": {...as POST /tunnels...}, "routes":
    /// [{...as POST /routes...}], "bandwidth_mbps": N}.
    Add { file: PathBuf },
    /// vecgate pool connection del ID (its tunnel's name).
    Del { id: String },
}

pub fn pool(t: &Target, cmd: &PoolCmd) -> ExitCode {
    finish(pool_inner(t, cmd))
}

fn pool_inner(t: &Target, cmd: &PoolCmd) -> Result<(), String> {
    let c = resolve(t)?;
    match cmd {
        PoolCmd::Show => {
            let v = json(&c.ok(c.get("/pool")?)?)?;
            let p: PoolInfo = typed(&v)?;
            print_or_json(t, &v, |_| show_text(&p));
        }
        PoolCmd::Connection(ConnectionCmd::Add { file }) => {
            let text = if file.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?
            } else {
                std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?
            };
            let spec: PoolConnectionSpec =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let body = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
            c.ok(c.request("POST", "/pool/connections", Some(&body))?)?;
            println!(
                "connection {} stored; the pool's leader places it",
                spec.tunnel.name
            );
        }
        PoolCmd::Connection(ConnectionCmd::Del { id }) => {
            let path = format!("/pool/connections/{}", enc(id));
            c.ok(c.request("DELETE", &path, None)?)?;
            println!("connection {id} deleted");
        }
        PoolCmd::Drain { member, end } => {
            let body = serde_json::to_string(&PoolDrain {
                member: member.clone(),
                end: *end,
            })
            .map_err(|e| e.to_string())?;
            c.ok(c.request("POST", "/pool/drain", Some(&body))?)?;
            if *end {
                println!("member {member}: drain ended");
            } else {
                println!("member {member}: draining (see vecgate pool show)");
            }
        }
        PoolCmd::Rebalance {
            dry_run,
            max_moves,
            interval_ms,
        } => {
            let body = serde_json::to_string(&PoolRebalance {
                dry_run: *dry_run,
                max_moves: *max_moves,
                interval_ms: *interval_ms,
            })
            .map_err(|e| e.to_string())?;
            let v = json(&c.ok(c.request("POST", "/pool/rebalance", Some(&body))?)?)?;
            let plan: Vec<PoolMove> = typed(&v)?;
            print_or_json(t, &v, |_| {
                let rows: Vec<Vec<String>> = plan
                    .iter()
                    .map(|m| vec![m.connection.cell(), m.from.cell(), m.to.cell()])
                    .collect();
                let head = if *dry_run {
                    "plan (not applied)\n"
                } else {
                    "applying\n"
                };
                format!("{head}{}", table(&["connection", "from", "to"], &rows))
            });
        }
    }
    Ok(())
}

fn show_text(p: &PoolInfo) -> String {
    let f = &p.fence;
    let fence = if f.holding {
        "holding (etcd has no quorum)".to_owned()
    } else if f.serving {
        format!("serving ({} ms left)", f.deadline_ms)
    } else {
        "fenced".to_owned()
    };
    let mut out = format!(
        "pool {}  member {}  lease {}  leader {}  epoch {}  revision {}\nfence {fence}  etcd {}\n\n",
        p.pool,
        p.member,
        p.lease,
        p.leader.cell(),
        p.epoch,
        p.revision,
        p.etcd_error.as_deref().unwrap_or("ok"),
    );
    let rows: Vec<Vec<String>> = p
        .members
        .iter()
        .map(|m| {
            vec![
                m.name.cell(),
                format!("{}/{}", m.load_ipsec_mbps, m.capacity_ipsec_mbps),
                format!("{}/{}", m.load_gre_mbps, m.capacity_gre_mbps),
                format!("{}/{}", m.tunnels, m.capacity_tunnels),
                m.draining.cell(),
                m.lease.cell(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "member",
            "ipsec-mbps",
            "gre-mbps",
            "tunnels",
            "draining",
            "lease",
        ],
        &rows,
    ));
    out.push('\n');
    let rows: Vec<Vec<String>> = p
        .connections
        .iter()
        .map(|c| {
            vec![
                c.id.cell(),
                c.tenant.cell(),
                c.kind.cell(),
                c.local.cell(),
                c.remote.cell(),
                c.bandwidth_mbps.cell(),
                c.member.cell(),
                c.reason.cell(),
                c.phase.cell(),
                c.moving_to.cell(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "connection",
            "tenant",
            "kind",
            "local",
            "remote",
            "mbps",
            "member",
            "reason",
            "phase",
            "moving-to",
        ],
        &rows,
    ));
    for r in &p.refused {
        out.push_str(&format!("refused {}: {}\n", r.connection, r.reason));
    }
    out
}
