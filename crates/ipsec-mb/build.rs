//! Compiles the C shim against the installed intel-ipsec-mb header
//! (Debian: libipsec-mb-dev, installed by scripts/install-deps.sh) and
//! links the library.

fn main() {
    println!("cargo:rerun-if-changed=csrc/shim.c");
    cc::Build::new()
        .file("csrc/shim.c")
        .warnings(true)
        .extra_warnings(true)
        .compile("vecgate_ipsec_mb_shim");
    println!("cargo:rustc-link-lib=dylib=IPSec_MB");
}
