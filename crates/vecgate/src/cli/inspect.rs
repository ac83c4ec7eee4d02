//! `vecgate trace` and `vecgate capture`: packets as the workers see them.

use super::{finish, json, print_or_json, resolve, typed, Target};
use std::path::Path;
use std::process::ExitCode;
use vecgate_control::model::{TraceArmed, TraceInfo};

#[derive(clap::Subcommand, Debug)]
pub enum TraceCmd {
    /// Trace the next N packets (per worker).
    Add { count: u64 },
    /// Print the recorded trace.
    Show,
    /// Forget the recorded trace.
    Clear,
}

pub fn trace(t: &Target, cmd: &TraceCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            TraceCmd::Add { count } => {
                let body = serde_json::json!({ "count": count }).to_string();
                let r = c.ok(c.request("POST", "/trace", Some(&body))?)?;
                let v = json(&r)?;
                let armed: TraceArmed = typed(&v)?;
                print_or_json(t, &v, |_| {
                    format!(
                        "tracing the next {} packets on {} workers\n",
                        armed.count, armed.workers
                    )
                });
            }
            TraceCmd::Show => {
                let v = json(&c.get("/trace")?)?;
                let trace: TraceInfo = typed(&v)?;
                print_or_json(t, &v, |_| {
                    trace.lines.iter().map(|l| format!("{l}\n")).collect()
                });
            }
            TraceCmd::Clear => {
                c.ok(c.request("DELETE", "/trace", None)?)?;
            }
        }
        Ok(())
    })())
}

pub fn capture(t: &Target, iface: &str, count: u64, out: &Path, timeout_ms: u64) -> ExitCode {
    finish((|| {
        let mut c = resolve(t)?;
        c.timeout = std::time::Duration::from_millis(timeout_ms + 10_000);
        let body =
            serde_json::json!({"interface": iface, "count": count, "timeout_ms": timeout_ms})
                .to_string();
        let r = c.ok(c.request("POST", "/capture", Some(&body))?)?;
        if !r.content_type.starts_with("application/vnd.tcpdump.pcap") {
            return Err(format!(
                "expected a pcap from the API, got {:?}",
                r.content_type
            ));
        }
        std::fs::write(out, &r.body).map_err(|e| format!("writing {}: {e}", out.display()))?;
        let n = wire::pcap::Reader::new(&r.body)
            .map(|mut rd| std::iter::from_fn(move || rd.next_record().ok().flatten()).count())
            .unwrap_or(0);
        eprintln!("{n} packets captured on {iface} into {}", out.display());
        Ok(())
    })())
}
