//! INFORMATIONAL (RFC 7296 §1.4, §1.5): deleting child SAs and the IKE SA,
//! liveness checks (an empty request, §2.4) and error notifies inside
//! an established IKE SA.

use super::table::{Req, Request};
use super::{FailReason, Ike};
use crate::error::Result;
use crate::message::{exchange, Message};
use crate::payload::{notify, sa as sap, Delete, Payload};

impl Ike {
    /// Our request deleting child `spi` (None if it is gone already).
    pub(super) fn delete_child_request(&self, idx: usize, spi: u32) -> Option<Request> {
        if !self.sas[idx].children.iter().any(|c| c.spi_in == spi) {
            return None;
        }
        Some(Request {
            exchange: exchange::INFORMATIONAL,
            payloads: vec![Payload::Delete(Delete {
                protocol: sap::PROTO_ESP,
                spis: vec![spi],
            })],
            req: Req::DeleteChild(spi),
        })
    }

    /// Our request deleting the IKE SA (and with it every child).
    pub(super) fn delete_ike_request() -> Request {
        Request {
            exchange: exchange::INFORMATIONAL,
            payloads: vec![Payload::Delete(Delete {
                protocol: sap::PROTO_IKE,
                spis: vec![],
            })],
            req: Req::DeleteIke,
        }
    }

    /// A liveness check: an empty INFORMATIONAL request (§2.4).
    pub(super) fn dpd_request() -> Request {
        Request {
            exchange: exchange::INFORMATIONAL,
            payloads: vec![],
            req: Req::Dpd,
        }
    }

    /// The peer acknowledged our delete (or liveness check).
    pub(super) fn informational_response(&mut self, idx: usize, req: Req) {
        match req {
            Req::DeleteChild(spi) => {
                let sa = &mut self.sas[idx];
                if let Some(i) = sa.children.iter().position(|c| c.spi_in == spi) {
                    let c = sa.children.remove(i);
                    self.child_removed(&c);
                }
            }
            Req::DeleteIke => self.sas[idx].dead = true,
            _ => {}
        }
    }

    pub(super) fn info_request(&mut self, idx: usize, m: &Message) -> Result<Vec<Payload>> {
        let mut out = Vec::new();
        let mut removed = Vec::new();
        for p in &m.payloads {
            match p {
                Payload::Delete(d) if d.protocol == sap::PROTO_IKE => {
                    self.sas[idx].dead = true;
                    return Ok(vec![]);
                }
                Payload::Delete(d) if d.protocol == sap::PROTO_ESP => {
                    let sa = &mut self.sas[idx];
                    for spi in &d.spis {
                        if let Some(i) = sa.children.iter().position(|c| c.spi_out == *spi) {
                            removed.push(sa.children.remove(i));
                        }
                    }
                }
                Payload::Notify(n) if n.ty == notify::AUTHENTICATION_FAILED => {
                    self.sas[idx].dead = true;
                    self.fail(FailReason::AuthenticationFailed, false);
                    return Ok(vec![]);
                }
                _ => {}
            }
        }
        if !removed.is_empty() {
            out.push(Payload::Delete(Delete {
                protocol: sap::PROTO_ESP,
                spis: removed.iter().map(|c| c.spi_in).collect(),
            }));
            for c in removed {
                self.child_removed(&c);
            }
        }
        Ok(out)
    }
}
