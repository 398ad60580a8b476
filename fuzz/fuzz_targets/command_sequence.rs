//! See `replay_tests::fuzz_targets::command_sequence` (shared with the stable corpus replay test).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = replay_tests::fuzz_targets::command_sequence(data);
});
