//! `closure-ledger-compiler/5`: the newest released Context Compiler. It is compiler/4
//! (`v4.rs`: compiler/3's stages, each project path delivered once) with one change
//! (`v2::Rules::V5`):
//!
//! - (outside review 67; seed 000: "For each repair dispatch, the compiler MUST … render
//!   preservation constraints and a bounded feedback projection", and "Runtime MUST NOT
//!   ask the Worker to infer the previous failure") a repair child's FAILED_CHECK feedback
//!   item longer than the policy's `maxItemBytes` — its content carries the failing
//!   Evidence record's `detail`, admitted up to 64 KiB while an item is at most 4 KiB — is
//!   **cut** to fit: its content's longest prefix (at a character boundary, trailing white
//!   space and invisible characters dropped) followed by the marker
//!   ` [… cut to fit the policy's feedback item limit: the first K of N bytes; the cited
//!   Evidence record holds the whole detail]`. Compilers 1–4 left such an item out whole,
//!   so the repair worker learned only the failing check's id — or, where the phase
//!   requires WORKING, compiler/4 refused every repair Attempt of the workflow. An item is
//!   still left out (`feedback.maxItemBytes`) where not even the marker fits.
//!
//! Elsewhere its output differs from compiler/4's only in `compilerVersion`. **Frozen** from
//! its release on: a change in output is compiler/6.

use ledger_schema::package::ContextPackage;

use super::v2::{self, Rules};
use super::v3;
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/5";

/// Compiler/5 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V5;

impl Compiler for V5 {
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

/// Compiles the Context Package and Manifest for one Attempt start: compiler/4's stages,
/// a FAILED_CHECK feedback item over the item limit cut to fit.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V5)
}
