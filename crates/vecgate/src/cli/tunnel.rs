//! `vecgate tunnel add|del`: a typed `POST /tunnels` request
//! ([`TunnelSpec`]) from the command line.

use super::{enc, finish, resolve, Target};
use std::process::ExitCode;
use vecgate_control::model::TunnelSpec;

/// `vecgate tunnel add|del`: overlay tunnels (gre, nvgre, vxlan) and
/// IPsec tunnels live.
#[derive(clap::Subcommand, Debug)]
pub enum TunnelCmd {
    /// vecgate tunnel add NAME KIND LOCAL REMOTE [--key N] [--vrf V] ...
    ///
    /// ipsec, static keys: --sa-out SPI:ALG:KEYFILE --sa-in SPI:ALG:KEYFILE
    /// [--traffic PREFIX]... [--nat-t]; keyed by IKEv2: --ike-psk-file F
    /// or --ike-cert-file F --ike-key-file F --ike-ca-file F
    /// [--ike-remote-id ID] [--ike-responder] ... (key files are read by
    /// the gateway; keys never go on the command line).
    Add {
        name: String,
        /// gre, nvgre, vxlan or ipsec.
        kind: String,
        local: String,
        remote: String,
        /// GRE key, NVGRE VSID or VXLAN VNI.
        #[arg(long)]
        key: Option<u32>,
        #[arg(long)]
        vrf: Option<String>,
        #[arg(long)]
        underlay_vrf: Option<String>,
        #[arg(long)]
        mtu: Option<u32>,
        /// The gateway's address on the overlay segment (repeatable).
        #[arg(long = "address")]
        addresses: Vec<String>,
        /// GRE payload: ip or ethernet.
        #[arg(long)]
        inner: Option<String>,
        #[arg(long)]
        checksum: bool,
        #[arg(long)]
        sequence: bool,
        /// VXLAN UDP port.
        #[arg(long)]
        port: Option<u16>,
        #[command(flatten)]
        ipsec: Box<IpsecArgs>,
    },
    /// vecgate tunnel del NAME (an IKEv2 tunnel deletes its IKE SA with
    /// the peer first)
    Del { name: String },
}

/// The `[[tunnel]]` IPsec keys of `vecgate tunnel add NAME ipsec ...`.
/// IKEv2 keys it with a PSK file, a certificate, or both (one for each
/// direction): the other IKE options need one of them.
#[derive(clap::Args, Debug, Default)]
#[command(group(
    clap::ArgGroup::new("ike")
        .multiple(true)
        .args(["ike_psk_file", "ike_cert_file"])
))]
pub struct IpsecArgs {
    /// Remote prefix of the SPD (routed into the tunnel, accepted from
    /// it); repeatable.
    #[arg(long)]
    pub traffic: Vec<String>,
    /// ESP in UDP 4500 (RFC 3948).
    #[arg(long)]
    pub nat_t: bool,
    /// The outbound SA: SPI:ALGORITHM:KEY_FILE (e.g.
    /// 0x1001:aes128gcm16:/etc/vecgate/out.hex).
    #[arg(long, value_name = "SPI:ALG:KEYFILE")]
    pub sa_out: Option<String>,
    /// An inbound SA: SPI:ALGORITHM:KEY_FILE; repeatable.
    #[arg(long, value_name = "SPI:ALG:KEYFILE")]
    pub sa_in: Vec<String>,
    /// IKEv2 with the pre-shared key in this file (on the gateway).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sa_out", "sa_in"])]
    pub ike_psk_file: Option<String>,
    /// IKEv2 signing with this certificate (PEM, intermediates may
    /// follow; on the gateway): `auth = "pubkey"`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["sa_out", "sa_in"])]
    pub ike_cert_file: Option<String>,
    /// The certificate's private key (on the gateway, mode 0600).
    #[arg(long, value_name = "FILE", requires = "ike_cert_file")]
    pub ike_key_file: Option<String>,
    /// A CA the peer's certificate must chain to; repeatable.
    #[arg(long, value_name = "FILE", requires = "ike")]
    pub ike_ca_file: Vec<String>,
    /// A CRL of those CAs; repeatable.
    #[arg(long, value_name = "FILE", requires = "ike_ca_file")]
    pub ike_crl_file: Vec<String>,
    /// The peer's own certificate, trusted as is.
    #[arg(long, value_name = "FILE", requires = "ike")]
    pub ike_remote_cert_file: Option<String>,
    /// How the peer authenticates: psk or pubkey (default: as we do).
    #[arg(long, value_name = "METHOD", requires = "ike")]
    pub ike_remote_auth: Option<vecgate_config::IkeAuth>,
    #[arg(long, requires = "ike")]
    pub ike_local_id: Option<String>,
    #[arg(long, requires = "ike")]
    pub ike_remote_id: Option<String>,
    /// IKE proposal, strongSwan syntax; repeatable.
    #[arg(long, requires = "ike")]
    pub ike_proposal: Vec<String>,
    /// ESP proposal, strongSwan syntax; repeatable.
    #[arg(long, requires = "ike")]
    pub esp_proposal: Vec<String>,
    /// Wait for the peer instead of initiating.
    #[arg(long, requires = "ike")]
    pub ike_responder: bool,
    /// Seconds between liveness checks.
    #[arg(long, requires = "ike")]
    pub dpd: Option<u64>,
    #[arg(long, requires = "ike")]
    pub ike_lifetime: Option<u64>,
    #[arg(long, requires = "ike")]
    pub child_lifetime: Option<u64>,
    /// Packets until each child SA stops (rekeyed at 85 %).
    #[arg(long, requires = "ike")]
    pub child_lifetime_packets: Option<u64>,
    /// Bytes until each child SA stops (rekeyed at 85 %).
    #[arg(long, requires = "ike")]
    pub child_lifetime_bytes: Option<u64>,
    /// Our traffic selector; repeatable (default: the VRF's networks).
    #[arg(long, requires = "ike")]
    pub local_traffic: Vec<String>,
}

impl IpsecArgs {
    /// Adds the IPsec keys given to a `POST /tunnels` request.
    fn fill(&self, spec: &mut TunnelSpec) -> Result<(), String> {
        use vecgate_control::model::{parse_spi, SpiText, TunnelSaSpec};
        if !self.traffic.is_empty() {
            spec.traffic = Some(self.traffic.clone());
        }
        if self.nat_t {
            spec.nat_t = Some(true);
        }
        let sa = |direction: &str, text: &str| -> Result<TunnelSaSpec, String> {
            let bad = || format!("--sa-{direction} {text}: expected SPI:ALGORITHM:KEY_FILE");
            let mut it = text.splitn(3, ':');
            let (Some(spi), Some(alg), Some(file)) = (it.next(), it.next(), it.next()) else {
                return Err(bad());
            };
            let spi = parse_spi(spi)
                .filter(|_| !file.is_empty())
                .ok_or_else(bad)?;
            Ok(TunnelSaSpec {
                direction: direction.to_owned(),
                replay_window: None,
                spi: SpiText(spi),
                algorithm: alg.to_owned(),
                key: None,
                key_file: Some(file.to_owned()),
                esn: None,
                lifetime_bytes: None,
                lifetime_packets: None,
                lifetime_seconds: None,
            })
        };
        let mut sas = Vec::new();
        if let Some(o) = &self.sa_out {
            sas.push(sa("out", o)?);
        }
        for i in &self.sa_in {
            sas.push(sa("in", i)?);
        }
        if !sas.is_empty() {
            spec.sa = Some(sas);
        }
        if self.ike_psk_file.is_some() || self.ike_cert_file.is_some() {
            let local_traffic = self
                .local_traffic
                .iter()
                .map(|p| p.parse().map_err(|e| format!("--local-traffic {p}: {e}")))
                .collect::<Result<_, String>>()?;
            let auth = if self.ike_cert_file.is_some() {
                vecgate_config::IkeAuth::Pubkey
            } else {
                vecgate_config::IkeAuth::Psk
            };
            let files = |v: &[String]| v.iter().map(Into::into).collect();
            spec.ike = Some(vecgate_config::IkeSettings {
                auth,
                remote_auth: self.ike_remote_auth,
                psk_file: self.ike_psk_file.clone().unwrap_or_default().into(),
                cert_file: self.ike_cert_file.as_ref().map(Into::into),
                key_file: self.ike_key_file.as_ref().map(Into::into),
                ca_files: files(&self.ike_ca_file),
                crl_files: files(&self.ike_crl_file),
                remote_cert_file: self.ike_remote_cert_file.as_ref().map(Into::into),
                local_id: self.ike_local_id.clone(),
                remote_id: self.ike_remote_id.clone(),
                ike_proposals: self.ike_proposal.clone(),
                esp_proposals: self.esp_proposal.clone(),
                initiate: !self.ike_responder,
                dpd_interval: self.dpd,
                ike_lifetime: self.ike_lifetime,
                child_lifetime: self.child_lifetime,
                child_lifetime_packets: self.child_lifetime_packets,
                child_lifetime_bytes: self.child_lifetime_bytes,
                local_traffic,
                ..Default::default()
            });
        }
        Ok(())
    }
}

/// How an SA command gets its key: never on the command line (it would
pub fn tunnel(t: &Target, cmd: &TunnelCmd) -> ExitCode {
    finish((|| {
        let c = resolve(t)?;
        match cmd {
            TunnelCmd::Add {
                name,
                kind,
                local,
                remote,
                key,
                vrf,
                underlay_vrf,
                mtu,
                addresses,
                inner,
                checksum,
                sequence,
                port,
                ipsec,
            } => {
                let mut spec = TunnelSpec {
                    name: name.clone(),
                    kind: kind.clone(),
                    local: local.clone(),
                    remote: remote.clone(),
                    key: *key,
                    vrf: vrf.clone(),
                    underlay_vrf: underlay_vrf.clone(),
                    mtu: *mtu,
                    checksum: checksum.then_some(true),
                    sequence: sequence.then_some(true),
                    port: *port,
                    addresses: (!addresses.is_empty()).then(|| addresses.clone()),
                    inner: inner.clone(),
                    nat_t: None,
                    traffic: None,
                    sa: None,
                    ike: None,
                };
                ipsec.fill(&mut spec)?;
                let body = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
                let r = c.ok(c.request("POST", "/tunnels", Some(&body))?)?;
                if t.json {
                    println!("{}", r.text());
                } else {
                    println!("tunnel {name} ({kind} {local} -> {remote}) added");
                }
            }
            TunnelCmd::Del { name } => {
                c.ok(c.request("DELETE", &format!("/tunnels/{}", enc(name)), None)?)?;
                if !t.json {
                    println!("tunnel {name} deleted");
                }
            }
        }
        Ok(())
    })())
}
