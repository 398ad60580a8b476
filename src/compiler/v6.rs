//! `closure-ledger-compiler/6`: a released Context Compiler (compiler/8 is the newest). Its packages and
//! manifests are compiler/5's but for `compilerVersion`; its Markdown rendering
//! (`v2::markdown_cited`) also shows the digests the package cites for each repair item —
//! every prior-attempt feedback item's source digests beside its source records, and each
//! failed Evidence record's record digest, check-specification digest and eligibility (seed
//! 000: "Every item MUST cite its source records and digests"; outside reviews 128 F5 and
//! 146 F6: the rendering a worker reads named the records and left their digests in the
//! package bytes only). Compiler/5's rendering is unchanged, so what an earlier Attempt's
//! worker was given re-renders byte for byte. **Frozen** from its release on: a change in
//! output is compiler/7.

use ledger_schema::package::ContextPackage;

use super::v2::{self, Rules};
use super::v3;
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/6";

/// Compiler/6 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V6;

impl Compiler for V6 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    /// Compiler/5's rendering with every repair item's digests shown.
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown_cited(package, true, true, false)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/4's stages.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V4)
}
