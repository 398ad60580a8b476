//! One test binary for the replay-tests crate (as ripgrep and rust-analyzer do): each module
//! was a binary of its own, each re-linking sled, tokio and the ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

mod compiler;
mod compiler_versions;
mod crash;
mod engine;
mod faults;
mod fuzz_corpus;
mod golden_packages;
mod lifecycle;
mod preallocated;
mod profiles_managed;
mod profiles_plan;
mod profiles_replay;
mod profiles_sources;
mod profiles_util;
mod recovery;
mod redelivery;
mod replay_cli;
mod replay_parallel;
mod rules_acceptance;
mod rules_attempt;
mod rules_authority;
mod rules_candidate;
mod rules_evidence;
mod rules_goal;
mod rules_repair;
mod rules_source;
mod rules_worker;
mod rules_workflow;
mod selection_attempt;
mod selection_cli;
mod selection_route;
mod status;
mod submit;
mod tamper;
