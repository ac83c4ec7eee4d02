//! Applying a change: copy → edit → validate → build → publish, with the
//! interfaces that enter attached before the tables name them and those
//! that leave released after the tables stop naming them.

use super::{lock, ApiError, Control};
use crate::ops::PortOps;
use dataplane::worker::{Command, PortQueue};
use std::sync::Arc;
use std::time::Instant;
use vecgate_config::Config;

/// What a change edits: the path of the object it adds or changes
/// (`route[4]`), so that a refusal by the validator names the request's
/// own field ([`ApiError::invalid`]); `None` for a change of several.
pub type Edited = Option<String>;

/// Interfaces opened for a change, not yet in the tables: closed again if
/// the change goes no further.
struct Opened<'a> {
    ops: Option<&'a Arc<dyn PortOps>>,
    queues: Vec<(String, Vec<PortQueue>)>,
}

impl Opened<'_> {
    fn undo(&self) {
        if let Some(o) = self.ops {
            for (n, _) in &self.queues {
                o.close(n);
            }
        }
    }
}

impl Control {
    /// Copy → `edit` → validate → build → publish. A configuration the
    /// validator refuses is a 400 naming the field of the object `edit`
    /// reports ([`Edited`]), else `fallback`.
    ///
    /// Interfaces that enter are attached first (netdev claimed, one queue
    /// per worker opened, ingress guard), handed to the workers once the
    /// tables are built, and the tables naming them published only when
    /// every worker polls them. Interfaces that leave are gone from the
    /// published tables before the workers close their queues (packets
    /// still on their way to one are dropped and counted), then their
    /// netdev is released. Everything else keeps its port and state.
    pub fn apply(
        &self,
        fallback: &str,
        edit: impl FnOnce(&mut Config) -> Result<Edited, ApiError>,
    ) -> Result<(), ApiError> {
        let mut cur = lock(&self.config);
        let mut next = cur.clone();
        let edited = edit(&mut next)?;
        if let Some(d) = vecgate_config::validate(&next).first() {
            return Err(ApiError::invalid(d, edited.as_deref(), fallback));
        }
        let leaving: Vec<String> = cur
            .interfaces
            .iter()
            .filter(|i| next.interface(&i.name).is_none())
            .map(|i| i.name.clone())
            .collect();
        let ports = lock(&self.ports).clone();
        let opened = self.attach(ports.as_ref(), &cur, &next, !leaving.is_empty())?;
        let learned = self.learned();
        let tables = match (self.dp.build)(&next, &learned) {
            Ok(t) => t,
            Err(e) => {
                // The sockets close as `opened` goes.
                opened.undo();
                return Err(ApiError::new(409, e, None));
            }
        };
        let old = self.dp.tables.load();
        // The workers poll the new queues, then the tables name them.
        let mut attached = Vec::new();
        for (name, queues) in opened.queues {
            let Some(port) = Self::port_in(&tables, &name) else {
                continue;
            };
            let mut queues: Vec<Option<PortQueue>> = queues.into_iter().map(Some).collect();
            self.tell_workers(|w, done| match queues.get_mut(w).and_then(Option::take) {
                Some(io) => Command::AttachPort { port, io, done },
                None => Command::DetachPort { port, done },
            });
            attached.push(port);
        }
        self.dp.tables.store(tables);
        // Gratuitous ARP / unsolicited NA for the new addresses (one
        // worker sends for all).
        if let Some(mb) = self.dp.mailboxes.first() {
            for p in &attached {
                let _ = mb.try_send(Command::Announce(*p));
            }
        }
        // Interfaces gone from the tables: their queues closed, their
        // netdevs released.
        if let Some(o) = ports.as_ref().filter(|_| !leaving.is_empty()) {
            for name in &leaving {
                if let Some(port) = Self::port_in(&old, name) {
                    self.tell_workers(|_, done| Command::DetachPort { port, done });
                }
                o.close(name);
            }
        }
        *cur = next;
        Ok(())
    }

    /// Publishes tables built anew from the running configuration, for
    /// when what else goes into them changed (the VRRP virtual addresses
    /// held).
    pub fn rebuild(&self) -> Result<(), ApiError> {
        self.apply("config", |_| Ok(None))
    }

    /// Opens the interfaces of `next` that `cur` lacks (undone if one
    /// fails); refused when some enter or leave (`leaving`) and this
    /// dataplane attaches interfaces at startup only.
    fn attach<'a>(
        &self,
        ports: Option<&'a Arc<dyn PortOps>>,
        cur: &Config,
        next: &Config,
        leaving: bool,
    ) -> Result<Opened<'a>, ApiError> {
        let entering: Vec<&vecgate_config::Interface> = next
            .interfaces
            .iter()
            .filter(|i| cur.interface(&i.name).is_none())
            .collect();
        let mut opened = Opened {
            ops: ports,
            queues: Vec::new(),
        };
        if entering.is_empty() && !leaving {
            return Ok(opened);
        }
        let Some(o) = ports else {
            return Err(ApiError::new(
                409,
                "interfaces are attached at startup by this dataplane: restart to change them",
                Some("name"),
            ));
        };
        for ifc in entering {
            match o.open(ifc) {
                Ok((_, queues)) => opened.queues.push((ifc.name.clone(), queues)),
                Err(e) => {
                    opened.undo();
                    return Err(ApiError::new(
                        409,
                        format!("interface {}: {e}", ifc.name),
                        Some("name"),
                    ));
                }
            }
        }
        Ok(opened)
    }

    /// Sends `make(worker)` to every worker and waits (up to
    /// [`super::MAILBOX_WAIT`] each) until each has handled it.
    fn tell_workers(&self, mut make: impl FnMut(usize, crossbeam_channel::Sender<()>) -> Command) {
        let mut waits = Vec::new();
        for (w, mb) in self.dp.mailboxes.iter().enumerate() {
            let (tx, rx) = crossbeam_channel::bounded(1);
            if mb.send_timeout(make(w, tx), super::MAILBOX_WAIT).is_ok() {
                waits.push(rx);
            }
        }
        let deadline = Instant::now() + super::MAILBOX_WAIT;
        for rx in waits {
            let _ = rx.recv_deadline(deadline);
        }
    }
}
