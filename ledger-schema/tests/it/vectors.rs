//! Golden vectors: frozen canonical bytes and entry hashes for every event kind, and
//! frozen non-canonical inputs that the strict decoder must refuse.
//!
//! `vectors/positive.json` is produced from `samples::chain()` by deleting it and running
//! `BLESS_VECTORS=1 cargo test -p ledger-schema --test it vectors`, and cross-checked by an
//! independent implementation written from docs/format.md (`vectors/crosscheck.py`: Python
//! cbor2 + blake3; it recomputes the entry hashes and every record digest).
//! `vectors/negative.json` is written by `vectors/make_negative.py` (its own encoder). A
//! change that moves one byte fails here until the vectors are consciously re-frozen.

use std::path::PathBuf;

use ledger_schema::{DecodeError, Entry, Event, SealedEntry, entry_hash, samples};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Positive {
    name: String,
    kind: String,
    seq: u64,
    hex: String,
    hash: String,
}

#[derive(Debug, Deserialize)]
struct Negative {
    name: String,
    hex: String,
    error: String,
}

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap()).collect()
}

fn load_positive() -> Vec<Positive> {
    let path = vectors_dir().join("positive.json");
    if std::env::var_os("BLESS_VECTORS").is_some() && !path.exists() {
        let fresh: Vec<Positive> = samples::chain()
            .into_iter()
            .map(|(name, sealed)| Positive {
                name: name.to_owned(),
                kind: sealed.entry.event.kind().to_owned(),
                seq: sealed.entry.seq,
                hex: hex(&sealed.bytes),
                hash: sealed.hash.to_string(),
            })
            .collect();
        std::fs::write(&path, serde_json::to_string_pretty(&fresh).unwrap() + "\n").unwrap();
    }
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// Every frozen positive vector decodes, re-encodes to the identical bytes and hashes to
/// the frozen hash.
#[test]
fn positive_vectors_round_trip() {
    for v in load_positive() {
        let bytes = unhex(&v.hex);
        let sealed = SealedEntry::open(&bytes).unwrap_or_else(|e| panic!("{}: {e}", v.name));
        assert_eq!(sealed.entry.encode(), bytes, "{}", v.name);
        assert_eq!(sealed.hash.to_string(), v.hash, "{}", v.name);
        assert_eq!(sealed.entry.event.kind(), v.kind, "{}", v.name);
        assert_eq!(sealed.entry.seq, v.seq, "{}", v.name);
    }
}

/// Today's encoder still produces the frozen bytes for the same values: the format did
/// not move.
#[test]
fn encoder_matches_frozen_vectors() {
    let frozen = load_positive();
    let now = samples::chain();
    assert_eq!(frozen.len(), now.len());
    for (v, (name, sealed)) in frozen.iter().zip(&now) {
        assert_eq!(v.name, *name);
        assert_eq!(v.hex, hex(&sealed.bytes), "{name}: encoding moved");
        assert_eq!(v.hash, sealed.hash.to_string(), "{name}: hash moved");
    }
}

/// The vectors cover every kind of catalog v1, and form one valid chain from genesis.
#[test]
fn vectors_cover_every_kind_and_chain() {
    let vectors = load_positive();
    for kind in Event::KINDS {
        assert!(vectors.iter().any(|v| v.kind == *kind), "no vector for {kind}");
    }
    let mut prev = ledger_schema::Digest::ZERO;
    for (seq, v) in (0u64..).zip(&vectors) {
        let bytes = unhex(&v.hex);
        let entry = Entry::decode(&bytes).unwrap();
        assert_eq!(entry.seq, seq);
        assert_eq!(entry.prev, prev, "{}", v.name);
        prev = entry_hash(&bytes);
    }
}

/// Every negative vector is refused with the expected error variant.
#[test]
fn negative_vectors_are_rejected() {
    let path = vectors_dir().join("negative.json");
    let negatives: Vec<Negative> = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(negatives.len() >= 12);
    let mut wrong = Vec::new();
    for n in negatives {
        let bytes = unhex(&n.hex);
        let error: DecodeError = match Entry::decode(&bytes) {
            Ok(entry) => panic!("{}: accepted {entry:?}", n.name),
            Err(e) => e,
        };
        // The variant name, exactly (`Schema` must not match `SchemaX`).
        let variant = format!("{error:?}");
        let name = variant.split(|c: char| !c.is_alphanumeric()).next().unwrap_or_default();
        if name != n.error {
            wrong.push(format!("{}: expected {}, got {variant}", n.name, n.error));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every record digest a positive vector carries is what the code's digest functions
/// compute (the same formulas `vectors/crosscheck.py` recomputes independently from
/// docs/format.md), and every digest that names another vector's record — a policy or
/// profile binding, an Evidence reference, a repair's copy of its decision's digests, a
/// manifest's goal entry — equals that record's digest. No placeholder passes.
#[test]
fn positive_vectors_carry_real_record_digests() {
    use ledger_schema::record_digests::evidence_set_digest;
    use ledger_schema::{Digest, DigestKind, Id};
    use std::collections::BTreeMap;

    let mut policies: BTreeMap<Id, Digest> = BTreeMap::new();
    let mut profiles: BTreeMap<Id, Digest> = BTreeMap::new();
    let mut goals: BTreeMap<(Id, u64), Digest> = BTreeMap::new();
    let mut evidence: BTreeMap<Id, Digest> = BTreeMap::new();
    let mut manifests: BTreeMap<Id, Digest> = BTreeMap::new();
    let mut receipts: BTreeMap<Digest, ()> = BTreeMap::new();
    let mut decisions: BTreeMap<Id, (Digest, Digest, Digest)> = BTreeMap::new();
    let mut checked = 0usize;
    let binding = |known: &BTreeMap<Id, Digest>, b: &ledger_schema::types::Binding, what: &str| {
        if let Some(d) = known.get(&b.id) {
            assert_eq!(*d, b.digest, "{what} binding {} names another digest", b.id);
        }
    };
    for v in load_positive() {
        let entry = Entry::decode(&unhex(&v.hex)).unwrap();
        let name = &v.name;
        match &entry.event {
            Event::PolicyBundleInstalled(e) => {
                assert_eq!(e.digest, e.bundle.digest(), "{name}: policy digest");
                policies.insert(e.policy_id, e.digest);
                checked += 1;
            }
            Event::ExecutionProfileInstalled(e) => {
                assert_eq!(e.digest, e.profile.digest(), "{name}: profile digest");
                profiles.insert(e.profile_id, e.digest);
                checked += 1;
            }
            Event::GoalCreated(e) => {
                goals.insert((e.goal_id, 1), e.content.digest());
            }
            Event::GoalRevised(e) => {
                goals.insert((e.goal_id, u64::from(e.revision)), e.content.digest());
            }
            Event::WorkflowStarted(e) => {
                binding(&policies, &e.policy, name);
                binding(&profiles, &e.profile, name);
            }
            Event::ProjectSourceRecorded(e) => {
                assert_eq!(
                    e.digest,
                    Digest::of(DigestKind::Source, e.content.as_bytes()),
                    "{name}: source digest"
                );
                checked += 1;
            }
            Event::AttemptStarted(e) => {
                assert_eq!(e.manifest_digest, e.manifest.digest(), "{name}: manifest digest");
                binding(&policies, &e.manifest.policy, name);
                binding(&profiles, &e.manifest.profile, name);
                for m in e.manifest.entries.iter().filter(|m| m.kind == "goal") {
                    let content = goals.get(&(e.manifest.goal_id, m.source_revision)).unwrap();
                    assert_eq!(m.source_digest, Some(*content), "{name}: goal entry sourceDigest");
                }
                // The manifest binds the same selection receipt the event names (compiler/3).
                assert_eq!(e.selection_receipt, e.manifest.selection_receipt, "{name}: selection receipt");
                if let Some(r) = e.selection_receipt {
                    assert_eq!(receipts.get(&r), Some(&()), "{name}: a recorded selection's receipt");
                }
                manifests.insert(e.attempt_id, e.manifest_digest);
                checked += 1;
            }
            Event::SelectionRecorded(e) => {
                receipts.insert(e.receipt().digest(), ());
            }
            Event::DispatchClaimed(e) => {
                binding(&profiles, &e.profile, name);
                assert_eq!(manifests.get(&e.attempt_id), Some(&e.manifest_digest), "{name}: manifest digest");
            }
            Event::WorkerEventAdmitted(e) => {
                assert_eq!(e.payload_digest, e.payload.digest(), "{name}: payload digest");
                assert_eq!(manifests.get(&e.attempt_id), Some(&e.manifest_digest), "{name}: manifest digest");
                checked += 1;
            }
            Event::EvidenceRecorded(e) => {
                evidence.insert(e.evidence_id, e.record_digest());
            }
            Event::AcceptanceDecided(e) => {
                let im = &e.input_manifest;
                assert!(im.evidence.windows(2).all(|w| w[0].evidence_id < w[1].evidence_id), "{name}: order");
                for r in &im.evidence {
                    assert_eq!(evidence.get(&r.evidence_id), Some(&r.record_digest), "{name}: evidence ref");
                }
                binding(&policies, &im.policy, name);
                if let Some(profile) = &im.profile {
                    binding(&profiles, profile, name);
                }
                assert!(
                    im.plan.is_none() || im.profile.is_some(),
                    "{name}: a plan pair only beside the profile"
                );
                assert_eq!(e.input_manifest_digest, im.digest(), "{name}: input manifest digest");
                assert_eq!(e.evidence_set_digest, evidence_set_digest(&im.evidence), "{name}: evidence set");
                assert_eq!(e.decision_digest, e.computed_digest(), "{name}: decision digest");
                decisions.insert(
                    e.decision_id,
                    (e.decision_digest, e.input_manifest_digest, e.evidence_set_digest),
                );
                checked += 1;
            }
            Event::RepairRecorded(e) => {
                assert_eq!(e.repair_digest, e.computed_digest(), "{name}: repair digest");
                let copies = (e.decision_digest, e.input_manifest_digest, e.evidence_set_digest);
                assert_eq!(decisions.get(&e.decision_id), Some(&copies), "{name}: the decision's digests");
                checked += 1;
            }
            _ => {}
        }
    }
    // policy, two profiles (one binding an App Server input closure), source, four
    // attempts (one carrying a selection, one a restart's replacement), payload, two
    // decisions (one binding the profile and plan pair), repair
    assert_eq!(checked, 12);
}
