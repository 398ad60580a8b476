//! `closure-ledger-compiler/3`: a released Context Compiler (compiler/4 is the newest). It is compiler/2
//! (`v2.rs`: the same five stages, selection, order, budgets and package bytes) plus the
//! **task selection** an Attempt may name (issue #15, seed 003 "Task selection"):
//!
//! - the selection is checked over the state ([`attempt_material`]: recorded, completed,
//!   loaded, for this goal, goal revision and phase, its binding still current, every
//!   loaded resource still the registry's bytes, UTF-8 text); a selection that no longer
//!   holds is a context that no longer compiles (a dispatch claim is then `ManifestStale`,
//!   a dispatched Attempt is marked CONTEXT_CHANGED);
//! - its loaded resources (each selected skill's `SKILL.md` and required resources, in the
//!   selection's (id, path) order: the dependency closure) become **one**
//!   `PROJECT_MATERIAL` item of kind `taskSelection`, authority class `PROMPT_ADVISORY`
//!   (it grants no tool, capability or authority), source `selection/<receiptDigest>`,
//!   revision the selection's seq, source digest the receipt digest; it follows the goal's
//!   project sources inside the class budget and is kept or omitted whole — what does not
//!   fit (or a phase that does not want project material) is one recorded omission, never
//!   a required overflow and never half a skill;
//! - the package carries them as `selectedSkills`, the manifest binds the selection's
//!   `receiptDigest` (`selectionReceipt`), and `compilerVersion` is this one.
//!
//! Without a selection its output differs from compiler/2's only in `compilerVersion`.
//! **Frozen** from its release on: a change in output is compiler/4.

use ledger_schema::Digest;
use ledger_schema::package::{ContextPackage, SelectedSkill};
use ledger_schema::types::{AuthorityClass, InputClass};

use super::v2::{self, Item, Place, Rules, Source, item_in};
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
    with_selection(state, binding, VERSION, Rules::V2)
}

/// Compiler/2's stages with the selection's loaded sources as advisory project material,
/// recording `version` under `rules` (shared with compiler/4, which differs only in them).
pub(super) fn with_selection(
    state: &State,
    binding: &AttemptBinding,
    version: &'static str,
    rules: Rules,
) -> Result<Compiled, CompileError> {
    let advisory = match binding.selection {
        Some(receipt) => selected_sources(state, binding, receipt)?,
        None => Vec::new(),
    };
    v2::pipeline(state, binding, version, advisory, rules)
}

/// The selection `receipt`, checked, as one `PROJECT_MATERIAL` item: its loaded sources
/// are its dependency closure, so they are kept or omitted whole (a worker never gets a
/// required resource without the instructions that use it, or a skill without its
/// dependencies).
fn selected_sources(state: &State, b: &AttemptBinding, receipt: Digest) -> Result<Vec<Item>, CompileError> {
    let (selection, material) =
        attempt_material(state, receipt, b.goal_id, b.goal_revision, b.phase, b.selection_currency)?;
    if material.is_empty() {
        // A `none` decision: the manifest binds the receipt, nothing is rendered.
        return Ok(Vec::new());
    }
    let value: Vec<SelectedSkill> = material
        .into_iter()
        .map(|m| SelectedSkill {
            id: m.resource.id.clone(),
            path: m.resource.path.clone(),
            digest: m.resource.digest,
            content: m.text.to_owned(),
        })
        .collect();
    let source = Source {
        kind: "taskSelection",
        source_ref: {
            let mut r = String::with_capacity(10 + 67);
            r.push_str("selection/");
            receipt.push_to(&mut r);
            r
        },
        source_revision: selection.seq,
        source_digest: Some(receipt),
        authority_class: AuthorityClass::PromptAdvisory,
    };
    Ok(vec![item_in(InputClass::ProjectMaterial, source, value, Place::Skills)])
}
