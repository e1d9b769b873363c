//! The exposition parser must never panic: any bytes give a document or a `ParseError`.
//! When it parses, the derived route observations must not panic either.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(doc) = harrier::sources::scrape::exposition::parse_bytes(data) {
        let _ = harrier::sources::scrape::presets::observations(&doc, "fuzz");
    }
});
