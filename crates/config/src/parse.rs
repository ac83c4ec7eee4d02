//! Shape phase: TOML text to the typed model, with positions.
//!
//! Walks toml's spanned document tree ([`toml::de::DeTable`]) by hand rather
//! than through serde so that every problem (unknown key, wrong type, missing
//! key) is reported with its own line, and all of them are collected instead
//! of stopping at the first.

use crate::model::*;
use crate::validate::{ObjPos, Pos, Positions};
use crate::Diagnostic;
use std::collections::HashSet;
use std::net::IpAddr;
use std::ops::Range;
use std::path::PathBuf;
use toml::de::{DeString, DeTable, DeValue};
use toml::Spanned;

#[path = "parse_ha.rs"]
mod ha;
#[path = "parse_ipsec.rs"]
pub(crate) mod ipsec;

/// Byte offset to line/column.
pub(crate) struct Source {
    line_starts: Vec<usize>,
    text_len: usize,
}

impl Source {
    pub(crate) fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source {
            line_starts,
            text_len: text.len(),
        }
    }

    /// 1-based line and column (in bytes) of `offset`.
    pub(crate) fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text_len);
        let line = self.line_starts.partition_point(|s| *s <= offset);
        let start = self
            .line_starts
            .get(line.wrapping_sub(1))
            .copied()
            .unwrap_or(0);
        Pos {
            line: line.max(1),
            column: offset - start + 1,
        }
    }

    fn span(&self, span: Range<usize>) -> Pos {
        self.pos(span.start)
    }
}

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
pub(crate) const INTERFACE_KEYS: &[&str] = &[
    "name",
    "host",
    "driver",
    "addresses",
    "vrf",
    "mtu",
    "rsc",
    "offloads",
];
/// The keys of a `[[tunnel]]` table (the API's tunnel fields too).
pub const TUNNEL_KEYS: &[&str] = &[
    "name",
    "kind",
    "local",
    "remote",
    "key",
    "vrf",
    "underlay_vrf",
    "mtu",
    "checksum",
    "sequence",
    "port",
    "addresses",
    "inner",
    "nat_t",
    "traffic",
    "sa",
    "ike",
];
const ROUTE_KEYS: &[&str] = &["vrf", "prefix", "via"];
const ROUTING_KEYS: &[&str] = &["fpm", "max_routes", "max_nexthop_groups", "table", "punt"];
const ROUTING_PUNT_KEYS: &[&str] = &["vrf", "tap", "netns", "fpm"];
const ROUTING_TABLE_KEYS: &[&str] = &["id", "vrf"];
const TOP_KEYS: &[&str] = &["gateway", "interface", "tunnel", "route", "routing", "ha"];

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

/// Reads the keys of one table, recording positions and problems.
struct Reader<'a, 't, 'i> {
    src: &'a Source,
    table: &'t DeTable<'i>,
    label: String,
    pos: ObjPos,
    diags: &'a mut Vec<Diagnostic>,
    /// Set when a required key is missing or a value is unusable.
    broken: bool,
}

impl<'t, 'i> Reader<'_, 't, 'i> {
    fn err(&mut self, at: Pos, msg: String) {
        self.diags
            .push(Diagnostic::at(at, format!("{}: {msg}", self.label)));
    }

    fn get(&mut self, key: &'static str) -> Option<&'t Spanned<DeValue<'i>>> {
        let (k, v) = find(self.table, key)?;
        let at = self.src.span(k.span());
        self.pos.keys.push((key, at));
        Some(v)
    }

    fn key_pos(&self, key: &str) -> Pos {
        self.pos.key(key)
    }

    fn missing(&mut self, key: &str) {
        let at = self.pos.table;
        self.err(at, format!("missing required key \"{key}\""));
        self.broken = true;
    }

    fn wrong_type(&mut self, key: &str, expected: &str, v: &DeValue<'_>) {
        let at = self.key_pos(key);
        self.err(
            at,
            format!("key \"{key}\" must be {expected}, found {}", type_name(v)),
        );
        self.broken = true;
    }

    fn string(&mut self, key: &'static str, required: bool) -> Option<String> {
        match self.get(key) {
            None => {
                if required {
                    self.missing(key);
                }
                None
            }
            Some(v) => match v.get_ref() {
                DeValue::String(s) => Some(s.to_string()),
                other => {
                    self.wrong_type(key, "a string", other);
                    None
                }
            },
        }
    }

    /// A string parsed with `FromStr`, the parse error naming the key.
    fn parsed<T: std::str::FromStr<Err = String>>(
        &mut self,
        key: &'static str,
        required: bool,
    ) -> Option<T> {
        let s = self.string(key, required)?;
        match s.parse() {
            Ok(v) => Some(v),
            Err(e) => {
                let at = self.key_pos(key);
                self.err(at, format!("{key}: {e}"));
                self.broken = true;
                None
            }
        }
    }

    fn addr(&mut self, key: &'static str) -> Option<IpAddr> {
        let s = self.string(key, true)?;
        match s.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                let at = self.key_pos(key);
                self.err(
                    at,
                    format!("{key} = \"{s}\" is not an IPv4 or IPv6 address"),
                );
                self.broken = true;
                None
            }
        }
    }

    fn int(&mut self, key: &'static str, range: Range<i128>, expect: &str) -> Option<i128> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Integer(i) => {
                match i128::from_str_radix(i.as_str(), i.radix())
                    .ok()
                    .filter(|n| range.contains(n))
                {
                    Some(n) => Some(n),
                    None => {
                        let at = self.key_pos(key);
                        self.err(
                            at,
                            format!("{key} = {i} is out of range (expected {expect})"),
                        );
                        self.broken = true;
                        None
                    }
                }
            }
            other => {
                self.wrong_type(key, "an integer", other);
                None
            }
        }
    }

    /// An optional `key = "ADDRESS:PORT"`; a bad one is reported.
    fn socket_addr(&mut self, key: &'static str) -> Option<std::net::SocketAddr> {
        let a = self.string(key, false)?;
        let parsed = a.parse().ok();
        if parsed.is_none() {
            let at = self.key_pos(key);
            self.err(
                at,
                format!("{key} = \"{a}\" is not ADDRESS:PORT (e.g. \"127.0.0.1:2620\")"),
            );
        }
        parsed
    }

    fn boolean(&mut self, key: &'static str, default: bool) -> bool {
        match self.get(key) {
            None => default,
            Some(v) => match v.get_ref() {
                DeValue::Boolean(b) => *b,
                other => {
                    self.wrong_type(key, "true or false", other);
                    default
                }
            },
        }
    }

    fn vrf(&mut self, key: &'static str) -> String {
        self.string(key, false)
            .unwrap_or_else(|| DEFAULT_VRF.to_owned())
    }

    /// `key = ["...", ...]`, each string parsed by `parse` (an error names
    /// the key, at the element's line); with `record`, each element's
    /// position goes to `pos.items`.
    fn list<T>(
        &mut self,
        key: &'static str,
        record: bool,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Vec<T> {
        let Some(v) = self.get(key) else {
            return Vec::new();
        };
        let DeValue::Array(items) = v.get_ref() else {
            self.wrong_type(key, "an array of strings", v.get_ref());
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let at = self.src.span(item.span());
            let parsed = match item.get_ref() {
                DeValue::String(s) => parse(s).map_err(|e| format!("{key}: {e}")),
                other => Err(format!(
                    "{key} must hold strings, found {}",
                    type_name(other)
                )),
            };
            match parsed {
                Ok(x) => {
                    if record {
                        self.pos.items.push(at);
                    }
                    out.push(x);
                }
                Err(m) => {
                    self.err(at, m);
                    self.broken = true;
                }
            }
        }
        out
    }

    /// Reports every key not in `allowed`, each at its own line.
    fn unknown_keys(&mut self, allowed: &[&str]) {
        let list = allowed.join(", ");
        let mut found: Vec<(Pos, String)> = self
            .table
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.get_ref().as_ref()))
            .map(|(k, _)| (self.src.span(k.span()), k.get_ref().to_string()))
            .collect();
        found.sort_by_key(|(p, _)| *p);
        for (at, k) in found {
            self.err(at, format!("unknown key \"{k}\" (expected one of {list})"));
        }
    }
}

/// The tables of an array-of-tables key (`[[interface]]`), or a diagnostic.
fn tables<'t, 'i>(
    src: &Source,
    key: &str,
    v: &'t Spanned<DeValue<'i>>,
    key_span: Range<usize>,
    diags: &mut Vec<Diagnostic>,
) -> Vec<(&'t DeTable<'i>, Pos)> {
    let mut out = Vec::new();
    match v.get_ref() {
        DeValue::Array(items) => {
            for item in items.iter() {
                match item.get_ref() {
                    DeValue::Table(t) => out.push((t, src.span(item.span()))),
                    other => diags.push(Diagnostic::at(
                        src.span(item.span()),
                        format!(
                            "\"{key}\" must hold tables ([[{key}]]), found {}",
                            type_name(other)
                        ),
                    )),
                }
            }
        }
        other => diags.push(Diagnostic::at(
            src.span(key_span),
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
        read_objects(&src, doc, &mut positions, &mut broken_names, &mut diags);

    let routing = read_routing(&src, doc, &mut positions, &mut diags);
    let (ha, ha_pos) = ha::read(&src, doc, &mut diags);
    positions.ha = ha_pos;
    let mut config = match gateway {
        Some(gateway) => Config {
            gateway,
            interfaces,
            tunnels,
            routes,
            routing: Routing::default(),
            ha,
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

/// The `[[interface]]`, `[[tunnel]]` and `[[route]]` tables that could be
/// built, positions recorded; the names of broken interfaces and tunnels
/// go to `broken_names`.
fn read_objects(
    src: &Source,
    doc: &DeTable<'_>,
    positions: &mut Positions,
    broken_names: &mut HashSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> (Vec<Interface>, Vec<Tunnel>, Vec<Route>) {
    let list = |key: &str, diags: &mut Vec<Diagnostic>| match find(doc, key) {
        Some((k, v)) => tables(src, key, v, k.span(), diags),
        None => Vec::new(),
    };
    let iface_tables = list("interface", diags);
    let tunnel_tables = list("tunnel", diags);
    let route_tables = list("route", diags);

    // Route targets are resolved by name, so collect every name first.
    let iface_names: HashSet<String> = iface_tables
        .iter()
        .filter_map(|(t, _)| peek_name(t))
        .collect();
    let tunnel_names: HashSet<String> = tunnel_tables
        .iter()
        .filter_map(|(t, _)| peek_name(t))
        .collect();

    let mut interfaces = Vec::new();
    for (i, (t, at)) in iface_tables.iter().enumerate() {
        match read_interface(src, t, *at, i, diags) {
            Ok((iface, pos)) => {
                positions.interfaces.push(pos);
                interfaces.push(iface);
            }
            Err(name) => broken_names.extend(name),
        }
    }
    let mut tunnels = Vec::new();
    for (i, (t, at)) in tunnel_tables.iter().enumerate() {
        match read_tunnel(src, t, *at, i, diags) {
            Ok((tunnel, pos)) => {
                positions.tunnels.push(pos);
                tunnels.push(tunnel);
            }
            Err(name) => broken_names.extend(name),
        }
    }
    let mut routes = Vec::new();
    for (i, (t, at)) in route_tables.iter().enumerate() {
        let read = read_route(src, t, *at, i, &iface_names, &tunnel_names, diags);
        if let Some((route, pos)) = read {
            positions.routes.push(pos);
            routes.push(route);
        }
    }

    (interfaces, tunnels, routes)
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
            Diagnostic::at(at, format!("TOML syntax error: {}", e.message().trim()))
        })
        .collect()
}

/// A diagnostic for each top-level key that is not one of [`TOP_KEYS`].
fn unknown_top_keys(src: &Source, doc: &DeTable<'_>, diags: &mut Vec<Diagnostic>) {
    let list = TOP_KEYS
        .iter()
        .map(|k| {
            if *k == "gateway" || *k == "routing" || *k == "ha" {
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
                src.span(k.span()),
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
    match find(doc, "gateway") {
        None => {
            diags.push(Diagnostic::at(
                Pos { line: 1, column: 1 },
                "missing [gateway] table (it needs at least name = \"...\")".to_owned(),
            ));
            None
        }
        Some((k, v)) => match v.get_ref() {
            DeValue::Table(t) => {
                let mut r = Reader {
                    src,
                    table: t,
                    label: "[gateway]".to_owned(),
                    pos: ObjPos::new(src.span(v.span())),
                    diags,
                    broken: false,
                };
                r.unknown_keys(GATEWAY_KEYS);
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
            other => {
                diags.push(Diagnostic::at(
                    src.span(k.span()),
                    format!(
                        "\"gateway\" must be a table ([gateway]), found {}",
                        type_name(other)
                    ),
                ));
                None
            }
        },
    }
}

/// One `[[interface]]` (the `i`-th) with its position, or the name of a
/// broken one (reported) so validation does not call it dangling.
fn read_interface(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    diags: &mut Vec<Diagnostic>,
) -> Result<(Interface, ObjPos), Option<String>> {
    let name = peek_name(t);
    let mut r = Reader {
        src,
        table: t,
        label: name_label("interface", name.as_deref(), i),
        pos: ObjPos::new(at),
        diags,
        broken: false,
    };
    r.unknown_keys(INTERFACE_KEYS);
    let name = r.string("name", true);
    let host = r.string("host", true);
    let driver = r.parsed::<Driver>("driver", true);
    let addresses = read_addresses(&mut r);
    let vrf = r.vrf("vrf");
    let mtu = r
        .int("mtu", 0..(1 << 32), "68..=65535")
        .and_then(|n| u32::try_from(n).ok());
    let rsc = r.boolean("rsc", true);
    let offloads = r.boolean("offloads", true);
    let (pos, broken) = (r.pos, r.broken);
    match (name, host, driver, broken) {
        (Some(name), Some(host), Some(driver), false) => Ok((
            Interface {
                name,
                host,
                driver,
                addresses,
                vrf,
                mtu,
                rsc,
                offloads,
            },
            pos,
        )),
        (name, ..) => Err(name),
    }
}

/// One `[[tunnel]]` (the `i`-th) with its position, or the name of a broken
/// one (reported).
fn read_tunnel(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    diags: &mut Vec<Diagnostic>,
) -> Result<(Tunnel, ObjPos), Option<String>> {
    let name = peek_name(t);
    let mut r = Reader {
        src,
        table: t,
        label: name_label("tunnel", name.as_deref(), i),
        pos: ObjPos::new(at),
        diags,
        broken: false,
    };
    r.unknown_keys(TUNNEL_KEYS);
    let name = r.string("name", true);
    let kind = r.parsed::<TunnelKind>("kind", true);
    let local = r.addr("local");
    let remote = r.addr("remote");
    let key = r
        .int("key", 0..(1 << 32), "0..=4294967295")
        .and_then(|n| u32::try_from(n).ok());
    let vrf = r.vrf("vrf");
    let underlay_vrf = r.vrf("underlay_vrf");
    let mtu = r
        .int("mtu", 0..(1 << 32), "68..=65535")
        .and_then(|n| u32::try_from(n).ok());
    let checksum = r.boolean("checksum", false);
    let sequence = r.boolean("sequence", false);
    let port = r
        .int("port", 0..(1 << 16), "1..=65535")
        .and_then(|n| u16::try_from(n).ok())
        .unwrap_or(VXLAN_PORT);
    let addresses = read_addresses(&mut r);
    let inner = r.parsed::<TunnelInner>("inner", false).unwrap_or_default();
    let ipsec = ipsec::read(&mut r);
    let (pos, broken) = (r.pos, r.broken);
    match (name, kind, local, remote, broken) {
        (Some(name), Some(kind), Some(local), Some(remote), false) => Ok((
            Tunnel {
                name,
                kind,
                local,
                remote,
                key,
                vrf,
                underlay_vrf,
                mtu,
                checksum,
                sequence,
                port,
                addresses,
                inner,
                ipsec,
            },
            pos,
        )),
        (name, ..) => Err(name),
    }
}

/// One `[[route]]` (the `i`-th) with its position; `via` names a tunnel
/// when a tunnel (and no interface) has that name.
fn read_route(
    src: &Source,
    t: &DeTable<'_>,
    at: Pos,
    i: usize,
    iface_names: &HashSet<String>,
    tunnel_names: &HashSet<String>,
    diags: &mut Vec<Diagnostic>,
) -> Option<(Route, ObjPos)> {
    let label = match find(t, "prefix").map(|(_, v)| v.get_ref()) {
        Some(DeValue::String(p)) => format!("[[route]] \"{p}\""),
        _ => format!("[[route]] #{}", i + 1),
    };
    let mut r = Reader {
        src,
        table: t,
        label,
        pos: ObjPos::new(at),
        diags,
        broken: false,
    };
    r.unknown_keys(ROUTE_KEYS);
    let vrf = r.vrf("vrf");
    let prefix = r.parsed::<Prefix>("prefix", true);
    let via = r.string("via", true).map(|v| match v.parse::<IpAddr>() {
        Ok(a) => Via::Address(a),
        // An unknown name stays an interface reference: validation then
        // reports it as dangling, with the same message as for code-built configs.
        Err(_) if tunnel_names.contains(&v) && !iface_names.contains(&v) => Via::Tunnel(v),
        Err(_) => Via::Interface(v),
    });
    let (pos, broken) = (r.pos, r.broken);
    match (prefix, via, broken) {
        (Some(prefix), Some(via), false) => Some((Route { vrf, prefix, via }, pos)),
        _ => None,
    }
}

/// `addresses = ["10.1.0.1/24", ...]`, each element's position recorded.
fn read_addresses(r: &mut Reader<'_, '_, '_>) -> Vec<IfAddr> {
    r.list("addresses", true, str::parse)
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
    }
}

/// `[routing]` and its `[[routing.table]]`s (defaults when absent).
fn read_routing(
    src: &Source,
    doc: &DeTable<'_>,
    positions: &mut Positions,
    diags: &mut Vec<Diagnostic>,
) -> Routing {
    let mut out = Routing::default();
    let Some((k, v)) = find(doc, "routing") else {
        return out;
    };
    let DeValue::Table(t) = v.get_ref() else {
        diags.push(Diagnostic::at(
            src.span(k.span()),
            format!(
                "\"routing\" must be a table ([routing]), found {}",
                type_name(v.get_ref())
            ),
        ));
        return out;
    };
    let mut r = Reader {
        src,
        table: t,
        label: "[routing]".to_owned(),
        pos: ObjPos::new(src.span(v.span())),
        diags,
        broken: false,
    };
    r.unknown_keys(ROUTING_KEYS);
    out.fpm = r.socket_addr("fpm");
    if let Some(n) = r.int("max_routes", 1..(1 << 32), "1..=4294967295") {
        out.max_routes = u32::try_from(n).unwrap_or(DEFAULT_MAX_ROUTES);
    }
    if let Some(n) = r.int("max_nexthop_groups", 1..(1 << 32), "1..=4294967295") {
        out.max_nexthop_groups = u32::try_from(n).unwrap_or(DEFAULT_MAX_NEXTHOP_GROUPS);
    }
    let table = r.get("table");
    let punt = r.get("punt");
    positions.routing = r.pos;
    if let Some(pv) = punt {
        let key_span = find(t, "punt").map_or(0..0, |(k, _)| k.span());
        read_punts(src, pv, key_span, positions, &mut out, diags);
    }
    if let Some(tv) = table {
        let key_span = find(t, "table").map_or(0..0, |(k, _)| k.span());
        read_tables(src, tv, key_span, positions, &mut out, diags);
    }
    out
}

/// The `[[routing.punt]]` tables into `out.punt`.
fn read_punts(
    src: &Source,
    pv: &Spanned<DeValue<'_>>,
    key_span: Range<usize>,
    positions: &mut Positions,
    out: &mut Routing,
    diags: &mut Vec<Diagnostic>,
) {
    for (i, (tt, at)) in tables(src, "routing.punt", pv, key_span, diags)
        .into_iter()
        .enumerate()
    {
        let mut r = Reader {
            src,
            table: tt,
            label: format!("[[routing.punt]] #{}", i + 1),
            pos: ObjPos::new(at),
            diags,
            broken: false,
        };
        r.unknown_keys(ROUTING_PUNT_KEYS);
        let vrf = r.string("vrf", true);
        let tap = r.string("tap", true);
        let netns = r.string("netns", false);
        let fpm = r.socket_addr("fpm");
        let (pos, broken) = (r.pos, r.broken);
        if let (Some(vrf), Some(tap), false) = (vrf, tap, broken) {
            positions.routing_punts.push(pos);
            out.punt.push(RoutingPunt {
                vrf,
                tap,
                netns,
                fpm,
            });
        }
    }
}

/// The `[[routing.table]]` tables into `out.tables`.
fn read_tables(
    src: &Source,
    tv: &Spanned<DeValue<'_>>,
    key_span: Range<usize>,
    positions: &mut Positions,
    out: &mut Routing,
    diags: &mut Vec<Diagnostic>,
) {
    for (i, (tt, at)) in tables(src, "routing.table", tv, key_span, diags)
        .into_iter()
        .enumerate()
    {
        let mut r = Reader {
            src,
            table: tt,
            label: format!("[[routing.table]] #{}", i + 1),
            pos: ObjPos::new(at),
            diags,
            broken: false,
        };
        r.unknown_keys(ROUTING_TABLE_KEYS);
        let id = r.int("id", 1..(1 << 32), "1..=4294967295");
        if id.is_none() && r.get("id").is_none() {
            r.missing("id");
        }
        let vrf = r.string("vrf", true);
        let (pos, broken) = (r.pos, r.broken);
        if let (Some(id), Some(vrf), false) = (id.and_then(|n| u32::try_from(n).ok()), vrf, broken)
        {
            positions.routing_tables.push(pos);
            out.tables.push(RoutingTable { id, vrf });
        }
    }
}
