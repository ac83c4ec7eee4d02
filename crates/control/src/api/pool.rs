//! `/pool`: the pool of gateways this one is a member of. Any member
//! takes changes; they go to etcd, and the pool's leader places them.

use super::{blocking, object, path_err, ApiResult, AppState};
use crate::model::*;
use crate::state::ApiError;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;

#[utoipa::path(get, path = "/pool", tag = "pool",
    responses((status = 200, description = "Members with capacity and load per class, leader and epoch, placement, this member's fence, etcd's health", body = PoolInfo),
              (status = 404, description = "not a pool member", body = ErrorBody),
              (status = 401, body = ErrorBody)))]
pub(super) async fn pool(State(s): State<AppState>) -> ApiResult<Json<PoolInfo>> {
    let ctl = s.ctl.clone();
    blocking(move || ctl.pool()).await?.map(Json)
}

#[utoipa::path(post, path = "/pool/connections", tag = "pool", request_body = PoolConnectionSpec,
    responses((status = 201, description = "stored; the leader places it"),
              (status = 400, description = "invalid; `field` names the key, e.g. `tunnel.local` or `routes[1].via`", body = ErrorBody),
              (status = 409, description = "it does not fit the pool (capacity, headroom for N failures), or its id is taken", body = ErrorBody),
              (status = 503, description = "etcd unreachable or without quorum: nothing stored", body = ErrorBody),
              (status = 404, description = "not a pool member", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn add_connection(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<StatusCode> {
    let spec: PoolConnectionSpec = object(body)?;
    let ctl = s.ctl.clone();
    blocking(move || ctl.pool_add(&spec)).await??;
    Ok(StatusCode::CREATED)
}

#[utoipa::path(delete, path = "/pool/connections/{id}", tag = "pool",
    params(("id" = String, Path, description = "Connection id (its tunnel's name)")),
    responses((status = 204, description = "deleted; its owner removes it"),
              (status = 404, body = ErrorBody), (status = 503, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn del_connection(
    State(s): State<AppState>,
    id: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(id) = id.map_err(path_err)?;
    let ctl = s.ctl.clone();
    blocking(move || ctl.pool_del(&id)).await??;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/pool/drain", tag = "pool", request_body = PoolDrain,
    responses((status = 204, description = "recorded; the leader moves the member's connections make-before-break"),
              (status = 400, body = ErrorBody),
              (status = 404, description = "no such member", body = ErrorBody),
              (status = 503, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn drain(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<StatusCode> {
    let spec: PoolDrain = object(body)?;
    if spec.member.is_empty() {
        return Err(ApiError::bad("member", "member must not be empty"));
    }
    let ctl = s.ctl.clone();
    blocking(move || ctl.pool_drain(&spec)).await??;
    Ok(StatusCode::NO_CONTENT)
}

/// Most moves one rebalance may ask for.
const MAX_MOVES: u32 = 10_000;
/// Longest pause between two moves.
const MAX_INTERVAL_MS: u64 = 3_600_000;

#[utoipa::path(post, path = "/pool/rebalance", tag = "pool", request_body = PoolRebalance,
    responses((status = 200, description = "The plan (with dry_run: not applied; otherwise the leader applies it at the bounded rate)", body = [PoolMove]),
              (status = 400, body = ErrorBody), (status = 503, body = ErrorBody),
              (status = 404, description = "not a pool member", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub(super) async fn rebalance(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<Vec<PoolMove>>> {
    let spec: PoolRebalance = object(body)?;
    if spec.max_moves.is_some_and(|m| m == 0 || m > MAX_MOVES) {
        return Err(ApiError::bad(
            "max_moves",
            format!("max_moves is out of range (expected 1..={MAX_MOVES})"),
        ));
    }
    if spec.interval_ms.is_some_and(|m| m > MAX_INTERVAL_MS) {
        return Err(ApiError::bad(
            "interval_ms",
            format!("interval_ms is out of range (expected 0..={MAX_INTERVAL_MS})"),
        ));
    }
    let ctl = s.ctl.clone();
    blocking(move || ctl.pool_rebalance(&spec)).await?.map(Json)
}
