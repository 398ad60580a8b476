//! Arbitrary bytes into the strict entry decoder: never a panic; anything accepted
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = ledger_schema::Entry::decode(data) {
        assert_eq!(entry.encode(), data, "accepted bytes must be canonical");
    }
});
