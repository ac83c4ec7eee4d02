//! Access control. On a unix socket the file's permissions decide (0660,
//! root); on TCP every request needs `Authorization: Bearer TOKEN`: the
//! admin token may do anything, the read-only token only GET/HEAD (403
//! otherwise); a missing or wrong token is 401 (RFC 6750 §3.1). Tokens are
//! compared in constant time, never logged, and zeroized when dropped.

use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// Longest token file accepted.
pub const MAX_TOKEN_LEN: usize = 4096;

/// A bearer token (zeroized on drop; `Debug` does not show it).
pub struct Token(Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A token from its text; surrounding whitespace (a trailing newline
    /// in the file) is not part of it. Empty tokens are refused.
    pub fn new(text: &[u8]) -> Option<Token> {
        let t = text.trim_ascii();
        (!t.is_empty() && t.len() <= MAX_TOKEN_LEN).then(|| Token(Zeroizing::new(t.to_vec())))
    }

    /// Reads a token file.
    pub fn from_file(path: &std::path::Path) -> Result<Token, String> {
        use std::io::Read;
        let f =
            std::fs::File::open(path).map_err(|e| format!("token file {}: {e}", path.display()))?;
        let mut buf = Zeroizing::new(Vec::new());
        f.take(MAX_TOKEN_LEN as u64 + 2)
            .read_to_end(&mut buf)
            .map_err(|e| format!("token file {}: {e}", path.display()))?;
        Token::new(&buf).ok_or_else(|| {
            format!(
                "token file {}: empty or longer than {MAX_TOKEN_LEN} bytes",
                path.display()
            )
        })
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

    #[test]
    fn bearer_rules() {
        let a = Auth::Bearer {
            admin: Token::new(b"adm1n\n").unwrap(),
            readonly: Token::new(b"r3ad"),
        };
        assert_eq!(a.check(Some(b"Bearer adm1n"), true), Verdict::Allow);
        assert_eq!(a.check(Some(b"bearer adm1n"), false), Verdict::Allow);
        assert_eq!(a.check(Some(b"Bearer r3ad"), false), Verdict::Allow);
        assert_eq!(a.check(Some(b"Bearer r3ad"), true), Verdict::Forbidden);
        assert_eq!(
            a.check(Some(b"Bearer adm1"), false),
            Verdict::Unauthenticated
        );
        assert_eq!(
            a.check(Some(b"Basic adm1n"), false),
            Verdict::Unauthenticated
        );
        assert_eq!(a.check(None, false), Verdict::Unauthenticated);
        assert_eq!(Auth::None.check(None, true), Verdict::Allow);
        assert!(Token::new(b" \n").is_none());
        assert_eq!(format!("{:?}", Token::new(b"secret").unwrap()), "Token(..)");
    }
}
