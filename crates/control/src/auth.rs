//! Access control. On a unix socket the file's permissions decide (0660,
//! root); on TCP every request needs `Authorization: Bearer TOKEN`: the
//! admin token may do anything, the read-only token only GET/HEAD (403
//! otherwise); a missing or wrong token is 401 (RFC 6750 §3.1). Tokens are
//! compared in constant time, never logged, and zeroized when dropped.

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Longest token file accepted.
pub const MAX_TOKEN_LEN: usize = vecgate_config::secret::MAX_SECRET_LEN;
/// Shortest token accepted: 32 bytes (e.g. `openssl rand -hex 16` gives
/// 32 characters) leave nothing to guess within any throttled rate.
pub const MIN_TOKEN_LEN: usize = 32;

/// A bearer token (zeroized on drop; `Debug` does not show it).
pub struct Token(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A token from its text; surrounding whitespace (a trailing newline
    /// in the file) is not part of it. Tokens shorter than
    /// [`MIN_TOKEN_LEN`] are refused with the reason.
    pub fn new(text: &[u8]) -> Result<Token, String> {
        let t = text.trim_ascii();
        if t.len() < MIN_TOKEN_LEN {
            return Err(format!(
                "the token is {} bytes: at least {MIN_TOKEN_LEN} are needed (e.g. openssl rand -hex 32)",
                t.len()
            ));
        }
        if t.len() > MAX_TOKEN_LEN {
            return Err(format!("the token is longer than {MAX_TOKEN_LEN} bytes"));
        }
        if !t.iter().all(|b| b.is_ascii_graphic()) {
            return Err(
                "the token must be printable ASCII without spaces (it travels in an HTTP header)"
                    .into(),
            );
        }
        Ok(Token(Zeroizing::new(t.to_vec())))
    }

    /// Reads a token file: a regular file that neither group nor others
    /// may read ([`vecgate_config::secret`]), holding a token
    /// [`Token::new`] accepts. Errors name the file and the reason.
    pub fn from_file(path: &std::path::Path) -> Result<Token, String> {
        let buf = vecgate_config::secret::read_secret_file(path, MAX_TOKEN_LEN)
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        Token::new(&buf).map_err(|e| format!("token file {}: {e}", path.display()))
    }

    /// Constant-time comparison (length leaks, content does not).
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.as_slice().ct_eq(presented).into()
    }
}

/// Who may do what.
#[derive(Debug)]
pub enum Auth {
    /// No tokens (unix socket: the socket's permissions decide).
    None,
    /// Bearer tokens required.
    Bearer {
        admin: Token,
        readonly: Option<Token>,
    },
}

/// The outcome of checking a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// 401: no or wrong token.
    Unauthenticated,
    /// 403: the read-only token on a write.
    Forbidden,
}

impl Auth {
    /// Checks the `Authorization` header value for a request that `writes`.
    pub fn check(&self, header: Option<&[u8]>, writes: bool) -> Verdict {
        let Auth::Bearer { admin, readonly } = self else {
            return Verdict::Allow;
        };
        let Some(token) = header.and_then(|h| {
            let h = h.trim_ascii();
            (h.len() > 7 && h[..7].eq_ignore_ascii_case(b"bearer ")).then(|| h[7..].trim_ascii())
        }) else {
            return Verdict::Unauthenticated;
        };
        // Evaluate both comparisons so timing does not tell which matched.
        let is_admin = admin.matches(token);
        let is_ro = readonly.as_ref().is_some_and(|r| r.matches(token));
        if is_admin {
            Verdict::Allow
        } else if is_ro {
            if writes {
                Verdict::Forbidden
            } else {
                Verdict::Allow
            }
        } else {
            Verdict::Unauthenticated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &[u8] = b"adm1n-0123456789abcdef0123456789abcdef";
    const RO: &[u8] = b"r3ad-0123456789abcdef0123456789abcdef";

    fn bearer(t: &[u8]) -> Vec<u8> {
        [&b"Bearer "[..], t].concat()
    }

    #[test]
    fn bearer_rules() {
        let a = Auth::Bearer {
            admin: Token::new(&[ADMIN, b"\n"].concat()).unwrap(),
            readonly: Token::new(RO).ok(),
        };
        assert_eq!(a.check(Some(&bearer(ADMIN)), true), Verdict::Allow);
        let lower = [&b"bearer "[..], ADMIN].concat();
        assert_eq!(a.check(Some(&lower), false), Verdict::Allow);
        assert_eq!(a.check(Some(&bearer(RO)), false), Verdict::Allow);
        assert_eq!(a.check(Some(&bearer(RO)), true), Verdict::Forbidden);
        assert_eq!(
            a.check(Some(&bearer(&ADMIN[..ADMIN.len() - 1])), false),
            Verdict::Unauthenticated
        );
        let basic = [&b"Basic "[..], ADMIN].concat();
        assert_eq!(a.check(Some(&basic), false), Verdict::Unauthenticated);
        assert_eq!(a.check(None, false), Verdict::Unauthenticated);
        assert_eq!(Auth::None.check(None, true), Verdict::Allow);
        assert_eq!(format!("{:?}", Token::new(ADMIN).unwrap()), "Token(..)");
    }

    #[test]
    fn short_and_odd_tokens_are_refused() {
        assert!(Token::new(b" \n").is_err());
        let short = Token::new(b"secret").unwrap_err();
        assert!(
            short.contains("6 bytes") && short.contains("at least 32"),
            "{short}"
        );
        assert!(Token::new(&[b'a'; 31]).is_err());
        assert!(Token::new(&[b'a'; 32]).is_ok());
        assert!(Token::new(b"0123456789abcdef 0123456789abcdef").is_err());
    }

    #[test]
    fn token_files_must_be_private() {
        use std::os::unix::fs::PermissionsExt;
        let p = std::env::temp_dir().join(format!("vg-token-{}", std::process::id()));
        std::fs::write(&p, [ADMIN, b"\n"].concat()).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::from_file(&p).unwrap_err();
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Token::from_file(&p).unwrap().matches(ADMIN));
        std::fs::write(&p, b"short\n").unwrap();
        assert!(Token::from_file(&p).unwrap_err().contains("at least 32"));
        let _ = std::fs::remove_file(&p);
    }
}
