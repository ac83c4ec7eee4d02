//! vecgate's configuration: the TOML file users write, parsed into a typed
//! model and validated by one validator shared by `vecgate check`,
//! `vecgate run` and the control API.
//!
//! ```toml
//! [gateway]
//! name = "gw-a"
//! workers = 2                          # default 1
//! api = "unix:/run/vecgate/gw-a.sock"  # default unix:/run/vecgate/<name>.sock
//!
//! [[interface]]
//! name = "lan0"
//! host = "veth-lan"
//! driver = "af_packet"                 # af_packet | af_xdp | tap
//! addresses = ["10.1.0.1/24", "fd01::1/64"]
//! vrf = "blue"                         # default "default"
//!
//! [[tunnel]]
//! name = "to-b"
//! kind = "gre"                         # gre | nvgre | vxlan | ipsec
//! local = "192.0.2.1"
//! remote = "192.0.2.2"
//! key = 100
//! vrf = "blue"
//! inner = "ip"                         # gre only: ip | ethernet (0x6558)
//! addresses = ["10.9.0.1/24"]          # gateway's overlay addresses (L2 tunnels)
//!
//! [[route]]
//! vrf = "blue"
//! prefix = "10.2.0.0/24"
//! via = "to-b"                         # interface, tunnel or next-hop address
//! ```
//!
//! The key names are a public contract: they may gain optional keys, never
//! lose or rename one. See `examples/*.toml` for every optional key.
//!
//! `kind = "ipsec"` tunnels take statically keyed SAs (`[[tunnel.sa]]`, keys
//! in hex files named by `key_file`, never inline), `nat_t` and `traffic`
//! selectors, or an IKEv2 `[tunnel.ike]` section (PSK file, identities,
//! proposals, lifetimes): see [`ipsec`] and `examples/ipsec-*.toml`. An
//! ipsec tunnel with neither validates but does not run.
//!
//! `[ha]` and `[[ha.group]]` give virtual addresses held with VRRPv3: see
//! [`ha`]. `[pool]` makes the gateway a member of a pool of gateways on
//! etcd: see [`pool`].

mod emit;
pub mod ha;
pub mod ipsec;
mod model;
mod parse;
pub mod pool;
mod position;
mod request;
pub mod secret;
mod validate;

pub use ha::{Ha, HaGroup, HaSync};
pub use ipsec::{EspAlgorithm, IkeAuth, IkeSettings, Ipsec, SaDirection, StaticSa};
pub use model::*;
pub use parse::ipsec::{IKE_KEYS, SA_KEYS};
pub use parse::objects::TUNNEL_KEYS;
pub use pool::{Pool, PoolCapacity};
use position::At;
pub use request::{FieldError, InterfaceSpec, TunnelSpec};
pub use validate::validate;

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in a configuration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    /// 1-based line in the file; 0 for a configuration built in code.
    pub line: usize,
    /// 1-based column (bytes); 0 when `line` is 0.
    pub column: usize,
    /// Which field: its path of keys and indices, as a request names it
    /// (`tunnel[3].ike.psk_file`, `route[0].via`, `gateway.api`; the
    /// index is the object's place in the file, or in the configuration's
    /// list for one built in code). Empty for the file as a whole.
    pub field: String,
    /// What is wrong, naming the object and the key.
    pub message: String,
}

impl Diagnostic {
    pub(crate) fn at(at: At, message: String) -> Self {
        Diagnostic {
            line: at.pos.line,
            column: at.pos.column,
            field: at.field,
            message,
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// Why [`load`] failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file was read but is not a valid configuration.
    #[error("{} has {} error(s)", path.display(), diagnostics.len())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem, sorted by line.
        diagnostics: Vec<Diagnostic>,
    },
}

/// Upper bound on a configuration file, so a wrong path (a device, a huge
/// log) cannot make us allocate without limit.
pub const MAX_FILE_SIZE: u64 = 16 << 20;

/// Parses and validates `text`, returning every problem found, sorted by line.
pub fn parse(text: &str) -> Result<Config, Vec<Diagnostic>> {
    let shaped = parse::shape(text);
    let mut diags = shaped.diags;
    if shaped.complete {
        diags.extend(validate::validate_at(
            &shaped.config,
            &shaped.positions,
            &shaped.broken_names,
        ));
    }
    if diags.is_empty() {
        Ok(shaped.config)
    } else {
        diags.sort_by_key(|d| (d.line, d.column));
        diags.dedup();
        Err(diags)
    }
}

/// Reads and validates a configuration file.
pub fn load(path: &Path) -> Result<Config, LoadError> {
    use std::io::Read;
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    file.take(MAX_FILE_SIZE + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_FILE_SIZE {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_FILE_SIZE} bytes"),
        )));
    }
    parse(&text).map_err(|diagnostics| LoadError::Invalid {
        path: path.to_owned(),
        diagnostics,
    })
}
