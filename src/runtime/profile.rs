//! Context profiles (seed 003, issue #14): the rules for registry snapshots and profile
//! revisions, and the **plan** — a pure function of a registry and a selection — with the
//! **generation manifest** derived from it. `apply` re-derives every recorded plan and
//! generation digest, so live admission, reopen and `ledger replay` all prove them.
//!
//! No I/O: scanning a source tree and materialising a generation live in `crate::profiles`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::runtime::skill;
use ledger_schema::events::profile::{
    BudgetMode, ProfileDefinition, ProfileRevisionRecorded, ProfileSelection, Registry, RegistrySource,
    RevisionAction, SelectionMode, SourceRegistryRecorded, Target,
};
use ledger_schema::{Digest, DigestKind, codec};
use serde::Serialize;

use super::state::Map;
use super::{Rule, RuleViolation, State, ensure, violation};

/// The scanner version this build writes (`Registry::scanner`).
pub const SCANNER_VERSION: &str = "closure-ledger-scan/1";
/// Most sources in one registry.
pub const MAX_SOURCES: usize = 512;
/// Most resources (files) of one source.
pub const MAX_RESOURCES_PER_SOURCE: usize = 256;
/// Most profile definitions in one registry.
pub const MAX_PROFILES: usize = 16;
/// Most ids in `--include` / `--exclude`.
pub const MAX_SELECTION_IDS: usize = 128;
/// Longest id, name, path or description (bytes).
pub const MAX_NAME_BYTES: usize = 4096;
/// Front-matter keys that bear authority: a source carrying one is never selectable.
pub const AUTHORITY_KEYS: [&str; 5] = ["agent", "context", "hooks", "tools", "allowed-tools"];

/// The projection of context-profile events.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextProfiles {
    /// Every registry snapshot recorded → the seq of its entry (its bytes stay in the entry).
    pub registries: Map<Digest, u64>,
    /// Every revision, keyed by revision number (1, 2, ...).
    pub revisions: Map<u32, RevisionState>,
    /// The newest registry snapshot's digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_digest: Option<Digest>,
    /// The newest registry snapshot itself (covered by `registry_digest`).
    #[serde(skip)]
    pub registry: Option<Arc<Registry>>,
    /// The seq of the newest registry snapshot's entry (`registries` keeps the first seq
    /// of each digest: after A → B → A the current snapshot is the third entry, not the
    /// first; outside review 101). Derived, not encoded.
    #[serde(skip)]
    pub registry_seq: Option<u64>,
    /// The source tree the newest snapshot was scanned from, where it records one.
    /// Omitted when absent, so ledgers without it keep their state digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_root: Option<String>,
}

impl ContextProfiles {
    pub fn is_empty(&self) -> bool {
        self.registries.is_empty() && self.revisions.is_empty()
    }

    /// The store revision: 0 = unconfigured.
    pub fn revision(&self) -> u32 {
        self.revisions.get_max().map_or(0, |(r, _)| *r)
    }

    /// The current configuration, if any.
    pub fn current(&self) -> Option<&RevisionState> {
        self.revisions.get_max().map(|(_, s)| s)
    }
}

/// One recorded profile revision, with the plan it was proved against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionState {
    pub seq: u64,
    pub action: RevisionAction,
    pub selection: ProfileSelection,
    pub state_root: String,
    pub plan_digest: Digest,
    pub registry_digest: Digest,
    pub generation_digest: Digest,
    /// The plan (its digest is `plan_digest`).
    #[serde(skip)]
    pub plan: Arc<Plan>,
}

// ---------------------------------------------------------------------------------------
// Plans

/// Why a source was selected.
pub const REASON_REQUIRED: &str = "required";
pub const REASON_EAGER: &str = "eager";
pub const REASON_INCLUDE: &str = "include";
/// Followed by ` of <id>`: the first selected source (in id order) that depends on it.
pub const REASON_DEPENDENCY: &str = "dependency";

/// Why a source is in `excludedIds`.
pub const EXCLUDED_BY_USER: &str = "exclude";
pub const EXCLUDED_MANUAL_ONLY: &str = "manual-only";
pub const EXCLUDED_AUTHORITY: &str = "authority-bearing";
pub const EXCLUDED_DYNAMIC: &str = "dynamic-content";
/// Not routable (nor taken by an eager-all profile): a dependency it would bring in is never
/// selectable, excluded, or (for routing) manual-only — loading it would be refused.
pub const EXCLUDED_DEPENDENCY: &str = "dependency-not-selectable";
/// Not routable: with its dependencies it is more sources than one selection loads
/// (`selection::MAX_CLOSURE`).
pub const EXCLUDED_CLOSURE: &str = "closure-too-large";
/// Not routable: its load (with its dependencies) would be refused — a file it needs is
/// recorded by digest only, or the bytes are over one load's budget
/// (`selection::MAX_LOAD_BYTES`).
pub const EXCLUDED_NOT_LOADABLE: &str = "not-loadable";

/// One selected source of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanEntry {
    pub id: String,
    /// Metadata bytes: `name` + `description`.
    pub bytes: u64,
    pub reason: String,
    /// `ceil(bytes / 4)`.
    pub tokens: u64,
}

/// One excluded source and the rule that excluded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanExcluded {
    pub id: String,
    pub rule: String,
}

/// The metadata estimate of the selected entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Estimate {
    pub bytes: u64,
    pub tokens: u64,
    pub budget_mode: BudgetMode,
    /// `tokens > budgetTokens` (a Lean plan never is: it is refused instead).
    pub over_budget: bool,
    pub budget_tokens: u32,
}

/// A plan: a pure projection of one registry and one selection. Fields are declared in
/// canonical key order; `planDigest = Digest::of(ProfilePlan, canonical plan)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub target: Target,
    pub entries: Vec<PlanEntry>,
    pub exclude: Vec<String>,
    pub include: Vec<String>,
    pub profile: String,
    pub estimate: Estimate,
    pub routed_ids: Vec<String>,
    pub excluded_ids: Vec<PlanExcluded>,
    pub selected_ids: Vec<String>,
    pub profile_digest: Digest,
    pub selection_mode: SelectionMode,
    pub registry_digest: Digest,
}

impl Plan {
    pub fn digest(&self) -> Digest {
        codec::record_digest(DigestKind::ProfilePlan, self).0
    }

    /// The same plan under another selection mode (the mode selects nothing by itself).
    pub fn with_mode(&self, mode: SelectionMode) -> Plan {
        Plan { selection_mode: mode, ..self.clone() }
    }

    pub fn selection(&self) -> ProfileSelection {
        ProfileSelection {
            mode: self.selection_mode,
            target: self.target,
            exclude: self.exclude.clone(),
            include: self.include.clone(),
            profile: self.profile.clone(),
        }
    }
}

/// Why a plan was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    #[error("no source registry is recorded: run `ledger sources scan` first")]
    NoRegistry,
    #[error("unknown profile {0:?} (the registry defines {1})")]
    UnknownProfile(String, String),
    #[error("unknown source id {0:?}")]
    UnknownId(String),
    /// In an include or exclude list, which may be the configured one a command kept
    /// (outside review 206 F6: a plain `set` named an id the user never typed).
    #[error(
        "unknown source id {0:?} in the {1} list (the configured include and exclude lists hold unless given: `set` and `preview` take --clear-filters to start from none)"
    )]
    UnknownListed(String, &'static str),
    #[error(
        "{0:?} is both included and excluded (the configured include and exclude lists hold unless given: `set` and `preview` take --clear-filters to start from none; a named `resolve` never drops a configured exclusion)"
    )]
    IncludedAndExcluded(String),
    /// An id given to `--include` that the profile installs without it (outside review 224
    /// F3: accepted, it made a new revision that set every earlier receipt aside).
    #[error(
        "{id:?} is installed by profile {profile:?} without --include ({reason}): including it adds nothing; drop it"
    )]
    IncludeAddsNothing { id: String, profile: String, reason: String },
    #[error("{0:?} is given twice in --{1}")]
    Duplicate(String, &'static str),
    #[error("too many ids in --{0}: at most {MAX_SELECTION_IDS}")]
    TooManyIds(&'static str),
    #[error("{0:?} is required by the profile and cannot be excluded")]
    ExcludesRequired(String),
    #[error("excluded {excluded:?} is a dependency of selected {needed_by:?}")]
    ExclusionNeeded { excluded: String, needed_by: String },
    #[error("{id:?} is never selectable ({rule}){}", .needed_by.as_ref().map(|n| format!(", but selected {n:?} depends on it")).unwrap_or_default())]
    NotSelectable { id: String, rule: &'static str, needed_by: Option<String> },
    #[error(
        "the {profile} plan is estimated at {tokens} metadata tokens (an estimate: each entry's name and description bytes / 4, rounded up — not a tokenizer count), over its blocking budget of {budget}"
    )]
    OverBudget { profile: String, tokens: u64, budget: u32 },
}

/// What can never be selected, and why (`None` = selectable).
pub fn unselectable(source: &RegistrySource) -> Option<&'static str> {
    if !source.authority_keys.is_empty() {
        Some(EXCLUDED_AUTHORITY)
    } else if source.dynamic_content {
        Some(EXCLUDED_DYNAMIC)
    } else {
        None
    }
}

/// Why `source`, selectable itself, could not be loaded — the rule its closure breaks
/// (`selection::closure_over`, the very walk a load makes): a dependency unknown, never
/// selectable, `excluded`, or — unless `manual_ok` — manual-only gives
/// [`EXCLUDED_DEPENDENCY`], more than `max` sources [`EXCLUDED_CLOSURE`]. Seed 003:
/// "Native manual-only flags and authority-bearing metadata are checked before selection"
/// (outside reviews 79, 80: such sources were ranked and shortlisted, and `select` then
/// failed on a skill the user never named).
fn closure_block(
    by_id: &BTreeMap<&str, &RegistrySource>,
    excluded: &BTreeSet<&str>,
    source: &RegistrySource,
    manual_ok: bool,
    max: usize,
) -> Option<&'static str> {
    closure_of(by_id, excluded, source, manual_ok, max).err()
}

/// The closure [`closure_block`] walks, or the rule it breaks.
fn closure_of(
    by_id: &BTreeMap<&str, &RegistrySource>,
    excluded: &BTreeSet<&str>,
    source: &RegistrySource,
    manual_ok: bool,
    max: usize,
) -> Result<Vec<String>, &'static str> {
    super::selection::closure_over(
        by_id,
        &|id| excluded.contains(id),
        &|_| manual_ok,
        std::slice::from_ref(&source.id),
        max,
    )
    .map_err(|e| match e {
        super::selection::SelectionError::ClosureTooLarge(_) => EXCLUDED_CLOSURE,
        _ => EXCLUDED_DEPENDENCY,
    })
}

/// The profile named `id` (`lean@1`) or by name (`lean`).
pub fn find_profile<'r>(registry: &'r Registry, name: &str) -> Result<&'r ProfileDefinition, PlanError> {
    registry.profiles.iter().find(|p| p.id == name || p.name() == name).ok_or_else(|| {
        let known: Vec<&str> = registry.profiles.iter().map(|p| p.id.as_str()).collect();
        PlanError::UnknownProfile(name.to_owned(), known.join(", "))
    })
}

/// Sorted, unique, bounded, known ids: what `--include`/`--exclude` become.
fn normalise(
    registry: &BTreeMap<&str, &RegistrySource>,
    ids: &[String],
    flag: &'static str,
) -> Result<Vec<String>, PlanError> {
    if ids.len() > MAX_SELECTION_IDS {
        return Err(PlanError::TooManyIds(flag));
    }
    let mut set = BTreeSet::new();
    for id in ids {
        if !registry.contains_key(id.as_str()) {
            return Err(PlanError::UnknownListed(id.clone(), flag));
        }
        if !set.insert(id.clone()) {
            return Err(PlanError::Duplicate(id.clone(), flag));
        }
    }
    Ok(set.into_iter().collect())
}

fn ceil_div4(bytes: u64) -> u64 {
    bytes.div_ceil(4)
}

/// The plan of `selection` over `registry` (whose digest is `registry_digest`). The order
/// of `include`/`exclude` does not matter; duplicates are refused.
pub fn plan(
    registry: &Registry,
    registry_digest: Digest,
    profile: &str,
    target: Target,
    mode: SelectionMode,
    include: &[String],
    exclude: &[String],
) -> Result<Plan, PlanError> {
    let profile = find_profile(registry, profile)?;
    let by_id: BTreeMap<&str, &RegistrySource> =
        registry.sources.iter().map(|s| (s.id.as_str(), s)).collect();
    let include = normalise(&by_id, include, "include")?;
    let exclude = normalise(&by_id, exclude, "exclude")?;
    let excluded: BTreeSet<&str> = exclude.iter().map(String::as_str).collect();
    if let Some(both) = include.iter().find(|i| excluded.contains(i.as_str())) {
        return Err(PlanError::IncludedAndExcluded(both.clone()));
    }
    if let Some(req) = profile.required.iter().find(|r| excluded.contains(r.as_str())) {
        return Err(PlanError::ExcludesRequired(req.clone()));
    }
    // Seeds, with the strongest reason first.
    let mut reasons: BTreeMap<&str, String> = BTreeMap::new();
    for id in &profile.required {
        reasons.entry(id.as_str()).or_insert_with(|| REASON_REQUIRED.to_owned());
    }
    let eager: Vec<&str> = if profile.eager_all {
        // Every source it can load: one whose dependencies bring in a source never
        // selectable is left out with its rule, as that source is (outside review 79: one
        // such skill made the whole Full profile refused). A dependency the user excluded
        // still refuses the plan, naming what to exclude with it.
        registry
            .sources
            .iter()
            .filter(|s| unselectable(s).is_none())
            .filter(|s| closure_block(&by_id, &BTreeSet::new(), s, true, usize::MAX).is_none())
            .map(|s| s.id.as_str())
            .collect()
    } else {
        profile.eager.iter().map(String::as_str).collect()
    };
    for id in eager {
        if !excluded.contains(id) {
            reasons.entry(id).or_insert_with(|| REASON_EAGER.to_owned());
        }
    }
    for id in &include {
        let source = by_id.get(id.as_str()).ok_or_else(|| PlanError::UnknownId(id.clone()))?;
        if let Some(rule) = unselectable(source) {
            return Err(PlanError::NotSelectable { id: id.clone(), rule, needed_by: None });
        }
        reasons.entry(id.as_str()).or_insert_with(|| REASON_INCLUDE.to_owned());
    }
    // Close over dependencies, in id order so the recorded reason is deterministic.
    let mut pending: Vec<&str> = reasons.keys().rev().copied().collect();
    while let Some(id) = pending.pop() {
        let source = by_id.get(id).ok_or_else(|| PlanError::UnknownId(id.to_owned()))?;
        if let Some(rule) = unselectable(source) {
            return Err(PlanError::NotSelectable { id: id.to_owned(), rule, needed_by: None });
        }
        for dep in &source.dependencies {
            let dep = dep.as_str();
            let dep_source = by_id.get(dep).ok_or_else(|| PlanError::UnknownId(dep.to_owned()))?;
            if excluded.contains(dep) {
                return Err(PlanError::ExclusionNeeded {
                    excluded: dep.to_owned(),
                    needed_by: id.to_owned(),
                });
            }
            if let Some(rule) = unselectable(dep_source) {
                return Err(PlanError::NotSelectable {
                    id: dep.to_owned(),
                    rule,
                    needed_by: Some(id.to_owned()),
                });
            }
            if !reasons.contains_key(dep) {
                reasons.insert(dep, format!("{REASON_DEPENDENCY} of {id}"));
                pending.push(dep);
            }
        }
    }
    let mut entries = Vec::with_capacity(reasons.len());
    let mut routed_ids = Vec::new();
    let mut excluded_ids = Vec::new();
    for source in &registry.sources {
        let id = source.id.as_str();
        if let Some(reason) = reasons.get(id) {
            let bytes = (source.name.len() as u64).saturating_add(source.description.len() as u64);
            entries.push(PlanEntry {
                id: id.to_owned(),
                bytes,
                reason: reason.clone(),
                tokens: ceil_div4(bytes),
            });
        } else if excluded.contains(id) {
            excluded_ids.push(PlanExcluded { id: id.to_owned(), rule: EXCLUDED_BY_USER.to_owned() });
        } else if let Some(rule) = unselectable(source) {
            excluded_ids.push(PlanExcluded { id: id.to_owned(), rule: rule.to_owned() });
        } else if source.manual_only {
            excluded_ids.push(PlanExcluded { id: id.to_owned(), rule: EXCLUDED_MANUAL_ONLY.to_owned() });
        } else {
            // Routed only where selecting it would load: its closure walks (outside reviews
            // 79, 80) and its load is neither digest-only nor over one load's budget
            // (outside review 85: such a skill was ranked or cited, and `--load` then
            // refused the whole `select`) — `selection::load`, the very check a load makes.
            let routable = closure_of(&by_id, &excluded, source, false, super::selection::MAX_CLOSURE)
                .and_then(|ids| {
                    super::selection::load(registry, &ids).map(drop).map_err(|_| EXCLUDED_NOT_LOADABLE)
                });
            match routable {
                Ok(()) => routed_ids.push(id.to_owned()),
                Err(rule) => excluded_ids.push(PlanExcluded { id: id.to_owned(), rule: rule.to_owned() }),
            }
        }
    }
    let bytes = entries.iter().fold(0u64, |sum, e| sum.saturating_add(e.bytes));
    let tokens = entries.iter().fold(0u64, |sum, e| sum.saturating_add(e.tokens));
    let over_budget = tokens > u64::from(profile.budget_tokens);
    if over_budget && profile.budget_mode == BudgetMode::Blocking {
        return Err(PlanError::OverBudget {
            profile: profile.id.clone(),
            tokens,
            budget: profile.budget_tokens,
        });
    }
    Ok(Plan {
        target,
        selected_ids: entries.iter().map(|e| e.id.clone()).collect(),
        entries,
        exclude,
        include,
        profile: profile.id.clone(),
        estimate: Estimate {
            bytes,
            tokens,
            budget_mode: profile.budget_mode,
            over_budget,
            budget_tokens: profile.budget_tokens,
        },
        routed_ids,
        excluded_ids,
        profile_digest: profile.digest(),
        selection_mode: mode,
        registry_digest,
    })
}

/// [`plan`] of a recorded selection (which must already be normalised).
pub fn plan_of(
    registry: &Registry,
    registry_digest: Digest,
    s: &ProfileSelection,
) -> Result<Plan, PlanError> {
    plan(registry, registry_digest, &s.profile, s.target, s.mode, &s.include, &s.exclude)
}

// ---------------------------------------------------------------------------------------
// Generations

/// One file of a generation, relative to its root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationFile {
    pub path: String,
    pub bytes: u64,
    pub digest: Digest,
    /// Written 0700, not 0600 (the source file was executable). Absent when false: every
    /// earlier generation keeps its digest.
    #[serde(skip_serializing_if = "ledger_schema::events::profile::is_false")]
    pub executable: bool,
}

/// A generation's manifest: what its directory holds, laid out for the target.
/// `generationDigest = Digest::of(ProfileGeneration, canonical manifest)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GenerationManifest {
    pub files: Vec<GenerationFile>,
    pub target: Target,
}

impl GenerationManifest {
    pub fn digest(&self) -> Digest {
        codec::record_digest(DigestKind::ProfileGeneration, self).0
    }
}

/// A selected resource whose bytes the ledger does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{id} resource {path:?} is recorded by digest only (over the storage bound: a scan stores first what open workflows' Attempts loaded, then every agents/openai.yaml, then what the configured and previous generations install): it cannot be materialised — make room, then scan the tree again: what an Attempt loaded is kept while its workflow is open (close the workflows that no longer need it), an unchanged tree's rescan records nothing while an Attempt started over a selection awaits its dispatch claim (claim or cancel it first), or make the tree smaller"
)]
pub struct NotLoadable {
    pub id: String,
    pub path: String,
}

/// The directory a target's skills live in, inside a generation.
pub fn target_dir(target: Target) -> &'static str {
    match target {
        Target::Codex => ".codex/skills",
        Target::Claude => ".claude/skills",
    }
}

/// The manifest of the generation of `plan` over `registry`, with each file's bytes (a
/// pure function of the ledger: every byte comes from the registry entry).
pub fn generation<'r>(
    registry: &'r Registry,
    plan: &Plan,
) -> Result<(GenerationManifest, Vec<&'r [u8]>), NotLoadable> {
    let selected: BTreeSet<&str> = plan.selected_ids.iter().map(String::as_str).collect();
    let mut files = Vec::new();
    let mut contents = Vec::new();
    for source in registry.sources.iter().filter(|s| selected.contains(s.id.as_str())) {
        let dir = source.id.strip_prefix("skill:").unwrap_or(&source.id);
        for r in &source.resources {
            let content = r
                .content
                .as_ref()
                .ok_or_else(|| NotLoadable { id: source.id.clone(), path: r.path.clone() })?;
            files.push(GenerationFile {
                path: format!("{}/{dir}/{}", target_dir(plan.target), r.path),
                bytes: r.bytes,
                digest: r.digest,
                executable: r.executable,
            });
            contents.push(content.0.as_slice());
        }
    }
    Ok((GenerationManifest { files, target: plan.target }, contents))
}

// ---------------------------------------------------------------------------------------
// Rules

fn bounded_name(field: &str, value: &str) -> Result<(), RuleViolation> {
    ensure!(
        !value.is_empty() && value.len() <= MAX_NAME_BYTES,
        Rule::SourceRegistry,
        "{field} is empty or over {MAX_NAME_BYTES} bytes"
    );
    ensure!(!value.chars().any(char::is_control), Rule::SourceRegistry, "{field} holds a control character");
    Ok(())
}

fn sorted_unique<T: Ord>(field: &str, values: impl Iterator<Item = T>) -> Result<(), RuleViolation> {
    let mut last: Option<T> = None;
    for v in values {
        if let Some(prev) = &last {
            ensure!(*prev < v, Rule::SourceRegistry, "{field} is not sorted and unique");
        }
        last = Some(v);
    }
    Ok(())
}

/// A relative path inside one tree (a skill's, a project's): `/`-separated, no empty, `.`
/// or `..` part, no backslash, no control character, and not beginning with a drive
/// (`C:`, `C:x`), which another system reads as absolute or drive-relative.
pub fn safe_relative(path: &str) -> bool {
    let drive = |part: &str| matches!(part.as_bytes(), [letter, b':', ..] if letter.is_ascii_alphabetic());
    !path.is_empty()
        && path.len() <= MAX_NAME_BYTES
        && !path.starts_with('/')
        && path.split('/').all(|part| !part.is_empty() && part != "." && part != "..")
        && !path.split('/').next().is_some_and(drive)
        && !path.chars().any(|c| c.is_control() || c == '\\')
}

fn check_source(source: &RegistrySource) -> Result<(), RuleViolation> {
    let dir = source.id.strip_prefix("skill:").unwrap_or("");
    ensure!(
        !dir.is_empty() && safe_relative(dir) && !dir.contains('/'),
        Rule::SourceRegistry,
        "source id {:?} is not skill:<dir>",
        source.id
    );
    bounded_name("name", &source.name)?;
    ensure!(
        source.description.len() <= MAX_NAME_BYTES,
        Rule::SourceRegistry,
        "{} description too long",
        source.id
    );
    ensure!(
        !source.description.chars().any(char::is_control),
        Rule::SourceRegistry,
        "{} description holds a control character",
        source.id
    );
    ensure!(
        !source.resources.is_empty() && source.resources.len() <= MAX_RESOURCES_PER_SOURCE,
        Rule::SourceRegistry,
        "{} has {} resources (1 to {MAX_RESOURCES_PER_SOURCE})",
        source.id,
        source.resources.len()
    );
    sorted_unique("resources", source.resources.iter().map(|r| r.path.as_str()))?;
    ensure!(
        source.resources.iter().any(|r| r.path == "SKILL.md"),
        Rule::SourceRegistry,
        "{} has no SKILL.md",
        source.id
    );
    for r in &source.resources {
        ensure!(
            safe_relative(&r.path),
            Rule::SourceRegistry,
            "{} resource path {:?} escapes",
            source.id,
            r.path
        );
        if let Some(content) = &r.content {
            ensure!(
                content.0.len() as u64 == r.bytes,
                Rule::SourceRegistry,
                "{} resource {} stores {} bytes, records {}",
                source.id,
                r.path,
                content.0.len(),
                r.bytes
            );
            let found = ledger_schema::events::profile::SourceResource::digest_of(&content.0);
            ensure!(
                found == r.digest,
                Rule::SourceRegistry,
                "{} resource {} digest mismatch",
                source.id,
                r.path
            );
        }
    }
    ensure!(
        source.computed_content_digest() == source.content_digest,
        Rule::SourceRegistry,
        "{} contentDigest is not the digest of its resources",
        source.id
    );
    sorted_unique("dependencies", source.dependencies.iter())?;
    ensure!(
        !source.dependencies.contains(&source.id),
        Rule::SourceRegistry,
        "{} depends on itself",
        source.id
    );
    sorted_unique("requiredResources", source.required_resources.iter())?;
    for path in &source.required_resources {
        ensure!(
            source.resources.iter().any(|r| &r.path == path),
            Rule::SourceRegistry,
            "{} requires resource {path:?}, which is not in its tree",
            source.id
        );
    }
    sorted_unique("authorityKeys", source.authority_keys.iter())?;
    for key in &source.authority_keys {
        ensure!(
            AUTHORITY_KEYS.contains(&key.as_str()),
            Rule::SourceRegistry,
            "unknown authority key {key:?}"
        );
    }
    Ok(())
}

/// Every rule a registry snapshot obeys (the scanner produces only such snapshots; a
/// forged one is refused here, live and on replay).
pub fn check_registry(registry: &Registry) -> Result<(), RuleViolation> {
    // (One scanner has written every registry; another name is none of ours: outside
    // review 197 F2.)
    ensure!(
        registry.scanner == SCANNER_VERSION,
        Rule::SourceRegistry,
        "scanner {:?} is not {SCANNER_VERSION}",
        crate::runtime::escaped(&registry.scanner)
    );
    ensure!(
        registry.sources.len() <= MAX_SOURCES,
        Rule::SourceRegistry,
        "{} sources, over {MAX_SOURCES}",
        registry.sources.len()
    );
    sorted_unique("sources", registry.sources.iter().map(|s| s.id.as_str()))?;
    let by_id: BTreeMap<&str, &RegistrySource> =
        registry.sources.iter().map(|s| (s.id.as_str(), s)).collect();
    // What a scan of a tree records, held to the tree's own rules (outside review 195 F1:
    // flags contradicting the stored SKILL.md, a secret, a hidden or look-alike id
    // replayed, and were delivered): bounds, then each source's tree, then its names.
    let (mut total, mut stored) = (0u64, 0u64);
    for r in registry.sources.iter().flat_map(|s| &s.resources) {
        total = total.saturating_add(r.bytes);
        if r.content.is_some() {
            ensure!(
                r.bytes <= skill::MAX_STORED_FILE_BYTES,
                Rule::SourceRegistry,
                "resource {} stores {} bytes, over the stored-file bound of {}",
                crate::runtime::escaped(&r.path),
                r.bytes,
                skill::MAX_STORED_FILE_BYTES
            );
            stored = stored.saturating_add(r.bytes);
        }
    }
    ensure!(
        total <= skill::MAX_TREE_BYTES,
        Rule::SourceRegistry,
        "the sources hold {total} bytes, over the tree bound of {}",
        skill::MAX_TREE_BYTES
    );
    ensure!(
        stored <= skill::MAX_STORED_TOTAL_BYTES,
        Rule::SourceRegistry,
        "the registry stores {stored} resource bytes, over the bound of {}",
        skill::MAX_STORED_TOTAL_BYTES
    );
    // A file is recorded by digest only where it did not fit when the scan came to it: over
    // the per-file bound, or over what was left of the total — and what is stored only
    // grows, so it does not fit beside the final total either (every build's scan fills
    // greedily). One that would have fitted is a forger's choice (outside review 203 F1: a
    // 129-byte SKILL.md dropped to its digest, its name, description and flags rewritten).
    for s in &registry.sources {
        for r in s.resources.iter().filter(|r| r.content.is_none()) {
            ensure!(
                r.bytes > skill::MAX_STORED_FILE_BYTES
                    || stored.saturating_add(r.bytes) > skill::MAX_STORED_TOTAL_BYTES,
                Rule::SourceRegistry,
                "{} resource {} ({} bytes) is recorded by digest only though it fits the stored bounds beside the {stored} \
                 bytes stored (a scan stores every file that fits)",
                crate::runtime::escaped(&s.id),
                crate::runtime::escaped(&r.path),
                r.bytes
            );
        }
    }
    for source in &registry.sources {
        check_source(source)?;
        skill::check_recorded(source).map_err(|why| violation(Rule::SourceRegistry, why))?;
        for dep in &source.dependencies {
            ensure!(
                by_id.contains_key(dep.as_str()),
                Rule::SourceRegistry,
                "{} depends on unknown {dep}",
                source.id
            );
        }
    }
    if let Some(cycle) = dependency_cycle(&registry.sources) {
        return Err(violation(Rule::SourceRegistry, format!("dependency cycle through {cycle}")));
    }
    skill::check_names(&registry.sources).map_err(|why| violation(Rule::SourceRegistry, why))?;
    ensure!(
        registry.profiles.len() <= MAX_PROFILES,
        Rule::SourceRegistry,
        "{} profiles, over {MAX_PROFILES}",
        registry.profiles.len()
    );
    sorted_unique("profiles", registry.profiles.iter().map(|p| p.id.as_str()))?;
    ensure!(
        registry.profiles.iter().map(|p| p.id.as_str()).eq(["full@1", "lean@1"]),
        Rule::SourceRegistry,
        "the profiles are full@1 and lean@1 (the scan reads these two and no other)"
    );
    for p in &registry.profiles {
        bounded_name("profile id", &p.id)?;
        ensure!(p.description.len() <= MAX_NAME_BYTES, Rule::SourceRegistry, "{} description too long", p.id);
        skill::canonical_profile(&p.id, p.eager_all, p.budget_mode, p.budget_tokens)
            .map_err(|why| violation(Rule::SourceRegistry, format!("{}: {why}", p.id)))?;
        ensure!(
            skill::clean_text("description", &p.description).as_deref() == Ok(p.description.as_str()),
            Rule::SourceRegistry,
            "{} description is not as the scan records it (control characters refused, blanks collapsed)",
            p.id
        );
        ensure!(
            !p.eager_all || p.eager.is_empty(),
            Rule::SourceRegistry,
            "{}: eager is \"all\" or a list",
            p.id
        );
        sorted_unique("eager", p.eager.iter())?;
        sorted_unique("required", p.required.iter())?;
        let named =
            p.eager.iter().map(|id| (id, "eager")).chain(p.required.iter().map(|id| (id, "required")));
        for (id, list) in named {
            let source = by_id.get(id.as_str()).ok_or_else(|| {
                violation(Rule::SourceRegistry, format!("profile {} names unknown source {id}", p.id))
            })?;
            ensure!(
                unselectable(source).is_none(),
                Rule::SourceRegistry,
                "profile {} lists {id} as {list}, which is never selectable",
                p.id
            );
        }
    }
    Ok(())
}

/// A source on a dependency cycle, if there is one (iterative DFS, id order).
pub fn dependency_cycle(sources: &[RegistrySource]) -> Option<String> {
    let by_id: BTreeMap<&str, &RegistrySource> = sources.iter().map(|s| (s.id.as_str(), s)).collect();
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    for root in by_id.keys() {
        if mark.get(root).copied().unwrap_or(0) != 0 {
            continue;
        }
        let mut stack: Vec<(&str, usize)> = vec![(root, 0)];
        mark.insert(root, 1);
        while let Some((id, next)) = stack.pop() {
            let deps = by_id.get(id).map(|s| s.dependencies.as_slice()).unwrap_or(&[]);
            match deps.get(next) {
                Some(dep) => {
                    stack.push((id, next + 1));
                    match mark.get(dep.as_str()).copied().unwrap_or(0) {
                        1 => return Some(dep.clone()),
                        0 if by_id.contains_key(dep.as_str()) => {
                            mark.insert(dep.as_str(), 1);
                            stack.push((dep.as_str(), 0));
                        }
                        _ => {}
                    }
                }
                None => {
                    mark.insert(id, 2);
                }
            }
        }
    }
    None
}

/// Folds a registry snapshot: every registry rule, its digest, and not identical to the
/// current one (an identical rescan is a no-op that writes nothing).
pub fn apply_registry(state: &mut State, e: &SourceRegistryRecorded, seq: u64) -> Result<(), RuleViolation> {
    check_registry(&e.registry)?;
    let found = e.registry.digest();
    ensure!(
        found == e.registry_digest,
        Rule::SourceRegistry,
        "registryDigest {} is not the registry's digest {found}",
        e.registry_digest
    );
    if let Some(root) = &e.source_root {
        ensure!(
            root.len() <= MAX_ROOT_BYTES && root_text(root).is_ok(),
            Rule::SourceRegistry,
            "source root {root:?} is not an absolute, normalised path other than `/` of visible characters, at most {MAX_ROOT_BYTES} bytes"
        );
    }
    // The same snapshot again is news only from another tree (a moved checkout).
    ensure!(
        state.context_profiles.registry_digest != Some(found)
            || state.context_profiles.registry_root != e.source_root,
        Rule::SourceRegistry,
        "registry {found} is already the current one"
    );
    let cp = &mut state.context_profiles;
    cp.registry_root = e.source_root.clone();
    if !cp.registries.contains_key(&found) {
        cp.registries.insert(found, seq);
    }
    cp.registry_digest = Some(found);
    cp.registry = Some(Arc::new(e.registry.clone()));
    cp.registry_seq = Some(seq);
    Ok(())
}

fn plan_violation(e: PlanError) -> RuleViolation {
    violation(Rule::ProfilePlan, e.to_string())
}

/// Longest recorded source root (bytes): the usual `PATH_MAX`.
pub const MAX_ROOT_BYTES: usize = 4096;

/// A state root's text as `profile set` accepts it, checked without the filesystem or the
/// environment — one rule for `set` (`profiles::generation::root_path`) and replay, which
/// refuses what the CLI refuses (outside review 91: `/` replayed): absolute, normalised (no
/// empty, `.` or `..` part, no trailing `/`), not `/` itself, and no control, bidirectional
/// or invisible character; `Err` says which. (`set` also refuses the home directory, which
/// only the environment names.)
pub fn root_text(root: &str) -> Result<(), &'static str> {
    if root.chars().any(|c| c.is_control() || super::undeliverable(c) || super::invisible(c)) {
        return Err("holds a control, bidirectional or invisible character");
    }
    let Some(rest) = root.strip_prefix('/') else { return Err("is not absolute") };
    if rest.is_empty() {
        return Err("is the filesystem root");
    }
    if rest.split('/').any(|part| part.is_empty() || part == "." || part == "..") {
        return Err("is not normalised (an empty, `.` or `..` part)");
    }
    Ok(())
}

/// Folds a profile revision: revision +1, and the plan and generation it records are the
/// ones the state derives (set: over the current registry; mode: the current plan with
/// another mode; rollback: exactly the revision before the current one).
pub fn apply_revision(state: &mut State, e: &ProfileRevisionRecorded, seq: u64) -> Result<(), RuleViolation> {
    let cp = &state.context_profiles;
    let current_rev = cp.revision();
    ensure!(
        Some(e.revision) == current_rev.checked_add(1),
        Rule::ProfileRevision,
        "revision {} recorded at store revision {current_rev} (expected {})",
        e.revision,
        current_rev.saturating_add(1)
    );
    ensure!(
        e.state_root.len() <= MAX_NAME_BYTES && root_text(&e.state_root).is_ok(),
        Rule::ProfileRevision,
        "state root {:?} is not an absolute, normalised path other than `/` of visible characters",
        e.state_root
    );
    let current = cp.current();
    let plan: Plan = match e.action {
        RevisionAction::Set => {
            ensure!(e.rollback_to.is_none(), Rule::ProfileRevision, "a set names no rollback target");
            let registry = cp.registry.as_ref().ok_or_else(|| plan_violation(PlanError::NoRegistry))?;
            ensure!(
                cp.registry_digest == Some(e.registry_digest),
                Rule::ProfilePlan,
                "set over registry {}, the current one is {}",
                e.registry_digest,
                cp.registry_digest.map(|d| d.to_string()).unwrap_or_default()
            );
            let plan = plan_of(registry, e.registry_digest, &e.selection).map_err(plan_violation)?;
            ensure!(
                plan.selection() == e.selection,
                Rule::ProfilePlan,
                "the recorded selection is not normalised (sorted, unique include/exclude)"
            );
            let (manifest, _) =
                generation(registry, &plan).map_err(|n| violation(Rule::ProfilePlan, n.to_string()))?;
            ensure!(
                manifest.digest() == e.generation_digest,
                Rule::ProfilePlan,
                "generationDigest {} is not the plan's generation {}",
                e.generation_digest,
                manifest.digest()
            );
            // Over a newer registry the same generation is a revision: it moves the profile
            // to the current sources (outside review 68: after drift in routed sources only
            // nothing could, and the drift stayed reported for good).
            if let Some(c) = current {
                ensure!(
                    !(c.selection == e.selection
                        && c.generation_digest == e.generation_digest
                        && c.registry_digest == e.registry_digest
                        && c.state_root == e.state_root),
                    Rule::ProfileRevision,
                    "the same generation with the same selection over the same registry is the current revision (a no-op)"
                );
            }
            plan
        }
        RevisionAction::Mode => {
            ensure!(e.rollback_to.is_none(), Rule::ProfileRevision, "a mode change names no rollback target");
            let c =
                current.ok_or_else(|| violation(Rule::ProfileRevision, "no configured profile to change"))?;
            ensure!(
                c.selection.mode != e.selection.mode,
                Rule::ProfileRevision,
                "the mode is already {:?}",
                c.selection.mode
            );
            // A stale generation takes no new revision: `rollback` would then return to it
            // rather than to the revision before it (outside review 101: after drift, a
            // mode change left Lean out of rollback's reach). `select` refuses it too.
            // (Where the drift left the saved selection no plan at all, that is said, with why:
            // its generation may be unchanged — outside review 254 F2.)
            if super::selection::stale_generation(state).is_some() {
                let what = match super::selection::no_plan(state) {
                    Some(why) => {
                        format!("the saved selection has no plan over the sources recorded since ({why})")
                    }
                    None => {
                        "the configured generation is stale against the sources recorded since".to_owned()
                    }
                };
                return Err(violation(
                    Rule::ProfileRevision,
                    format!(
                        "{what}: `set` the profile over the current sources (or `rollback`, where the previous revision is not stale as well) before changing its mode"
                    ),
                ));
            }
            let expected = ProfileSelection { mode: e.selection.mode, ..c.selection.clone() };
            ensure!(
                expected == e.selection
                    && c.registry_digest == e.registry_digest
                    && c.generation_digest == e.generation_digest
                    && c.state_root == e.state_root,
                Rule::ProfileRevision,
                "a mode change keeps the profile, target, include, exclude, registry, generation and state root"
            );
            c.plan.with_mode(e.selection.mode)
        }
        RevisionAction::Rollback => {
            let c = current
                .ok_or_else(|| violation(Rule::ProfileRevision, "no configured profile to roll back"))?;
            let to = current_rev.saturating_sub(1);
            ensure!(
                e.rollback_to == Some(to) && to >= 1,
                Rule::ProfileRevision,
                "a rollback at revision {current_rev} returns to revision {to} (recorded {:?})",
                e.rollback_to
            );
            let back = cp
                .revisions
                .get(&to)
                .ok_or_else(|| violation(Rule::ProfileRevision, format!("revision {to} is unknown")))?;
            ensure!(
                back.selection == e.selection
                    && back.registry_digest == e.registry_digest
                    && back.generation_digest == e.generation_digest
                    && c.state_root == e.state_root,
                Rule::ProfileRevision,
                "a rollback records exactly revision {to}'s selection, registry and generation, under the current state root"
            );
            (*back.plan).clone()
        }
    };
    let found = plan.digest();
    ensure!(
        found == e.plan_digest,
        Rule::ProfilePlan,
        "planDigest {} is not the derived plan's digest {found}",
        e.plan_digest
    );
    let revision = RevisionState {
        seq,
        action: e.action,
        selection: e.selection.clone(),
        state_root: e.state_root.clone(),
        plan_digest: found,
        registry_digest: e.registry_digest,
        generation_digest: e.generation_digest,
        plan: Arc::new(plan),
    };
    state.context_profiles.revisions.insert(e.revision, revision);
    Ok(())
}
