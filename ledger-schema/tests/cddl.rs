#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
//! `ledger.cddl` describes every golden vector: each positive vector validates against the
//! `entry` rule with the `cddl` crate (an implementation independent of ours), and a
//! schema-breaking mutation does not.

use serde::Deserialize;

#[derive(Deserialize)]
struct Positive {
    name: String,
    hex: String,
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn schema() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/ledger.cddl")).unwrap()
}

/// Every positive vector validates against `ledger.cddl`.
#[test]
fn every_positive_vector_matches_the_cddl() {
    let schema = schema();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/vectors/positive.json");
    let vectors: Vec<Positive> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(vectors.len() >= 28);
    for v in vectors {
        let bytes = unhex(&v.hex);
        if let Err(e) = cddl::validate_cbor_from_slice(&schema, &bytes, None) {
            panic!("{} does not match ledger.cddl: {e}", v.name);
        }
    }
}

/// Every Context Package and Context Manifest the golden lifecycle files hold — every
/// compiler version's, plain, repair and protected — validates against `context-package` and
/// `context-manifest` (outside review 201 F2: the package's shape was documented nowhere),
/// and a package with a field of the wrong type does not.
#[test]
fn every_golden_package_and_manifest_matches_the_cddl() {
    let schema = schema();
    let as_first = |rule: &str| format!("root = {rule}\n{schema}");
    let (packages, manifests) = (as_first("context-package"), as_first("context-manifest"));
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../replay-tests/golden");
    let (mut checked, mut manifests_checked) = (0, 0);
    let mut schemas = std::collections::BTreeSet::new();
    for file in std::fs::read_dir(dir).unwrap() {
        let path = file.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let golden: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for attempt in golden["attempts"].as_array().unwrap() {
            let name = format!("{} {}", path.display(), attempt["attemptId"]);
            let package = unhex(attempt["packageHex"].as_str().unwrap());
            if let Err(e) = cddl::validate_cbor_from_slice(&packages, &package, None) {
                panic!("{name}: package does not match context-package: {e}");
            }
            // (The first golden file, compiler/1's, holds packages only.)
            if let Some(hex) = attempt["manifestHex"].as_str() {
                if let Err(e) = cddl::validate_cbor_from_slice(&manifests, &unhex(hex), None) {
                    panic!("{name}: manifest does not match context-manifest: {e}");
                }
                manifests_checked += 1;
            }
            schemas.insert(attempt["schemaVersion"].as_u64().unwrap());
            checked += 1;
        }
    }
    assert!(checked >= 30 && manifests_checked >= 30, "{checked} packages, {manifests_checked} manifests");
    assert!(schemas.contains(&1) && schemas.contains(&2), "{schemas:?}");
    // Not vacuous: `schemaVersion` (text "9" for the integer) breaks it.
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{dir}/lifecycle-packages-v6.json")).unwrap())
            .unwrap();
    let package = unhex(golden["attempts"][0]["packageHex"].as_str().unwrap());
    let key = b"\x6dschemaVersion";
    let at = package.windows(key.len()).position(|w| w == key).unwrap() + key.len();
    let mut broken = package.clone();
    broken.splice(at..at + 1, [0x61, b'9']);
    assert!(cddl::validate_cbor_from_slice(&packages, &broken, None).is_err());
}

/// The schema is not vacuous: an entry whose `seq` is a text string fails validation.
#[test]
fn cddl_rejects_a_wrong_type() {
    let schema = schema();
    let sealed = &ledger_schema::samples::chain()[0].1;
    let mut value: serde_cbor_free::Value = serde_cbor_free::from_slice(&sealed.bytes);
    value.set_seq_text();
    let bytes = value.encode();
    assert!(cddl::validate_cbor_from_slice(&schema, &bytes, None).is_err());
}

/// A tiny hand-rolled mutation: replace the `seq` value (the first key after `v`) of a
/// genesis entry by the text "0", without any CBOR library.
mod serde_cbor_free {
    pub struct Value(Vec<u8>);
    pub fn from_slice(bytes: &[u8]) -> Value {
        Value(bytes.to_vec())
    }
    impl Value {
        pub fn set_seq_text(&mut self) {
            // a6 61 76 01 63 73 65 71 00 ... : map(6) "v" 1 "seq" 0
            assert_eq!(&self.0[..9], &[0xa6, 0x61, 0x76, 0x01, 0x63, b's', b'e', b'q', 0x00]);
            self.0.splice(8..9, [0x61, b'0']);
        }
        pub fn encode(self) -> Vec<u8> {
            self.0
        }
    }
}
