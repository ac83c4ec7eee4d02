//! `vecgate route add|del`: static routes live.

use super::{enc, finish, resolve, Target};
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum RouteCmd {
    /// vecgate route add VRF PREFIX via X
    Add {
        vrf: String,
        prefix: String,
        #[arg(value_parser = ["via"])]
        via_kw: String,
        via: String,
    },
    /// vecgate route del VRF PREFIX
    Del { vrf: String, prefix: String },
}

pub fn route(t: &Target, cmd: &RouteCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            RouteCmd::Add {
                vrf, prefix, via, ..
            } => {
                let body =
                    serde_json::json!({"vrf": vrf, "prefix": prefix, "via": via}).to_string();
                let r = c.ok(c.request("POST", "/routes", Some(&body))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("route {prefix} via {via} added to vrf {vrf}");
                }
            }
            RouteCmd::Del { vrf, prefix } => {
                let path = format!("/routes?vrf={}&prefix={}", enc(vrf), enc(prefix));
                c.ok(c.request("DELETE", &path, None)?)?;
                if !t.json {
                    println!("route {prefix} deleted from vrf {vrf}");
                }
            }
        }
        Ok(())
    })())
}
