//! How each record's digest is computed. Every digest is `derive_key(context of its
//! kind, canonical bytes)` over the record *without its envelope* (its own id and digest
//! fields), and every binding it carries. docs/format.md lists them.

use serde::Serialize;

use crate::codec::record_digest;
use crate::events::{
    AcceptanceDecided, AcceptanceInputManifest, EvidenceRecorded, EvidenceRef, ExecutionProfile, GoalContent,
    PolicyBundle, RepairRecorded, WorkerPayload,
};
use crate::manifest::ContextManifest;
use crate::types::Verdict;
use crate::{Digest, DigestKind, Id};

impl PolicyBundle {
    pub fn digest(&self) -> Digest {
        record_digest(DigestKind::Policy, self).0
    }
}

impl ExecutionProfile {
    pub fn digest(&self) -> Digest {
        record_digest(DigestKind::Profile, self).0
    }
}

impl GoalContent {
    /// Digest of one Goal revision's content (a manifest `sourceDigest`).
    pub fn digest(&self) -> Digest {
        record_digest(DigestKind::Source, self).0
    }
}

impl WorkerPayload {
    /// Digest of the canonical payload: covers every field, including the observed time.
    /// (Admission computes it twice in a row — deciding the entry, then checking it in
    /// `apply` — so the second is answered by [`Digest::of_recent`]'s one-slot memo.)
    pub fn digest(&self) -> Digest {
        crate::codec::record_digest_recent(DigestKind::WorkerPayload, self)
    }
}

impl ContextManifest {
    pub fn digest(&self) -> Digest {
        record_digest(DigestKind::Manifest, self).0
    }
}

impl EvidenceRecorded {
    /// Digest of the whole Evidence record.
    pub fn record_digest(&self) -> Digest {
        record_digest(DigestKind::Evidence, self).0
    }
}

/// Digest of an Evidence Set: its references, sorted by evidence id.
pub fn evidence_set_digest(evidence: &[EvidenceRef]) -> Digest {
    record_digest(DigestKind::EvidenceSet, &evidence).0
}

impl AcceptanceInputManifest {
    pub fn digest(&self) -> Digest {
        record_digest(DigestKind::InputManifest, self).0
    }
}

/// What an Acceptance decision's digest covers (its id is envelope).
#[derive(Serialize)]
#[allow(non_snake_case)] // field names are the encoded keys
struct DecisionCore<'a> {
    reasons: &'a [String],
    verdict: Verdict,
    workflowId: Id,
    generationId: Id,
    candidateDigest: Digest,
    evidenceSetDigest: Digest,
    inputManifestDigest: Digest,
}

impl AcceptanceDecided {
    /// The digest `decisionDigest` must hold.
    pub fn computed_digest(&self) -> Digest {
        let core = DecisionCore {
            reasons: &self.reasons,
            verdict: self.verdict,
            workflowId: self.workflow_id,
            generationId: self.generation_id,
            candidateDigest: self.candidate_digest,
            evidenceSetDigest: self.evidence_set_digest,
            inputManifestDigest: self.input_manifest_digest,
        };
        record_digest(DigestKind::Decision, &core).0
    }
}

/// What a Repair record's digest covers (its id and digest are envelope).
#[derive(Serialize)]
#[allow(non_snake_case)] // field names are the encoded keys
struct RepairCore<'a> {
    decisionId: Id,
    workflowId: Id,
    decisionDigest: Digest,
    childGenerationId: Id,
    evidenceSetDigest: Digest,
    parentGenerationId: Id,
    inputManifestDigest: Digest,
    constraintsToPreserve: &'a [String],
    parentCandidateDigest: Digest,
}

impl RepairRecorded {
    /// The digest `repairDigest` must hold.
    pub fn computed_digest(&self) -> Digest {
        let core = RepairCore {
            decisionId: self.decision_id,
            workflowId: self.workflow_id,
            decisionDigest: self.decision_digest,
            evidenceSetDigest: self.evidence_set_digest,
            childGenerationId: self.child_generation_id,
            inputManifestDigest: self.input_manifest_digest,
            parentGenerationId: self.parent_generation_id,
            constraintsToPreserve: &self.constraints_to_preserve,
            parentCandidateDigest: self.parent_candidate_digest,
        };
        record_digest(DigestKind::Repair, &core).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode;

    /// A record digest is BLAKE3's own one-shot `derive_key` over the materialised
    /// encoding, for every kind, at sizes around the reuse bound and past it.
    #[test]
    fn record_digest_equals_one_shot_derive_key() {
        for kind in DigestKind::ALL {
            for len in [0usize, 1, 100, 4096, 70_000, 1 << 20, 3 << 20, 5] {
                let value = (kind.context(), "y".repeat(len));
                let bytes = encode(&value);
                let expected = Digest(blake3::derive_key(kind.context(), &bytes));
                assert_eq!(record_digest(kind, &value), (expected, bytes.len()), "{kind:?} {len}");
            }
        }
    }

    /// The private digest cores are encoded in canonical key order too.
    #[test]
    fn digest_cores_are_canonical() {
        for (_, event) in crate::samples::events() {
            match event {
                crate::Event::AcceptanceDecided(d) => {
                    let core = DecisionCore {
                        reasons: &d.reasons,
                        verdict: d.verdict,
                        workflowId: d.workflow_id,
                        generationId: d.generation_id,
                        candidateDigest: d.candidate_digest,
                        evidenceSetDigest: d.evidence_set_digest,
                        inputManifestDigest: d.input_manifest_digest,
                    };
                    assert!(crate::codec::check_canonical(&encode(&core)).is_ok());
                }
                crate::Event::RepairRecorded(r) => {
                    let core = RepairCore {
                        decisionId: r.decision_id,
                        workflowId: r.workflow_id,
                        decisionDigest: r.decision_digest,
                        evidenceSetDigest: r.evidence_set_digest,
                        childGenerationId: r.child_generation_id,
                        inputManifestDigest: r.input_manifest_digest,
                        parentGenerationId: r.parent_generation_id,
                        constraintsToPreserve: &r.constraints_to_preserve,
                        parentCandidateDigest: r.parent_candidate_digest,
                    };
                    assert!(crate::codec::check_canonical(&encode(&core)).is_ok());
                }
                _ => {}
            }
        }
    }
}
