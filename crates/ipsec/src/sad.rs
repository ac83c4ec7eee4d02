//! The Security Association Database: inbound SAs by SPI, and per tunnel the
//! outbound SA that is switched atomically on rekey.
//!
//! Both are read-copy-update with `arc_swap`: workers look SAs up without a
//! lock or a reference-count bump ([`Sad::snapshot`] per vector), and the
//! control plane, which changes them a few times an hour, copies the map.
//!
//! Make-before-break (RFC 7296 §2.8): the new inbound SA is installed
//! first, then the tunnel's outbound pointer is switched; the old inbound SA
//! keeps accepting packets still in flight until the key manager removes it.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

use crate::{EspError, InboundSa, OutboundSa};

/// Inbound SAs by SPI.
pub type InboundMap = HashMap<u32, Arc<InboundSa>>;

/// The inbound half of the SAD.
#[derive(Debug, Default)]
pub struct Sad {
    inbound: ArcSwap<InboundMap>,
}

impl Sad {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an inbound SA; `bad-config` if its SPI is already in use (SPIs
    /// are chosen by the receiver and must be unique, RFC 4301 §4.1).
    pub fn install_inbound(&self, sa: Arc<InboundSa>) -> Result<(), EspError> {
        let spi = sa.spi();
        let mut result = Ok(());
        self.inbound.rcu(|cur| {
            if cur.contains_key(&spi) {
                result = Err(EspError::BadConfig);
                return Arc::clone(cur);
            }
            result = Ok(());
            let mut m = InboundMap::clone(cur);
            m.insert(spi, Arc::clone(&sa));
            Arc::new(m)
        });
        result
    }

    /// Removes an inbound SA; packets already holding it finish with it.
    pub fn remove_inbound(&self, spi: u32) -> Option<Arc<InboundSa>> {
        let mut removed = None;
        self.inbound.rcu(|cur| {
            removed = cur.get(&spi).cloned();
            if removed.is_none() {
                return Arc::clone(cur);
            }
            let mut m = InboundMap::clone(cur);
            m.remove(&spi);
            Arc::new(m)
        });
        removed
    }

    /// The inbound SA for `spi` (one packet; vectors use [`Sad::snapshot`]).
    pub fn lookup_inbound(&self, spi: u32) -> Option<Arc<InboundSa>> {
        self.inbound.load().get(&spi).cloned()
    }

    /// The current map, for looking up a whole vector without touching
    /// reference counts.
    pub fn snapshot(&self) -> Guard<Arc<InboundMap>> {
        self.inbound.load()
    }

    /// Number of inbound SAs.
    pub fn len(&self) -> usize {
        self.inbound.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The SAs of one tunnel: the current outbound SA, switchable atomically.
#[derive(Debug)]
pub struct TunnelSas {
    outbound: ArcSwap<OutboundSa>,
}

impl TunnelSas {
    pub fn new(outbound: OutboundSa) -> Self {
        TunnelSas {
            outbound: ArcSwap::from_pointee(outbound),
        }
    }

    /// The SA new packets are encrypted with (load once per vector).
    pub fn outbound(&self) -> Guard<Arc<OutboundSa>> {
        self.outbound.load()
    }

    /// Replaces the outbound SA (after the peer's matching inbound SA is
    /// known to be installed); returns the old one. Batches that already
    /// loaded the old SA finish with it.
    pub fn switch_outbound(&self, new: OutboundSa) -> Arc<OutboundSa> {
        self.outbound.swap(Arc::new(new))
    }
}
