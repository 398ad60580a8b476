//! Golden packages: the reference lifecycle's Context Packages (exact bytes) and Manifest
//! digests are frozen in `replay-tests/golden/lifecycle-packages.json`, so any change in
//! compiler output fails here until `COMPILER_VERSION` is bumped and the goldens are
//! re-blessed on purpose (`BLESS_GOLDEN=1 cargo test -p replay-tests --test golden_packages`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use std::path::PathBuf;

use closure_ledger::admission;
use closure_ledger::compiler::COMPILER_VERSION;
use closure_ledger::ledger::Ledger;
use closure_ledger::lifecycle::Script;
use closure_ledger::runtime::State;
use closure_ledger::store::{MemStore, Store};
use ledger_schema::Event;
use replay_tests::*;
use serde_json::json;

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/lifecycle-packages.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every attempt of the reference lifecycle, recompiled from the ledger.
fn current() -> serde_json::Value {
    let mut ledger = Ledger::from_store(MemStore::new(LEDGER, "golden", T0)).unwrap();
    Script { ledger: &mut ledger, time_ms: T0, log: Vec::new() }.lifecycle().unwrap();
    let mut state = State::default();
    let mut attempts = Vec::new();
    for sealed in ledger.store().read_range(0, u64::MAX).unwrap() {
        if let Event::AttemptStarted(a) = &sealed.entry.event {
            let compiled = admission::recompile(&state, a).unwrap();
            attempts.push(json!({
                "attemptId": a.attempt_id,
                "phase": a.phase,
                "schemaVersion": compiled.package.schema_version,
                "packageDigest": compiled.manifest.package_digest,
                "manifestDigest": compiled.manifest_digest,
                "packageHex": hex(&compiled.package_bytes),
            }));
        }
        admission::apply(&mut state, &sealed.entry).unwrap();
    }
    json!({ "compilerVersion": COMPILER_VERSION, "attempts": attempts })
}

/// The compiler's output for the reference lifecycle is byte-for-byte the frozen one.
#[test]
fn lifecycle_packages_are_frozen() {
    let now = current();
    if std::env::var_os("BLESS_GOLDEN").is_some() {
        std::fs::write(golden_path(), serde_json::to_string_pretty(&now).unwrap() + "\n").unwrap();
    }
    let frozen: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(golden_path()).unwrap()).unwrap();
    assert_eq!(frozen["attempts"].as_array().unwrap().len(), 4);
    if frozen != now {
        assert_ne!(
            frozen["compilerVersion"], now["compilerVersion"],
            "compiler output changed without a compilerVersion bump: bump COMPILER_VERSION, then re-bless"
        );
        panic!("compilerVersion changed: re-bless the goldens on purpose (BLESS_GOLDEN=1)");
    }
}
