//! Identities and certificates (RFC 7296 §3.5, RFC 4945 §3): what a
//! configured `remote_id` accepts, whether a certificate vouches for an
//! IKE identity, and distinguished names as text.
//!
//! DNs are written strongSwan-style, in encoding order:
//! `C=CH, O=example, CN=gw1.example.net` (or `/C=CH/O=example/CN=gw1`).
//! We encode that text to DER ourselves (a writer, no parsing); DNs from
//! the wire or a certificate are read with x509-parser and compared
//! attribute by attribute, so PrintableString and UTF8String spellings of
//! the same name match.

use super::scheme::tlv;
use crate::payload::Identity;
use std::net::IpAddr;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

/// The configured identity that accepts any peer identity the
/// certificate vouches for (strongSwan's `%any`).
pub const ANY: &str = "%any";

/// DN attribute keywords: (names, OID content bytes, string tag).
const ATTRS: &[(&[&str], &[u8], u8)] = &[
    (&["C"], &[0x55, 0x04, 0x06], 0x13),
    (&["ST", "S"], &[0x55, 0x04, 0x08], 0x0c),
    (&["L"], &[0x55, 0x04, 0x07], 0x0c),
    (&["O"], &[0x55, 0x04, 0x0a], 0x0c),
    (&["OU"], &[0x55, 0x04, 0x0b], 0x0c),
    (&["CN"], &[0x55, 0x04, 0x03], 0x0c),
    (&["SERIALNUMBER", "SN"], &[0x55, 0x04, 0x05], 0x13),
    (&["T", "TITLE"], &[0x55, 0x04, 0x0c], 0x0c),
    (
        &["E", "EMAIL", "EMAILADDRESS"],
        &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01],
        0x16,
    ),
    (
        &["DC"],
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19],
        0x16,
    ),
    (
        &["UID"],
        &[0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01],
        0x0c,
    ),
];

/// Whether `s` reads as a DN (`key=value` parts).
pub fn looks_like_dn(s: &str) -> bool {
    s.contains('=')
}

/// DER of a DN written as text; None if a part is not `key=value` with a
/// known key. One attribute per RDN.
pub fn dn_from_text(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    let parts: Vec<&str> = if s.starts_with('/') {
        s.split('/').filter(|p| !p.trim().is_empty()).collect()
    } else {
        s.split(',').collect()
    };
    let mut rdns = Vec::new();
    for p in parts {
        let (k, v) = p.split_once('=')?;
        let (k, v) = (k.trim().to_ascii_uppercase(), v.trim());
        let (_, oid, tag) = ATTRS
            .iter()
            .find(|(names, _, _)| names.contains(&k.as_str()))?;
        if v.is_empty() || (*tag != 0x0c && !v.is_ascii()) {
            return None;
        }
        let atv = tlv(0x30, &[tlv(0x06, oid), tlv(*tag, v.as_bytes())].concat());
        rdns.extend(tlv(0x31, &atv));
    }
    if rdns.is_empty() {
        return None;
    }
    Some(tlv(0x30, &rdns))
}

/// (OID bytes, value) of each attribute of a DER DN, in order; None if
/// it does not parse.
fn attributes(der: &[u8]) -> Option<Vec<(Vec<u8>, String)>> {
    let (rest, n) = X509Name::from_der(der).ok()?;
    if !rest.is_empty() {
        return None;
    }
    Some(attributes_of(&n))
}

fn attributes_of(n: &X509Name) -> Vec<(Vec<u8>, String)> {
    n.iter_attributes()
        .map(|a| {
            let v = match a.as_str() {
                Ok(s) => s.to_string(),
                Err(_) => String::from_utf8_lossy(a.as_slice()).into_owned(),
            };
            (a.attr_type().as_bytes().to_vec(), v)
        })
        .collect()
}

/// Whether two attribute lists name the same entity; in `want` a `*`
/// value matches any value of its attribute.
fn same_dn(want: &[(Vec<u8>, String)], got: &[(Vec<u8>, String)]) -> bool {
    want.len() == got.len()
        && want
            .iter()
            .zip(got)
            .all(|((wo, wv), (go, gv))| wo == go && (wv == "*" || wv.eq_ignore_ascii_case(gv)))
}

/// A DER DN as text (`C=CH, O=example, CN=gw1`), or hex if it does not
/// parse.
pub fn dn_text(der: &[u8]) -> String {
    match X509Name::from_der(der) {
        Ok((_, n)) => n.to_string(),
        Err(_) => der.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

/// Whether the peer's identity `got` is what the configured `want`
/// accepts: `%any` takes every identity; DNs compare attribute by
/// attribute (`*` as a value is a wildcard); FQDN and RFC 822 names
/// ignore ASCII case; everything else compares as bytes.
pub fn id_matches(want: &Identity, got: &Identity) -> bool {
    match (want, got) {
        (Identity::Fqdn(w), _) if w == ANY => true,
        (Identity::Dn(w), Identity::Dn(g)) => match (attributes(w), attributes(g)) {
            (Some(w), Some(g)) => same_dn(&w, &g),
            _ => w == g,
        },
        (Identity::Fqdn(w), Identity::Fqdn(g)) | (Identity::Rfc822(w), Identity::Rfc822(g)) => {
            w.eq_ignore_ascii_case(g)
        }
        _ => want == got,
    }
}

/// Whether `cert` vouches for `id` (RFC 4945 §3.1): a DN is the subject;
/// an FQDN, RFC 822 name or address is one of the subjectAltNames.
/// ID_KEY_ID and other types are bound to no certificate field.
pub fn cert_has_id(cert: &X509Certificate, id: &Identity) -> bool {
    if let Identity::Dn(d) = id {
        return match attributes(d) {
            Some(a) => same_dn(&a, &attributes_of(cert.subject())),
            None => false,
        };
    }
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    san.value.general_names.iter().any(|n| match (n, id) {
        (GeneralName::DNSName(d), Identity::Fqdn(f)) => d.eq_ignore_ascii_case(f),
        (GeneralName::RFC822Name(e), Identity::Rfc822(r)) => e.eq_ignore_ascii_case(r),
        (GeneralName::IPAddress(b), Identity::Ipv4(a)) => *b == a.octets(),
        (GeneralName::IPAddress(b), Identity::Ipv6(a)) => *b == a.octets(),
        _ => false,
    })
}

/// The identities a certificate vouches for, as text (subject first),
/// for error messages and `vecgate check`.
pub fn cert_ids(cert: &X509Certificate) -> Vec<String> {
    let mut v = vec![cert.subject().to_string()];
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => v.push((*d).to_string()),
                GeneralName::RFC822Name(e) => v.push((*e).to_string()),
                GeneralName::IPAddress(b) => {
                    if let Ok(a) = <[u8; 4]>::try_from(*b) {
                        v.push(IpAddr::from(a).to_string());
                    } else if let Ok(a) = <[u8; 16]>::try_from(*b) {
                        v.push(IpAddr::from(a).to_string());
                    }
                }
                _ => {}
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dn_text_round_trip() {
        let der = dn_from_text("C=CH, O=strongSwan Project, CN=moon.strongswan.org").unwrap();
        assert_eq!(
            dn_text(&der),
            "C=CH, O=strongSwan Project, CN=moon.strongswan.org"
        );
        let slash = dn_from_text("/C=CH/O=strongSwan Project/CN=moon.strongswan.org").unwrap();
        assert_eq!(slash, der);
        assert!(dn_from_text("C=CH, bogus").is_none());
        assert!(dn_from_text("XX=1").is_none());
        assert!(dn_from_text("CN=").is_none());
        assert!(dn_from_text("").is_none());
    }

    #[test]
    fn matching() {
        let dn = |s| Identity::Dn(dn_from_text(s).unwrap());
        let got = dn("C=CH, O=Example, CN=gw1");
        assert!(id_matches(&dn("C=CH, O=example, CN=gw1"), &got));
        assert!(id_matches(&dn("C=CH, O=Example, CN=*"), &got));
        assert!(!id_matches(&dn("C=CH, CN=gw1"), &got));
        assert!(!id_matches(&dn("C=CH, O=Example, CN=gw2"), &got));
        assert!(id_matches(&Identity::Fqdn(ANY.into()), &got));
        let f = Identity::Fqdn("GW1.example.net".into());
        assert!(id_matches(&Identity::Fqdn("gw1.EXAMPLE.net".into()), &f));
        assert!(!id_matches(&Identity::Fqdn("gw2.example.net".into()), &f));
        assert!(!id_matches(&f, &got));
        let a = Identity::from_text("192.0.2.1");
        assert!(id_matches(&a, &Identity::from_text("192.0.2.1")));
        assert!(!id_matches(&a, &Identity::from_text("192.0.2.2")));
    }
}
