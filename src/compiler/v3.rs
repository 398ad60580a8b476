//! `closure-ledger-compiler/3`: the newest released Context Compiler. It is compiler/2
//! (`v2.rs`: the same five stages, selection, order, budgets and package bytes) plus the
//! **task selection** an Attempt may name (issue #15, seed 003 "Task selection"):
//!
//! - the selection is checked over the state ([`attempt_material`]: recorded, completed,
//!   loaded, for this goal, goal revision and phase, its binding still current, every
//!   loaded resource still the registry's bytes, UTF-8 text); a selection that no longer
//!   holds is a context that no longer compiles (a dispatch claim is then `ManifestStale`,
//!   a dispatched Attempt is marked CONTEXT_CHANGED);
//! - each loaded resource (a skill's `SKILL.md` and its required resources, in the
//!   selection's (id, path) order) becomes a `PROJECT_MATERIAL` item of kind
//!   `selectedSkill`, authority class `PROMPT_ADVISORY` (it grants no tool, capability or
//!   authority), source `<id>/<path>`, revision the selection's seq, source digest the
//!   registry's resource digest; they follow the goal's project sources inside the class
//!   budget, and what does not fit (or a phase that does not want project material) is a
//!   recorded omission — never a required overflow;
//! - the package carries them as `selectedSkills`, the manifest binds the selection's
//!   `receiptDigest` (`selectionReceipt`), and `compilerVersion` is this one.
//!
//! Without a selection its output differs from compiler/2's only in `compilerVersion`.
//! **Frozen** from its release on: a change in output is compiler/4.

use ledger_schema::Digest;
use ledger_schema::package::{ContextPackage, SelectedSkill};
use ledger_schema::types::{AuthorityClass, InputClass};

use super::v2::{self, Item, Place, Source, item};
use super::{CompileError, Compiled, Compiler};
use crate::runtime::AttemptBinding;
use crate::runtime::selection::attempt_material;
use crate::runtime::state::State;

/// The `compilerVersion` this compiler records.
pub const VERSION: &str = "closure-ledger-compiler/3";

/// Compiler/3 as a registry entry.
#[derive(Debug, Clone, Copy, Default)]
pub struct V3;

impl Compiler for V3 {
    fn version(&self) -> &'static str {
        VERSION
    }

    fn compile(&self, state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
        compile(state, binding)
    }

    /// Compiler/2's rendering, which renders `selectedSkills` when present.
    fn markdown(&self, package: &ContextPackage) -> String {
        v2::markdown(package)
    }
}

/// Compiles the Context Package and Manifest for one Attempt start: compiler/2's stages
/// with the selection's loaded sources as advisory project material.
pub fn compile(state: &State, binding: &AttemptBinding) -> Result<Compiled, CompileError> {
    let advisory = match binding.selection {
        Some(receipt) => selected_sources(state, binding, receipt)?,
        None => Vec::new(),
    };
    v2::pipeline(state, binding, VERSION, advisory)
}

/// One `PROJECT_MATERIAL` item per loaded resource of selection `receipt`, checked.
fn selected_sources(state: &State, b: &AttemptBinding, receipt: Digest) -> Result<Vec<Item>, CompileError> {
    let (selection, material) = attempt_material(state, receipt, b.goal_id, b.goal_revision, b.phase)?;
    Ok(material
        .into_iter()
        .map(|m| {
            let value = SelectedSkill {
                id: m.resource.id.clone(),
                path: m.resource.path.clone(),
                digest: m.resource.digest,
                content: m.text.to_owned(),
            };
            let source = Source {
                kind: "selectedSkill",
                source_ref: format!("{}/{}", m.resource.id, m.resource.path),
                source_revision: selection.seq,
                source_digest: Some(m.resource.digest),
                authority_class: AuthorityClass::PromptAdvisory,
            };
            item(InputClass::ProjectMaterial, source, &value, Place::Skill(value.clone()))
        })
        .collect())
}
