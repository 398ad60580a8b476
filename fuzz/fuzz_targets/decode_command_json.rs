//! See `replay_tests::fuzz_targets::decode_command_json` (shared with the stable corpus replay test).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    replay_tests::fuzz_targets::decode_command_json(data);
});
