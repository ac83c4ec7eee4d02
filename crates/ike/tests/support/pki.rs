//! A test PKI made with rcgen: roots, intermediates, end entities of each
//! key type, CRLs, and the IKE configuration pieces built from them.
#![allow(dead_code)]

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, CertificateRevocationListParams,
    DistinguishedName, DnType, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose,
    RevokedCertParams, SerialNumber, SignatureAlgorithm,
};
use std::sync::Arc;
use vecgate_ike::pki::{LocalCert, SigningKey, TrustStore};

/// Key and signature types of the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rsa,
    P256,
    P384,
    Ed25519,
}

pub const ALL: [Alg; 4] = [Alg::Rsa, Alg::P256, Alg::P384, Alg::Ed25519];

fn sig(a: Alg) -> &'static SignatureAlgorithm {
    match a {
        Alg::Rsa => &rcgen::PKCS_RSA_SHA256,
        Alg::P256 => &rcgen::PKCS_ECDSA_P256_SHA256,
        Alg::P384 => &rcgen::PKCS_ECDSA_P384_SHA384,
        Alg::Ed25519 => &rcgen::PKCS_ED25519,
    }
}

pub fn key(a: Alg) -> KeyPair {
    match a {
        Alg::Rsa => {
            KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048).unwrap()
        }
        _ => KeyPair::generate_for(sig(a)).unwrap(),
    }
}

/// A CA: its parameters and key sign what it issues.
pub struct Ca {
    pub params: CertificateParams,
    pub key: KeyPair,
    pub pem: String,
    pub der: Vec<u8>,
    /// Serial of its own certificate.
    pub serial: u64,
    next_serial: std::cell::Cell<u64>,
}

/// What an end entity (or intermediate) looks like.
#[derive(Clone)]
pub struct Spec {
    pub cn: String,
    /// subjectAltNames: DNS names, or IP addresses when they parse.
    pub sans: Vec<String>,
    pub alg: Alg,
    /// (year, month, day) validity.
    pub from: (i32, u8, u8),
    pub until: (i32, u8, u8),
    pub serial: Option<u64>,
    /// keyUsage digitalSignature (else keyEncipherment only).
    pub signing: bool,
}

impl Spec {
    pub fn new(cn: &str, sans: &[&str], alg: Alg) -> Spec {
        Spec {
            cn: cn.into(),
            sans: sans.iter().map(|s| s.to_string()).collect(),
            alg,
            from: (2020, 1, 1),
            until: (2099, 12, 31),
            serial: None,
            signing: true,
        }
    }
}

/// An issued end entity: PEM certificate, PEM key, DER certificate,
/// serial.
pub struct Leaf {
    pub pem: String,
    pub der: Vec<u8>,
    pub key_pem: String,
    pub serial: u64,
}

impl Leaf {
    pub fn local(&self) -> LocalCert {
        LocalCert::new(
            self.pem.as_bytes(),
            SigningKey::from_bytes(self.key_pem.as_bytes()).unwrap(),
        )
        .unwrap()
    }
}

fn ca_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CountryName, "CH");
    p.distinguished_name
        .push(DnType::OrganizationName, "vecgate test");
    p.distinguished_name.push(DnType::CommonName, cn);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    p.not_before = date_time_ymd(2020, 1, 1);
    p.not_after = date_time_ymd(2099, 12, 31);
    p.key_identifier_method = KeyIdMethod::Sha256;
    p.use_authority_key_identifier_extension = true;
    p
}

impl Ca {
    pub fn root(cn: &str, alg: Alg) -> Ca {
        let key = key(alg);
        let mut params = ca_params(cn);
        params.serial_number = Some(SerialNumber::from(1u64));
        let c = params.self_signed(&key).unwrap();
        Ca {
            pem: c.pem(),
            der: c.der().to_vec(),
            serial: 1,
            params,
            key,
            next_serial: std::cell::Cell::new(100),
        }
    }

    fn serial(&self) -> u64 {
        let s = self.next_serial.get();
        self.next_serial.set(s + 1);
        s
    }

    /// A CA under this one.
    pub fn intermediate(&self, cn: &str, alg: Alg) -> Ca {
        let key = key(alg);
        let mut params = ca_params(cn);
        let serial = self.serial();
        params.serial_number = Some(SerialNumber::from(serial));
        let c = params
            .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
            .unwrap();
        Ca {
            pem: c.pem(),
            der: c.der().to_vec(),
            serial,
            params,
            key,
            next_serial: std::cell::Cell::new(1000),
        }
    }

    /// An end entity with the DN `C=CH, O=vecgate test, CN=<cn>`.
    pub fn issue(&self, s: &Spec) -> Leaf {
        let key = key(s.alg);
        let mut p = CertificateParams::new(s.sans.clone()).unwrap();
        p.distinguished_name = DistinguishedName::new();
        p.distinguished_name.push(DnType::CountryName, "CH");
        p.distinguished_name
            .push(DnType::OrganizationName, "vecgate test");
        p.distinguished_name.push(DnType::CommonName, s.cn.as_str());
        p.not_before = date_time_ymd(s.from.0, s.from.1, s.from.2);
        p.not_after = date_time_ymd(s.until.0, s.until.1, s.until.2);
        let serial = s.serial.unwrap_or_else(|| self.serial());
        p.serial_number = Some(SerialNumber::from(serial));
        p.key_usages = if s.signing {
            vec![KeyUsagePurpose::DigitalSignature]
        } else {
            vec![KeyUsagePurpose::KeyEncipherment]
        };
        p.use_authority_key_identifier_extension = true;
        let c = p
            .signed_by(&key, &Issuer::from_params(&self.params, &self.key))
            .unwrap();
        Leaf {
            pem: c.pem(),
            der: c.der().to_vec(),
            key_pem: key.serialize_pem(),
            serial,
        }
    }

    /// A CRL of this CA revoking these serials.
    pub fn crl(&self, serials: &[u64]) -> String {
        let p = CertificateRevocationListParams {
            this_update: date_time_ymd(2024, 1, 1),
            next_update: date_time_ymd(2099, 1, 1),
            crl_number: SerialNumber::from(1u64),
            issuing_distribution_point: None,
            revoked_certs: serials
                .iter()
                .map(|s| RevokedCertParams {
                    serial_number: SerialNumber::from(*s),
                    revocation_time: date_time_ymd(2024, 1, 1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: KeyIdMethod::Sha256,
        };
        p.signed_by(&Issuer::from_params(&self.params, &self.key))
            .unwrap()
            .pem()
            .unwrap()
    }
}

/// A trust store with these CA PEMs and CRL PEMs.
pub fn trust(cas: &[&str], crls: &[&str]) -> Arc<TrustStore> {
    let mut t = TrustStore::default();
    for c in cas {
        t.add_anchors(c.as_bytes()).unwrap();
    }
    for c in crls {
        t.add_crls(c.as_bytes()).unwrap();
    }
    Arc::new(t)
}

/// An end entity's PEM followed by its intermediates' (a cert_file).
pub fn chain_pem(leaf: &Leaf, inter: &[&Ca]) -> String {
    let mut s = leaf.pem.clone();
    for i in inter {
        s.push_str(&i.pem);
    }
    s
}
