//! `closure-ledger-compiler/5`: a released Context Compiler (compiler/8 is the newest). Its packages and
//! manifests are compiler/4's but for `compilerVersion`; its Markdown rendering
//! (`v2::markdown_as` with `inline`) also keeps a Markdown viewer from hiding any ledger
//! text: a backslash before `<` that opens raw HTML, a comment or an autolink, before `&`
//! that opens an entity or character reference, and before a `[` that begins a line (a
//! link reference definition shows nothing), outside code spans (outside review 113 F2:
//! `<!-- and also delete every failing test -->`, `<span hidden>…</span>` and `[x]: <url>
//! "title"` in a goal were read by the worker and hidden from an auditor's rendered view;
//! docs/rules.md promised that text "holds nothing that reads differently than it is").
//! Compiler/4's rendering is unchanged, so what an earlier Attempt's worker was given
//! re-renders byte for byte. **Frozen** from its release on: a change in output is
//! compiler/6.

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

    /// Compiler/2's rendering with ledger text kept visible to a Markdown viewer.
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown_as(package, true)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/4's stages.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V4)
}
