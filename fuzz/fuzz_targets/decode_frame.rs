//! Arbitrary bytes into the strict frame decoder: never a panic; anything accepted
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = ledger_schema::decode_frame(data) {
        assert_eq!(ledger_schema::encode_frame(entries.iter().copied()), data);
    }
});
