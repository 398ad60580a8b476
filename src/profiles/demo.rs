//! The context-profile part of `ledger demo`: a small source tree in ECC's layout, one
//! registry snapshot, then Lean -> Full -> rollback under a state root beside the ledger.

use std::path::Path;

use ledger_schema::events::profile::{SelectionMode, Target};

use super::{PlanInput, ProfileError, ProfileStatus};

const TREE: &[(&str, &str)] = &[
    (
        "skills/python-patterns/SKILL.md",
        "---\nname: python-patterns\ndescription: Idiomatic Python patterns.\n---\n# Python patterns\n",
    ),
    ("skills/python-patterns/references/details.md", "Use frozen dataclasses for values.\n"),
    (
        "skills/testing/SKILL.md",
        "---\nname: testing\ndescription: Focused tests that can fail.\n---\n# Testing\n",
    ),
    (
        "skills/security-review/SKILL.md",
        "---\nname: security-review\ndescription: Review trust boundaries.\n---\n# Security review\n",
    ),
    (
        "skills/code-review/SKILL.md",
        "---\nname: code-review\ndescription: Review code changes for correctness and naming.\n---\n# Code review\n\nRead the diff twice; name what each change proves.\n",
    ),
    (
        "skills/change-summary/SKILL.md",
        "---\nname: change-summary\ndescription: Summarize code changes for reviewers.\n---\n# Change summary\n\nOne line per changed behaviour.\n",
    ),
    (
        "skills/deploy/SKILL.md",
        "---\nname: deploy\ndescription: Deploy to staging.\ndisable-model-invocation: true\n---\n# Deploy\n",
    ),
    // Manual-only in Codex's own form too, so the Codex carrier says so.
    ("skills/deploy/agents/openai.yaml", "policy:\n  allow_implicit_invocation: false\n"),
    (
        "skills/shell-tools/SKILL.md",
        "---\nname: shell-tools\ndescription: Runs commands.\nallowed-tools: Bash\n---\n# Shell\n",
    ),
    (
        "manifests/context-packs/skill-registry@1.json",
        r#"{"version":1,"skills":[{"id":"skill:testing","dependencies":["skill:python-patterns"]},{"id":"skill:python-patterns","requiredResources":["skills/python-patterns/references/details.md"]}]}"#,
    ),
    (
        "manifests/context-profiles/lean@1.json",
        r#"{"id":"lean@1","description":"small base","eager":["skill:testing"],"required":["skill:python-patterns"],"budgetTokens":200,"budgetMode":"blocking"}"#,
    ),
    (
        "manifests/context-profiles/full@1.json",
        r#"{"id":"full@1","description":"everything selectable","eager":"all","required":["skill:python-patterns"],"budgetTokens":200,"budgetMode":"report-only"}"#,
    ),
];

/// Writes the demo tree under `root`.
pub fn write_tree(root: &Path) -> std::io::Result<()> {
    for (path, text) in TREE {
        let path = root.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    Ok(())
}

/// Records the registry and applies Lean -> Full -> rollback. Returns one line per step.
/// The state root's name inside the demo's work directory.
pub const STATE_ROOT: &str = "profile-store";

pub fn run(dir: &Path, work: &Path) -> Result<Vec<String>, ProfileError> {
    let tree = work.join("sources");
    write_tree(&tree).map_err(|e| ProfileError::Usage(format!("{}: {e}", tree.display())))?;
    let state_root = work.join(STATE_ROOT);
    let scan = super::record_registry(dir, &tree)?;
    let mut lines = vec![format!(
        "registry {} recorded at seq {} ({} sources)",
        scan.registry_digest, scan.seq, scan.sources
    )];
    let input = |profile: &str| PlanInput {
        profile: profile.to_owned(),
        target: Some(Target::Codex),
        mode: Some(SelectionMode::Manual),
        include: Some(Vec::new()),
        exclude: Some(Vec::new()),
        exclusions_add: false,
    };
    let line = |what: &str, st: &ProfileStatus| {
        format!(
            "profile {what}: revision {} {} selected [{}] generation {}",
            st.revision,
            st.profile_id.clone().unwrap_or_default(),
            st.selected_ids.join(", "),
            st.generation_digest.map(|d| d.to_string()).unwrap_or_default()
        )
    };
    let lean = super::set(dir, &input("lean"), &state_root, Some(0), false)?;
    lines.push(line("set lean", &lean));
    let full = super::set(dir, &input("full"), &state_root, Some(1), false)?;
    lines.push(line("set full", &full));
    let back = super::rollback(dir, &state_root, 2)?;
    lines.push(line("rollback", &back));
    if back.generation_digest != lean.generation_digest || back.plan_digest != lean.plan_digest {
        return Err(ProfileError::Refused("rollback did not return to the Lean generation".into()));
    }
    super::status(dir, None)?;
    Ok(lines)
}
