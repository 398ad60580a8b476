//! One test binary for the replay-tests crate (as ripgrep and rust-analyzer do): each module
//! was a binary of its own, each re-linking sled, tokio and the ledger. Tests that still
//! live beside this directory are separate binaries (the profile and compiler-version suites).

mod compiler;
mod crash;
mod engine;
mod faults;
mod fuzz_corpus;
mod lifecycle;
mod recovery;
mod redelivery;
mod replay_cli;
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
mod status;
mod submit;
mod tamper;
