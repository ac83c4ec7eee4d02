//! Runs the API on its own thread with a small tokio runtime, on a unix
//! socket (created 0660, stale socket replaced, removed at shutdown) or a
//! TCP listener: TLS (rustls, aws-lc-rs) unless plain HTTP was allowed on
//! a loopback address. TCP connections are capped in number, handshakes
//! and request headers in time.

use crate::api::router;
use crate::auth::Auth;
use crate::state::Control;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
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
/// the same API must not touch the first one's interfaces or ingress
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

/// Largest certificate chain file read.
const MAX_CERT_FILE: u64 = 64 << 10;
/// TCP connections served at once (more are closed at accept).
const MAX_CONNECTIONS: usize = 256;
/// Time a client has for its TLS handshake, and for a request's headers.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The TCP API's TLS server configuration (RFC 8446; TLS 1.2 too).
#[derive(Clone)]
pub struct Tls(Arc<rustls::ServerConfig>);

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

impl Tls {
    /// Loads a PEM certificate chain and its PEM private key (a secret
    /// file: private, regular, at most 4 KiB). Errors name the file.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Tls, String> {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        use std::io::Read;
        let what = |e: &dyn std::fmt::Display| format!("api_tls_cert_file {}: {e}", cert.display());
        let mut pem = Vec::new();
        std::fs::File::open(cert)
            .map_err(|e| what(&e))?
            .take(MAX_CERT_FILE + 1)
            .read_to_end(&mut pem)
            .map_err(|e| what(&e))?;
        if pem.len() as u64 > MAX_CERT_FILE {
            return Err(what(&format!("larger than {MAX_CERT_FILE} bytes")));
        }
        let chain = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| what(&e))?;
        if chain.is_empty() {
            return Err(what(&"no PEM certificate in it"));
        }
        let kwhat = |e: &dyn std::fmt::Display| format!("api_tls_key_file {}: {e}", key.display());
        let text =
            vecgate_config::secret::read_secret_file(key, vecgate_config::secret::MAX_SECRET_LEN)
                .map_err(|e| kwhat(&e))?;
        let pk = PrivateKeyDer::from_pem_slice(&text).map_err(|e| kwhat(&e))?;
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| what(&e))?
            .with_no_client_auth()
            .with_single_cert(chain, pk)
            .map_err(|e| format!("api_tls_cert_file / api_tls_key_file: {e}"))?;
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls(Arc::new(cfg)))
    }
}

/// Serves one accepted connection (HTTP/1.1), the peer's address given to
/// the handlers as [`axum::extract::ConnectInfo`] (401 throttling).
async fn serve_conn<S>(stream: S, app: axum::Router, peer: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut r: axum::http::Request<hyper::body::Incoming>| {
            r.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            r
        })
        .service(app);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(
            hyper_util::rt::TokioIo::new(stream),
            hyper_util::service::TowerToHyperService::new(svc),
        );
    if let Err(e) = conn.await {
        tracing::debug!(%peer, "API connection: {e}");
    }
}

/// Accepts TCP connections until `stop`: TLS first when `tls` is given.
async fn serve_tcp(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
    stats: Arc<crate::auth::AuthStats>,
    stop: impl std::future::Future<Output = ()>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(stop);
    loop {
        let (tcp, peer) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors, say: wait instead of spinning.
                    tracing::warn!("API accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            continue; // over the cap: closed at once
        };
        let (app, tls, stats) = (app.clone(), tls.clone(), stats.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let _ = tcp.set_nodelay(true);
            match tls {
                None => serve_conn(tcp, app, peer).await,
                Some(acc) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acc.accept(tcp)).await {
                    Ok(Ok(s)) => serve_conn(s, app, peer).await,
                    _ => {
                        stats
                            .tls_handshake_failures
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                },
            }
        });
    }
}

/// Starts the API on `endpoint`. Binding happens before this returns, so
/// errors (address in use, bad path) are reported to the caller. A TCP
/// endpoint needs a bearer token, and TLS unless it is a loopback address
/// (the configuration's `api_insecure_loopback` asks for that).
pub fn serve(
    endpoint: &ApiEndpoint,
    ctl: Arc<Control>,
    auth: Auth,
    tls: Option<Tls>,
) -> Result<ServerHandle, String> {
    if let ApiEndpoint::Tcp(addr) = endpoint {
        if matches!(auth, Auth::None) {
            return Err("a TCP API endpoint needs a bearer token (api_token_file)".into());
        }
        if tls.is_none() && !addr.ip().is_loopback() {
            return Err(format!(
                "{addr} is not a loopback address: a TCP API there needs TLS (api_tls_cert_file, api_tls_key_file)"
            ));
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(8)
        .thread_name("vg-api-blocking")
        .build()
        .map_err(|e| format!("starting the API runtime: {e}"))?;
    let stats = ctl.auth_stats().clone();
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
            let acceptor = tls.map(|t| tokio_rustls::TlsAcceptor::from(t.0));
            let t = std::thread::Builder::new()
                .name("vg-api".into())
                .spawn(move || {
                    rt.block_on(serve_tcp(listener, app, acceptor, stats, shutdown));
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
