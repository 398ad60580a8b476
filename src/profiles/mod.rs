//! Context profiles at the edge (seed 003, issue #14): the I/O around the pure rules and
//! plan of `runtime::profile`. [`scan`] reads a source tree into a registry snapshot;
//! [`generation`] materialises a plan's generation under a state root through a recorded
//! transaction whose commit point is the ledger entry. What is recorded is an event folded
//! by `runtime::apply`, like every other fact.

pub mod demo;
pub mod generation;
pub mod scan;
/// The secret reader lives in the runtime (pure text), where admission reads it too.
pub use crate::runtime::secrets;
pub mod select;

use std::path::Path;

use ledger_schema::events::profile::SourceRegistryRecorded;
use ledger_schema::{Digest, Event, SealedEntry};

use crate::admission;
use crate::ledger::{Ledger, SubmitError};
use crate::runtime::profile::PlanError;
use crate::runtime::{Ctx, State};
use crate::store::{self, DiskStore, OpenError};

/// Why a profile command failed. [`ProfileError::is_refusal`] tells a refusal (exit 1)
/// from a usage or I/O failure (exit 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    #[error("{0}")]
    Scan(#[from] scan::ScanError),
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{0}")]
    Submit(#[from] SubmitError),
    /// The revision's generation and receipt are published but its entry failed to commit
    /// (storage): `ledger profile recover` rolls the transaction forward.
    #[error(
        "{0}; the generation and receipt are published: `ledger profile recover` commits the revision (roll forward)"
    )]
    Uncommitted(SubmitError),
    /// The revision's entry is committed, but what follows the commit — the transaction's
    /// end in the root, the ledger's note of it — failed (storage): the revision stands.
    #[error(
        "revision {revision} is committed, but finishing it failed: {source}; `ledger profile status` shows the revision, and `ledger profile recover` finishes what is left"
    )]
    Unfinished { revision: u32, source: generation::GenerationError },
    /// The transaction failed (storage) after its `txn.json` was written: it is left as a
    /// crash there would leave it, for `recover` to finish or undo.
    #[error(
        "{source}; the transaction is left in the state root as a crash there would leave it: `ledger profile recover` finishes it (its revision is committed where its generation and receipt were published) or undoes it — until then `set`, `mode`, `rollback` and `select` refuse"
    )]
    LeftForRecover { source: generation::GenerationError },
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("{0}")]
    Generation(#[from] generation::GenerationError),
    #[error("expected revision {expected}, the store is at revision {found}")]
    StaleRevision { expected: u32, found: u32 },
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Usage(String),
}

impl ProfileError {
    /// A refusal of what was asked (exit 1), as opposed to usage or I/O (exit 2).
    pub fn is_refusal(&self) -> bool {
        match self {
            ProfileError::Scan(e) => !e.is_io(),
            ProfileError::Open(e) => e.is_verification_failure(),
            ProfileError::Submit(e) | ProfileError::Uncommitted(e) => e.is_refusal(),
            ProfileError::Generation(e) => !e.is_io(),
            ProfileError::Usage(_)
            | ProfileError::Unfinished { .. }
            | ProfileError::LeftForRecover { .. } => false,
            ProfileError::Plan(_) | ProfileError::StaleRevision { .. } | ProfileError::Refused(_) => true,
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The state of the ledger in `dir`, folded read-only from its journal through the one
/// admission step (writes nothing, waits for no writer).
pub fn read_state(dir: &Path) -> Result<State, OpenError> {
    let mut state = State::default();
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::inadmissible(sealed, e))
    };
    store::replay_journal(dir, &mut fold)?;
    Ok(state)
}

/// What `sources scan` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScanOutcome {
    /// False when the ledger already held this exact registry (nothing written).
    pub recorded: bool,
    /// The seq of the entry holding the registry.
    pub seq: u64,
    pub registry_digest: Digest,
    pub sources: u64,
    pub resources: u64,
    /// Resources recorded by digest only (over the storage bounds: not loadable).
    pub not_loadable: Vec<String>,
    pub profiles: Vec<String>,
}

/// What a rescan stores first ([`scan::scan_keeping`]), in three tiers, each resource with
/// the digest it is kept for: the resources (source id, path) open workflows' Attempts
/// loaded — first, so nothing else a tree holds pushes them out (outside review 207 F2: a
/// configured base grown past the bound pushed out an open Attempt's unchanged skill in id
/// order); then, after every native flags file ([`KEPT_BEFORE_FLAGS`]: a flags file is
/// always stored, and one that does not fit refuses the tree — outside review 210 F2: a
/// configured Full that filled the entry refused a new skill's flags file, and no command
/// led out), every resource of a source the configured generation installs (outside review
/// 61); then every resource of a source the revision before it installed — the one
/// `rollback` returns to (outside review 175 F4).
fn kept_by_the_ledger(state: &State) -> [scan::Kept; 3] {
    let cp = &state.context_profiles;
    let installed = |revision: Option<&crate::runtime::profile::RevisionState>| {
        let mut keep = std::collections::BTreeSet::new();
        if let (Some(r), Some(registry)) = (revision, cp.registry.as_ref()) {
            for source in registry.sources.iter().filter(|s| r.plan.selected_ids.contains(&s.id)) {
                keep.extend(
                    source.resources.iter().map(|res| (source.id.clone(), res.path.clone(), res.digest)),
                );
            }
        }
        keep
    };
    let previous = cp.revision().checked_sub(1).and_then(|n| cp.revisions.get(&n));
    [loaded_by_open_workflows(state), installed(cp.current()), installed(previous)]
}

/// Whether `new` is `current` but for which resources' bytes are stored, and `current`
/// stores every resource the first two tiers of `kept` (open Attempts' loads, the configured
/// generation) name with the bytes `new` has.
fn only_storage_differs(current: &Registry, new: &Registry, kept: &[scan::Kept; 3]) -> bool {
    if without_stored_bytes(current) != without_stored_bytes(new) {
        return false;
    }
    current.sources.iter().all(|s| {
        s.resources.iter().all(|x| {
            let named = (s.id.clone(), x.path.clone(), x.digest);
            x.content.is_some() || !kept.iter().take(2).any(|k| k.contains(&named))
        })
    })
}

/// Whether an open workflow's Attempt started over a selection and awaits its dispatch
/// claim, which a newer registry snapshot would make stale. Only then does a rescan of an
/// unchanged tree keep the current choice of stored bytes (outside review 213 F2: with none
/// waiting, a skill an earlier configuration had pushed out could never be stored again).
fn awaiting_claim(state: &State) -> bool {
    state.attempts.values().any(|a| {
        a.status == crate::runtime::state::AttemptStatus::Started
            && a.selection_receipt.is_some()
            && state.workflows.get(&a.workflow_id).is_some_and(|w| !w.closed)
    })
}

/// `registry` with no resource's bytes stored: what a tree's scan gives whatever the ledger
/// keeps (which bytes a rescan stores depends on the ledger's state, not on the tree).
fn without_stored_bytes(registry: &Registry) -> Registry {
    let mut r = registry.clone();
    for s in &mut r.sources {
        for x in &mut s.resources {
            x.content = None;
        }
    }
    r
}

/// The tiers of [`kept_by_the_ledger`] stored before every native flags file.
const KEPT_BEFORE_FLAGS: usize = 1;

fn loaded_by_open_workflows(state: &State) -> scan::Kept {
    state
        .attempts
        .values()
        .filter(|a| state.workflows.get(&a.workflow_id).is_some_and(|w| !w.closed))
        .filter_map(|a| a.selection_receipt)
        .filter_map(|receipt| state.selections.by_receipt.get(&receipt))
        .flat_map(|s| s.resources.iter().map(|r| (r.id.clone(), r.path.clone(), r.digest)))
        .collect()
}

/// Scans `root` and records the registry in the ledger at `dir` (one frame), unless the
/// current registry is byte-identical, which is a no-op returning the existing snapshot.
pub fn record_registry(dir: &Path, root: &Path) -> Result<ScanOutcome, ProfileError> {
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    let kept = kept_by_the_ledger(ledger.state());
    let recorded = scan::scan_keeping(root, &kept, KEPT_BEFORE_FLAGS)?;
    let cp = &ledger.state().context_profiles;
    let same_root = cp.registry_root == recorded.source_root;
    let existing = if same_root && cp.registry_digest == Some(recorded.registry_digest) {
        cp.registry_seq
    } else if same_root
        && awaiting_claim(ledger.state())
        && cp
            .registry
            .as_deref()
            .is_some_and(|current| only_storage_differs(current, &recorded.registry, &kept))
    {
        // The tree is unchanged and the current snapshot stores every byte the ledger
        // stands on: another choice of stored bytes would only be a newer snapshot, which
        // stales every open selection (outside review 210 F3: an identical rescan after a
        // workflow closed recorded one, and another workflow's Attempt could not be claimed).
        cp.registry_seq
    } else {
        None
    };
    let outcome = |seq: u64, written: bool, r: &SourceRegistryRecorded| ScanOutcome {
        recorded: written,
        seq,
        registry_digest: r.registry_digest,
        sources: r.registry.sources.len() as u64,
        resources: r.registry.sources.iter().map(|s| s.resources.len() as u64).sum(),
        not_loadable: r
            .registry
            .sources
            .iter()
            .flat_map(|s| {
                s.resources
                    .iter()
                    .filter(|x| x.content.is_none())
                    .map(move |x| format!("{}:{}", s.id, x.path))
            })
            .collect(),
        profiles: r.registry.profiles.iter().map(|p| p.id.clone()).collect(),
    };
    if let Some(seq) = existing {
        // What is recorded: the current snapshot (its own digest and stored bytes).
        let current = match (cp.registry.as_deref(), cp.registry_digest) {
            (Some(registry), Some(registry_digest)) => SourceRegistryRecorded {
                registry_digest,
                registry: registry.clone(),
                source_root: cp.registry_root.clone(),
            },
            _ => recorded,
        };
        return Ok(outcome(seq, false, &current));
    }
    let report = outcome(0, true, &recorded);
    let receipt =
        ledger.admit(vec![Event::SourceRegistryRecorded(Box::new(recorded))], Ctx { time_ms: now_ms() })?;
    Ok(ScanOutcome { seq: receipt.seq, ..report })
}

// ---------------------------------------------------------------------------------------
// Managed state: set, status, mode, rollback, recover.

use std::path::PathBuf;
use std::sync::Arc;

use ledger_schema::events::profile::{
    ProfileRevisionRecorded, ProfileSelection, Registry, RevisionAction, SelectionMode, Target,
};
use ledger_schema::{Id, codec};

use crate::runtime::profile::{self as rp, ContextProfiles};
use crate::store::Store;
use generation::{GenerationError, Receipt, Transaction};

/// What every profile command prints (`--json`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    /// The store revision (0 = unconfigured).
    pub revision: u32,
    pub profile_id: Option<String>,
    pub target: Option<Target>,
    pub selection_mode: Option<SelectionMode>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub selected_ids: Vec<String>,
    pub plan_digest: Option<Digest>,
    pub registry_digest: Option<Digest>,
    /// False when a newer registry snapshot was recorded since the current revision (source
    /// drift): `set` again to move to it.
    pub registry_current: bool,
    /// The drift changes the configured generation (a source it installs changed): every
    /// `select` and `resolve --state-root` is refused until `profile set` (seed 003: "stale
    /// source generations" are rejected). False when the drift touched only routed sources
    /// (selections route over the newest registry) or there is none.
    pub generation_stale: bool,
    /// Where the drift left the configured selection no plan at all (a blocking budget it no
    /// longer fits, an excluded id the registry no longer holds) — the generation itself may be
    /// unchanged — why (outside review 251 F3: `status` said the sources changed the
    /// generation). `generationStale` is true then too: every `select` is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_plan: Option<String>,
    pub generation_digest: Option<Digest>,
    pub generation_root: Option<String>,
    pub state_root: Option<String>,
    /// The configured plan's metadata estimate against its profile's budget (outside review
    /// 72: a Full plan over its report-only budget was reported by `preview` alone).
    pub estimate: Option<rp::Estimate>,
    /// A transaction was interrupted: run `ledger profile recover`.
    pub recovery_required: bool,
    /// What the command did: `set`, `mode`, `rollback`, `no-op`, `dry-run`, `status`,
    /// `completed`, `rolled-forward`, `rolled-back`, `nothing-to-recover`.
    pub outcome: String,
    /// Why, where the outcome alone does not say it (a `recover` that rolled back a
    /// transaction the ledger can no longer record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `status` only: the source tree the newest registry was scanned from, scanned again
    /// ([`check_source`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceCheck>,
}

/// The source tree the newest registry snapshot was scanned from, scanned again and
/// compared with it, bytes stored or not (seed 003: managed state is checked for "source
/// drift"; outside review 114: an edited tree went unseen until someone rescanned it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceCheck {
    /// The recorded root (none for a snapshot scanned before roots were recorded).
    pub root: Option<String>,
    /// `unchanged`, `changed`, `unreadable` or `unrecorded`.
    pub state: &'static str,
    /// What changed, why it cannot be read, or what to do.
    pub detail: String,
}

impl SourceCheck {
    /// Whether a command that delivers sources must stop: the tree changed, or it cannot
    /// be read where it was scanned.
    pub fn blocks(&self) -> bool {
        matches!(self.state, "changed" | "unreadable")
    }

    /// The refusal of a command that delivers sources over this check.
    pub fn refusal(&self) -> ProfileError {
        let root = self.root.as_deref().map(scan::shown).unwrap_or_default();
        ProfileError::Refused(format!(
            "the source tree {root} {}: scan it again (`ledger sources scan DIR ROOT`, from where it is now{}) before delivering from it",
            self.detail,
            if self.state == "unreadable" {
                "; a tree the scan refuses must first be changed as its refusal says"
            } else {
                ""
            }
        ))
    }
}

/// [`SourceCheck`] of the ledger's newest registry snapshot: its tree scanned again (read
/// only) and compared source by source, the bytes the entry stores left aside (what a
/// rescan stores depends on the ledger's state, not on the tree).
pub fn check_source(state: &State) -> SourceCheck {
    let cp = &state.context_profiles;
    let seq = cp.registry_seq.map(|s| format!(" at seq {s}")).unwrap_or_default();
    let (Some(current), Some(root)) = (cp.registry.as_deref(), cp.registry_root.clone()) else {
        let detail = if cp.registry.is_some() {
            format!(
                "the registry{seq} records no source root (scanned before roots were recorded): scan the tree again to record it"
            )
        } else {
            "no registry recorded".to_owned()
        };
        return SourceCheck { root: None, state: "unrecorded", detail };
    };
    let found = match scan::scan_keeping(Path::new(&root), &kept_by_the_ledger(state), KEPT_BEFORE_FLAGS) {
        Ok(found) => found,
        Err(e) => {
            return SourceCheck {
                root: Some(root),
                state: "unreadable",
                detail: format!("cannot be scanned again as it was{seq} ({e})"),
            };
        }
    };
    let (was, now) = (without_stored_bytes(current), without_stored_bytes(&found.registry));
    if was == now {
        return SourceCheck {
            root: Some(root),
            state: "unchanged",
            detail: format!("unchanged since the scan{seq}"),
        };
    }
    let ids =
        |r: &Registry| -> std::collections::BTreeMap<String, ledger_schema::events::profile::RegistrySource> {
            r.sources.iter().map(|s| (s.id.clone(), s.clone())).collect()
        };
    let (a, b) = (ids(&was), ids(&now));
    let mut changed: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|id| a.get(*id) != b.get(*id))
        .map(|id| scan::shown(id))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if was.profiles != now.profiles || was.scanner != now.scanner {
        changed.push("the profiles".to_owned());
    }
    let shown: Vec<String> = changed.iter().take(5).cloned().collect();
    let more = changed.len().saturating_sub(shown.len());
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    SourceCheck {
        root: Some(root),
        state: "changed",
        detail: format!("changed since the scan{seq}: {}{more}", shown.join(", ")),
    }
}

/// Plan inputs given on the command line; `None` is "as configured" (a `set` never changes
/// what it was not asked to: outside review 20), or the default when nothing is configured
/// (codex, manual, no include, no exclude).
#[derive(Debug, Clone)]
pub struct PlanInput {
    pub profile: String,
    pub target: Option<Target>,
    pub mode: Option<SelectionMode>,
    pub include: Option<Vec<String>>,
    pub exclude: Option<Vec<String>>,
    /// The given `exclude` adds to the configured exclusions instead of replacing them:
    /// the named `profile resolve`, whose load is not recorded, never relaxes an exclusion
    /// the configuration holds (outside review 129 F2: any `--exclude` dropped the
    /// configured ones, and an excluded skill's body was returned).
    pub exclusions_add: bool,
}

impl PlanInput {
    /// The plan this input asks for over `registry` (recorded as `digest`), every choice not
    /// given taken from the configured selection of `cp`.
    pub fn plan(
        &self,
        cp: &ContextProfiles,
        registry: &Registry,
        digest: Digest,
    ) -> Result<rp::Plan, PlanError> {
        let current = cp.current().map(|c| &c.selection);
        let list = |given: &Option<Vec<String>>, configured: fn(&ProfileSelection) -> &Vec<String>| {
            given.clone().or_else(|| current.map(|c| configured(c).clone())).unwrap_or_default()
        };
        let target = self.target.or(current.map(|c| c.target)).unwrap_or(Target::Codex);
        let mode = self.mode.or(current.map(|c| c.mode)).unwrap_or(SelectionMode::Manual);
        let include = list(&self.include, |c| &c.include);
        let exclude = self.exclusions(current);
        let plan = rp::plan(registry, digest, &self.profile, target, mode, &include, &exclude)?;
        // An id given to --include that the plan installs without it adds nothing to the
        // generation — only a new plan digest, which sets every earlier receipt aside
        // (outside review 224 F3: Lean's own eager skill, or any skill under Full).
        for id in self.include.iter().flatten() {
            let without: Vec<String> = include.iter().filter(|x| *x != id).cloned().collect();
            let Ok(other) = rp::plan(registry, digest, &self.profile, target, mode, &without, &exclude)
            else {
                continue;
            };
            if other.selected_ids == plan.selected_ids {
                let reason = other.entries.iter().find(|e| e.id == *id).map(|e| e.reason.clone());
                return Err(PlanError::IncludeAddsNothing {
                    id: id.clone(),
                    profile: self.profile.clone(),
                    reason: reason.unwrap_or_default(),
                });
            }
        }
        Ok(plan)
    }

    fn exclusions(&self, current: Option<&ProfileSelection>) -> Vec<String> {
        let configured = current.map(|c| c.exclude.clone()).unwrap_or_default();
        match &self.exclude {
            None => configured,
            Some(given) if self.exclusions_add => {
                let mut all = configured;
                all.extend(given.iter().filter(|id| !all.contains(id)).cloned().collect::<Vec<_>>());
                all
            }
            Some(given) => given.clone(),
        }
    }
}

fn status_of(
    state: &State,
    root_override: Option<&Path>,
    outcome: &str,
) -> Result<ProfileStatus, ProfileError> {
    let cp = &state.context_profiles;
    let Some(c) = cp.current() else {
        return Ok(ProfileStatus {
            revision: 0,
            profile_id: None,
            target: None,
            selection_mode: None,
            include: Vec::new(),
            exclude: Vec::new(),
            selected_ids: Vec::new(),
            plan_digest: None,
            registry_digest: None,
            registry_current: cp.registry_digest.is_some(),
            generation_stale: false,
            no_plan: None,
            generation_digest: None,
            generation_root: None,
            state_root: None,
            estimate: None,
            recovery_required: root_override.is_some_and(interrupted_txn),
            outcome: outcome.to_owned(),
            note: None,
            source: None,
        });
    };
    let root = root_override.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(&c.state_root));
    // The configured generation lives in the state root its revision recorded, whatever
    // root was asked about (outside review 79: `recover --state-root A` showed a path in A
    // for a revision committed in B).
    let generation_root = PathBuf::from(&c.state_root);
    Ok(ProfileStatus {
        revision: cp.revision(),
        profile_id: Some(c.selection.profile.clone()),
        target: Some(c.selection.target),
        selection_mode: Some(c.selection.mode),
        include: c.selection.include.clone(),
        exclude: c.selection.exclude.clone(),
        selected_ids: c.plan.selected_ids.clone(),
        plan_digest: Some(c.plan_digest),
        registry_digest: Some(c.registry_digest),
        registry_current: cp.registry_digest == Some(c.registry_digest),
        generation_stale: crate::runtime::selection::stale_generation(state).is_some(),
        no_plan: crate::runtime::selection::no_plan(state),
        generation_digest: Some(c.generation_digest),
        generation_root: Some(
            generation::generation_dir(&generation_root, c.generation_digest).display().to_string(),
        ),
        state_root: Some(c.state_root.clone()),
        estimate: Some(c.plan.estimate.clone()),
        recovery_required: interrupted_txn(&root),
        outcome: outcome.to_owned(),
        note: None,
        source: None,
    })
}

/// The registry with `digest`, from the state (the current one) or its stored entry.
fn registry_by_digest<S: Store>(ledger: &Ledger<S>, digest: Digest) -> Result<Arc<Registry>, ProfileError> {
    let cp = &ledger.state().context_profiles;
    if cp.registry_digest == Some(digest)
        && let Some(r) = &cp.registry
    {
        return Ok(r.clone());
    }
    let seq = *cp
        .registries
        .get(&digest)
        .ok_or_else(|| ProfileError::Refused(format!("registry {digest} is not in the ledger")))?;
    let sealed = ledger.store().read(seq).map_err(|e| ProfileError::Usage(e.to_string()))?;
    match sealed.entry.event {
        Event::SourceRegistryRecorded(r) => Ok(Arc::new(r.registry)),
        other => Err(ProfileError::Refused(format!("seq {seq} holds {}, not a registry", other.kind()))),
    }
}

fn manifest_of(
    registry: &Registry,
    plan: &rp::Plan,
) -> Result<(rp::GenerationManifest, Vec<Vec<u8>>), ProfileError> {
    let (m, contents) = rp::generation(registry, plan).map_err(|e| ProfileError::Refused(e.to_string()))?;
    Ok((m, contents.into_iter().map(<[u8]>::to_vec).collect()))
}

fn check_expected(cp: &ContextProfiles, expected: Option<u32>) -> Result<(), ProfileError> {
    match expected {
        Some(e) if e != cp.revision() => {
            Err(ProfileError::StaleRevision { expected: e, found: cp.revision() })
        }
        _ => Ok(()),
    }
}

/// `event` passes the rules over the current state (checked before anything is written).
fn admissible<S: Store>(ledger: &Ledger<S>, event: &ProfileRevisionRecorded) -> Result<(), ProfileError> {
    let mut working = ledger.state().clone();
    rp::apply_revision(&mut working, event, ledger.store().head().seq + 1)
        .map_err(|v| ProfileError::Refused(v.to_string()))
}

/// The current generation, if it lives under `root`, must verify (a modified, added,
/// symlinked or hard-linked file blocks set, rollback and status).
/// A configured generation that does not verify, with the way out named wherever it is
/// reported — `status`, `set`, `select`, `recover` (outside review 91: `status` said only
/// "was modified").
fn with_remedy(e: GenerationError) -> GenerationError {
    remedied(e, "move it out of the state root; `ledger profile recover` then rebuilds it")
}

/// An altered generation's refusal with its way out `remedy` (unless one is named already).
fn remedied(e: GenerationError, remedy: &str) -> GenerationError {
    match e {
        GenerationError::Tampered { root, reason } if !reason.contains("profile recover") => {
            GenerationError::Tampered { root, reason: format!("{reason} ({remedy})") }
        }
        other => other,
    }
}

/// Every earlier generation the state root `root` still holds — the configured one, or one
/// `set` is about to configure — checked as the current one is: a rollback would install it
/// (outside review 136 F4: an older generation, altered, passed `status` and every audit
/// until a rollback to it refused; outside review 139 F7: `set` committed over one, and
/// `status` refused right after; outside review 251 F1: so it did into another root than the
/// configured one). A missing one is no damage — `rollback` rebuilds it from the ledger.
/// `registry` finds a registry by digest.
fn verify_past(
    cp: &ContextProfiles,
    root: &Path,
    registry: &dyn Fn(Digest) -> Result<Arc<Registry>, ProfileError>,
) -> Result<(), ProfileError> {
    let Some(c) = cp.current() else { return Ok(()) };
    // (The current generation, where it is in `root`, is verified by the caller.)
    let mut checked: std::collections::BTreeSet<Digest> =
        (Path::new(&c.state_root) == root).then_some(c.generation_digest).into_iter().collect();
    for (number, past) in cp.revisions.iter().rev() {
        let dir = generation::generation_dir(root, past.generation_digest);
        if Path::new(&past.state_root) != root || !checked.insert(past.generation_digest) || !dir.exists() {
            continue;
        }
        let (manifest, _) = manifest_of(&*registry(past.registry_digest)?, &past.plan)?;
        generation::verify(&dir, &manifest).map_err(|e| match e {
            GenerationError::Tampered { root, reason } => GenerationError::Tampered {
                root,
                reason: format!(
                    "{reason} — the generation of revision {number}, not the current one (move it out of the \
                     state root; `ledger profile rollback` rebuilds it from the ledger when it is needed)"
                ),
            },
            other => other,
        })?;
    }
    Ok(())
}

fn verify_current<S: Store>(ledger: &Ledger<S>, root: &Path) -> Result<(), ProfileError> {
    let cp = &ledger.state().context_profiles;
    if let Some(c) = cp.current()
        && Path::new(&c.state_root) == root
    {
        let registry = registry_by_digest(ledger, c.registry_digest)?;
        let (manifest, _) = manifest_of(&registry, &c.plan)?;
        generation::verify(&generation::generation_dir(root, c.generation_digest), &manifest)
            .map_err(with_remedy)?;
        verify_past(cp, root, &|digest| registry_by_digest(ledger, digest))?;
        if generation::read_txn(root)?.is_none() {
            generation::verify_receipts(
                root,
                &expected_receipts(cp, ledger.store().head().ledger, root),
                (ledger.store().head().ledger, cp.revision()),
            )?;
        }
    } else if root.is_dir() && generation::read_txn(root)?.is_none() {
        // Another root holds only receipts of revisions this ledger committed there
        // (outside review 127: a state root moved to a new path took its receipts along,
        // `set` committed into it, and every later command refused those receipts). One
        // missing there — the root deleted and made again — `set` republishes
        // ([`republish_missing`]; outside review 212 F5).
        let expected = expected_receipts(cp, ledger.store().head().ledger, root);
        refuse_differing(
            root,
            &generation::check_receipts(root, &expected, (ledger.store().head().ledger, cp.revision()))?,
        )?;
        // And the generations this ledger committed there, which `status` checks once `set`
        // configures the root (outside review 251 F1: `set` committed over an altered one,
        // and every later command refused the store).
        verify_past(cp, root, &|digest| registry_by_digest(ledger, digest))?;
    }
    Ok(())
}

/// Of the receipts `check_receipts` named (missing, or not the ledger's), the first one that
/// is there, refused: it differs from the ledger's, and its bytes are evidence — moved out
/// by hand, never overwritten (outside review 157). Missing ones are the caller's to
/// republish.
fn refuse_differing(root: &Path, revisions: &[u32]) -> Result<(), ProfileError> {
    for revision in revisions {
        let path = root.join("receipts").join(format!("{revision}.json"));
        if fs_exists(&path) {
            return Err(GenerationError::Receipt {
                path: scan::shown(&path.display().to_string()),
                reason: "differs from the ledger's receipt of that revision: move it out of the state root"
                    .into(),
            }
            .into());
        }
    }
    Ok(())
}

/// Publishes, into a state root `set` takes that is not the configured one, the receipts of
/// revisions the ledger committed there earlier that it lacks — the path used before,
/// deleted, and given again (outside review 212 F5, P2: refused for the missing receipt
/// where it was made again empty, and where it was missing, committed into and then refused
/// by every later command). A receipt there that differs was refused by [`verify_current`].
fn republish_missing<S: Store>(ledger: &Ledger<S>, root: &Path) -> Result<(), ProfileError> {
    let cp = &ledger.state().context_profiles;
    if cp.current().is_some_and(|c| Path::new(&c.state_root) == root) {
        return Ok(());
    }
    for receipt in expected_receipts(cp, ledger.store().head().ledger, root) {
        if !fs_exists(&root.join("receipts").join(format!("{}.json", receipt.revision))) {
            generation::publish_receipt(root, &receipt)?;
        }
    }
    Ok(())
}

/// Whether `root` holds a transaction no live writer holds (one a live writer holds is in
/// flight, not interrupted: outside review 56).
/// The refusal for a state root holding a transaction: busy while a live writer holds its
/// lock (its owner explained), else interrupted — one verdict for every command (outside
/// review 199 F4: `set` called a transaction interrupted that `recover` and `select` called
/// live).
fn transaction_there(root: &Path) -> ProfileError {
    let shown = scan::shown(&root.display().to_string());
    match generation::live_holder(root) {
        Some(holder) => {
            GenerationError::Busy { path: shown, holder: generation::holder_explained(root, &holder) }.into()
        }
        None => GenerationError::RecoveryRequired(shown).into(),
    }
}

fn interrupted_txn(root: &Path) -> bool {
    root.join(generation::TXN_FILE).exists() && generation::live_holder(root).is_none()
}

/// A transaction of this ledger left unfinished in a state root the ledger's note names
/// ([`generation::PENDING_FILE`]; outside review 101).
enum Pending {
    /// The root holds it, interrupted (no live writer): `recover` there finishes it.
    Interrupted(PathBuf),
    /// The root is gone or unmarked (moved, unmounted): nothing can tell whether it was
    /// committed (outside reviews 103, 105: the note was ignored, and the root coming back
    /// rolled forward).
    Missing(PathBuf),
}

impl Pending {
    fn refusal(&self, dir: &Path) -> ProfileError {
        match self {
            Pending::Interrupted(p) => GenerationError::RecoveryRequired(shown_path(p)).into(),
            Pending::Missing(p) => ProfileError::Refused(self.text(dir, p)),
        }
    }

    fn note(&self, dir: &Path) -> String {
        match self {
            Pending::Interrupted(p) => format!(
                "a transaction of this ledger was interrupted in state root {}: run `ledger profile recover DIR --state-root {}`",
                shown_path(p),
                shown_path(p)
            ),
            Pending::Missing(p) => self.text(dir, p),
        }
    }

    fn text(&self, dir: &Path, p: &Path) -> String {
        format!(
            "state root {} — where the ledger's note ({}) says a transaction of this ledger was in flight — is missing, \
             not a directory, or holds no ownership marker (moved, unmounted?): \
             restore it and run `ledger profile recover DIR --state-root {}`, or remove the note to go on without it \
             (the transaction stays in that root, where `recover` would still finish it)",
            shown_path(p),
            shown_path(&dir.join(generation::PENDING_FILE)),
            shown_path(p)
        )
    }
}

fn shown_path(p: &Path) -> String {
    scan::shown(&p.display().to_string())
}

/// The transaction of ledger `ledger` (at `dir`) left unfinished in a state root, as the
/// ledger's note names it — but for an interrupted one in `except` (the root the caller
/// recovers or checks itself). Only proof makes a note stale: the root marked as another
/// ledger's now (outside review 103: a stale note blamed this ledger for another ledger's
/// transaction, whose `recover` it could not run), or marked as this ledger's and holding no
/// interrupted transaction (it finished). A root that is gone, or holds no readable
/// ownership marker — an unmounted mount point is an empty directory — cannot be checked,
/// and blocks (outside review 105: taken for stale, it let `select` and `mode` go on and a
/// later `recover` roll forward).
fn pending_elsewhere(dir: &Path, ledger: Id, except: Option<&Path>) -> Option<Pending> {
    let p = generation::pending_root(dir)?;
    // A symlink there is no state root either (every command refuses one; outside review
    // 107: the note pointed at a `recover` that refused it).
    if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
        return Some(Pending::Missing(p));
    }
    match generation::owner_of(&p) {
        None => Some(Pending::Missing(p)),
        Some(owner) if owner != ledger => None,
        Some(_) if Some(p.as_path()) == except => None,
        Some(_) => interrupted_txn(&p).then_some(Pending::Interrupted(p)),
    }
}

/// Refuses while a transaction of the ledger at `dir` is left unfinished in a state root
/// other than `except`: it is recovered (rolled forward or back) before anything else
/// changes.
fn refuse_interrupted_elsewhere(dir: &Path, ledger: Id, except: Option<&Path>) -> Result<(), ProfileError> {
    match pending_elsewhere(dir, ledger, except) {
        Some(pending) => Err(pending.refusal(dir)),
        None => Ok(()),
    }
}

/// The receipts of every revision the ledger committed through a transaction (`set`,
/// `rollback`; `mode` writes none) in state root `root`.
fn expected_receipts(cp: &ContextProfiles, ledger_id: Id, root: &Path) -> Vec<Receipt> {
    cp.revisions
        .iter()
        .filter(|(_, r)| r.action != RevisionAction::Mode && Path::new(&r.state_root) == root)
        .map(|(n, r)| Receipt {
            ledger_id,
            revision: *n,
            generation_digest: r.generation_digest,
            plan_digest: r.plan_digest,
            registry_digest: r.registry_digest,
        })
        .collect()
}

/// The configured profile's saved state, checked before a selection is decided or its
/// bodies loaded (seed 003: `run` "rechecks source bindings, saved state … before loading
/// bodies"; outside review 56: `select` recorded and loaded over a tampered or missing
/// generation and an interrupted transaction): the state root as `set` requires it, no
/// interrupted transaction, the current generation and the receipts verified.
pub(crate) fn check_saved_state(dir: &Path, ledger: &Ledger<DiskStore>) -> Result<(), ProfileError> {
    refuse_pending_transaction(dir, ledger.store().head().ledger, ledger.state())?;
    let Some(c) = ledger.state().context_profiles.current() else { return Ok(()) };
    verify_current(ledger, Path::new(&c.state_root))
}

/// Refuses while a transaction of the ledger at `dir` is in flight or left unfinished —
/// in the configured state root (checked as every command checks it) or in another one its
/// note names: what it commits may change the profile (its mode, its exclusions), so no
/// body is returned on the configuration it replaces (outside review 151 F1: the named
/// `profile resolve --load` returned a skill the interrupted `set` excluded).
pub(crate) fn refuse_pending_transaction(dir: &Path, ledger: Id, state: &State) -> Result<(), ProfileError> {
    refuse_interrupted_elsewhere(dir, ledger, None)?;
    let Some(c) = state.context_profiles.current() else { return Ok(()) };
    let root = Path::new(&c.state_root);
    generation::check_root(root, ledger, generation::RootUse::Existing)?;
    if generation::read_txn(root)?.is_some() {
        return Err(transaction_there(root));
    }
    Ok(())
}

/// Runs the five-boundary transaction for `event` and commits it.
fn transact(
    ledger: &mut Ledger<DiskStore>,
    dir: &Path,
    root: &Path,
    event: ProfileRevisionRecorded,
    manifest: &rp::GenerationManifest,
    contents: &[Vec<u8>],
) -> Result<(), ProfileError> {
    let ledger_id = ledger.store().head().ledger;
    let _lock = generation::lock(root)?;
    let txn = Transaction {
        ledger_id,
        revision: event.revision,
        expected_revision: event.revision.saturating_sub(1),
        generation_digest: event.generation_digest,
        event_hex: hex_of(&codec::encode(&Event::ProfileRevisionRecorded(event.clone()))),
    };
    let receipt = Receipt {
        ledger_id,
        revision: event.revision,
        generation_digest: event.generation_digest,
        plan_digest: event.plan_digest,
        registry_digest: event.registry_digest,
    };
    let slices: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    // A root holding a transaction already is refused before the note is written: a
    // refused `set` writes nothing (outside review 107: it re-wrote a note the operator had
    // removed).
    // (Under this command's own lock: a transaction there is an interrupted one.)
    if generation::read_txn(root)?.is_some() {
        return Err(GenerationError::RecoveryRequired(shown_path(root)).into());
    }
    if let Err(e) = generation::note_pending(dir, root) {
        // The note may stand though its directory's sync failed: no transaction follows it
        // (outside review 110).
        let _ = generation::clear_pending(dir, root);
        return Err(e.into());
    }
    if let Err(e) = generation::prepare_and_publish(root, &txn, manifest, &slices, &receipt) {
        // Refused (or failed) before its `txn.json` was written: no transaction, so no note
        // (outside review 109: a generation that did not verify refused the `set` and left
        // the note, which later blocked the ledger over a transaction that never was).
        if matches!(generation::read_txn(root), Ok(None)) {
            generation::clear_pending(dir, root)?;
            return Err(e.into());
        }
        // Left for `recover` (an I/O failure; a refusal rolls back before it returns): said
        // so (outside review 219 F2: a bare OS error, though `recover` may commit it).
        return Err(match e.is_io() {
            true => ProfileError::LeftForRecover { source: e },
            false => e.into(),
        });
    }
    let revision = event.revision;
    if let Err(e) = ledger.admit(vec![Event::ProfileRevisionRecorded(event)], Ctx { time_ms: now_ms() }) {
        if e.is_refusal() {
            // Refused at the commit point: nothing was committed, and `recover` must not
            // roll the refused operation forward later.
            generation::roll_back(root, &txn, manifest, &slices, &receipt)?;
            generation::clear_pending(dir, root)?;
            return Err(e.into());
        }
        // A storage failure leaves the published transaction for `recover`, which commits
        // the entry (outside review 26: the error line did not say so).
        return Err(ProfileError::Uncommitted(e));
    }
    generation::boundary("state");
    // Committed: a failure from here on is said as what it is (outside review 214 F3: a
    // failed sync of the ledger's directory read as a bare OS error, as if nothing stood).
    generation::finish(root)
        .and_then(|()| generation::clear_pending(dir, root))
        .map_err(|source| ProfileError::Unfinished { revision, source })
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || text.len() > 2 * codec::MAX_ENTRY_BYTES {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| text.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

fn root_string(root: &Path) -> Result<String, ProfileError> {
    root.to_str().map(str::to_owned).ok_or_else(|| ProfileError::Usage("the state root is not UTF-8".into()))
}

/// `profile set`: plan over the current registry, materialise its generation under
/// `root` and record the revision (or verify and do nothing when it is the current one).
pub fn set(
    dir: &Path,
    input: &PlanInput,
    root: &Path,
    expected: Option<u32>,
    dry_run: bool,
) -> Result<ProfileStatus, ProfileError> {
    // The state root's own form first, as `status` checks it (outside review 68: a relative
    // one was refused by the revision rule, its message prefixed with the rule's name).
    generation::root_path(root)?;
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    // Nothing is materialised from a tree that changed since its scan (outside review 114).
    let source = check_source(ledger.state());
    if source.blocks() {
        return Err(source.refusal());
    }
    let cp = &ledger.state().context_profiles;
    check_expected(cp, expected)?;
    let (registry, registry_digest) = match (&cp.registry, cp.registry_digest) {
        (Some(r), Some(d)) => (r.clone(), d),
        _ => return Err(PlanError::NoRegistry.into()),
    };
    // The configured store first: a transaction interrupted there is recovered before the
    // configuration moves anywhere (outside review 79: a `set` into another root committed
    // the revision the interrupted one had prepared).
    if let Some(c) = cp.current()
        && Path::new(&c.state_root) != root
        && interrupted_txn(Path::new(&c.state_root))
    {
        return Err(GenerationError::RecoveryRequired(c.state_root.clone()).into());
    }
    // And one interrupted in a root the ledger records nowhere yet (outside review 101).
    refuse_interrupted_elsewhere(dir, ledger.store().head().ledger, Some(root))?;
    let plan = input.plan(cp, &registry, registry_digest)?;
    installs_manual_only_natively(&registry, &plan)?;
    let (manifest, contents) = manifest_of(&registry, &plan)?;
    let state_root = root_string(root)?;
    let event = ProfileRevisionRecorded {
        action: RevisionAction::Set,
        revision: cp.revision().saturating_add(1),
        selection: plan.selection(),
        state_root: state_root.clone(),
        plan_digest: plan.digest(),
        rollback_to: None,
        registry_digest,
        generation_digest: manifest.digest(),
    };
    let ledger_id = ledger.store().head().ledger;
    // Over a newer registry the same generation is a new revision (outside review 68: after
    // drift in routed sources only, `set` was a no-op and the drift note stayed for good).
    if let Some(c) = cp.current()
        && c.selection == event.selection
        && c.generation_digest == event.generation_digest
        && c.registry_digest == registry_digest
        && c.state_root == state_root
    {
        generation::check_root(root, ledger_id, generation::RootUse::Existing)?;
        if generation::read_txn(root)?.is_some() {
            return Err(transaction_there(root));
        }
        verify_current(&ledger, root)?;
        return status_of(ledger.state(), None, "no-op");
    }
    admissible(&ledger, &event)?;
    if dry_run {
        // The same verdict as the real `set`, writing nothing.
        generation::check_root(root, ledger_id, generation::RootUse::Preview)?;
        generation::foreign_txn_tmp(root, ledger_id)?;
        verify_current(&ledger, root)?;
        generation::preflight(root, event.generation_digest, &manifest)?;
        let mut preview = status_of(ledger.state(), None, "dry-run")?;
        preview.revision = event.revision;
        preview.profile_id = Some(plan.profile.clone());
        preview.target = Some(plan.target);
        preview.selection_mode = Some(plan.selection_mode);
        preview.include = plan.include.clone();
        preview.exclude = plan.exclude.clone();
        preview.selected_ids = plan.selected_ids.clone();
        preview.plan_digest = Some(event.plan_digest);
        preview.registry_digest = Some(registry_digest);
        preview.registry_current = true;
        preview.generation_stale = false;
        preview.estimate = Some(plan.estimate.clone());
        preview.generation_digest = Some(event.generation_digest);
        preview.generation_root =
            Some(generation::generation_dir(root, event.generation_digest).display().to_string());
        preview.state_root = Some(state_root);
        return Ok(preview);
    }
    // Checked as the dry run checks it before anything is written: a refused `set` leaves
    // no ownership mark behind (outside review 91: it marked an emptied root, then refused).
    generation::check_root(root, ledger_id, generation::RootUse::Preview)?;
    generation::foreign_txn_tmp(root, ledger_id)?;
    verify_current(&ledger, root)?;
    generation::check_root(root, ledger_id, generation::RootUse::Create)?;
    republish_missing(&ledger, root)?;
    transact(&mut ledger, dir, root, event, &manifest, &contents)?;
    status_of(ledger.state(), None, "set")
}

/// A manual-only skill a plan installs must say so in its target's own native form, or
/// the native loader would invoke it implicitly (seed 003: "Native manual-only flags … are
/// checked before selection"; outside review 56: Full installed a skill manual-only by
/// `disable-model-invocation` into the Codex carrier, where nothing stops Codex invoking
/// it). Checked by `set` (and its dry run) and `preview` (outside review 87): a recorded
/// revision is not re-judged.
pub(crate) fn installs_manual_only_natively(
    registry: &Registry,
    plan: &rp::Plan,
) -> Result<(), ProfileError> {
    let flag = match plan.target {
        ledger_schema::events::profile::Target::Claude => "`disable-model-invocation: true` in its SKILL.md",
        ledger_schema::events::profile::Target::Codex => {
            "an `agents/openai.yaml` holding only `policy.allow_implicit_invocation: false` (Codex ignores the whole file when any other field fails its parse)"
        }
    };
    for id in &plan.selected_ids {
        if let Some(source) = registry.sources.iter().find(|s| &s.id == id)
            && source.manual_only
            && !scan::carries_manual_only(source, plan.target)
        {
            return Err(ProfileError::Refused(format!(
                "{} is manual-only, but its {} carrier would not say so: add {flag}, or exclude it (--exclude {})",
                scan::shown(id),
                crate::runtime::wire(&plan.target),
                scan::shown(id)
            )));
        }
    }
    Ok(())
}

fn fs_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// `profile status`: the configured profile from the ledger alone (the source tree is
/// never read; the ledger is read without waiting for or disturbing a writer), with its
/// generation verified on disk.
pub fn status(dir: &Path, root: Option<&Path>) -> Result<ProfileStatus, ProfileError> {
    // `status` reads the ledger, then the state root, holding neither's lock: a `set`,
    // `mode`, `rollback` or `recover` committing between the two reads leaves a receipt or
    // generation the ledger read did not know yet (outside review 199 F2: a live `set`'s
    // receipt was reported as another ledger copy's, and the way out named was to abandon
    // the state root). A refusal is given only when the ledger's profile revisions did not
    // move while it was read; otherwise the whole read is made again (a few times at most).
    // (The ledger is read again only on a refusal: a status that holds costs one read.)
    let mut refused = None;
    for _ in 0..5 {
        let mut read = 0u32;
        match status_once(dir, root, &mut read) {
            Err(e @ (ProfileError::Generation(_) | ProfileError::Refused(_))) => {
                // (A transaction publishes its receipt just before it commits its entry: a
                // moment later, the entry is there.)
                if profile_revisions(dir)? == read {
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    if profile_revisions(dir)? == read {
                        return Err(e);
                    }
                }
                refused = Some(e);
            }
            other => return other,
        }
    }
    Err(refused
        .unwrap_or_else(|| ProfileError::Refused("the profile kept changing while it was read".to_owned())))
}

/// The ledger's profile revision (each revision entry is the next one), read without the
/// lock.
fn profile_revisions(dir: &Path) -> Result<u32, ProfileError> {
    let mut revisions = 0u32;
    store::replay_journal(dir, &mut |sealed| {
        if matches!(sealed.entry.event, Event::ProfileRevisionRecorded(_)) {
            revisions = revisions.saturating_add(1);
        }
        Ok(())
    })?;
    Ok(revisions)
}

/// [`status`], one read of the ledger and the state root; `read` is the profile revision
/// the ledger read holds.
fn status_once(dir: &Path, root: Option<&Path>, read: &mut u32) -> Result<ProfileStatus, ProfileError> {
    // A state root given on the command line is checked as `set` checks it (a relative path
    // was an I/O error, exit 2, where `set` refuses it, exit 1).
    if let Some(root) = root {
        generation::root_path(root)?;
    }
    let mut state = State::default();
    let mut registries: std::collections::BTreeMap<Digest, Arc<Registry>> = std::collections::BTreeMap::new();
    let mut ledger_id = None;
    let mut fold = |sealed: &SealedEntry| -> Result<(), OpenError> {
        ledger_id = Some(sealed.entry.ledger);
        admission::apply(&mut state, &sealed.entry).map_err(|e| OpenError::inadmissible(sealed, e))?;
        if let Event::SourceRegistryRecorded(r) = &sealed.entry.event {
            registries.insert(r.registry_digest, Arc::new(r.registry.clone()));
        }
        Ok(())
    };
    store::replay_journal(dir, &mut fold)?;
    let cp = &state.context_profiles;
    *read = cp.revision();
    // An unconfigured ledger's view of a state root is the verdict `set` would give it: a
    // root another ledger owns is refused by name, never reported as this ledger's
    // transaction to recover (outside review 87: it said "RECOVERY REQUIRED" for another
    // ledger's interrupted `set`, which this ledger's `recover` then refused).
    if let (Some(root), Some(ledger_id), None) = (root, ledger_id, cp.current()) {
        generation::check_root(root, ledger_id, generation::RootUse::Preview)?;
    }
    let mut report = status_of(&state, root, "status")?;
    if cp.registry.is_some() {
        report.source = Some(check_source(&state));
    }
    // A transaction interrupted in another state root, which the ledger may record nowhere
    // yet (outside review 101: `status` reported nothing to recover).
    let reported = root.map(Path::to_path_buf).or_else(|| cp.current().map(|c| PathBuf::from(&c.state_root)));
    if let Some(pending) = ledger_id.and_then(|id| pending_elsewhere(dir, id, reported.as_deref())) {
        report.recovery_required = true;
        report.note = Some(pending.note(dir));
    }
    if let (Some(root), None) = (root, cp.current())
        && generation::mark_cut_short(root)
    {
        // What `set` will complete (outside review 101: `status` said nothing of it).
        report.note = Some(
            "its ownership marker is cut short (a `profile set` killed while marking it): run the `set` again"
                .to_owned(),
        );
    }
    if let Some(c) = cp.current() {
        // Another state root than the configured one holds no generation of this profile:
        // say so, as `rollback` does, rather than fail on a missing directory in it.
        if let Some(given) = root.map(root_string).transpose()?
            && given != c.state_root
        {
            // Unless this ledger's interrupted transaction is there (outside review 101).
            if let Some(id) = ledger_id {
                refuse_interrupted_elsewhere(dir, id, None)?;
            }
            return Err(ProfileError::Refused(format!(
                "the configured state root is {}, not {given}",
                c.state_root
            )));
        }
        let root = root.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from(&c.state_root));
        // The state root as `set` requires it (owned, 0700, no symlink in it or its own
        // directories), before anything in it is read.
        if let Some(ledger_id) = ledger_id {
            generation::check_root(&root, ledger_id, generation::RootUse::Existing)?;
        }
        let registry = registries.get(&c.registry_digest).ok_or_else(|| {
            ProfileError::Refused(format!("registry {} is not in the ledger", c.registry_digest))
        })?;
        let (manifest, _) = manifest_of(registry, &c.plan)?;
        generation::verify(&generation::generation_dir(&root, c.generation_digest), &manifest)
            .map_err(with_remedy)?;
        verify_past(cp, &root, &|digest| {
            registries
                .get(&digest)
                .cloned()
                .ok_or_else(|| ProfileError::Refused(format!("registry {digest} is not in the ledger")))
        })?;
        if let Some(ledger_id) = ledger_id
            && generation::read_txn(&root)?.is_none()
        {
            generation::verify_receipts(
                &root,
                &expected_receipts(cp, ledger_id, &root),
                (ledger_id, cp.revision()),
            )?;
            // A `txn.tmp` not this ledger's blocks every transaction: said here too (outside
            // review 212 F2: `status` said nothing of what `set` and `recover` refuse).
            if let (Err(foreign), None) = (generation::foreign_txn_tmp(&root, ledger_id), &report.note) {
                report.note = Some(format!("{foreign} (every `profile set` and `recover` there refuses it)"));
            }
            // A stage no transaction names blocks the command that would reuse its
            // generation: said here, not first at that command (outside review 151 F4).
            if let (Err(stray), None) = (generation::stray_stage(&root), &report.note) {
                report.note = Some(format!(
                    "{stray} (`ledger profile recover` clears a stage of the configured generation that a rebuild cut short)"
                ));
            }
        }
    }
    Ok(report)
}

/// `profile mode`: the same plan under another selection mode, as a new revision (no
/// generation changes; the same mode is a no-op).
pub fn mode(
    dir: &Path,
    mode: SelectionMode,
    expected: Option<u32>,
    root: Option<&Path>,
) -> Result<ProfileStatus, ProfileError> {
    // As `set` requires (outside review 27: `mode` recorded a revision over an interrupted
    // transaction, which `recover` then rolled back instead of forward, and over a tampered
    // or deleted generation): the configured state root verifies as `status` verifies it,
    // and holds no interrupted transaction. A state root given (seed 003's `profile mode …
    // --state-root`) must be the configured one, as for `status`.
    let checked = status(dir, root)?;
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    refuse_interrupted_elsewhere(dir, ledger.store().head().ledger, None)?;
    if checked.recovery_required {
        let root = checked.state_root.unwrap_or_default();
        return Err(GenerationError::RecoveryRequired(scan::shown(&root)).into());
    }
    let cp = &ledger.state().context_profiles;
    check_expected(cp, expected)?;
    // What `status` verified is what is recorded now, under the writer's lock: a `set`,
    // `mode` or `rollback` admitted between the two (outside review 195 F2: a concurrent
    // `set` to another root, and this mode was recorded over it, unverified) is refused.
    if cp.revision() != checked.revision {
        return Err(ProfileError::Refused(format!(
            "the profile changed while this command verified it (revision {} became {}): run it again",
            checked.revision,
            cp.revision()
        )));
    }
    let c = cp.current().ok_or_else(|| {
        ProfileError::Refused("no profile is configured: run `ledger profile set` first".into())
    })?;
    if c.selection.mode == mode {
        return status_of(ledger.state(), None, "no-op");
    }
    let event = ProfileRevisionRecorded {
        action: RevisionAction::Mode,
        revision: cp.revision().saturating_add(1),
        selection: ProfileSelection { mode, ..c.selection.clone() },
        state_root: c.state_root.clone(),
        plan_digest: c.plan.with_mode(mode).digest(),
        rollback_to: None,
        registry_digest: c.registry_digest,
        generation_digest: c.generation_digest,
    };
    admissible(&ledger, &event)?;
    ledger.admit(vec![Event::ProfileRevisionRecorded(event)], Ctx { time_ms: now_ms() })?;
    status_of(ledger.state(), None, "mode")
}

/// `profile rollback`: a new revision returning to the revision before the current one
/// (its generation and its selection: profile, target, include, exclude, mode).
pub fn rollback(dir: &Path, root: &Path, expected: u32) -> Result<ProfileStatus, ProfileError> {
    generation::root_path(root)?;
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    refuse_interrupted_elsewhere(dir, ledger.store().head().ledger, Some(root))?;
    let cp = &ledger.state().context_profiles;
    check_expected(cp, Some(expected))?;
    let c = cp
        .current()
        .ok_or_else(|| ProfileError::Refused("no profile is configured: nothing to roll back".into()))?;
    let to = cp.revision().saturating_sub(1);
    let back = cp
        .revisions
        .get(&to)
        .ok_or_else(|| ProfileError::Refused("revision 1 has no earlier revision to roll back to".into()))?;
    let state_root = root_string(root)?;
    if state_root != c.state_root {
        return Err(ProfileError::Refused(format!(
            "the configured state root is {}, not {state_root}",
            c.state_root
        )));
    }
    let event = ProfileRevisionRecorded {
        action: RevisionAction::Rollback,
        revision: cp.revision().saturating_add(1),
        selection: back.selection.clone(),
        state_root,
        plan_digest: back.plan_digest,
        rollback_to: Some(to),
        registry_digest: back.registry_digest,
        generation_digest: back.generation_digest,
    };
    let plan = back.plan.clone();
    admissible(&ledger, &event)?;
    // A generation stale against the sources recorded since would be refused by every
    // `select` (seed 003 rejects "stale source generations"): refused here, changing
    // nothing, rather than recorded as a configuration nothing can use (outside review 68).
    let mut after = ledger.state().clone();
    rp::apply_revision(&mut after, &event, ledger.store().head().seq + 1)
        .map_err(|v| ProfileError::Refused(v.to_string()))?;
    if let Some(why) = crate::runtime::selection::no_plan(&after) {
        return Err(ProfileError::Refused(format!(
            "revision {to}'s saved selection has no plan over the sources recorded since ({why}), so every select \
             would refuse it — run `ledger profile set` with the selection you want over the current sources instead"
        )));
    }
    if let Some(newest) = crate::runtime::selection::stale_generation(&after) {
        return Err(ProfileError::Refused(format!(
            "revision {to}'s generation was planned over registry {}, and the sources changed since: it is \
             stale against registry {newest}, so every select would refuse it — run `ledger profile set` with \
             the selection you want over the current sources instead",
            event.registry_digest
        )));
    }
    let registry = registry_by_digest(&ledger, event.registry_digest)?;
    let (manifest, contents) = manifest_of(&registry, &plan)?;
    generation::check_root(root, ledger.store().head().ledger, generation::RootUse::Existing)?;
    verify_current(&ledger, root)?;
    transact(&mut ledger, dir, root, event, &manifest, &contents)?;
    status_of(ledger.state(), None, "rollback")
}

/// With no transaction to finish: rebuilds the configured generation from the ledger's
/// bytes when it is missing, and republishes receipts that are missing or differ from the
/// ledger's (outside review 56: a deleted generation left every command failing and
/// `recover` said nothing to recover). A generation that is present but does not verify
/// is refused, never overwritten: it is moved out by hand, then rebuilt. True when
/// anything was repaired.
fn repair_saved_state(ledger: &Ledger<DiskStore>, root: &Path) -> Result<bool, ProfileError> {
    let cp = &ledger.state().context_profiles;
    // What a write cut short left (`txn.tmp`, `receipts/N.tmp`: never renamed into place,
    // so nothing refers to them; recover holds the lock, so no writer is making them).
    let mut repaired = generation::remove_leftovers(
        root,
        ledger.store().head().ledger,
        &expected_receipts(cp, ledger.store().head().ledger, root),
    )?;
    if let Some(c) = cp.current()
        && Path::new(&c.state_root) == root
    {
        let registry = registry_by_digest(ledger, c.registry_digest)?;
        let (manifest, contents) = manifest_of(&registry, &c.plan)?;
        let dir = generation::generation_dir(root, c.generation_digest);
        let contents: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
        if !fs_exists(&dir) {
            generation::rebuild(root, c.generation_digest, &manifest, &contents)?;
            repaired = true;
        } else {
            // A stage of the configured generation that a rebuild cut short, every file in
            // it the generation's bytes or a prefix of them, is ours to clear, as before a
            // rebuild (outside review 151 F4: refused as "nothing records it").
            repaired |= generation::clear_stage(root, c.generation_digest, &manifest, &contents)
                .map_err(with_remedy)?;
        }
        generation::verify(&dir, &manifest).map_err(with_remedy)?;
        // What every other command checks, recover reports too, never "nothing to recover"
        // over it (outside review 147 F2: an edited earlier generation or a stray stage
        // blocked `status`, `set`, `mode`, `rollback` and `select` while `recover` said the
        // store was clean): an earlier generation it holds, and what is staged.
        verify_past(cp, root, &|digest| registry_by_digest(ledger, digest))?;
    }
    generation::stray_stage(root)?;
    // Missing receipts are republished; one that differs is never overwritten (outside
    // review 57: its bytes are evidence) — moved out by hand, then republished.
    let expected = expected_receipts(cp, ledger.store().head().ledger, root);
    let wrong = generation::check_receipts(root, &expected, (ledger.store().head().ledger, cp.revision()))?;
    refuse_differing(root, &wrong)?;
    for revision in wrong {
        if let Some(receipt) = expected.iter().find(|r| r.revision == revision) {
            generation::publish_receipt(root, receipt)?;
            repaired = true;
        }
    }
    Ok(repaired)
}

/// `profile recover`: finishes or undoes an interrupted transaction, deciding from the
/// ledger and the stage it finds. Idempotent.
pub fn recover(dir: &Path, root: &Path) -> Result<ProfileStatus, ProfileError> {
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    let ledger_id: Id = ledger.store().head().ledger;
    // What a note write cut short left (outside review 103: never removed).
    generation::remove_pending_leftover(dir)?;
    // A transaction left in another root is named in the outcome (outside review 103:
    // `recover` of the configured root said nothing to recover while it blocked every
    // command).
    let elsewhere = |mut status: ProfileStatus| {
        if let Some(pending) = pending_elsewhere(dir, ledger_id, Some(root)) {
            status.recovery_required = true;
            status.note = Some(pending.note(dir));
        }
        status
    };
    // The configured root, lost or emptied, is this ledger's to restore: made again (0700)
    // or, empty, marked, and rebuilt below from what the ledger vouches for (outside review
    // 91: every command refused it as "not marked" and named no way out). A root that is
    // not empty and not marked stays refused, as for `set`.
    // By its text, as recorded: a root `root_path` now refuses (a provider home named since)
    // is still the configured one, and gets that refusal below (outside review 97).
    let configured = ledger
        .state()
        .context_profiles
        .current()
        .is_some_and(|c| Some(c.state_root.as_str()) == root.to_str());
    let usage = if configured { generation::RootUse::Create } else { generation::RootUse::Existing };
    // Another root holds something to recover only if this ledger marked it (an interrupted
    // `set` to a new root): one missing or unmarked is named against the configured root,
    // not sent back to `recover` (outside review 96 F6).
    if !configured && !root.join(generation::OWNER_FILE).exists() {
        if generation::pending_root(dir).as_deref() == Some(root) && std::fs::symlink_metadata(root).is_err()
        {
            return Err(Pending::Missing(root.to_path_buf()).refusal(dir));
        }
        let what = format!("{} holds nothing of this ledger's to recover", root.display());
        let mut why = match ledger.state().context_profiles.current() {
            Some(c) => format!("the configured state root is {}, and {what}", c.state_root),
            None => format!("no profile is configured, and {what}"),
        };
        // A transaction left elsewhere is named (outside review 105).
        if let Some(pending) = pending_elsewhere(dir, ledger_id, None) {
            why.push_str("; ");
            why.push_str(&pending.note(dir));
        }
        return Err(ProfileError::Refused(why));
    }
    generation::check_root(root, ledger_id, usage)?;
    let _lock = generation::lock(root)?;
    let Some(txn) = generation::read_txn(root)? else {
        let outcome = if repair_saved_state(&ledger, root)? { "repaired" } else { "nothing-to-recover" };
        // A note left by a transaction finished but for its removal.
        generation::clear_pending(dir, root)?;
        return status_of(ledger.state(), Some(root), outcome).map(elsewhere);
    };
    let bad = |reason: &str| GenerationError::BadTransaction {
        path: root.join(generation::TXN_FILE).display().to_string(),
        reason: reason.to_owned(),
    };
    if txn.ledger_id != ledger_id {
        return Err(bad("it belongs to another ledger").into());
    }
    let bytes = unhex(&txn.event_hex).ok_or_else(|| bad("eventHex is not hex"))?;
    let event = match codec::decode::<Event>(&bytes, codec::MAX_ENTRY_BYTES) {
        Ok(Event::ProfileRevisionRecorded(e)) => e,
        _ => return Err(bad("eventHex is not a profileRevisionRecorded event").into()),
    };
    if event.revision != txn.revision
        || event.generation_digest != txn.generation_digest
        || txn.expected_revision.checked_add(1) != Some(txn.revision)
        || Path::new(&event.state_root) != root
    {
        return Err(bad("its fields disagree with its event").into());
    }
    let registry = registry_by_digest(&ledger, event.registry_digest)?;
    let plan = rp::plan_of(&registry, event.registry_digest, &event.selection)?;
    let (manifest, contents) = manifest_of(&registry, &plan)?;
    let contents: Vec<&[u8]> = contents.iter().map(Vec::as_slice).collect();
    let receipt = Receipt {
        ledger_id,
        revision: event.revision,
        generation_digest: event.generation_digest,
        plan_digest: event.plan_digest,
        registry_digest: event.registry_digest,
    };
    let cp = &ledger.state().context_profiles;
    // Committed by this transaction: the revision it prepared, recorded with its plan and
    // generation in this state root (outside review 79: a revision another root's `set`
    // committed was reported `completed` here, and its receipt published in this root).
    let committed = cp.revisions.get(&txn.revision).is_some_and(|r| {
        r.generation_digest == event.generation_digest
            && r.plan_digest == event.plan_digest
            && Path::new(&r.state_root) == root
    });
    let published = generation::generation_dir(root, txn.generation_digest);
    let mut note = None;
    // Inside a transaction, an altered generation's way out is named too (outside review 151
    // F5: "was modified", and no remedy).
    let in_txn = |e: GenerationError| {
        remedied(
            e,
            "move it out of the state root: the next `ledger profile recover` then rolls the interrupted \
             revision back — run the interrupted `set`, `mode` or `rollback` again after it — or, committed \
             already, rebuilds it",
        )
    };
    let outcome = if committed {
        // Committed already: a generation lost since is rebuilt from the ledger, as for any
        // committed revision (outside review 154 P1-1: moved out as told, it was refused
        // as missing at every `recover`, for good).
        if !fs_exists(&published) {
            generation::rebuild(root, txn.generation_digest, &manifest, &contents)?;
        }
        generation::verify(&published, &manifest).map_err(with_remedy)?;
        generation::publish_receipt(root, &receipt)?;
        generation::finish(root)?;
        "completed"
    } else if cp.revision() == txn.expected_revision && fs_exists(&published) {
        generation::verify(&published, &manifest).map_err(in_txn)?;
        // No revision is committed over an altered earlier generation, as `set` commits
        // none (outside review 151 F2: recover rolled forward and reported success, and the
        // next `status` refused).
        if let Some(c) = cp.current().filter(|c| Path::new(&c.state_root) == root) {
            let dir = generation::generation_dir(root, c.generation_digest);
            if fs_exists(&dir) {
                let registry = registry_by_digest(&ledger, c.registry_digest)?;
                generation::verify(&dir, &manifest_of(&registry, &c.plan)?.0).map_err(with_remedy)?;
            }
        }
        verify_past(cp, root, &|digest| registry_by_digest(&ledger, digest))?;
        // Nor over a receipt the ledger does not vouch for (outside review 154 P1-2): the
        // committed revisions' receipts, and this one's, differing from the ledger's or
        // foreign, are refused by name; a missing one is republished after.
        let mut expected = expected_receipts(cp, ledger_id, root);
        expected.push(receipt.clone());
        // (What our own writes cut short left — this receipt's `N.tmp` among them — goes
        // first, as in any repair.)
        generation::remove_leftovers(root, ledger_id, &expected)?;
        refuse_differing(root, &generation::check_receipts(root, &expected, (ledger_id, txn.revision))?)?;
        match admissible(&ledger, &event) {
            Ok(()) => {
                generation::publish_receipt(root, &receipt)?;
                ledger.admit(vec![Event::ProfileRevisionRecorded(event)], Ctx { time_ms: now_ms() })?;
                // Committed: a failure from here on says so, as `set`'s does (outside review
                // 220 F3: a bare OS error after the roll-forward committed the revision).
                generation::finish(root)
                    .map_err(|source| ProfileError::Unfinished { revision: txn.revision, source })?;
                "rolled-forward"
            }
            // The ledger moved on (a newer source registry was recorded since the crash):
            // the prepared revision can no longer be recorded, so it is undone (outside
            // review 79: `recover` refused it for good, and every profile command sent the
            // operator back to `recover`).
            Err(ProfileError::Refused(why)) => {
                generation::roll_back(root, &txn, &manifest, &contents, &receipt)?;
                note = Some(format!(
                    "the interrupted revision {} can no longer be recorded ({why}): rolled back; run `ledger profile set` again",
                    txn.revision
                ));
                "rolled-back"
            }
            Err(other) => return Err(other),
        }
    } else {
        generation::roll_back(root, &txn, &manifest, &contents, &receipt)?;
        "rolled-back"
    };
    generation::clear_pending(dir, root).map_err(|source| match outcome {
        "rolled-forward" => ProfileError::Unfinished { revision: txn.revision, source },
        _ => source.into(),
    })?;
    // What the transaction left as it was is repaired, or refused by name, in the same run:
    // never an outcome of success over damage the next command refuses (outside review 154
    // P2-B: an altered earlier generation after `completed`, a missing current generation
    // after `rolled-back`).
    // (A refusal there says what the transaction's outcome was first: outside review 157
    // P2-1, a roll-forward was reported only as the refusal after it.)
    repair_saved_state(&ledger, root).map_err(|e| match e {
        e if e.is_refusal() => ProfileError::Refused(format!(
            "the interrupted transaction (revision {}) was {}; then: {e}",
            txn.revision,
            outcome.replace('-', " ")
        )),
        e => e,
    })?;
    let mut status = status_of(ledger.state(), Some(root), outcome)?;
    status.note = note;
    Ok(elsewhere(status))
}
