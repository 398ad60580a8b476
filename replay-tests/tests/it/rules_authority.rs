//! Authority installs: Policy Bundles and Execution Profiles.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::Rule;
use closure_ledger::runtime::command::*;
use ledger_schema::Event;
use ledger_schema::events::{ExecutionProfileInstalled, LedgerInitialized, PolicyBundleInstalled};
use ledger_schema::types::InputClass;
use replay_tests::world::{Stage, World};

fn install(bundle: ledger_schema::events::PolicyBundle) -> closure_ledger::runtime::Command {
    closure_ledger::runtime::Command::InstallPolicy(InstallPolicy { policy_id: lid(0x99), bundle })
}

/// A policy whose digest is not the digest of its content is refused.
#[test]
fn authority_digest_policy() {
    let mut w = World::at(Stage::Empty);
    let bundle = policy_bundle();
    w.forged(
        Event::PolicyBundleInstalled(PolicyBundleInstalled {
            policy_id: lid(1),
            digest: digest_of("other"),
            bundle,
        }),
        Rule::AuthorityDigest,
    );
}

/// A profile whose digest is not the digest of its content is refused.
#[test]
fn authority_digest_profile() {
    let mut w = World::at(Stage::Empty);
    w.forged(
        Event::ExecutionProfileInstalled(ExecutionProfileInstalled {
            profile_id: lid(1),
            digest: digest_of("other"),
            profile: profile(true),
        }),
        Rule::AuthorityDigest,
    );
}

/// maxEventBytes above 65,536, or below the smallest event of the longest kind at any time —
/// an empty COMPACTION_COMPLETED observed at `u64::MAX`, in canonical JSON (outside review 84: 1–58 installed, and no result
/// could ever be admitted under it; outside review 86: at 68 a compaction opened and could
/// never close, holding back every result) — is refused; that size is admitted.
#[test]
fn policy_bounds_max_event_bytes() {
    // The canonical JSON, written out (not computed by the code under test).
    // At any observed time: the widest `observedAtMs` (outside review 88).
    let least = r#"{"items":[],"kind":"COMPACTION_COMPLETED","observedAtMs":18446744073709551615,"text":""}"#
        .len() as u32;
    assert_eq!(least, 88);
    let mut w = World::at(Stage::Empty);
    for max in [0, 1, 58, least - 1, 65_537, u32::MAX] {
        let mut b = policy_bundle();
        b.max_event_bytes = max;
        let err = w.fails(install(b)).to_string();
        assert!(err.contains("PolicyBounds"), "{max}: {err}");
        // Each bound gives its own reason (outside review 95 F3: 65,537 was told about 88).
        let why = if max > 65_536 { "over 65536, the largest Worker payload" } else { "below 88 some kind" };
        assert!(err.contains(why), "{max}: {err}");
    }
    let mut b = policy_bundle();
    b.max_event_bytes = least;
    w.ok(install(b));
}

/// Feedback limits outside 1–128 items / 1–4,096 bytes per item are refused.
#[test]
fn policy_bounds_feedback_limits() {
    let mut w = World::at(Stage::Empty);
    for (items, item_bytes) in [(0, 4096), (129, 4096), (16, 0), (16, 4097)] {
        let mut b = policy_bundle();
        b.feedback.max_items = items;
        b.feedback.max_item_bytes = item_bytes;
        w.refused(install(b), Rule::PolicyBounds);
    }
}

/// Budgets must be one per class, sorted (so no class has two budgets).
#[test]
fn policy_bounds_budgets_sorted_unique() {
    let mut w = World::at(Stage::Empty);
    let mut b = policy_bundle();
    b.budgets.swap(0, 1);
    w.refused(install(b), Rule::PolicyBounds);
    let mut b = policy_bundle();
    b.budgets[1].class = InputClass::Identity;
    w.refused(install(b), Rule::PolicyBounds);
    // A phase names each input class once: required or optional, not both, not twice
    // (outside review 16); capabilities once each (`OutOfBounds`).
    let mut b = policy_bundle();
    let phase = &mut b.phases[0];
    let class = phase.required[0];
    phase.optional.push(class);
    w.refused(install(b), Rule::PolicyBounds);
    let mut b = policy_bundle();
    let class = b.phases[0].required[0];
    b.phases[0].required.push(class);
    w.refused(install(b), Rule::PolicyBounds);
    let mut b = policy_bundle();
    b.phases[0].capabilities = vec!["read".into(), "read".into()];
    w.refused(install(b), Rule::OutOfBounds);
    w.ok(install(policy_bundle()));
}

/// An authority id is installed once: the same id with another bundle is refused (exactly
/// the same command is a redelivery: `redelivery.rs`).
#[test]
fn id_reused_policy() {
    let mut w = World::at(Stage::Setup);
    let mut bundle = policy_bundle();
    bundle.invariants.push("Never skip the review.".into());
    w.refused(
        closure_ledger::runtime::Command::InstallPolicy(InstallPolicy { policy_id: lid(POLICY), bundle }),
        Rule::IdReused,
    );
}

/// A second genesis entry is refused.
#[test]
fn genesis_only_first() {
    let mut w = World::at(Stage::Setup);
    w.forged(
        Event::LedgerInitialized(LedgerInitialized { catalog: 1, label: "again".into() }),
        Rule::Genesis,
    );
}

/// A genesis that announces an event catalog this build does not read is refused, never
/// guessed (outside review 24: catalog 2 was accepted); the catalog this build writes is
/// admitted.
#[test]
fn genesis_announces_the_catalog_this_build_reads() {
    use closure_ledger::runtime::State;
    use ledger_schema::events::CATALOG_VERSION;
    use ledger_schema::{Digest, Entry};
    for (catalog, admitted) in [(CATALOG_VERSION, true), (2, false), (0, false)] {
        let entry = Entry {
            v: ledger_schema::FORMAT_VERSION,
            seq: 0,
            prev: Digest::default(),
            event: Event::LedgerInitialized(LedgerInitialized { catalog, label: "t".into() }),
            ledger: replay_tests::LEDGER,
            time_ms: replay_tests::T0,
        };
        let result = closure_ledger::admission::apply(&mut State::default(), &entry);
        match result {
            Ok(()) => assert!(admitted, "catalog {catalog} admitted"),
            Err(e) => {
                assert!(!admitted, "catalog {catalog}: {e}");
                assert!(e.to_string().contains("Genesis") && e.to_string().contains("catalog"), "{e}");
            }
        }
    }
}

/// The acceptance-critical (protected) profile does not select AUTOMATIC compaction (seed
/// 000: "Automatic triggering remains UNKNOWN and unselected by the bounded M2 Execution
/// Profile"; outside review 77); an unprotected profile may, and a protected one may take
/// MANUAL or DISABLED.
#[test]
fn a_protected_profile_cannot_select_automatic_compaction() {
    use closure_ledger::runtime::Command;
    use ledger_schema::types::CompactionMode;
    let install = |id: u128, protected: bool, compaction: CompactionMode| {
        Command::InstallProfile(InstallProfile {
            profile_id: lid(id),
            profile: ledger_schema::events::ExecutionProfile { compaction, ..profile(protected) },
        })
    };
    let mut w = World::at(Stage::Empty);
    let err = w.fails(install(0x31, true, CompactionMode::Automatic));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::CompactionMode), "{err}");
    assert!(err.to_string().contains("protected") && err.to_string().contains("MANUAL"), "{err}");
    w.ok(install(0x32, false, CompactionMode::Automatic));
    w.ok(install(0x33, true, CompactionMode::Manual));
    w.ok(install(0x34, true, CompactionMode::Disabled));
}
