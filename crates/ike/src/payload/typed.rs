//! Typed access to "the payload of kind X in this message": one marker
//! type per payload kind the state machine reads, so each exchange asks
//! `m.need::<Ke>()?` instead of matching the payload list by hand.
//!
//! Only the first payload of a kind counts (RFC 7296 §3.2: none of these
//! kinds may appear twice in the messages that carry them).

use super::{Identity, Payload, Proposal, TrafficSelector};

/// A payload kind that [`crate::message::Message::get`] can find.
pub trait Kind {
    /// What the payload holds, borrowed from the message.
    type Body<'a>;
    /// Reason given when a required payload is absent.
    const MISSING: &'static str;
    /// The body if `p` is of this kind.
    fn body<'a>(p: &'a Payload) -> Option<Self::Body<'a>>;
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident => $body:ty, $missing:literal, |$p:ident| $get:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name;
        impl Kind for $name {
            type Body<'a> = $body;
            const MISSING: &'static str = $missing;
            fn body<'a>($p: &'a Payload) -> Option<$body> {
                $get
            }
        }
    )*};
}

kinds! {
    /// SA: the proposals (RFC 7296 §3.3).
    Sa => &'a [Proposal], "no SA", |p| match p {
        Payload::Sa(v) => Some(v),
        _ => None,
    };
    /// KE: (DH group, public value) (§3.4).
    Ke => (u16, &'a [u8]), "no KE", |p| match p {
        Payload::Ke { group, data } => Some((*group, data)),
        _ => None,
    };
    /// Ni or Nr (§3.9).
    Nonce => &'a [u8], "no nonce", |p| match p {
        Payload::Nonce(n) => Some(n),
        _ => None,
    };
    /// IDi (§3.5).
    IdI => &'a Identity, "no IDi", |p| match p {
        Payload::IdI(i) => Some(i),
        _ => None,
    };
    /// IDr (§3.5).
    IdR => &'a Identity, "no IDr", |p| match p {
        Payload::IdR(i) => Some(i),
        _ => None,
    };
    /// AUTH: (method, data) (§3.8).
    Auth => (u8, &'a [u8]), "no AUTH", |p| match p {
        Payload::Auth { method, data } => Some((*method, data)),
        _ => None,
    };
    /// TSi (§3.13).
    TsI => &'a [TrafficSelector], "no TSi", |p| match p {
        Payload::TsI(t) => Some(t),
        _ => None,
    };
    /// TSr (§3.13).
    TsR => &'a [TrafficSelector], "no TSr", |p| match p {
        Payload::TsR(t) => Some(t),
        _ => None,
    };
}
