//! The REST API: routes, handlers and the OpenAPI document generated from
//! them (served at `GET /openapi.json`).
//!
//! Every error is JSON `{"error": "...", "field": "..."}`; malformed bodies
//! and queries are 400 naming the field serde complained about. Handlers
//! that wait for workers (neighbours, trace, capture) run on the blocking
//! pool so the API stays responsive.

use crate::auth::{Auth, Throttle, Verdict};
use crate::model::*;
use crate::state::{ApiError, Control};
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use std::sync::Arc;
use std::time::Duration;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

mod pool;

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub ctl: Arc<Control>,
    pub auth: Arc<Auth>,
    pub throttle: Arc<Throttle>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            Json(ErrorBody {
                error: self.message,
                field: self.field,
            }),
        )
            .into_response()
    }
}

/// The field a serde error names: axum prefixes the path of the failing
/// value (`…target type: rsc: invalid type…`); serde names missing and
/// unknown fields in backquotes (`missing field `via``).
fn serde_field(msg: &str) -> Option<String> {
    if let Some(i) = msg.find("target type: ") {
        let rest = &msg[i + 13..];
        if let Some((path, _)) = rest.split_once(": ") {
            if !path.is_empty()
                && path.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'[' || b == b']'
                })
            {
                return Some(path.to_owned());
            }
        }
    }
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(msg[start..start + len].to_owned())
}

fn json_err(e: JsonRejection) -> ApiError {
    let msg = e.body_text();
    let field = serde_field(&msg).unwrap_or_else(|| "body".to_owned());
    ApiError::new(400, msg, Some(&field))
}

/// A JSON body that must be an object: serde would also build a struct
/// from an array, which no client means.
fn object<T: serde::de::DeserializeOwned>(
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<T> {
    let Json(v) = body.map_err(json_err)?;
    if !v.is_object() {
        return Err(ApiError::bad("body", "the body must be a JSON object"));
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.inner().to_string();
        let field = match path.as_str() {
            "." | "" => serde_field(&msg).unwrap_or_else(|| "body".to_owned()),
            p => p.to_owned(),
        };
        ApiError::new(400, format!("{field}: {msg}"), Some(&field))
    })
}

fn query_err(e: QueryRejection) -> ApiError {
    let msg = e.body_text();
    let field = serde_field(&msg).unwrap_or_else(|| "query".to_owned());
    ApiError::new(400, msg, Some(&field))
}

fn path_err(e: PathRejection) -> ApiError {
    ApiError::new(400, e.body_text(), Some("name"))
}

/// Runs blocking control work (waiting for workers) off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(500, format!("internal error: {e}"), None))
}

type ApiResult<T> = Result<T, ApiError>;

#[utoipa::path(get, path = "/status", tag = "gateway",
    responses((status = 200, body = StatusInfo), (status = 401, body = ErrorBody)))]
async fn status(State(s): State<AppState>) -> Json<StatusInfo> {
    Json(s.ctl.status())
}

#[utoipa::path(get, path = "/interfaces", tag = "interfaces",
    responses((status = 200, body = [InterfaceInfo]), (status = 401, body = ErrorBody)))]
async fn interfaces(State(s): State<AppState>) -> Json<Vec<InterfaceInfo>> {
    Json(s.ctl.interfaces())
}

/// Attaches an interface live: the netdev is claimed and opened on every
/// worker (one queue each, as at startup), then the tables with its
/// addresses, VRF and connected routes are published.
#[utoipa::path(post, path = "/interfaces", tag = "interfaces", request_body = InterfaceSpec,
    responses((status = 201, body = InterfaceInfo), (status = 400, body = ErrorBody),
              (status = 409, description = "name in use, or the netdev cannot be attached (missing, held by another gateway)", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn add_interface(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<InterfaceInfo>)> {
    let spec: InterfaceSpec = object(body)?;
    let ctl = s.ctl.clone();
    let sp = spec.clone();
    blocking(move || ctl.add_interface(&sp)).await??;
    find_iface(&s, &spec.name).map(|i| (StatusCode::CREATED, Json(i)))
}

/// Releases an interface live: it leaves the tables, every worker closes
/// its queue (packets still queued for it are dropped and counted), its
/// netdev is released.
#[utoipa::path(delete, path = "/interfaces/{name}", tag = "interfaces",
    params(("name" = String, Path, description = "Interface name")),
    responses((status = 204, description = "released"), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "a route or tunnel depends on it: change those first", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn del_interface(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(name) = name.map_err(path_err)?;
    let ctl = s.ctl.clone();
    blocking(move || ctl.del_interface(&name)).await??;
    Ok(StatusCode::NO_CONTENT)
}

fn find_iface(s: &AppState, name: &str) -> ApiResult<InterfaceInfo> {
    s.ctl
        .interfaces()
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| ApiError::not_found("name", format!("no interface \"{name}\"")))
}

#[utoipa::path(get, path = "/interfaces/{name}", tag = "interfaces",
    params(("name" = String, Path, description = "Interface name")),
    responses((status = 200, body = InterfaceInfo), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)))]
async fn interface(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<InterfaceInfo>> {
    let Path(name) = name.map_err(path_err)?;
    find_iface(&s, &name).map(Json)
}

#[utoipa::path(patch, path = "/interfaces/{name}", tag = "interfaces",
    params(("name" = String, Path, description = "Interface name")),
    request_body = InterfacePatch,
    responses((status = 200, body = InterfaceInfo), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn patch_interface(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<InterfaceInfo>> {
    let Path(name) = name.map_err(path_err)?;
    let p: InterfacePatch = object(body)?;
    s.ctl.patch_interface(&name, &p)?;
    find_iface(&s, &name).map(Json)
}

#[utoipa::path(get, path = "/vrfs", tag = "routing",
    responses((status = 200, body = [VrfInfo]), (status = 401, body = ErrorBody)))]
async fn vrfs(State(s): State<AppState>) -> Json<Vec<VrfInfo>> {
    Json(s.ctl.vrfs())
}

#[utoipa::path(get, path = "/routes", tag = "routing", params(RouteFilter),
    responses((status = 200, body = [RouteInfo]), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody)))]
async fn routes(
    State(s): State<AppState>,
    q: Result<Query<RouteFilter>, QueryRejection>,
) -> ApiResult<Json<Vec<RouteInfo>>> {
    let Query(q) = q.map_err(query_err)?;
    Ok(Json(s.ctl.routes(q.vrf.as_deref())))
}

#[utoipa::path(post, path = "/routes", tag = "routing", request_body = RouteSpec,
    responses((status = 201, body = RouteInfo), (status = 400, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
async fn add_route(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<RouteInfo>)> {
    let spec: RouteSpec = object(body)?;
    let r = s.ctl.add_route(&spec)?;
    Ok((StatusCode::CREATED, Json(r)))
}

#[utoipa::path(delete, path = "/routes", tag = "routing", params(RouteKey),
    responses((status = 204, description = "deleted"), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn del_route(
    State(s): State<AppState>,
    q: Result<Query<RouteKey>, QueryRejection>,
) -> ApiResult<StatusCode> {
    let Query(k) = q.map_err(query_err)?;
    s.ctl.del_route(&k)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/neighbors", tag = "routing",
    responses((status = 200, body = [NeighborInfo]), (status = 401, body = ErrorBody)))]
async fn neighbors(State(s): State<AppState>) -> ApiResult<Json<Vec<NeighborInfo>>> {
    let ctl = s.ctl.clone();
    blocking(move || ctl.neighbors()).await.map(Json)
}

#[utoipa::path(get, path = "/tunnels", tag = "tunnels",
    responses((status = 200, body = [TunnelInfo]), (status = 401, body = ErrorBody)))]
async fn tunnels(State(s): State<AppState>) -> Json<Vec<TunnelInfo>> {
    Json(s.ctl.tunnels())
}

#[utoipa::path(get, path = "/tunnels/{name}", tag = "tunnels",
    params(("name" = String, Path, description = "Tunnel name")),
    responses((status = 200, body = TunnelInfo), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 401, body = ErrorBody)))]
async fn tunnel(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<TunnelInfo>> {
    let Path(name) = name.map_err(path_err)?;
    s.ctl
        .tunnels()
        .into_iter()
        .find(|t| t.name == name)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("name", format!("no tunnel \"{name}\"")))
}

/// Creates a tunnel live. `kind = "ipsec"` takes the file's IPsec keys:
/// static SAs in `sa` (keys from `key_file` or inline hex `key`, never
/// echoed) or IKEv2 in `ike` (the tunnel starts negotiating, or waits as
/// responder, at once).
#[utoipa::path(post, path = "/tunnels", tag = "tunnels", request_body = TunnelSpec,
    responses((status = 201, description = "created (the answer never holds key material)", body = TunnelInfo),
              (status = 400, description = "invalid; `field` names the offending key, e.g. `sa[1].spi` or `ike.psk_file`", body = ErrorBody),
              (status = 409, description = "name or inbound SPI in use, or a build without live tunnels", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn add_tunnel(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<TunnelInfo>)> {
    let spec: TunnelSpec = object(body)?;
    let ctl = s.ctl.clone();
    let sp = spec.clone();
    blocking(move || ctl.add_tunnel(&sp)).await??;
    s.ctl
        .tunnels()
        .into_iter()
        .find(|t| t.name == spec.name)
        .map(|t| (StatusCode::CREATED, Json(t)))
        .ok_or_else(|| ApiError::new(500, "tunnel vanished after creation", None))
}

/// Deletes a tunnel live. An IKEv2-keyed ipsec tunnel first deletes its
/// IKE SA with the peer (INFORMATIONAL, RFC 7296 §1.4.1); an ipsec
/// tunnel's SAs are removed with it.
#[utoipa::path(delete, path = "/tunnels/{name}", tag = "tunnels",
    params(("name" = String, Path, description = "Tunnel name")),
    responses((status = 204, description = "deleted"), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "a route goes through the tunnel: delete it first", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn del_tunnel(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(name) = name.map_err(path_err)?;
    let ctl = s.ctl.clone();
    blocking(move || ctl.del_tunnel(&name)).await??;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/sas", tag = "tunnels",
    responses((status = 200, description = "IPsec SAs (never key material)", body = [SaInfo]),
              (status = 401, body = ErrorBody)))]
async fn sas(State(s): State<AppState>) -> Json<Vec<SaInfo>> {
    Json(s.ctl.sas())
}

#[utoipa::path(post, path = "/sas", tag = "tunnels", request_body = SaSpec,
    responses((status = 201, description = "installed (the answer never holds the key)", body = SaInfo),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "SPI in use, IKE-keyed tunnel, or no IPsec on this gateway", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn add_sa(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<SaInfo>)> {
    let spec: SaSpec = object(body)?;
    // Reads a key file: off the async thread.
    let ctl = s.ctl.clone();
    let info = blocking(move || ctl.add_sa(&spec)).await??;
    Ok((StatusCode::CREATED, Json(info)))
}

#[utoipa::path(delete, path = "/sas/{spi}", tag = "tunnels",
    params(("spi" = String, Path, description = "Inbound SPI, hex (0x1001) or decimal")),
    responses((status = 204, description = "removed"), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn del_sa(
    State(s): State<AppState>,
    spi: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    let Path(spi) = spi.map_err(path_err)?;
    let spi = parse_spi(&spi)
        .ok_or_else(|| ApiError::bad("spi", format!("spi \"{spi}\" is not a 32-bit number")))?;
    s.ctl.del_sa(spi)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/tunnels/{name}/switch", tag = "tunnels",
    params(("name" = String, Path, description = "ipsec tunnel name")),
    request_body = SaSwitch,
    responses((status = 200, body = SaSwitched), (status = 400, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 409, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn switch_sa(
    State(s): State<AppState>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Json<SaSwitched>> {
    let Path(name) = name.map_err(path_err)?;
    let spec: SaSwitch = object(body)?;
    let ctl = s.ctl.clone();
    blocking(move || ctl.switch_sa(&name, &spec))
        .await?
        .map(Json)
}

#[utoipa::path(get, path = "/ike", tag = "tunnels",
    responses((status = 200, description = "IKEv2 tunnels with their IKE and child SAs: state, algorithms, SPIs, lifetimes, rekey counts (never keys)", body = [IkeTunnelInfo]),
              (status = 401, body = ErrorBody)))]
async fn ike(State(s): State<AppState>) -> Json<Vec<IkeTunnelInfo>> {
    Json(s.ctl.ike())
}

#[utoipa::path(get, path = "/ha", tag = "ha",
    responses((status = 200, description = "VRRP virtual routers (RFC 5798): state, priorities, master, last transition, tracked links, advert counters", body = [HaGroupInfo]),
              (status = 401, body = ErrorBody)))]
async fn ha(State(s): State<AppState>) -> ApiResult<Json<Vec<HaGroupInfo>>> {
    let ctl = s.ctl.clone();
    blocking(move || ctl.ha()).await.map(Json)
}

/// Longest preemption hold a switchover may ask for.
const MAX_HOLD_SECS: u64 = 86_400;
/// Preemption hold when the request names none.
const DEFAULT_HOLD_SECS: u64 = 60;

#[utoipa::path(post, path = "/ha/switchover", tag = "ha", request_body = HaSwitchover,
    responses((status = 200, description = "The virtual routers that resigned (sent priority 0, now backup); the peer takes over after its Skew_Time", body = [HaGroupInfo]),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "this gateway is master of none of them", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn ha_switchover(
    State(s): State<AppState>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Vec<HaGroupInfo>>> {
    // No body: every group this gateway is master of.
    let mut spec: HaSwitchover = if body.iter().all(u8::is_ascii_whitespace) {
        HaSwitchover::default()
    } else {
        let v: serde_json::Value = serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad("body", format!("body: {e}")))?;
        object(Ok(Json(v)))?
    };
    if spec.vrid == Some(0) {
        return Err(ApiError::bad("vrid", "vrid must be 1..=255"));
    }
    let hold = spec.hold_secs.unwrap_or(DEFAULT_HOLD_SECS);
    if hold > MAX_HOLD_SECS {
        return Err(ApiError::bad(
            "hold_secs",
            format!("hold_secs = {hold} is out of range (expected 0..={MAX_HOLD_SECS})"),
        ));
    }
    spec.hold_secs = Some(hold);
    let ctl = s.ctl.clone();
    blocking(move || ctl.ha_switchover(&spec)).await?.map(Json)
}

#[utoipa::path(get, path = "/counters", tag = "observability",
    responses((status = 200, body = CountersInfo), (status = 401, body = ErrorBody)))]
async fn counters(State(s): State<AppState>) -> Json<CountersInfo> {
    let sum = s.ctl.counters();
    Json(CountersInfo {
        workers: s.ctl.workers() as u64,
        interfaces: s
            .ctl
            .interface_counters()
            .into_iter()
            .map(|(interface, p)| InterfaceCounters {
                interface,
                counters: InterfaceTraffic::from(&p),
            })
            .collect(),
        tunnels: s.ctl.tunnel_counters(),
        nodes: sum
            .nodes
            .iter()
            .map(|n| NodeCounters {
                node: n.name.clone(),
                vectors: n.vectors,
                packets: n.packets,
                drops: n
                    .errors
                    .iter()
                    .map(|(r, c)| DropCount {
                        reason: r.clone(),
                        count: *c,
                    })
                    .collect(),
            })
            .collect(),
    })
}

#[utoipa::path(get, path = "/metrics", tag = "observability",
    responses((status = 200, description = "Prometheus / OpenMetrics text", body = String,
               content_type = "text/plain"),
              (status = 401, body = ErrorBody)))]
async fn metrics(State(s): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        crate::metrics::render(&s.ctl),
    )
        .into_response()
}

#[utoipa::path(get, path = "/config", tag = "gateway",
    responses((status = 200, description = "The running configuration as TOML; fed to `vecgate run` it reproduces this state",
               body = String, content_type = "application/toml"),
              (status = 401, body = ErrorBody)))]
async fn config(State(s): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/toml"),
        )],
        s.ctl.config().to_toml(),
    )
        .into_response()
}

/// Live reload: the body is a whole configuration file (TOML), validated
/// whole (400 naming each error's line, nothing applied), then the
/// difference from the running configuration is applied through the same
/// steps as the other live changes. A change only a restart can apply
/// (workers, an interface's netdev or driver, `[gateway]`, `[routing]`,
/// `[ha]`) refuses the whole reload with 409 "needs a restart: …".
/// `?dry_run=true` only returns the plan. The spec also names `text/plain`
/// so that generic OpenAPI clients (and schemathesis) can send a body.
#[utoipa::path(post, path = "/config", tag = "gateway", params(ReloadQuery),
    request_body(description = "The new configuration file (TOML; any text media type is read as TOML)",
                 content((String = "application/toml"), (String = "text/plain"))),
    responses((status = 200, description = "The plan; `applied` says whether it was applied", body = ReloadPlan),
              (status = 400, description = "invalid configuration: every error with its line", body = ErrorBody),
              (status = 409, description = "a change needs a restart, or a live step was refused (nothing applied)", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn reload(
    State(s): State<AppState>,
    q: Result<Query<ReloadQuery>, QueryRejection>,
    body: String,
) -> ApiResult<Json<ReloadPlan>> {
    let Query(q) = q.map_err(query_err)?;
    let new = vecgate_config::parse(&body).map_err(|diags| {
        let lines: Vec<String> = diags.iter().map(|d| d.to_string()).collect();
        ApiError::bad(
            "config",
            format!(
                "the new configuration has {} error(s), nothing applied: {}",
                diags.len(),
                lines.join("; ")
            ),
        )
    })?;
    let ctl = s.ctl.clone();
    let dry = q.dry_run.unwrap_or(false);
    blocking(move || ctl.reload(new, dry)).await?.map(Json)
}

#[utoipa::path(get, path = "/trace", tag = "observability",
    responses((status = 200, body = TraceInfo), (status = 401, body = ErrorBody)))]
async fn trace_get(State(s): State<AppState>) -> ApiResult<Json<TraceInfo>> {
    let ctl = s.ctl.clone();
    blocking(move || TraceInfo {
        lines: ctl.trace_lines(),
    })
    .await
    .map(Json)
}

#[utoipa::path(post, path = "/trace", tag = "observability", request_body = TraceArm,
    responses((status = 202, body = TraceArmed), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn trace_arm(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<TraceArmed>)> {
    let a: TraceArm = object(body)?;
    if !(1..=10_000).contains(&a.count) {
        return Err(ApiError::bad(
            "count",
            format!("count = {} is out of range (expected 1..=10000)", a.count),
        ));
    }
    let workers = s.ctl.trace_arm(a.count as usize) as u64;
    Ok((
        StatusCode::ACCEPTED,
        Json(TraceArmed {
            count: a.count,
            workers,
        }),
    ))
}

#[utoipa::path(delete, path = "/trace", tag = "observability",
    responses((status = 204, description = "cleared"), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
async fn trace_clear(State(s): State<AppState>) -> ApiResult<StatusCode> {
    let ctl = s.ctl.clone();
    blocking(move || ctl.trace_clear()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/capture", tag = "observability", request_body = CaptureSpec,
    responses((status = 200, description = "A pcap file (Ethernet) of the captured frames",
               body = Vec<u8>, content_type = "application/vnd.tcpdump.pcap"),
              (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn capture(
    State(s): State<AppState>,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> ApiResult<Response> {
    let c: CaptureSpec = object(body)?;
    let ms = c.timeout_ms.unwrap_or(10_000);
    if !(1..=60_000).contains(&ms) {
        return Err(ApiError::bad(
            "timeout_ms",
            format!("timeout_ms = {ms} is out of range (expected 1..=60000)"),
        ));
    }
    let ctl = s.ctl.clone();
    let pcap =
        blocking(move || ctl.capture(&c.interface, c.count, Duration::from_millis(ms))).await??;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/vnd.tcpdump.pcap"),
        )],
        pcap,
    )
        .into_response())
}

async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        ApiDoc::openapi().to_pretty_json().unwrap_or_default(),
    )
        .into_response()
}

/// Declares the bearer scheme (required on TCP endpoints).
struct BearerAddon;

impl Modify for BearerAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let comps = openapi.components.get_or_insert_with(Default::default);
        comps.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The OpenAPI 3 document.
#[derive(OpenApi)]
#[openapi(
    info(title = "vecgate management API", description = "Interfaces, VRFs, routes, neighbours, tunnels, SAs, VRRP (HA), the pool, counters, trace and capture of a vecgate gateway. On a TCP endpoint every request needs a bearer token; the read-only token may only GET."),
    paths(status, interfaces, add_interface, del_interface, interface, patch_interface, vrfs, routes, add_route,
          del_route, neighbors, tunnels, tunnel, add_tunnel, del_tunnel, switch_sa, sas, add_sa,
          del_sa, ike, ha, ha_switchover, pool::pool, pool::add_connection, pool::del_connection,
          pool::drain, pool::rebalance, counters, metrics,
          config, reload, trace_get, trace_arm, trace_clear, capture),
    // The element of `TunnelSpec.sa` (a generic argument: not collected).
    components(schemas(TunnelSaSpec)),
    modifiers(&BearerAddon),
    security(("bearer" = []))
)]
pub struct ApiDoc;

/// Rejects requests the token does not allow (nothing runs for them).
async fn authorize(State(s): State<AppState>, req: Request, next: Next) -> Response {
    // The API's own description is public: clients fetch it to learn
    // how to authenticate.
    if req.uri().path() == "/openapi.json" {
        return next.run(req).await;
    }
    let writes = !matches!(*req.method(), Method::GET | Method::HEAD);
    let h = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    match s.auth.check(h, writes) {
        Verdict::Allow => next.run(req).await,
        Verdict::Unauthenticated => {
            // Every failure costs its sender time (a timer: other requests
            // go on); over budget, more, with Retry-After.
            let source = req
                .extensions()
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|c| c.0.ip());
            drop(req);
            let over = s.throttle.fail(source);
            s.throttle.delay(over).await;
            let mut r = ApiError::new(401, "missing or wrong bearer token", Some("Authorization"))
                .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"vecgate\""),
            );
            if over {
                let secs = crate::auth::THROTTLED_DELAY.as_secs().max(1);
                if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                    r.headers_mut().insert(header::RETRY_AFTER, v);
                }
            }
            r
        }
        Verdict::Forbidden => ApiError::new(
            403,
            "the read-only token may only read (GET)",
            Some("Authorization"),
        )
        .into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::new(404, "no such resource (see GET /openapi.json)", None)
}

/// The whole API.
pub fn router(ctl: Arc<Control>, auth: Auth) -> Router {
    let st = AppState {
        throttle: Arc::new(Throttle::new(ctl.auth_stats().clone())),
        ctl,
        auth: Arc::new(auth),
    };
    Router::new()
        .route("/openapi.json", get(openapi_json))
        .route("/status", get(status))
        .route("/interfaces", get(interfaces).post(add_interface))
        .route(
            "/interfaces/{name}",
            get(interface).patch(patch_interface).delete(del_interface),
        )
        .route("/vrfs", get(vrfs))
        .route("/routes", get(routes).post(add_route).delete(del_route))
        .route("/neighbors", get(neighbors))
        .route("/tunnels", get(tunnels).post(add_tunnel))
        .route("/tunnels/{name}", get(tunnel).delete(del_tunnel))
        .route("/sas", get(sas).post(add_sa))
        .route("/sas/{spi}", axum::routing::delete(del_sa))
        .route("/tunnels/{name}/switch", axum::routing::post(switch_sa))
        .route("/ha", get(ha))
        .route("/ha/switchover", axum::routing::post(ha_switchover))
        .route("/pool", get(pool::pool))
        .route(
            "/pool/connections",
            axum::routing::post(pool::add_connection),
        )
        .route(
            "/pool/connections/{id}",
            axum::routing::delete(pool::del_connection),
        )
        .route("/pool/drain", axum::routing::post(pool::drain))
        .route("/pool/rebalance", axum::routing::post(pool::rebalance))
        .route("/ike", get(ike))
        .route("/counters", get(counters))
        .route("/metrics", get(metrics))
        .route("/config", get(config).post(reload))
        .route("/trace", get(trace_get).post(trace_arm).delete(trace_clear))
        .route("/capture", axum::routing::post(capture))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(st.clone(), authorize))
        .layer(axum::extract::DefaultBodyLimit::max(1 << 20))
        .with_state(st)
}
