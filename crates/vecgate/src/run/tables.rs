//! The tables' first build.

use anyhow::{anyhow, Result};
use dataplane::tables::SharedTables;
use std::collections::HashMap;
use std::sync::Arc;
use vecgate_config::Config;
use vecgate_control::build::{Inputs, IpsecTables, Ports};
use vecgate_control::NetdevFacts;
use vecgate_keying::esp_tables::EspTables;

/// The first tables, and the port assignment that interfaces and tunnels
/// keep across live changes.
pub fn first_tables(
    cfg: &Config,
    facts: &HashMap<String, NetdevFacts>,
    esp: Option<&vecgate_ipsec::EspRegistry>,
) -> Result<(Arc<std::sync::Mutex<Ports>>, Arc<SharedTables>)> {
    let mut tports = Ports::new(cfg);
    let esp = esp.map(EspTables);
    let inputs = Inputs {
        netdevs: facts,
        learned: &Default::default(),
        held: &Default::default(),
        ipsec: esp.as_ref().map(|e| e as &dyn IpsecTables),
    };
    let tables = tports
        .tables(cfg, &inputs)
        .map_err(|e| anyhow!("building tables: {e}"))?;
    Ok((
        Arc::new(std::sync::Mutex::new(tports)),
        SharedTables::new(tables),
    ))
}
