//! A small blocking HTTP/1.1 client for the management API over a unix
//! socket or TCP (TLS with rustls when a CA is given; plain HTTP only for
//! a gateway that allows it on loopback): one request per connection
//! (`Connection: close`), Content-Length or chunked responses, bounded in
//! size.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use vecgate_config::ApiEndpoint;
use zeroize::Zeroizing;

/// Largest response accepted (a capture of 10 000 super-packets fits).
const MAX_RESPONSE: u64 = 1 << 30;

/// Where and how to reach the daemon.
pub struct Client {
    pub endpoint: ApiEndpoint,
    token: Option<Zeroizing<String>>,
    /// TLS for a TCP endpoint (the server is checked against these roots).
    tls: Option<Arc<rustls::ClientConfig>>,
    pub timeout: Duration,
}

/// A TLS client configuration trusting the PEM certificates of `ca_file`
/// (a CA, or the gateway's own self-signed certificate).
pub fn tls_config(ca_file: &Path) -> Result<Arc<rustls::ClientConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let what = |e: &dyn std::fmt::Display| format!("CA file {}: {e}", ca_file.display());
    let mut pem = Vec::new();
    std::fs::File::open(ca_file)
        .map_err(|e| what(&e))?
        .take(1 << 20)
        .read_to_end(&mut pem)
        .map_err(|e| what(&e))?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(&pem) {
        roots.add(c.map_err(|e| what(&e))?).map_err(|e| what(&e))?;
    }
    if roots.is_empty() {
        return Err(what(&"no PEM certificate in it"));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| what(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// A response: status, content type, body.
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The server's `error` message, or the body.
    pub fn error_message(&self) -> String {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| {
                let e = v.get("error")?.as_str()?.to_owned();
                Some(match v.get("field").and_then(|f| f.as_str()) {
                    Some(f) => format!("{e} (field \"{f}\")"),
                    None => e,
                })
            })
            .unwrap_or_else(|| self.text())
    }
}

fn connect_error(what: &str, e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        NotFound => format!("cannot connect to {what}: no such file — is `vecgate run` running?"),
        ConnectionRefused => {
            format!("cannot connect to {what}: connection refused — is `vecgate run` running?")
        }
        PermissionDenied => format!(
            "cannot connect to {what}: permission denied — run as root or as a member of the socket's group"
        ),
        _ => format!("cannot connect to {what}: {e}"),
    }
}

trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

impl Client {
    /// A client of `endpoint`; `ca_file` makes a TCP endpoint TLS.
    pub fn new(
        endpoint: ApiEndpoint,
        token_file: Option<&Path>,
        ca_file: Option<&Path>,
    ) -> Result<Client, String> {
        let tls = match (&endpoint, ca_file) {
            (ApiEndpoint::Tcp(_), Some(ca)) => Some(tls_config(ca)?),
            _ => None,
        };
        let token = match token_file {
            Some(p) => {
                // The same rules as the daemon's: a private regular file.
                let t = vecgate_config::secret::read_secret_file(
                    p,
                    vecgate_config::secret::MAX_SECRET_LEN,
                )
                .map_err(|e| format!("token file {}: {e}", p.display()))?;
                let t = std::str::from_utf8(&t)
                    .map_err(|_| format!("token file {}: not text", p.display()))?;
                Some(Zeroizing::new(t.trim().to_owned()))
            }
            None => None,
        };
        Ok(Client {
            endpoint,
            token,
            tls,
            timeout: Duration::from_secs(30),
        })
    }

    fn open(&self) -> Result<Box<dyn Stream>, String> {
        match &self.endpoint {
            ApiEndpoint::Unix(p) => {
                let s = UnixStream::connect(p)
                    .map_err(|e| connect_error(&p.display().to_string(), &e))?;
                let _ = s.set_read_timeout(Some(self.timeout));
                let _ = s.set_write_timeout(Some(self.timeout));
                Ok(Box::new(s))
            }
            ApiEndpoint::Tcp(a) => {
                let s = std::net::TcpStream::connect_timeout(a, Duration::from_secs(5))
                    .map_err(|e| connect_error(&a.to_string(), &e))?;
                let _ = s.set_read_timeout(Some(self.timeout));
                let _ = s.set_write_timeout(Some(self.timeout));
                match &self.tls {
                    None => Ok(Box::new(s)),
                    Some(cfg) => {
                        // The certificate must name the address dialled.
                        let name = rustls::pki_types::ServerName::from(a.ip());
                        let conn = rustls::ClientConnection::new(cfg.clone(), name)
                            .map_err(|e| format!("TLS to {a}: {e}"))?;
                        Ok(Box::new(rustls::StreamOwned::new(conn, s)))
                    }
                }
            }
        }
    }

    /// Sends one request; `body` is JSON.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> Result<Response, String> {
        self.request_typed(method, path, body, "application/json")
    }

    /// Sends one request with a body of `content_type`.
    pub fn request_typed(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        content_type: &str,
    ) -> Result<Response, String> {
        let mut s = self.open()?;
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: vecgate\r\nConnection: close\r\n");
        if let Some(t) = &self.token {
            req.push_str(&format!("Authorization: Bearer {}\r\n", t.as_str()));
        }
        let b = body.unwrap_or("");
        if body.is_some() {
            req.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{b}", b.len()));
        let req = Zeroizing::new(req);
        s.write_all(req.as_bytes())
            .map_err(|e| format!("sending to {}: {e}", self.endpoint))?;
        let mut raw = Vec::new();
        s.take(MAX_RESPONSE)
            .read_to_end(&mut raw)
            .map_err(|e| format!("reading from {}: {e}", self.endpoint))?;
        parse_response(&raw).map_err(|e| format!("bad response from {}: {e}", self.endpoint))
    }

    /// GET `path`, expecting 2xx; errors carry the server's message.
    pub fn get(&self, path: &str) -> Result<Response, String> {
        self.ok(self.request("GET", path, None)?)
    }

    pub fn ok(&self, r: Response) -> Result<Response, String> {
        if (200..300).contains(&r.status) {
            Ok(r)
        } else {
            Err(format!("HTTP {}: {}", r.status, r.error_message()))
        }
    }
}

fn find(h: &[u8], needle: &[u8]) -> Option<usize> {
    h.windows(needle.len()).position(|w| w == needle)
}

/// Parses a whole HTTP/1.1 response.
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = find(raw, b"\r\n\r\n").ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut content_type = String::new();
    let mut length = None;
    let mut chunked = false;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = v.to_owned(),
            "content-length" => length = v.parse::<usize>().ok(),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = length {
        rest.get(..n)
            .ok_or("body shorter than Content-Length")?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        content_type,
        body,
    })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let e = find(b, b"\r\n").ok_or("truncated chunk size")?;
        let size_s = std::str::from_utf8(&b[..e]).map_err(|_| "bad chunk size")?;
        let size = usize::from_str_radix(size_s.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| "bad chunk size")?;
        b = &b[e + 2..];
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(b.get(..size).ok_or("truncated chunk")?);
        b = b.get(size + 2..).ok_or("truncated chunk")?;
    }
}

/// The only `*.sock` under /run/vecgate, if exactly one.
pub fn default_socket(dir: &Path) -> Result<PathBuf, String> {
    let mut socks: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "sock"))
                .collect()
        })
        .unwrap_or_default();
    socks.sort();
    match socks.len() {
        0 => Err(format!(
            "no API socket in {} — is `vecgate run` running? (or pass --api / --config)",
            dir.display()
        )),
        1 => Ok(socks.remove(0)),
        _ => Err(format!(
            "several gateways in {} ({}): pick one with --api unix:PATH or --config FILE",
            dir.display(),
            socks
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_length_and_chunked() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: a/b\r\n\r\nhixx",
        )
        .unwrap();
        assert_eq!(
            (r.status, r.body.as_slice(), r.content_type.as_str()),
            (200, &b"hi"[..], "a/b")
        );
        let r = parse_response(b"HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"abcde"[..]));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhi").is_err());
        assert!(parse_response(b"garbage").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
