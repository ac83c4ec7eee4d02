//! A `[[tunnel]]` as a request writes it: `POST /tunnels` takes this
//! shape (schema `TunnelSpec`, with the `schema` feature), fills in the
//! file's defaults with [`TunnelSpec::to_tunnel`], and validates the result
//! with [`crate::validate`] like any tunnel of the file. A new tunnel key is
//! added here, beside [`Tunnel`], and the API takes it without a change of
//! its own.

use crate::ipsec::{IkeSettings, Ipsec};
use crate::model::{IfAddr, Prefix, Tunnel, TunnelInner, TunnelKind, DEFAULT_VRF, VXLAN_PORT};
use serde::Deserialize;
use std::net::IpAddr;
use std::str::FromStr;

/// POST /tunnels: the keys of a `[[tunnel]]` table, optional where the
/// file's are (with the same defaults). A `kind = "ipsec"` tunnel also
/// takes `nat_t`, `traffic`, and either static SAs (`sa`, as
/// `[[tunnel.sa]]`) or IKEv2 (`ike`, as `[tunnel.ike]`).
///
/// `Sa` is the shape of one `sa`: the API's also takes an inline key,
/// which the file never holds, so the caller builds the
/// [`crate::StaticSa`]s.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = TunnelSpec))]
#[serde(deny_unknown_fields, bound(deserialize = "Sa: Deserialize<'de>"))]
pub struct TunnelSpec<Sa> {
    pub name: String,
    /// gre, nvgre, vxlan or ipsec.
    pub kind: String,
    pub local: String,
    pub remote: String,
    #[serde(default)]
    pub key: Option<u32>,
    #[serde(default)]
    pub vrf: Option<String>,
    #[serde(default)]
    pub underlay_vrf: Option<String>,
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub checksum: Option<bool>,
    #[serde(default)]
    pub sequence: Option<bool>,
    #[serde(default)]
    pub port: Option<u16>,
    /// The gateway's addresses on the overlay segment, e.g. "10.9.0.1/24"
    /// (needed by L2 tunnels).
    #[serde(default)]
    pub addresses: Option<Vec<String>>,
    /// GRE payload: "ip" (default) or "ethernet" (0x6558).
    #[serde(default)]
    pub inner: Option<String>,
    /// ipsec: ESP in UDP 4500 (RFC 3948); default false.
    #[serde(default)]
    pub nat_t: Option<bool>,
    /// ipsec: the remote prefixes (SPD selectors): routed into the tunnel,
    /// and the only sources accepted from it (RFC 4301 §5.2).
    #[serde(default)]
    pub traffic: Option<Vec<String>>,
    /// ipsec, statically keyed: exactly one "out" and at least one "in" SA.
    #[serde(default)]
    pub sa: Option<Vec<Sa>>,
    /// ipsec, keyed by IKEv2 with a pre-shared key (instead of `sa`):
    /// `[tunnel.ike]` as the file holds it (schema `IkeSpec`).
    #[serde(default)]
    pub ike: Option<IkeSettings>,
}

/// A request field that does not parse: its path (`traffic[1]`) and what
/// is wrong, naming it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: String) -> Self {
        FieldError {
            field: field.into(),
            message,
        }
    }
}

impl<Sa> TunnelSpec<Sa> {
    /// The tunnel as the file would hold it, with the file's defaults, and
    /// without static SAs (the caller builds those from `sa`). Only the
    /// syntax of each value is checked here; [`crate::validate`] judges
    /// the tunnel among the rest of the configuration.
    pub fn to_tunnel(&self) -> Result<Tunnel, FieldError> {
        let kind = self
            .kind
            .parse::<TunnelKind>()
            .map_err(|e| FieldError::new("kind", e))?;
        let addr = |f: &str, v: &str| {
            v.parse::<IpAddr>()
                .map_err(|_| FieldError::new(f, format!("{f} \"{v}\" is not an IP address")))
        };
        let (local, remote) = (addr("local", &self.local)?, addr("remote", &self.remote)?);
        let addresses = parsed_list::<IfAddr>("addresses", self.addresses.as_deref())
            .map_err(|e| FieldError::new("addresses", e.message))?;
        let inner = match &self.inner {
            None => TunnelInner::default(),
            Some(s) => s
                .parse()
                .map_err(|e| FieldError::new("inner", format!("inner: {e}")))?,
        };
        let vrf = |v: &Option<String>| v.clone().unwrap_or_else(|| DEFAULT_VRF.to_owned());
        Ok(Tunnel {
            name: self.name.clone(),
            kind,
            local,
            remote,
            key: self.key,
            vrf: vrf(&self.vrf),
            underlay_vrf: vrf(&self.underlay_vrf),
            mtu: self.mtu,
            checksum: self.checksum.unwrap_or(false),
            sequence: self.sequence.unwrap_or(false),
            port: self.port.unwrap_or(VXLAN_PORT),
            addresses,
            inner,
            ipsec: self.ipsec()?,
        })
    }

    /// The IPsec keys, `None` when none is given (as in the file).
    fn ipsec(&self) -> Result<Option<Ipsec>, FieldError> {
        if self.nat_t.is_none() && self.traffic.is_none() && self.sa.is_none() && self.ike.is_none()
        {
            return Ok(None);
        }
        Ok(Some(Ipsec {
            nat_t: self.nat_t.unwrap_or(false),
            traffic: parsed_list::<Prefix>("traffic", self.traffic.as_deref())?,
            sas: Vec::new(),
            ike: self.ike.clone(),
        }))
    }
}

/// Each string of list `field` parsed; an error names the element
/// (`traffic[1]`).
fn parsed_list<T: FromStr<Err = String>>(
    field: &str,
    v: Option<&[String]>,
) -> Result<Vec<T>, FieldError> {
    v.unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, x)| {
            x.parse::<T>().map_err(|e| {
                FieldError::new(format!("{field}[{i}]"), format!("{field}: \"{x}\": {e}"))
            })
        })
        .collect()
}
