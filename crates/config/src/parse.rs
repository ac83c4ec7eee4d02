//! Shape phase: TOML text to the typed model, with positions.
//!
//! Walks toml's spanned document tree ([`toml::de::DeTable`]) by hand rather
//! than through serde so that every problem (unknown key, wrong type, missing
//! key) is reported with its own line, and all of them are collected instead
//! of stopping at the first.

use crate::model::*;
use crate::position::{At, Pos, Positions};
use crate::Diagnostic;
use reader::{Reader, Source};
use std::collections::HashSet;
use std::ops::Range;
use std::path::PathBuf;
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

mod ha;
pub(crate) mod ipsec;
pub(crate) mod objects;
mod pool;
mod reader;
mod routing;

const GATEWAY_KEYS: &[&str] = &[
    "name",
    "workers",
    "api",
    "api_token_file",
    "api_readonly_token_file",
    "api_tls_cert_file",
    "api_tls_key_file",
    "api_insecure_loopback",
    "state_dir",
    "busy_poll",
    "idle_spin_us",
];
const TOP_KEYS: &[&str] = &[
    "gateway",
    "interface",
    "tunnel",
    "route",
    "routing",
    "ha",
    "pool",
];

/// Result of the shape phase: what could be built, plus what to tell the user.
pub(crate) struct Shaped {
    pub config: Config,
    pub positions: Positions,
    /// Names of interfaces/tunnels that were too broken to build: routes
    /// pointing at them must not additionally be reported as dangling.
    pub broken_names: HashSet<String>,
    pub diags: Vec<Diagnostic>,
    /// False after a TOML syntax error: semantic validation of the
    /// recovered tree would only produce noise.
    pub complete: bool,
}

/// The reader of top-level table `[name]`, with unknown keys outside `keys`
/// reported; `None` when the key is absent or is not a table (reported).
fn top_table<'a, 't, 'i>(
    src: &'a Source,
    doc: &'t DeTable<'i>,
    name: &str,
    keys: &[&str],
    diags: &'a mut Vec<Diagnostic>,
) -> Option<Reader<'a, 't, 'i>> {
    let (k, v) = find(doc, name)?;
    let DeValue::Table(t) = v.get_ref() else {
        let at = At {
            pos: src.span(k.span()),
            field: name.to_owned(),
        };
        diags.push(Diagnostic::at(
            at,
            format!(
                "\"{name}\" must be a table ([{name}]), found {}",
                type_name(v.get_ref())
            ),
        ));
        return None;
    };
    let (label, path) = (format!("[{name}]"), name.to_owned());
    let mut r = Reader::new(src, t, label, path, src.span(v.span()), diags);
    r.unknown_keys(keys);
    Some(r)
}

fn find<'t, 'i>(
    t: &'t DeTable<'i>,
    key: &str,
) -> Option<(&'t Spanned<DeString<'i>>, &'t Spanned<DeValue<'i>>)> {
    t.iter().find(|(k, _)| k.get_ref().as_ref() == key)
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a datetime",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// The tables of an array-of-tables key (`[[interface]]`, at `path`),
/// each with its place in the array, or a diagnostic.
fn tables<'t, 'i>(
    src: &Source,
    key: &str,
    path: &str,
    v: &'t Spanned<DeValue<'i>>,
    key_span: Range<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(usize, &'t DeTable<'i>, Pos)> {
    let mut out = Vec::new();
    match v.get_ref() {
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let pos = src.span(item.span());
                match item.get_ref() {
                    DeValue::Table(t) => out.push((i, t, pos)),
                    other => diags.push(Diagnostic::at(
                        At {
                            pos,
                            field: format!("{path}[{i}]"),
                        },
                        format!(
                            "\"{key}\" must hold tables ([[{key}]]), found {}",
                            type_name(other)
                        ),
                    )),
                }
            }
        }
        other => diags.push(Diagnostic::at(
            At {
                pos: src.span(key_span),
                field: path.to_owned(),
            },
            format!(
                "\"{key}\" must be an array of tables, written [[{key}]], found {}",
                type_name(other)
            ),
        )),
    }
    out
}

fn name_label(kind: &str, name: Option<&str>, index: usize) -> String {
    match name {
        Some(n) => format!("[[{kind}]] \"{n}\""),
        None => format!("[[{kind}]] #{}", index + 1),
    }
}

/// Reads `name` first so that every later message can say which object it is about.
fn peek_name(t: &DeTable<'_>) -> Option<String> {
    match find(t, "name").map(|(_, v)| v.get_ref()) {
        Some(DeValue::String(s)) => Some(s.to_string()),
        _ => None,
    }
}

pub(crate) fn shape(text: &str) -> Shaped {
    let src = Source::new(text);
    let (doc, errors) = DeTable::parse_recoverable(text);
    let mut diags = syntax_errors(&src, &errors);
    let complete = errors.is_empty();
    let doc = doc.get_ref();
    if !complete {
        // The recovered tree holds placeholders for what did not parse;
        // judging it would only add noise to the syntax errors.
        return Shaped {
            config: placeholder(Vec::new(), Vec::new(), Vec::new()),
            positions: Positions::default(),
            broken_names: HashSet::new(),
            diags,
            complete,
        };
    }
    unknown_top_keys(&src, doc, &mut diags);

    let mut positions = Positions::default();
    let mut broken_names = HashSet::new();
    let gateway = read_gateway(&src, doc, &mut positions, &mut diags);

    let (interfaces, tunnels, routes) =
        objects::read(&src, doc, &mut positions, &mut broken_names, &mut diags);

    let routing = routing::read(&src, doc, &mut positions, &mut diags);
    let (ha, ha_pos) = ha::read(&src, doc, &mut diags);
    positions.ha = ha_pos;
    let (pool, pool_pos) = pool::read(&src, doc, &mut diags);
    positions.pool = pool_pos;
    let mut config = match gateway {
        Some(gateway) => Config {
            gateway,
            interfaces,
            tunnels,
            routes,
            routing: Routing::default(),
            ha,
            pool,
        },
        // Reported above; the rest is still worth validating.
        None => placeholder(interfaces, tunnels, routes),
    };
    config.routing = routing;
    Shaped {
        config,
        positions,
        broken_names,
        diags,
        complete,
    }
}

/// The TOML syntax errors, each at its position.
fn syntax_errors(src: &Source, errors: &[toml::de::Error]) -> Vec<Diagnostic> {
    errors
        .iter()
        .map(|e| {
            let at = e
                .span()
                .map(|s| src.pos(s.start))
                .unwrap_or(Pos { line: 1, column: 1 });
            Diagnostic::at(
                At::file(at),
                format!("TOML syntax error: {}", e.message().trim()),
            )
        })
        .collect()
}

/// A diagnostic for each top-level key that is not one of [`TOP_KEYS`].
fn unknown_top_keys(src: &Source, doc: &DeTable<'_>, diags: &mut Vec<Diagnostic>) {
    let list = TOP_KEYS
        .iter()
        .map(|k| {
            if *k == "gateway" || *k == "routing" || *k == "ha" || *k == "pool" {
                format!("[{k}]")
            } else {
                format!("[[{k}]]")
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    for (k, _) in doc.iter() {
        if !TOP_KEYS.contains(&k.get_ref().as_ref()) {
            diags.push(Diagnostic::at(
                At {
                    pos: src.span(k.span()),
                    field: k.get_ref().to_string(),
                },
                format!(
                    "unknown top-level key \"{}\" (expected {list})",
                    k.get_ref()
                ),
            ));
        }
    }
}

/// `[gateway]`, its position recorded; `None` (reported) if missing or
/// unusable.
fn read_gateway(
    src: &Source,
    doc: &DeTable<'_>,
    positions: &mut Positions,
    diags: &mut Vec<Diagnostic>,
) -> Option<Gateway> {
    if find(doc, "gateway").is_none() {
        diags.push(Diagnostic::at(
            At {
                pos: Pos { line: 1, column: 1 },
                field: "gateway".to_owned(),
            },
            "missing [gateway] table (it needs at least name = \"...\")".to_owned(),
        ));
        return None;
    }
    let mut r = top_table(src, doc, "gateway", GATEWAY_KEYS, diags)?;
    let name = r.string("name", true);
    let workers = r
        .int("workers", 0..(1 << 32), "1..=64")
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(1);
    let api = r.parsed::<ApiEndpoint>("api", false);
    let api_token_file = r.string("api_token_file", false).map(PathBuf::from);
    let api_readonly_token_file = r
        .string("api_readonly_token_file", false)
        .map(PathBuf::from);
    let api_tls_cert_file = r.string("api_tls_cert_file", false).map(PathBuf::from);
    let api_tls_key_file = r.string("api_tls_key_file", false).map(PathBuf::from);
    let api_insecure_loopback = r.boolean("api_insecure_loopback", false);
    let state_dir = r.string("state_dir", false).map(PathBuf::from);
    let busy_poll = r.boolean("busy_poll", false);
    let idle_spin_us = r
        .int("idle_spin_us", 0..10_001, "0..=10000 (microseconds)")
        .map(|n| n as u32);
    positions.gateway = r.pos;
    name.map(|name| Gateway {
        api: api.unwrap_or_else(|| ApiEndpoint::default_for(&name)),
        name,
        workers,
        api_token_file,
        api_readonly_token_file,
        api_tls_cert_file,
        api_tls_key_file,
        api_insecure_loopback,
        state_dir,
        busy_poll,
        idle_spin_us,
    })
}

/// A config with a stand-in gateway that passes validation, for when
/// `[gateway]` could not be read (that is reported on its own).
fn placeholder(interfaces: Vec<Interface>, tunnels: Vec<Tunnel>, routes: Vec<Route>) -> Config {
    Config {
        gateway: Gateway {
            name: "unnamed".to_owned(),
            workers: 1,
            api_token_file: None,
            api_readonly_token_file: None,
            api_tls_cert_file: None,
            api_tls_key_file: None,
            api_insecure_loopback: false,
            state_dir: None,
            busy_poll: false,
            idle_spin_us: None,
            api: ApiEndpoint::default_for("unnamed"),
        },
        interfaces,
        tunnels,
        routes,
        routing: Routing::default(),
        ha: None,
        pool: None,
    }
}
