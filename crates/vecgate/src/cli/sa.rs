//! `vecgate sa add|switch|del|reset-state`: static IPsec SAs live.

use super::{enc, finish, json, resolve, typed, Target};
use serde_json::Value;
use std::process::ExitCode;
use vecgate_control::model::SaSwitched;

/// How an SA command gets its key: never on the command line (it would
/// show in `ps`).
#[derive(clap::Args, Debug)]
pub struct SaKey {
    /// Hex key file, read by the gateway (recorded in its configuration).
    #[arg(long, conflicts_with = "key_stdin")]
    pub key_file: Option<String>,
    /// Read the hex key from standard input and send it in the request.
    #[arg(long)]
    pub key_stdin: bool,
}

/// `vecgate sa add|switch|del`: static IPsec SAs live (make-before-break:
/// add the new inbound SA, switch outbound once the peer has it, delete
/// the old inbound SA last).
#[derive(clap::Subcommand, Debug)]
pub enum SaCmd {
    /// vecgate sa add TUNNEL SPI ALGORITHM (--key-file F | --key-stdin)
    Add {
        tunnel: String,
        spi: String,
        algorithm: String,
        #[command(flatten)]
        key: SaKey,
        #[arg(long)]
        replay_window: Option<u32>,
    },
    /// vecgate sa switch TUNNEL SPI ALGORITHM (--key-file F | --key-stdin)
    Switch {
        tunnel: String,
        spi: String,
        algorithm: String,
        #[command(flatten)]
        key: SaKey,
    },
    /// vecgate sa del SPI (inbound SAs)
    Del { spi: String },
    /// vecgate sa reset-state --config F TUNNEL [SPI]: the operator's
    /// override for a static SA refused at start (its state unreadable, or
    /// its key recorded for another SA): forgets the key's record in the
    /// state directory, so the SA starts at sequence number 1 again. Only
    /// with the gateway stopped, and only if the peer was rekeyed or never
    /// saw this key: a reused key with reused numbers repeats nonces.
    /// The gateway's configuration (`--config F`, required) gives its
    /// state_dir and the SAs' keys.
    ResetState {
        tunnel: String,
        /// Only this SA of the tunnel (default: all its static SAs).
        spi: Option<String>,
    },
}

/// The key part of an SA request body (a stdin key is zeroized after).
fn sa_key(k: &SaKey, body: &mut serde_json::Map<String, Value>) -> Result<(), String> {
    match (&k.key_file, k.key_stdin) {
        (Some(f), false) => {
            body.insert("key_file".into(), Value::String(f.clone()));
        }
        (None, true) => {
            let mut text = zeroize::Zeroizing::new(String::new());
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .map_err(|e| format!("reading the key from stdin: {e}"))?;
            body.insert("key".into(), Value::String(text.trim().to_owned()));
        }
        _ => return Err("give --key-file FILE or --key-stdin".into()),
    }
    Ok(())
}

pub fn sa(t: &Target, cmd: &SaCmd) -> ExitCode {
    if let SaCmd::ResetState { tunnel, spi } = cmd {
        let Some(config) = &t.config else {
            eprintln!(
                "vecgate sa reset-state: --config F is required (the gateway's configuration)"
            );
            return ExitCode::from(2);
        };
        let gone = vecgate_config::load(config)
            .map_err(|e| e.to_string())
            .and_then(|cfg| vecgate_ipsec::sastate::reset_records(&cfg, tunnel, spi.as_deref()));
        return match gone {
            Ok(gone) => {
                if gone.is_empty() {
                    println!("nothing recorded for those SAs");
                }
                for p in gone {
                    println!("removed {}", p.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vecgate sa reset-state: {}: {e}", config.display());
                ExitCode::from(1)
            }
        };
    }
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            SaCmd::Add {
                tunnel,
                spi,
                algorithm,
                key,
                replay_window,
            } => {
                let mut body = serde_json::Map::new();
                body.insert("tunnel".into(), tunnel.as_str().into());
                body.insert("spi".into(), spi.as_str().into());
                body.insert("algorithm".into(), algorithm.as_str().into());
                if let Some(w) = replay_window {
                    body.insert("replay_window".into(), (*w).into());
                }
                sa_key(key, &mut body)?;
                let text = zeroize::Zeroizing::new(Value::Object(body).to_string());
                let r = c.ok(c.request("POST", "/sas", Some(&text))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("inbound SA {spi} installed on tunnel {tunnel}");
                }
            }
            SaCmd::Switch {
                tunnel,
                spi,
                algorithm,
                key,
            } => {
                let mut body = serde_json::Map::new();
                body.insert("spi".into(), spi.as_str().into());
                body.insert("algorithm".into(), algorithm.as_str().into());
                sa_key(key, &mut body)?;
                let text = zeroize::Zeroizing::new(Value::Object(body).to_string());
                let path = format!("/tunnels/{}/switch", enc(tunnel));
                let r = c.ok(c.request("POST", &path, Some(&text))?)?;
                let v = json(&r)?;
                if t.json {
                    println!("{v}");
                } else {
                    let sw: SaSwitched = typed(&v)?;
                    println!(
                        "tunnel {tunnel}: outbound SA {} -> {}",
                        sw.old_spi, sw.new_spi
                    );
                }
            }
            SaCmd::Del { spi } => {
                c.ok(c.request("DELETE", &format!("/sas/{}", enc(spi)), None)?)?;
                if !t.json {
                    println!("inbound SA {spi} deleted");
                }
            }
            SaCmd::ResetState { .. } => unreachable!("handled above"),
        }
        Ok(())
    })())
}
