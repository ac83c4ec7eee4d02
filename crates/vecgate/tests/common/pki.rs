//! A test PKI made by `openssl`: a root CA, an intermediate CA, end
//! entities with a DNS subjectAltName, CRLs and certificates with chosen
//! validity dates.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// A PKI made by openssl in a directory of its own (removed on drop):
/// `root.pem`, `inter.pem`, and per end entity `NAME.pem` (its chain:
/// itself, then the intermediate) and `NAME.key` (PKCS#8, mode 0600).
pub struct Pki {
    dir: PathBuf,
    newkey: &'static str,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const CA_EXT: &str = "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n";

impl Pki {
    /// `newkey`: openssl's `-newkey` argument (`ec -pkeyopt
    /// ec_paramgen_curve:P-256`, `rsa:2048`).
    pub fn new(newkey: &'static str) -> Pki {
        let dir = std::env::temp_dir().join(super::unique("pki"));
        std::fs::create_dir_all(&dir).unwrap();
        let p = Pki { dir, newkey };
        std::fs::write(p.dir.join("ca.ext"), CA_EXT).unwrap();
        p.openssl(&format!(
            "req -x509 -newkey {newkey} -nodes -keyout root.key -out root.pem -days 30 \
             -subj '/C=CH/O=vecgate test/CN=Test Root' -addext basicConstraints=critical,CA:TRUE \
             -addext keyUsage=critical,keyCertSign,cRLSign"
        ));
        p.sign(
            "inter",
            "/C=CH/O=vecgate test/CN=Test Intermediate",
            "root",
            "ca.ext",
        );
        p
    }

    pub fn openssl(&self, args: &str) {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("openssl {args}"))
            .current_dir(&self.dir)
            .output()
            .expect("openssl is installed");
        assert!(
            out.status.success(),
            "openssl {args}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A key and a certificate `name.crt` for `subject`, signed by CA
    /// `ca` with the extensions of file `ext`.
    pub fn sign(&self, name: &str, subject: &str, ca: &str, ext: &str) {
        self.openssl(&format!(
            "req -newkey {} -nodes -keyout {name}.key -out {name}.csr -subj '{subject}'",
            self.newkey
        ));
        self.openssl(&format!(
            "x509 -req -in {name}.csr -CA {ca}.pem -CAkey {ca}.key -CAcreateserial \
             -out {name}.crt -days 30 -extfile {ext}"
        ));
        std::fs::copy(
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.pem")),
        )
        .unwrap();
    }

    /// End entity `name` with `dns` as its subjectAltName.
    pub fn leaf(&self, name: &str, dns: &str) {
        let ext = format!("{name}.ext");
        std::fs::write(
            self.dir.join(&ext),
            format!("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nsubjectAltName=DNS:{dns}\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"),
        )
        .unwrap();
        self.sign(
            name,
            &format!("/C=CH/O=vecgate test/CN={name}"),
            "inter",
            &ext,
        );
        // The chain vecgate sends: the end entity, then the intermediate.
        let chain = [self.read(&format!("{name}.crt")), self.read("inter.pem")].concat();
        std::fs::write(self.path(&format!("{name}.pem")), chain).unwrap();
        super::write_secret(
            &self.path(&format!("{name}.key")),
            self.read(&format!("{name}.key")),
        );
    }

    /// `inter.crl`: the intermediate CA's CRL, listing the certificates
    /// of `revoked` (end entity names).
    pub fn crl(&self, revoked: &[&str]) {
        self.ca_db();
        for r in revoked {
            self.openssl(&format!(
                "ca -config ca.cnf -keyfile inter.key -cert inter.crt -revoke {r}.crt"
            ));
        }
        self.openssl("ca -config ca.cnf -keyfile inter.key -cert inter.crt -gencrl -out inter.crl");
    }

    /// A fresh `openssl ca` database for the intermediate CA.
    pub fn ca_db(&self) {
        std::fs::write(
            self.path("ca.cnf"),
            "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\ncrlnumber = crlnumber\nnew_certs_dir = .\nserial = serial\ndefault_md = sha256\ndefault_crl_days = 30\npolicy = p\n[p]\ncommonName = supplied\n",
        )
        .unwrap();
        std::fs::write(self.path("index.txt"), "").unwrap();
        std::fs::write(self.path("crlnumber"), "01\n").unwrap();
        std::fs::write(self.path("serial"), "1000\n").unwrap();
    }

    /// End entity `name` (made by [`Pki::leaf`]) signed again by the
    /// intermediate as `out.crt`, valid from `start` to `end` (openssl
    /// `YYYYMMDDHHMMSSZ`).
    pub fn redate(&self, name: &str, out: &str, start: &str, end: &str) {
        self.ca_db();
        self.openssl(&format!(
            "ca -config ca.cnf -batch -notext -keyfile inter.key -cert inter.crt -in {name}.csr \
             -out {out}.crt -startdate {start} -enddate {end} -extfile {name}.ext"
        ));
    }

    pub fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    pub fn read(&self, f: &str) -> Vec<u8> {
        std::fs::read(self.path(f)).unwrap()
    }
}
