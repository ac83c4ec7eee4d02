//! The pool member as the API sees it (`/pool`).

use super::{lock, ApiError, Control};
use crate::model::{PoolConnectionSpec, PoolDrain, PoolInfo, PoolMove, PoolRebalance};
use crate::ops::PoolOps;
use std::sync::Arc;

impl Control {
    /// Connects `/pool` to the pool member (which starts after the API).
    pub fn set_pool(&self, ops: Arc<dyn PoolOps>) {
        *lock(&self.pool) = Some(ops);
    }

    fn pool_ops(&self) -> Result<Arc<dyn PoolOps>, ApiError> {
        lock(&self.pool).clone().ok_or_else(|| {
            ApiError::new(
                404,
                "this gateway is not a member of a pool (no [pool] in its configuration)",
                None,
            )
        })
    }

    pub fn pool(&self) -> Result<PoolInfo, ApiError> {
        Ok(self.pool_ops()?.show())
    }

    pub fn pool_add(&self, spec: &PoolConnectionSpec) -> Result<(), ApiError> {
        self.pool_ops()?.add_connection(spec)
    }

    pub fn pool_del(&self, id: &str) -> Result<(), ApiError> {
        self.pool_ops()?.del_connection(id)
    }

    pub fn pool_drain(&self, spec: &PoolDrain) -> Result<(), ApiError> {
        self.pool_ops()?.drain(spec)
    }

    pub fn pool_rebalance(&self, spec: &PoolRebalance) -> Result<Vec<PoolMove>, ApiError> {
        self.pool_ops()?.rebalance(spec)
    }
}
