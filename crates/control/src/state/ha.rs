//! The VRRP speaker as the API sees it (`/ha`).

use super::{lock, ApiError, Control};
use crate::model::{HaGroupInfo, HaSwitchover};
use crate::ops::HaOps;
use std::sync::Arc;

impl Control {
    /// Connects `/ha` to the VRRP speaker (which starts after the API).
    pub fn set_ha(&self, ops: Arc<dyn HaOps>) {
        *lock(&self.ha) = Some(ops);
    }

    /// The VRRP virtual routers (empty without `[ha]`).
    pub fn ha(&self) -> Vec<HaGroupInfo> {
        let ops = lock(&self.ha).clone();
        ops.map(|o| o.groups()).unwrap_or_default()
    }

    /// Planned switchover; 409 when this gateway masters none of them.
    pub fn ha_switchover(&self, spec: &HaSwitchover) -> Result<Vec<HaGroupInfo>, ApiError> {
        let ops = lock(&self.ha).clone();
        match ops {
            Some(o) => o.switchover(spec),
            None => Err(ApiError::new(
                409,
                "no VRRP group ([ha]) runs on this gateway: it is master of nothing",
                None,
            )),
        }
    }
}
