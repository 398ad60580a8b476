//! Candidate generations: the first opened once; frozen once; nothing frozen under an
//! active attempt.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::Event;
use ledger_schema::events::GenerationOpened;
use replay_tests::world::{Stage, World};

fn freeze(id: u128) -> Command {
    Command::FreezeGeneration(FreezeGeneration {
        generation_id: lid(id),
        candidate_digest: digest_of("c"),
        change_set_digest: digest_of("cs"),
    })
}

/// A workflow's first generation is opened once; later ones come only from repairs.
#[test]
fn generation_open_once() {
    let mut w = World::at(Stage::Implementing);
    w.refused(
        Command::OpenGeneration(OpenGeneration {
            generation_id: lid(0x82),
            workflow_id: lid(WORKFLOW),
            base_digest: digest_of("b"),
        }),
        Rule::GenerationOpen,
    );
}

/// A generation that claims a parent without a repair record is refused.
#[test]
fn generation_open_without_repair_has_no_parent() {
    let mut w = World::at(Stage::Setup);
    w.forged(
        Event::GenerationOpened(GenerationOpened {
            generation_id: lid(0x82),
            workflow_id: lid(WORKFLOW),
            sequence: 2,
            base_digest: digest_of("b"),
            parent: Some(lid(0x80)),
            repair_id: None,
        }),
        Rule::GenerationOpen,
    );
}

/// Frozen is final.
#[test]
fn generation_not_mutable() {
    let mut w = World::at(Stage::Frozen);
    w.refused(freeze(0x80), Rule::GenerationNotMutable);
}

/// A generation does not freeze while an attempt works on it.
#[test]
fn attempt_active_blocks_freeze() {
    let mut w = World::at(Stage::Implementing);
    w.with(|s| s.start(0x64, 0x65)).unwrap();
    w.refused(freeze(0x80), Rule::AttemptActive);
}
