//! The `[[interface]]` and `[[tunnel]]` tables as a request writes them:
//! `POST /interfaces` and `POST /tunnels` take these shapes (schemas
//! `InterfaceSpec`, `TunnelSpec`, with the `schema` feature), fill in the
//! file's defaults ([`InterfaceSpec::to_interface`],
//! [`TunnelSpec::to_tunnel`]), and validate the result with
//! [`crate::validate`] like any object of the file. A new key is added
//! here, beside the model's type, and the API takes it without a change of
//! its own.

use crate::ipsec::{IkeSettings, Ipsec, StaticSa};
use crate::model::{
    Driver, IfAddr, Interface, Prefix, Tunnel, TunnelInner, TunnelKind, DEFAULT_VRF, VXLAN_PORT,
};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::str::FromStr;

/// POST /interfaces: the keys of an `[[interface]]` table, optional where
/// the file's are (with the same defaults). The netdev `host` is attached
/// at once (one queue per worker, its ingress guard), with its addresses
/// and VRF.
#[derive(Clone, Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct InterfaceSpec {
    pub name: String,
    /// The Linux netdev to attach to.
    pub host: String,
    /// af_packet (default), af_xdp or tap.
    #[serde(default)]
    pub driver: Option<String>,
    /// `ADDRESS/LEN` each.
    #[serde(default)]
    pub addresses: Option<Vec<String>>,
    #[serde(default)]
    pub vrf: Option<String>,
    /// L3 MTU (68..=65535; capped by the netdev's).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schema(minimum = 68, maximum = 65535))]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub rsc: Option<bool>,
    #[serde(default)]
    pub offloads: Option<bool>,
}

impl InterfaceSpec {
    /// The interface as the file would hold it, with the file's defaults.
    /// Only the syntax of each value is checked here; [`crate::validate`]
    /// judges the interface among the rest of the configuration.
    pub fn to_interface(&self) -> Result<Interface, FieldError> {
        let driver = match self.driver.as_deref() {
            None => Driver::AfPacket,
            Some(d) => d.parse().map_err(|_| {
                FieldError::new(
                    "driver",
                    format!("driver \"{d}\" is not one of af_packet, af_xdp, tap"),
                )
            })?,
        };
        let addresses = parsed_list::<IfAddr>("addresses", self.addresses.as_deref())
            .map_err(|e| FieldError::new("addresses", e.message))?;
        if let Some(m) = self.mtu.filter(|m| !(68..=65535).contains(m)) {
            return Err(FieldError::new(
                "mtu",
                format!("mtu = {m} is out of range (expected 68..=65535)"),
            ));
        }
        Ok(Interface {
            name: self.name.clone(),
            host: self.host.clone(),
            driver,
            addresses,
            vrf: self.vrf.clone().unwrap_or_else(|| DEFAULT_VRF.to_owned()),
            mtu: self.mtu,
            rsc: self.rsc.unwrap_or(true),
            offloads: self.offloads.unwrap_or(true),
        })
    }
}

/// POST /tunnels: the keys of a `[[tunnel]]` table, optional where the
/// file's are (with the same defaults). A `kind = "ipsec"` tunnel also
/// takes `nat_t`, `traffic`, and either static SAs (`sa`, as
/// `[[tunnel.sa]]`) or IKEv2 (`ike`, as `[tunnel.ike]`).
///
/// `Sa` is the shape of one `sa`: the API's also takes an inline key,
/// which the file never holds, so the caller builds the
/// [`crate::StaticSa`]s.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[cfg_attr(feature = "schema", derive(utoipa::ToSchema), schema(as = TunnelSpec))]
#[serde(
    deny_unknown_fields,
    bound(deserialize = "Sa: Deserialize<'de>", serialize = "Sa: Serialize")
)]
pub struct TunnelSpec<Sa> {
    pub name: String,
    /// gre, nvgre, vxlan or ipsec.
    pub kind: String,
    pub local: String,
    pub remote: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vrf: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub underlay_vrf: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The gateway's addresses on the overlay segment, e.g. "10.9.0.1/24"
    /// (needed by L2 tunnels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<String>>,
    /// GRE payload: "ip" (default) or "ethernet" (0x6558).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inner: Option<String>,
    /// ipsec: ESP in UDP 4500 (RFC 3948); default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat_t: Option<bool>,
    /// ipsec: the remote prefixes (SPD selectors): routed into the tunnel,
    /// and the only sources accepted from it (RFC 4301 §5.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<Vec<String>>,
    /// ipsec, statically keyed: exactly one "out" and at least one "in" SA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sa: Option<Vec<Sa>>,
    /// ipsec, keyed by IKEv2 with a pre-shared key (instead of `sa`):
    /// `[tunnel.ike]` as the file holds it (schema `IkeSpec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
}

/// The request that recreates `t` ([`TunnelSpec::to_tunnel`] gives `t`
/// back, its static SAs built by the caller from `sa`): what a gateway
/// sends a peer that must run the same tunnel, and what the CLI sends.
/// Secrets travel by file path only (`key_file`, `ike.psk_file`); keys
/// that only some kinds take are given for those kinds alone, so the
/// same tunnel always gives the same request.
impl<Sa> From<&Tunnel> for TunnelSpec<Sa>
where
    Sa: for<'a> From<&'a StaticSa>,
{
    fn from(t: &Tunnel) -> Self {
        let strings =
            |v: &[IfAddr]| (!v.is_empty()).then(|| v.iter().map(|a| a.to_string()).collect());
        let gre = t.kind == TunnelKind::Gre;
        let x = t.ipsec.as_ref();
        TunnelSpec {
            name: t.name.clone(),
            kind: t.kind.as_str().to_owned(),
            local: t.local.to_string(),
            remote: t.remote.to_string(),
            key: t.key,
            vrf: Some(t.vrf.clone()),
            underlay_vrf: Some(t.underlay_vrf.clone()),
            mtu: t.mtu,
            checksum: gre.then_some(t.checksum),
            sequence: gre.then_some(t.sequence),
            port: (t.kind == TunnelKind::Vxlan).then_some(t.port),
            addresses: strings(&t.addresses),
            inner: gre.then(|| t.inner.as_str().to_owned()),
            nat_t: x.map(|x| x.nat_t),
            traffic: x.map(|x| x.traffic.iter().map(|p| p.to_string()).collect()),
            sa: x
                .filter(|x| x.ike.is_none())
                .map(|x| x.sas.iter().map(Sa::from).collect()),
            ike: x.and_then(|x| x.ike.clone()),
        }
    }
}

impl<Sa> TunnelSpec<Sa> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::{Error, IgnoredAny, Visitor};

    /// The field names serde knows for `T`: what its derived `Deserialize`
    /// hands to `deserialize_struct`.
    fn serde_fields<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
        struct Grab<'a>(&'a mut &'static [&'static str]);
        impl<'de> serde::Deserializer<'de> for Grab<'_> {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(Self::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = fields;
                Err(Self::Error::custom("fields read"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
                bytes byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let mut fields: &'static [&'static str] = &[];
        let _ = T::deserialize(Grab(&mut fields));
        let mut v = fields.to_vec();
        v.sort_unstable();
        v
    }

    fn sorted(keys: &[&'static str]) -> Vec<&'static str> {
        let mut v = keys.to_vec();
        v.sort_unstable();
        v
    }

    /// Every tunnel of a configuration comes back from its request: no
    /// key lost, none added that the kind refuses.
    #[test]
    fn a_tunnels_request_gives_the_tunnel_back() {
        #[derive(Debug)]
        struct Sa(StaticSa);
        impl From<&StaticSa> for Sa {
            fn from(s: &StaticSa) -> Self {
                Sa(s.clone())
            }
        }
        let cfg = crate::parse(
            r#"
[gateway]
name = "t"

[[interface]]
name = "wan0"
host = "wan0"
driver = "af_packet"
addresses = ["192.0.2.1/24"]

[[tunnel]]
name = "g0"
kind = "gre"
local = "192.0.2.1"
remote = "192.0.2.9"
key = 7
checksum = true
inner = "ethernet"
addresses = ["10.9.0.1/24"]
mtu = 1400

[[tunnel]]
name = "x0"
kind = "vxlan"
local = "192.0.2.1"
remote = "192.0.2.8"
key = 5000
port = 4790
vrf = "blue"

[[tunnel]]
name = "e0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.7"
nat_t = true
traffic = ["10.2.0.0/24"]

[[tunnel.sa]]
direction = "out"
spi = 0x1001
algorithm = "aes128gcm16"
key_file = "/k/1001.hex"
lifetime_seconds = 3600

[[tunnel.sa]]
direction = "in"
spi = 0x2001
algorithm = "aes128gcm16"
key_file = "/k/2001.hex"
replay_window = 128

[[tunnel]]
name = "ike0"
kind = "ipsec"
local = "192.0.2.1"
remote = "192.0.2.6"

[tunnel.ike]
psk_file = "/k/psk"
remote_id = "gw-b.example.net"
"#,
        )
        .unwrap();
        for t in &cfg.tunnels {
            let spec = TunnelSpec::<Sa>::from(t);
            let mut back = spec.to_tunnel().unwrap();
            if let Some(x) = back.ipsec.as_mut() {
                x.sas = spec.sa.iter().flatten().map(|s| s.0.clone()).collect();
            }
            assert_eq!(&back, t, "{spec:?}");
            let gre = t.kind == TunnelKind::Gre;
            assert_eq!(spec.checksum.is_some(), gre, "{spec:?}");
            assert_eq!(spec.port.is_some(), t.kind == TunnelKind::Vxlan, "{spec:?}");
        }
    }

    /// The request shapes take exactly the keys the file's reader takes.
    #[test]
    fn request_fields_are_the_files_keys() {
        assert_eq!(
            serde_fields::<TunnelSpec<IgnoredAny>>(),
            sorted(crate::TUNNEL_KEYS)
        );
        assert_eq!(
            serde_fields::<InterfaceSpec>(),
            sorted(crate::parse::objects::INTERFACE_KEYS)
        );
    }
}
