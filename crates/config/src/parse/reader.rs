//! Reading one TOML table: its keys' values by type, each problem
//! reported at its key with its field path, every key's position recorded.

use super::{find, type_name};
use crate::model::DEFAULT_VRF;
use crate::position::{At, ObjPos, Pos};
use crate::Diagnostic;
use std::net::IpAddr;
use std::ops::Range;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

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

    pub(crate) fn span(&self, span: Range<usize>) -> Pos {
        self.pos(span.start)
    }
}

/// Reads the keys of one table, recording positions and problems.
pub(super) struct Reader<'a, 't, 'i> {
    pub src: &'a Source,
    pub table: &'t DeTable<'i>,
    /// How messages name the table (`[[tunnel]] "t"`).
    pub label: String,
    /// Its path (`tunnel[2]`) and the positions read so far.
    pub pos: ObjPos,
    pub diags: &'a mut Vec<Diagnostic>,
    /// Set when a required key is missing or a value is unusable.
    pub broken: bool,
}

impl<'a, 't, 'i> Reader<'a, 't, 'i> {
    /// A reader of `table`, the object at `path` whose header is at `at`.
    pub fn new(
        src: &'a Source,
        table: &'t DeTable<'i>,
        label: String,
        path: String,
        at: Pos,
        diags: &'a mut Vec<Diagnostic>,
    ) -> Self {
        Reader {
            src,
            table,
            label,
            pos: ObjPos::new(path, at),
            diags,
            broken: false,
        }
    }
}

impl<'t, 'i> Reader<'_, 't, 'i> {
    pub fn err(&mut self, at: At, msg: String) {
        self.diags
            .push(Diagnostic::at(at, format!("{}: {msg}", self.label)));
    }

    pub fn get(&mut self, key: &'static str) -> Option<&'t Spanned<DeValue<'i>>> {
        let (k, v) = find(self.table, key)?;
        let at = self.src.span(k.span());
        self.pos.keys.push((key, at));
        Some(v)
    }

    /// Where `key` is (the table when it is absent), and its path.
    pub fn at(&self, key: &str) -> At {
        self.pos.key(key)
    }

    pub fn missing(&mut self, key: &str) {
        let at = self.at(key);
        self.err(at, format!("missing required key \"{key}\""));
        self.broken = true;
    }

    pub fn wrong_type(&mut self, key: &str, expected: &str, v: &DeValue<'_>) {
        let at = self.at(key);
        self.err(
            at,
            format!("key \"{key}\" must be {expected}, found {}", type_name(v)),
        );
        self.broken = true;
    }

    pub fn string(&mut self, key: &'static str, required: bool) -> Option<String> {
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
    pub fn parsed<T: std::str::FromStr<Err = String>>(
        &mut self,
        key: &'static str,
        required: bool,
    ) -> Option<T> {
        let s = self.string(key, required)?;
        match s.parse() {
            Ok(v) => Some(v),
            Err(e) => {
                let at = self.at(key);
                self.err(at, format!("{key}: {e}"));
                self.broken = true;
                None
            }
        }
    }

    pub fn addr(&mut self, key: &'static str) -> Option<IpAddr> {
        let s = self.string(key, true)?;
        match s.parse() {
            Ok(a) => Some(a),
            Err(_) => {
                let at = self.at(key);
                self.err(
                    at,
                    format!("{key} = \"{s}\" is not an IPv4 or IPv6 address"),
                );
                self.broken = true;
                None
            }
        }
    }

    pub fn int(&mut self, key: &'static str, range: Range<i128>, expect: &str) -> Option<i128> {
        let v = self.get(key)?;
        match v.get_ref() {
            DeValue::Integer(i) => {
                match i128::from_str_radix(i.as_str(), i.radix())
                    .ok()
                    .filter(|n| range.contains(n))
                {
                    Some(n) => Some(n),
                    None => {
                        let at = self.at(key);
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
    pub fn socket_addr(&mut self, key: &'static str) -> Option<std::net::SocketAddr> {
        let a = self.string(key, false)?;
        let parsed = a.parse().ok();
        if parsed.is_none() {
            let at = self.at(key);
            self.err(
                at,
                format!("{key} = \"{a}\" is not ADDRESS:PORT (e.g. \"127.0.0.1:2620\")"),
            );
        }
        parsed
    }

    pub fn boolean(&mut self, key: &'static str, default: bool) -> bool {
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

    pub fn vrf(&mut self, key: &'static str) -> String {
        self.string(key, false)
            .unwrap_or_else(|| DEFAULT_VRF.to_owned())
    }

    /// `key = ["...", ...]`, each string parsed by `parse` (an error names
    /// the key, at the element's line); with `record`, each element's
    /// position goes to `pos.items`.
    pub fn list<T>(
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
        for (i, item) in items.iter().enumerate() {
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
                    let field = format!("{}.{key}[{i}]", self.pos.path);
                    self.err(At { pos: at, field }, m);
                    self.broken = true;
                }
            }
        }
        out
    }

    /// Reports every key not in `allowed`, each at its own line.
    pub fn unknown_keys(&mut self, allowed: &[&str]) {
        let list = allowed.join(", ");
        let mut found: Vec<(Pos, String)> = self
            .table
            .iter()
            .filter(|(k, _)| !allowed.contains(&k.get_ref().as_ref()))
            .map(|(k, _)| (self.src.span(k.span()), k.get_ref().to_string()))
            .collect();
        found.sort_by_key(|(p, _)| *p);
        for (pos, k) in found {
            let field = format!("{}.{k}", self.pos.path);
            let m = format!("unknown key \"{k}\" (expected one of {list})");
            self.err(At { pos, field }, m);
        }
    }
}
