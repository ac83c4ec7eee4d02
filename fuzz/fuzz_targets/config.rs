//! The configuration parser on arbitrary text: `vecgate_config::parse`
//! (TOML → shape with line numbers → the one validator). Nothing may panic;
//! a rejection carries diagnostics whose lines lie within the text, and an
//! accepted configuration passes the validator again on its own.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A configuration file is UTF-8 text (the loader refuses anything else).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match vecgate_config::parse(text) {
        Ok(cfg) => {
            assert!(
                vecgate_config::validate(&cfg).is_empty(),
                "an accepted configuration validates again"
            );
        }
        Err(diags) => {
            assert!(!diags.is_empty(), "a rejection says why");
            let lines = text.matches('\n').count() + 2;
            for d in &diags {
                assert!(d.line <= lines, "line {} beyond the text's {lines}", d.line);
            }
        }
    }
});
