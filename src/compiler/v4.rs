//! `closure-ledger-compiler/4`: the newest released Context Compiler. It is compiler/3
//! (`v3.rs`: compiler/2's five stages plus the task selection an Attempt may name) with two
//! changes (`v2::Rules::V4`):
//!
//! - (outside review 21; seed 000, "Validate authority and freshness — Reject or label …
//!   project excerpts whose source digest changed") of the goal's project sources, each path is delivered **once**, as recorded last (the
//!   greatest seq); every earlier record of the path is an omission decision, rule
//!   `freshness.sourceSuperseded`, reason naming the record that supersedes it. Compilers
//!   1–3 delivered every record, so two revisions of one file reached a worker as two
//!   authoritative excerpts with nothing to say which is current;
//! - (outside review 23) a repair child's prior-attempt feedback that loses an item to the policy's feedback
//!   limits fails the compilation when the phase policy *requires* WORKING, the class that
//!   carries it (seed 000: an overflow "fails compilation when policy marks the item
//!   required"); compilers 2 and 3 recorded such items as omissions even then.
//!
//! Elsewhere its output differs from compiler/3's only in `compilerVersion`. **Frozen** from
//! its release on: a change in output is compiler/5.

use ledger_schema::package::ContextPackage;

use super::v2::{self, Rules};
use super::v3;
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/4";

/// Compiler/4 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V4;

impl Compiler for V4 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    /// Compiler/2's rendering (which renders `selectedSkills` when present).
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown(package)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/3's stages,
/// each project path delivered as recorded last.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V4)
}
