//! `vecgate set interface …` and `vecgate rsc`: an interface's switches.

use super::{enc, finish, resolve, Target};
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum SetCmd {
    /// vecgate set interface IFACE rsc|offloads on|off
    Interface {
        name: String,
        #[arg(value_parser = ["rsc", "offloads"])]
        switch: String,
        #[arg(value_parser = ["on", "off"])]
        value: String,
    },
}

/// PATCH one switch of an interface.
pub fn set_switch(t: &Target, name: &str, switch: &str, on: bool) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        let body = serde_json::json!({ switch: on }).to_string();
        let r = c.ok(c.request("PATCH", &format!("/interfaces/{}", enc(name)), Some(&body))?)?;
        if t.json {
            println!("{}", r.text());
        } else {
            println!("{name}: {switch} {}", if on { "on" } else { "off" });
        }
        Ok(())
    })())
}

pub fn set(t: &Target, cmd: &SetCmd) -> ExitCode {
    match cmd {
        SetCmd::Interface {
            name,
            switch,
            value,
        } => set_switch(t, name, switch, value == "on"),
    }
}
