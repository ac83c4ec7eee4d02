//! Runs the API on its own thread with a small tokio runtime, on a unix
//! socket (created 0660, stale socket replaced, removed at shutdown) or a
//! TCP listener.

use crate::api::router;
use crate::auth::Auth;
use crate::state::Control;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vecgate_config::ApiEndpoint;

/// The running server; [`ServerHandle::shutdown`] (or drop) stops it and
/// removes the socket file.
pub struct ServerHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    socket: Option<PathBuf>,
    /// Where it listens (the bound port for `tcp:…:0`).
    pub endpoint: ApiEndpoint,
}

impl ServerHandle {
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = self.socket.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// Prepares a unix socket path: the parent directory exists, a stale
/// socket is removed, a live one (another daemon) or a non-socket is an
/// error.
fn prepare_socket(path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(format!(
                    "{} is in use by a running process (another vecgate?)",
                    path.display()
                ));
            }
            std::fs::remove_file(path)
                .map_err(|e| format!("removing stale socket {}: {e}", path.display()))
        }
        Ok(_) => Err(format!(
            "{} exists and is not a socket; not replacing it",
            path.display()
        )),
        Err(_) => Ok(()),
    }
}

/// Checks, before a gateway attaches to anything, that `endpoint` is free:
/// a unix socket another process answers on, or a TCP address someone
/// listens on, is an "address in use" error (a second `vecgate run` with
/// the same API must not touch the first one's interfaces or nftables
/// guards). A stale unix socket is fine ([`serve`] replaces it).
pub fn check_endpoint(endpoint: &ApiEndpoint) -> Result<(), String> {
    match endpoint {
        ApiEndpoint::Unix(path) => {
            let live = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
                && std::os::unix::net::UnixStream::connect(path).is_ok();
            if live {
                return Err(format!(
                    "{}: address in use (another vecgate is running with this API socket)",
                    path.display()
                ));
            }
            Ok(())
        }
        ApiEndpoint::Tcp(addr) => std::net::TcpListener::bind(addr).map(drop).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                format!(
                    "{addr}: address in use (another vecgate, or another program, listens there)"
                )
            } else {
                format!("{addr}: {e}")
            }
        }),
    }
}

/// Starts the API on `endpoint`. Binding happens before this returns, so
/// errors (address in use, bad path) are reported to the caller.
pub fn serve(
    endpoint: &ApiEndpoint,
    ctl: Arc<Control>,
    auth: Auth,
) -> Result<ServerHandle, String> {
    if matches!(endpoint, ApiEndpoint::Tcp(_)) && matches!(auth, Auth::None) {
        return Err("a TCP API endpoint needs a bearer token (api_token_file)".into());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(8)
        .thread_name("vg-api-blocking")
        .build()
        .map_err(|e| format!("starting the API runtime: {e}"))?;
    let app = router(ctl, auth);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stop_rx.await;
    };
    let (socket, bound, thread) = match endpoint {
        ApiEndpoint::Unix(path) => {
            prepare_socket(path)?;
            let listener = {
                let _g = rt.enter();
                tokio::net::UnixListener::bind(path)
                    .map_err(|e| format!("binding {}: {e}", path.display()))?
            };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))
                .map_err(|e| format!("chmod {}: {e}", path.display()))?;
            let t = std::thread::Builder::new()
                .name("vg-api".into())
                .spawn(move || {
                    rt.block_on(async move {
                        if let Err(e) = axum::serve(listener, app)
                            .with_graceful_shutdown(shutdown)
                            .await
                        {
                            tracing::error!("API server: {e}");
                        }
                    })
                })
                .map_err(|e| format!("spawning the API thread: {e}"))?;
            (Some(path.clone()), endpoint.clone(), t)
        }
        ApiEndpoint::Tcp(addr) => {
            let listener = rt
                .block_on(tokio::net::TcpListener::bind(addr))
                .map_err(|e| format!("binding {addr}: {e}"))?;
            let local = listener
                .local_addr()
                .map_err(|e| format!("binding {addr}: {e}"))?;
            let t = std::thread::Builder::new()
                .name("vg-api".into())
                .spawn(move || {
                    rt.block_on(async move {
                        if let Err(e) = axum::serve(listener, app)
                            .with_graceful_shutdown(shutdown)
                            .await
                        {
                            tracing::error!("API server: {e}");
                        }
                    })
                })
                .map_err(|e| format!("spawning the API thread: {e}"))?;
            (None, ApiEndpoint::Tcp(local), t)
        }
    };
    Ok(ServerHandle {
        stop: Some(stop_tx),
        thread: Some(thread),
        socket,
        endpoint: bound,
    })
}
