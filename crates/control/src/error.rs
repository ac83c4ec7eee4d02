//! A refused request: its HTTP status, what is wrong and which request
//! field it is about (the API's `{"error": ..., "field": ...}`).

/// A refused request: HTTP status, message and the offending field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>, field: Option<&str>) -> Self {
        ApiError {
            status,
            message: message.into(),
            field: field.map(str::to_owned),
        }
    }

    pub fn bad(field: &str, message: impl Into<String>) -> Self {
        Self::new(400, message, Some(field))
    }

    pub fn not_found(field: &str, message: impl Into<String>) -> Self {
        Self::new(404, message, Some(field))
    }

    /// A configuration the validator refused (400), as a request that
    /// added or changed the object at `object` (`tunnel[3]`) sees it: the
    /// field is the diagnostic's inside that object ([`request_field`]),
    /// `fallback` when the diagnostic is about another object or the
    /// object as a whole.
    pub fn invalid(d: &vecgate_config::Diagnostic, object: Option<&str>, fallback: &str) -> Self {
        let field = object
            .and_then(|o| request_field(&d.field, o))
            .unwrap_or_else(|| fallback.to_owned());
        ApiError {
            status: 400,
            message: d.message.clone(),
            field: Some(field),
        }
    }
}

/// The request field a configuration field path names, for a request
/// about the object at `object`: the path inside that object (`local`,
/// `sa[1].spi`, `ike.psk_file`), an element of a list of values named by
/// its list (`traffic[0]` is `traffic`, as the request shapes' own
/// checks name a value they cannot parse by its element); `None` outside
/// the object, or for the object as a whole.
pub fn request_field(path: &str, object: &str) -> Option<String> {
    let inside = path.strip_prefix(object)?.strip_prefix('.')?;
    let list = inside
        .strip_suffix(']')
        .and_then(|s| s.rsplit_once('['))
        .filter(|(_, index)| index.bytes().all(|b| b.is_ascii_digit()));
    Some(list.map_or(inside, |(key, _)| key).to_owned())
}

#[cfg(test)]
mod tests {
    use super::request_field;

    #[test]
    fn fields_inside_the_requests_object() {
        let f = |p| request_field(p, "tunnel[3]");
        assert_eq!(f("tunnel[3].local").as_deref(), Some("local"));
        assert_eq!(f("tunnel[3].sa[1].spi").as_deref(), Some("sa[1].spi"));
        assert_eq!(f("tunnel[3].ike.psk_file").as_deref(), Some("ike.psk_file"));
        assert_eq!(f("tunnel[3].traffic[0]").as_deref(), Some("traffic"));
        assert_eq!(
            f("tunnel[3].ike.local_traffic[2]").as_deref(),
            Some("ike.local_traffic")
        );
        assert_eq!(f("tunnel[3]"), None, "the object as a whole");
        assert_eq!(f("tunnel[30].local"), None, "another object");
        assert_eq!(f("tunnel[1].name"), None);
        assert_eq!(f("route[3].via"), None);
    }
}
