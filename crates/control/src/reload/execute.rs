//! Carrying out a reload plan ([`super::plan`]) on the running gateway:
//! the SA registry's steps around one table swap, each undone if a later
//! one fails.

use super::{plan, rekeys, Change, Item, Op};
use crate::model::{PlanChange, ReloadPlan};
use crate::ops::{read_key_file, KeySource, SaOps};
use crate::state::{ApiError, Control};
use vecgate_config::{Config, SaDirection, StaticSa, Tunnel, TunnelKind};

/// Key material read from files before anything changes, zeroized when
/// dropped.
type Secret = zeroize::Zeroizing<Vec<u8>>;

/// What a reload asks of the SA registry, besides the table swap.
#[derive(Debug, Default)]
struct RegistryChanges {
    /// ipsec tunnels leaving it: removed, or registered anew.
    leaving: Vec<Tunnel>,
    /// ipsec tunnels entering it: added, or registered anew ([`rekeys`]).
    entering: Vec<Tunnel>,
    /// Static SAs added or removed on tunnels that stay registered.
    sas: Vec<(Op, String, StaticSa)>,
}

impl RegistryChanges {
    fn of(cur: &Config, new: &Config, plan: &[Change]) -> Self {
        let ipsec = |t: &&Tunnel| t.kind == TunnelKind::Ipsec;
        let leaving: Vec<Tunnel> = cur
            .tunnels
            .iter()
            .filter(ipsec)
            .filter(|t| new.tunnel(&t.name).is_none_or(|u| rekeys(t, u)))
            .cloned()
            .collect();
        let entering: Vec<Tunnel> = new
            .tunnels
            .iter()
            .filter(ipsec)
            .filter(|u| cur.tunnel(&u.name).is_none_or(|t| rekeys(t, u)))
            .cloned()
            .collect();
        let mut changes = RegistryChanges {
            leaving,
            entering,
            sas: Vec::new(),
        };
        changes.sas = plan
            .iter()
            .filter_map(|c| match &c.item {
                Item::Sa { tunnel, sa }
                    if !changes.re_registered(tunnel)
                        && new.tunnel(tunnel).is_some()
                        && cur.tunnel(tunnel).is_some() =>
                {
                    Some((c.op, tunnel.clone(), (**sa).clone()))
                }
                _ => None,
            })
            .collect();
        changes
    }

    fn is_empty(&self) -> bool {
        self.leaving.is_empty() && self.entering.is_empty() && self.sas.is_empty()
    }

    /// Leaves the registry and enters it again (its keys changed).
    fn re_registered(&self, name: &str) -> bool {
        self.leaving.iter().any(|t| t.name == name) && self.entering.iter().any(|t| t.name == name)
    }
}

/// Every key and PSK file a reload needs, read before anything changes.
struct Secrets {
    /// Per entering tunnel: its static SAs' keys and its PSK.
    tunnels: Vec<(Vec<Secret>, Option<Secret>)>,
    /// Per SA change: the key of an added SA.
    sas: Vec<Option<Secret>>,
}

impl Secrets {
    fn read(reg: &RegistryChanges) -> Result<Self, ApiError> {
        let sa_file = |tunnel: &str, sa: &StaticSa| {
            read_key_file(&sa.key_file, "key_file")
                .map_err(|e| refused(&format!("tunnel {tunnel} sa {:#010x}", sa.spi), e))
        };
        let mut tunnels = Vec::new();
        for u in &reg.entering {
            let x = u.ipsec.clone().unwrap_or_default();
            let keys = x
                .sas
                .iter()
                .map(|sa| sa_file(&u.name, sa))
                .collect::<Result<_, _>>()?;
            let psk = match &x.ike {
                Some(k) if !k.uses_psk() => Some(zeroize::Zeroizing::new(Vec::new())),
                Some(k) => Some(
                    read_key_file(&k.psk_file, "psk_file")
                        .map_err(|e| refused(&format!("tunnel {}", u.name), e))?,
                ),
                None => None,
            };
            tunnels.push((keys, psk));
        }
        let sas = reg
            .sas
            .iter()
            .map(|(op, tunnel, sa)| match op {
                Op::Add => sa_file(tunnel, sa).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Secrets { tunnels, sas })
    }
}

/// A refusal of the whole reload because of one object.
fn refused(what: &str, e: ApiError) -> ApiError {
    ApiError {
        status: e.status,
        message: format!("{what}: {}; nothing applied", e.message),
        field: Some("config".into()),
    }
}

/// The registry's steps taken so far, to undo or report.
struct Steps<'a> {
    ops: &'a dyn SaOps,
    registered: Vec<String>,
    installed: Vec<u32>,
    done: Vec<String>,
}

impl Steps<'_> {
    /// Takes back the registrations and inbound SAs of this reload.
    fn undo(&self) {
        for spi in &self.installed {
            let _ = self.ops.remove_inbound(*spi);
        }
        for n in &self.registered {
            let _ = self.ops.remove_tunnel(n);
        }
    }

    /// `r`, having undone everything on an error.
    fn or_undo<T>(&self, r: Result<T, ApiError>) -> Result<T, ApiError> {
        r.inspect_err(|_| self.undo())
    }

    fn register(
        &mut self,
        new: &Config,
        u: &Tunnel,
        (keys, psk): &(Vec<Secret>, Option<Secret>),
    ) -> Result<(), ApiError> {
        let ks: Vec<KeySource<'_>> = keys.iter().map(|k| KeySource::File(k)).collect();
        self.ops
            .add_tunnel(new, u, &ks, psk.as_deref().map(|p| &p[..]))?;
        self.registered.push(u.name.clone());
        Ok(())
    }

    /// New ipsec tunnels registered, new inbound SAs installed.
    fn add(
        &mut self,
        new: &Config,
        reg: &RegistryChanges,
        secrets: &Secrets,
    ) -> Result<(), ApiError> {
        for (u, s) in reg.entering.iter().zip(&secrets.tunnels) {
            if reg.re_registered(&u.name) {
                continue;
            }
            let r = self.register(new, u, s);
            self.or_undo(r.map_err(|e| refused(&format!("tunnel {}", u.name), e)))?;
            self.done.push(format!("tunnel {}: registered", u.name));
        }
        for ((op, tunnel, sa), key) in reg.sas.iter().zip(&secrets.sas) {
            let (Op::Add, SaDirection::In, Some(k), Some(u)) =
                (op, sa.direction, key, new.tunnel(tunnel))
            else {
                continue;
            };
            let r = self.ops.install_inbound(u, sa, KeySource::File(k));
            let what = format!("tunnel {tunnel} sa {:#010x}", sa.spi);
            self.or_undo(r.map_err(|e| refused(&what, e)))?;
            self.installed.push(sa.spi);
            let m = format!("tunnel {tunnel}: installed inbound SA {:#010x}", sa.spi);
            self.done.push(m);
        }
        Ok(())
    }

    /// Re-registered tunnels: the old SAs go, the new ones come.
    fn re_register(
        &mut self,
        new: &Config,
        reg: &RegistryChanges,
        secrets: &Secrets,
    ) -> Result<(), ApiError> {
        for (u, s) in reg.entering.iter().zip(&secrets.tunnels) {
            if !reg.re_registered(&u.name) {
                continue;
            }
            self.ops.stop_tunnel(&u.name);
            let _ = self.ops.remove_tunnel(&u.name);
            let r = self.register(new, u, s).map_err(|e| ApiError {
                status: e.status,
                message: format!(
                    "tunnel {}: {}; its old SAs were removed already, the rest is not applied",
                    u.name, e.message
                ),
                field: Some("config".into()),
            });
            self.or_undo(r)?;
            self.done
                .push(format!("tunnel {}: registered anew", u.name));
        }
        Ok(())
    }

    /// Outbound switches (the peer has the matching inbound SA,
    /// make-before-break, RFC 7296 §2.8).
    fn switch(
        &mut self,
        new: &Config,
        reg: &RegistryChanges,
        secrets: &Secrets,
    ) -> Result<(), ApiError> {
        for ((op, tunnel, sa), key) in reg.sas.iter().zip(&secrets.sas) {
            let (Op::Add, SaDirection::Out, Some(k), Some(u)) =
                (op, sa.direction, key, new.tunnel(tunnel))
            else {
                continue;
            };
            let r = self.ops.switch_outbound(u, sa, KeySource::File(k));
            let what = format!("tunnel {tunnel} sa {:#010x}", sa.spi);
            let old = self.or_undo(r.map_err(|e| refused(&what, e)))?;
            self.done.push(format!(
                "tunnel {tunnel}: switched outbound SA {old:#010x} -> {:#010x}",
                sa.spi
            ));
        }
        Ok(())
    }

    /// After the swap, what the new tables no longer use leaves the
    /// registry; the new tunnels start.
    fn retire(&mut self, reg: &RegistryChanges) {
        for (op, tunnel, sa) in &reg.sas {
            if *op == Op::Remove && sa.direction == SaDirection::In {
                self.done.push(match self.ops.remove_inbound(sa.spi) {
                    Ok(_) => format!("tunnel {tunnel}: removed inbound SA {:#010x}", sa.spi),
                    Err(e) => format!("tunnel {tunnel}: {}", e.message),
                });
            }
        }
        for t in reg.leaving.iter().filter(|t| !reg.re_registered(&t.name)) {
            let _ = self.ops.remove_tunnel(&t.name);
            self.done
                .push(format!("tunnel {}: removed with its SAs", t.name));
        }
        for n in &self.registered {
            self.ops.start_tunnel(n);
        }
    }
}

/// The plan as the API reports it.
fn report(plan: &[Change]) -> ReloadPlan {
    ReloadPlan {
        applied: false,
        changes: plan
            .iter()
            .map(|c| PlanChange {
                op: c.op.sign().into(),
                object: c.object().into(),
                name: c.name.clone(),
                detail: c.detail.clone(),
                restart: c.restart.clone(),
            })
            .collect(),
        done: Vec::new(),
    }
}

impl Control {
    /// Live reload (`POST /config`, `vecgate reload`, SIGHUP): takes the
    /// running configuration to `new`, already parsed and validated whole
    /// ([`vecgate_config::parse`], checked again here). The plan
    /// ([`super::plan`]) is returned as is for a dry run; otherwise a
    /// change only a restart can apply refuses the whole reload (409
    /// "needs a restart: …"), and the rest goes through the live API's
    /// steps: key and PSK files are read first (nothing done if one is
    /// bad), new ipsec tunnels are registered and new inbound SAs installed
    /// (undone if a later step fails), a changed outbound SA switched to
    /// (make-before-break, RFC 7296 §2.8), then the whole new
    /// configuration is built and published in one table swap
    /// ([`Control::apply`]: interfaces, VRFs, routes and tunnels that did
    /// not change keep their ports and state), and last the inbound SAs
    /// and tunnels gone from the file leave the registry and new IKEv2
    /// tunnels start. Blocking (IKE deletes wait for the peer).
    pub fn reload(&self, new: Config, dry_run: bool) -> Result<ReloadPlan, ApiError> {
        if dry_run {
            return self.reload_steps(new, true);
        }
        let hook = self.reload_hook();
        if let Some(h) = &hook {
            h(true);
        }
        let r = self.reload_steps(new, false);
        if let Some(h) = &hook {
            h(false);
        }
        r
    }

    fn reload_steps(&self, new: Config, dry_run: bool) -> Result<ReloadPlan, ApiError> {
        if let Some(d) = vecgate_config::validate(&new).first() {
            return Err(ApiError::bad("config", d.message.clone()));
        }
        let _serial = self.serial();
        let cur = self.config();
        let plan = plan(&cur, &new);
        let mut report = report(&plan);
        if dry_run {
            return Ok(report);
        }
        let blocked: Vec<String> = plan
            .iter()
            .filter(|c| c.restart.is_some())
            .map(|c| c.line())
            .collect();
        if !blocked.is_empty() {
            return Err(ApiError::new(
                409,
                format!("needs a restart: {}; nothing applied", blocked.join("; ")),
                Some("config"),
            ));
        }
        // IKEv2 tunnels that stay and use certificates: their files are
        // read again (a renewed certificate, a new CRL) whether or not the
        // configuration changed; all are checked before any is taken.
        let certified: Vec<&Tunnel> = new
            .tunnels
            .iter()
            .filter(|u| {
                let uses = |k: &vecgate_config::IkeSettings| {
                    k.auth == vecgate_config::IkeAuth::Pubkey
                        || k.peer_auth() == vecgate_config::IkeAuth::Pubkey
                };
                u.ipsec
                    .as_ref()
                    .and_then(|x| x.ike.as_ref())
                    .is_some_and(uses)
                    && cur.tunnel(&u.name).is_some_and(|t| !rekeys(t, u))
            })
            .collect();
        if !certified.is_empty() {
            let ops = self.sa_ops()?;
            for apply in [false, true] {
                for u in &certified {
                    ops.reload_auth(u, apply)
                        .map_err(|e| refused(&format!("tunnel {}", u.name), e))?;
                }
            }
        }
        if plan.is_empty() {
            report.applied = true;
            return Ok(report);
        }
        let reg = RegistryChanges::of(&cur, &new, &plan);
        let ops = if reg.is_empty() {
            None
        } else {
            Some(self.sa_ops()?)
        };
        let secrets = Secrets::read(&reg)?;
        let mut steps = ops.map(|ops| Steps {
            ops,
            registered: Vec::new(),
            installed: Vec::new(),
            done: Vec::new(),
        });
        if let Some(s) = steps.as_mut() {
            s.add(&new, &reg, &secrets)?;
            s.re_register(&new, &reg, &secrets)?;
            s.switch(&new, &reg, &secrets)?;
            // Tunnels about to leave tell their peers (IKEv2 DELETE).
            for t in reg.leaving.iter().filter(|t| !reg.re_registered(&t.name)) {
                s.ops.stop_tunnel(&t.name);
            }
        }
        // One build and one publish for everything else.
        let swapped = self.apply("config", |c| {
            *c = new.clone();
            Ok(None)
        });
        if let Err(e) = swapped {
            if let Some(s) = &steps {
                s.undo();
            }
            return Err(ApiError {
                field: Some("config".into()),
                ..e
            });
        }
        if let Some(s) = steps.as_mut() {
            s.retire(&reg);
        }
        self.reloaded(&cur, &new, &|n| reg.re_registered(n));
        report.applied = true;
        report.done = steps.map(|s| s.done).unwrap_or_default();
        Ok(report)
    }
}
