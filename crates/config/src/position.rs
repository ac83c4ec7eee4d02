//! Where a diagnostic points: a line and column in the file (when there is
//! one), and the field's path in the configuration, as a request names it
//! (`tunnel[3].ike.psk_file`, `interface[0].addresses[1]`, `gateway.api`).
//! The reader records where every object and key is; the validator, which
//! also judges configurations built in code, reports against these.

/// A 1-based line and column; `line == 0` means "not from a file".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Pos {
    /// 1-based line, 0 when unknown.
    pub line: usize,
    /// 1-based column (bytes), 0 when unknown.
    pub column: usize,
}

/// What a diagnostic is about: its position and its field path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct At {
    pub pos: Pos,
    /// Empty for the file as a whole (a TOML syntax error).
    pub field: String,
}

impl At {
    /// A problem of the file as a whole, at `pos`.
    pub(crate) fn file(pos: Pos) -> Self {
        At {
            pos,
            field: String::new(),
        }
    }
}

/// Where one object and its keys are in the file.
#[derive(Clone, Debug, Default)]
pub(crate) struct ObjPos {
    /// The object's path (`tunnel[3]`, `tunnel[3].sa[1]`, `gateway`).
    pub path: String,
    /// The table header (`[[interface]]`).
    pub table: Pos,
    /// Each key that was present.
    pub keys: Vec<(&'static str, Pos)>,
    /// Elements of the object's array (`addresses`), in order.
    pub items: Vec<Pos>,
    /// Sub-tables (`[[tunnel.sa]]`, then `[tunnel.ike]`), in order.
    pub subs: Vec<ObjPos>,
}

impl ObjPos {
    pub(crate) fn new(path: String, table: Pos) -> Self {
        ObjPos {
            path,
            table,
            keys: Vec::new(),
            items: Vec::new(),
            subs: Vec::new(),
        }
    }

    /// The key's position, or the table's when the key was defaulted.
    pub(crate) fn key_pos(&self, key: &str) -> Pos {
        self.keys
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| *p)
            .unwrap_or(self.table)
    }

    /// The key of this object (where it is, or the table when it was
    /// defaulted).
    pub(crate) fn key(&self, key: &str) -> At {
        At {
            pos: self.key_pos(key),
            field: format!("{}.{key}", self.path),
        }
    }

    /// Element `i` of the list `key`.
    pub(crate) fn item(&self, i: usize, key: &str) -> At {
        At {
            pos: self
                .items
                .get(i)
                .copied()
                .unwrap_or_else(|| self.key_pos(key)),
            field: format!("{}.{key}[{i}]", self.path),
        }
    }

    /// The object as a whole, at its table header.
    pub(crate) fn whole(&self) -> At {
        At {
            pos: self.table,
            field: self.path.clone(),
        }
    }

    /// Sub-table `i` (`[[tunnel.sa]]` #i+1, `[tunnel.ike]` after them), named
    /// `name` in the path; for a configuration built in code, one at this
    /// object's table.
    pub(crate) fn sub(&self, i: usize, name: &str) -> ObjPos {
        self.subs
            .get(i)
            .cloned()
            .unwrap_or_else(|| ObjPos::new(format!("{}.{name}", self.path), self.table))
    }
}

/// Positions of every object, index-aligned with the [`crate::Config`]'s
/// vectors (an object that could not be read has none, so its path keeps
/// its place in the file).
#[derive(Clone, Debug)]
pub(crate) struct Positions {
    pub gateway: ObjPos,
    pub interfaces: Vec<ObjPos>,
    pub tunnels: Vec<ObjPos>,
    pub routes: Vec<ObjPos>,
    pub routing: ObjPos,
    pub routing_tables: Vec<ObjPos>,
    pub routing_punts: Vec<ObjPos>,
    /// `[ha]`; its `subs` are the `[[ha.group]]` tables.
    pub ha: ObjPos,
    /// `[pool]`; `subs[0]` is `[pool.capacity]`.
    pub pool: ObjPos,
}

impl Default for Positions {
    fn default() -> Self {
        let top = |name: &str| ObjPos::new(name.to_owned(), Pos::default());
        Positions {
            gateway: top("gateway"),
            interfaces: Vec::new(),
            tunnels: Vec::new(),
            routes: Vec::new(),
            routing: top("routing"),
            routing_tables: Vec::new(),
            routing_punts: Vec::new(),
            ha: top("ha"),
            pool: top("pool"),
        }
    }
}

/// Object `i` of the list `v` (the `path` list), or one without a
/// position for a configuration built in code.
pub(crate) fn nth(v: &[ObjPos], path: &str, i: usize) -> ObjPos {
    v.get(i)
        .cloned()
        .unwrap_or_else(|| ObjPos::new(format!("{path}[{i}]"), Pos::default()))
}
