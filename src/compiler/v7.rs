//! `closure-ledger-compiler/7`: a released Context Compiler (compiler/8 is the newest). Its packages and
//! manifests are compiler/6's but for `compilerVersion`; its Markdown rendering also writes
//! every `$` in ledger text with a backslash, so a viewer that renders `$…$` and `$$…$$` as
//! math (GitHub's) never draws any of it as something else — `\phantom{…}` draws its text
//! as blank space, and a constraint, fact or decision answer could hide a clause from an
//! auditor reading the rendered Markdown while the worker reads it (outside review 221 F2).
//! Compiler/6's rendering is unchanged, so what an earlier Attempt's worker was given
//! re-renders byte for byte. **Frozen** from its release on: a change in output is
//! compiler/8.

use ledger_schema::package::ContextPackage;

use super::v2::{self, Rules};
use super::v3;
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/7";

/// Compiler/7 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V7;

impl Compiler for V7 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    /// Compiler/6's rendering with no `$` opening a viewer's math.
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown_cited(package, true, true, true)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/4's stages.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    v3::with_selection(state, binding, VERSION, Rules::V4)
}
