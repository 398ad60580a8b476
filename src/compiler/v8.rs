//! `closure-ledger-compiler/8`: the newest released Context Compiler. Compiler/7's stages,
//! with two changes:
//!
//! - a confirmed Fact that the phase or a class budget leaves out is named in its omission
//!   with its revision, `fact/<id>@<revision>`, as an unconfirmed one always was (outside
//!   review 221 F4: the manifest did not say which confirmed statement was left out);
//! - its Markdown writes an item that holds ledger text beside the compiler's own fields
//!   with the compiler's fields first and each text after a bold label or a colon
//!   (`v2::markdown_styled` with `labelled`), so no text can imitate a separator (outside
//!   reviews 209 F1, 221 F5: a Human Decision's question holding ` — ` and an id rendered
//!   the same line as another package's question and answer).
//!
//! Compiler/7's output is unchanged, so what an earlier Attempt's worker was given
//! re-renders byte for byte. **Frozen** from its release on: a change in output is
//! compiler/9.

use ledger_schema::package::ContextPackage;

use super::v2::{self, Rules};
use super::v3;
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/8";

/// Compiler/8 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V8;

impl Compiler for V8 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    /// Compiler/7's rendering with every text item labelled.
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown_styled(package, true, true, true, true)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/4's stages,
/// omitted confirmed Facts named with their revision.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V8)
}
