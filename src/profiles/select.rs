//! `ledger select` at the edge (issue #15): the task input, the `--previous` receipt and
//! the `--proposal` document parsed within their bounds (malformed input is never echoed:
//! it may hold secrets), then the pure decision of `runtime::selection` recorded as one
//! `selectionRecorded` entry through `Ledger::admit`.

use std::io::Read;
use std::path::Path;

use ledger_schema::events::profile::SelectionMode;
use ledger_schema::events::selection::{ReceiptBody, SelectionRecorded};
use ledger_schema::{Digest, Event};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::ledger::{Ledger, SubmitError};
use crate::runtime::Ctx;
use crate::runtime::selection::{
    self as sel, MAX_PROPOSAL_BYTES, MAX_QUERY_BYTES, MAX_TASK_IDS, MAX_TASK_INPUT_BYTES, Request,
    SelectionError, Task,
};
use crate::store::{DiskStore, OpenError};

/// Why `ledger select` failed: a refusal (exit 1) or usage / I/O (exit 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// The task input, receipt or proposal is malformed (exit 2). Never echoes the input.
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Io(String),
    #[error("{0}")]
    Open(#[from] OpenError),
    #[error("{0}")]
    Submit(#[from] SubmitError),
    #[error("{0}")]
    Refused(#[from] SelectionError),
    #[error("--previous: the receipt's receiptDigest does not recompute: refused")]
    ReceiptDigest,
    #[error("--expected-digest {expected}: the selection is now {found} (stale): nothing loaded")]
    StaleExpected { expected: Digest, found: Digest },
    #[error("{0}")]
    Proposal(String),
    /// The configured profile's saved state does not verify (or is in flight).
    #[error("{0}")]
    SavedState(Box<super::ProfileError>),
}

impl SelectError {
    /// A refusal of what was asked (exit 1), as opposed to usage or I/O (exit 2).
    pub fn is_refusal(&self) -> bool {
        match self {
            // A proposal file that is not the documented shape is malformed input, as a
            // task input or receipt is (outside review 83: it exited 1).
            SelectError::Input(_) | SelectError::Io(_) | SelectError::Proposal(_) => false,
            SelectError::Open(e) => e.is_verification_failure(),
            SelectError::Submit(e) => e.is_refusal(),
            SelectError::Refused(SelectionError::Task(_)) => false,
            SelectError::Refused(_) | SelectError::ReceiptDigest | SelectError::StaleExpected { .. } => true,
            SelectError::SavedState(e) => e.is_refusal(),
        }
    }
}

/// A JSON object's members in document order, duplicates kept (so they can be refused).
struct Members(Vec<(String, Value)>);

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Members, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    if out.len() >= 64 {
                        return Err(de::Error::custom("too many members"));
                    }
                    out.push((k, v));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A JSON value whose objects, at every depth, name each key once. A parsed `Value` keeps
/// one of two equal keys, so a document read that way could mean either (outside review
/// 206: a `--previous` receipt with a key given twice was accepted).
struct UniqueKeys;

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<UniqueKeys, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_i64<E>(self, _: i64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_u64<E>(self, _: u64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_f64<E>(self, _: f64) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_str<E>(self, _: &str) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_unit<E>(self) -> Result<UniqueKeys, E> {
                Ok(UniqueKeys)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<UniqueKeys, A::Error> {
                while seq.next_element::<UniqueKeys>()?.is_some() {}
                Ok(UniqueKeys)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UniqueKeys, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !seen.insert(key) {
                        return Err(de::Error::custom("a key is given twice"));
                    }
                    map.next_value::<UniqueKeys>()?;
                }
                Ok(UniqueKeys)
            }
        }
        d.deserialize_any(V)
    }
}

/// One UTF-8 JSON object of at most `max` bytes, no NUL, members unique and among
/// `allowed`. Errors name the document and the rule, never its content.
fn object(
    what: &str,
    bytes: &[u8],
    max: usize,
    allowed: &[&str],
) -> Result<Vec<(String, Value)>, SelectError> {
    let bad = |m: &str| SelectError::Input(format!("{what}: {m}"));
    if bytes.len() > max {
        return Err(bad(&format!("over {max} bytes")));
    }
    if let Some(mark) = byte_order_mark(bytes) {
        return Err(bad(&format!(
            "starts with {mark}, which JSON text does not hold: save it as UTF-8 without one"
        )));
    }
    if bytes.contains(&0) {
        return Err(bad("holds a NUL byte"));
    }
    if std::str::from_utf8(bytes).is_err() {
        return Err(bad("not UTF-8"));
    }
    let Members(members) = serde_json::from_slice(bytes)
        .map_err(|e| bad(&format!("not one JSON object (line {}, column {})", e.line(), e.column())))?;
    let mut seen = std::collections::BTreeSet::new();
    for (k, _) in &members {
        if !allowed.contains(&k.as_str()) {
            return Err(bad(&format!("unknown key (allowed: {})", allowed.join(", "))));
        }
        if !seen.insert(k.as_str()) {
            return Err(bad("a key is given twice"));
        }
    }
    Ok(members)
}

/// The byte-order mark `bytes` start with, named, if any (outside reviews 95, 97: the JSON
/// parser's "line 1, column 1" did not say what was there).
pub fn byte_order_mark(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        Some("a UTF-8 byte-order mark (EF BB BF)")
    } else if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        Some("a UTF-16 byte-order mark (the text must be UTF-8)")
    } else {
        None
    }
}

fn ids(what: &str, field: &str, v: &Value) -> Result<Vec<String>, SelectError> {
    let bad = |m: &str| SelectError::Input(format!("{what}: {field} {m}"));
    let list = v.as_array().ok_or_else(|| bad("must be a list of ids"))?;
    if list.len() > MAX_TASK_IDS {
        return Err(bad(&format!("holds more than {MAX_TASK_IDS} ids")));
    }
    let mut out: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        let id = item.as_str().ok_or_else(|| bad("must be a list of ids"))?;
        if id.is_empty() || id.len() > 4096 || id.chars().any(char::is_control) {
            return Err(bad("holds a malformed id"));
        }
        out.push(id.to_owned());
    }
    out.sort();
    let before = out.len();
    out.dedup();
    if out.len() != before {
        return Err(bad("holds an id twice"));
    }
    Ok(out)
}

const TASK_KEYS: [&str; 8] =
    ["sessionId", "taskId", "revision", "phase", "query", "explicitIds", "proposedIds", "noWorkflow"];

/// Parses a task input (docs/selection.md). Ids are sorted; their existence is checked
/// against the registry by the decision.
pub fn parse_task(bytes: &[u8]) -> Result<Task, SelectError> {
    let what = "task input";
    let members = object(what, bytes, MAX_TASK_INPUT_BYTES, &TASK_KEYS)?;
    let bad = |m: &str| SelectError::Input(format!("{what}: {m}"));
    let mut task = Task::default();
    let (mut session, mut task_id, mut revision, mut phase) = (false, false, false, false);
    for (k, v) in members {
        let text = |field: &str| {
            v.as_str().map(str::to_owned).ok_or_else(|| bad(&format!("{field} must be a string")))
        };
        match k.as_str() {
            "sessionId" => {
                task.session_id = text("sessionId")?;
                session = true;
            }
            "taskId" => {
                task.task_id = text("taskId")?;
                task_id = true;
            }
            "phase" => {
                task.phase = text("phase")?;
                phase = true;
            }
            "revision" => {
                task.revision = v
                    .as_u64()
                    .and_then(|r| u32::try_from(r).ok())
                    .filter(|r| *r >= 1)
                    .ok_or_else(|| bad("revision must be an integer from 1 to 4294967295"))?;
                revision = true;
            }
            "query" => {
                let q = text("query")?;
                if q.len() > MAX_QUERY_BYTES {
                    return Err(bad(&format!("query is over {MAX_QUERY_BYTES} bytes")));
                }
                task.query = Some(q);
            }
            "explicitIds" => task.explicit_ids = ids(what, "explicitIds", &v)?,
            "proposedIds" => task.proposed_ids = ids(what, "proposedIds", &v)?,
            "noWorkflow" => {
                task.no_workflow = v.as_bool().ok_or_else(|| bad("noWorkflow must be true or false"))?
            }
            _ => return Err(bad("unknown key")),
        }
    }
    for (present, field) in
        [(session, "sessionId"), (task_id, "taskId"), (revision, "revision"), (phase, "phase")]
    {
        if !present {
            return Err(bad(&format!("{field} is required")));
        }
    }
    sel::check_task(&task).map_err(|e| SelectError::Input(e.to_string()))?;
    Ok(task)
}

/// Parses a provider's proposal: exactly `{"selectedIds": [...]}`, zero or one id.
pub fn parse_proposal(bytes: &[u8]) -> Result<Vec<String>, SelectError> {
    let members = object("proposal", bytes, MAX_PROPOSAL_BYTES, &["selectedIds"])
        .map_err(|e| SelectError::Proposal(e.to_string()))?;
    let Some((_, v)) = members.first() else {
        return Err(SelectError::Proposal("proposal: selectedIds is required".into()));
    };
    let list = ids("proposal", "selectedIds", v).map_err(|e| SelectError::Proposal(e.to_string()))?;
    if list.len() > 1 {
        return Err(SelectionError::ProposalTooMany(list.len()).into());
    }
    Ok(list)
}

/// A receipt as printed (`receipt` of `--json`): its body and `receiptDigest`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Receipt {
    #[serde(flatten)]
    pub body: ReceiptBody,
    pub receipt_digest: Digest,
}

impl Receipt {
    pub fn of(e: &SelectionRecorded) -> Receipt {
        let body = e.receipt();
        Receipt { receipt_digest: body.digest(), body }
    }
}

/// Parses a `--previous` receipt and recomputes its digest (a mismatch is refused).
pub fn parse_receipt(bytes: &[u8]) -> Result<Digest, SelectError> {
    if bytes.len() > MAX_TASK_INPUT_BYTES || bytes.contains(&0) {
        return Err(SelectError::Input("--previous: not a receipt (size or NUL)".into()));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        SelectError::Input(format!("--previous: not JSON (line {}, column {})", e.line(), e.column()))
    })?;
    serde_json::from_slice::<UniqueKeys>(bytes).map_err(|e| {
        SelectError::Input(format!(
            "--previous: a key is given twice (line {}, column {}): not a receipt as printed",
            e.line(),
            e.column()
        ))
    })?;
    let mut map = match value {
        Value::Object(m) => m,
        _ => return Err(SelectError::Input("--previous: not a receipt object".into())),
    };
    let digest = map
        .remove("receiptDigest")
        .and_then(|d| serde_json::from_value::<Digest>(d).ok())
        .ok_or_else(|| SelectError::Input("--previous: receiptDigest is missing or malformed".into()))?;
    let body: ReceiptBody = serde_json::from_value(Value::Object(map))
        .map_err(|_| SelectError::Input("--previous: not a selection receipt (fields)".into()))?;
    if body.digest() != digest {
        return Err(SelectError::ReceiptDigest);
    }
    Ok(digest)
}

/// Reads a file, or standard input for `-`, refusing more than `max` bytes before
/// holding them.
pub fn read_bounded(path: &Path, max: usize, what: &str) -> Result<Vec<u8>, SelectError> {
    let mut buf = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let read = if path == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut buf))
    };
    read.map_err(|e| SelectError::Io(format!("read {what} {}: {e}", super::scan::disp(path))))?;
    if buf.len() > max {
        return Err(SelectError::Input(format!("{what}: over {max} bytes")));
    }
    Ok(buf)
}

/// One loaded resource with its text (from the ledger, its digest re-checked).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadedText {
    pub id: String,
    pub path: String,
    pub bytes: u64,
    pub digest: Digest,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// What `ledger select` did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub event: SelectionRecorded,
    /// The entry's seq (None for `--dry-run`).
    pub seq: Option<u64>,
    /// The very same selection (same receipt) was already recorded, at `seq`: nothing was
    /// written (a selection is idempotent, as every command is).
    pub duplicate: bool,
    pub resources: Vec<LoadedText>,
    pub mode: ledger_schema::events::profile::SelectionMode,
    /// Why a `--previous` receipt was not reused, if it was not ([`sel::previous_set_aside`]).
    pub previous_set_aside: Option<String>,
    /// Explicit ids the configured profile installs already ([`sel::installed_explicit`]).
    pub installed_explicit: Vec<String>,
}

/// Options of `ledger select` besides the ledger and the task.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub request: Request,
    pub expected_digest: Option<Digest>,
    pub dry_run: bool,
}

/// Refused where the source tree the newest registry was scanned from changed since, or
/// cannot be scanned again (seed 003: `run` "rechecks source bindings … before loading
/// bodies"; outside review 114).
fn refuse_source_drift(state: &crate::runtime::State) -> Result<(), SelectError> {
    let check = super::check_source(state);
    if check.blocks() {
        return Err(SelectError::SavedState(Box::new(check.refusal())));
    }
    Ok(())
}

/// Decides `task` over the ledger at `dir` and (unless `dry_run`) records it as one entry.
pub fn select(dir: &Path, task: &Task, opts: &Options) -> Result<Outcome, SelectError> {
    let (mut ledger, _) = Ledger::<DiskStore>::open(dir)?;
    super::check_saved_state(dir, &ledger).map_err(|e| SelectError::SavedState(Box::new(e)))?;
    refuse_source_drift(ledger.state())?;
    let state = ledger.state();
    let (event, resources, mode) = decide_and_load(state, task, opts)?;
    let previous_set_aside = sel::previous_set_aside(state, &event);
    let installed_explicit = sel::installed_explicit(state, &event);
    let recorded = state.selections.by_receipt.get(&event.receipt().digest()).map(|s| s.seq);
    let (seq, duplicate) = match recorded {
        // Already recorded: a duplicate, dry run or not (outside review 87: the dry run said
        // `duplicate: false` where the real call returned the original seq).
        Some(seq) => (Some(seq), true),
        None if opts.dry_run => (None, false),
        None => {
            let receipt = ledger.admit(
                vec![Event::SelectionRecorded(Box::new(event.clone()))],
                Ctx { time_ms: super::now_ms() },
            )?;
            (Some(receipt.seq), false)
        }
    };
    Ok(Outcome { event, seq, duplicate, resources, mode, previous_set_aside, installed_explicit })
}

/// The decision over `state` (its configured profile) and, with `--load`, the loaded
/// bodies — from the ledger's registry bytes, re-checked against their digests.
fn decide_and_load(
    state: &crate::runtime::State,
    task: &Task,
    opts: &Options,
) -> Result<(SelectionRecorded, Vec<LoadedText>, ledger_schema::events::profile::SelectionMode), SelectError>
{
    let event = sel::decide_live(state, task, &opts.request)?;
    if let Some(expected) = opts.expected_digest
        && expected != event.selection_digest
    {
        return Err(SelectError::StaleExpected { expected, found: event.selection_digest });
    }
    let registry = state.context_profiles.registry.clone().ok_or(SelectionError::NotConfigured)?;
    let mode =
        state.context_profiles.current().map(|c| c.selection.mode).ok_or(SelectionError::NotConfigured)?;
    let mut resources = Vec::new();
    if opts.request.load {
        for (r, bytes) in sel::load(&registry, &event.selected_ids)? {
            // Bytes from the ledger, re-checked against the registry's digest.
            if ledger_schema::events::profile::SourceResource::digest_of(bytes) != r.digest {
                return Err(SelectionError::NotLoadable { id: r.id, path: r.path }.into());
            }
            let content = sel::deliverable_text(bytes)
                .map_err(|why| {
                    SelectError::Refused(SelectionError::NotText {
                        id: r.id.clone(),
                        path: r.path.clone(),
                        why,
                    })
                })?
                .to_owned();
            resources.push(LoadedText {
                id: r.id,
                path: r.path,
                bytes: r.bytes,
                digest: r.digest,
                content: Some(content),
            });
        }
    }
    Ok((event, resources, mode))
}

/// `profile resolve PROFILE` (seed 003: `resolve lean --task-input …`): `task` decided over
/// `input`'s plan of the current registry as if that plan were configured, its bodies
/// loaded with `--load` — recording nothing (no revision, no selection entry) and touching
/// no state root. The outcome's receipt binds a revision that does not exist, so it cannot
/// be reused; `select` (or `resolve --state-root`) decides over the configured profile and
/// records.
/// Whether mode `asked` loads bodies that mode `configured` withholds: `suggest` loads
/// none, `manual` only explicit ids, `auto` explicit and routed ones.
fn loads_more(asked: SelectionMode, configured: SelectionMode) -> bool {
    let reach = |m: SelectionMode| match m {
        SelectionMode::Suggest => 0,
        SelectionMode::Manual => 1,
        SelectionMode::Auto => 2,
    };
    reach(asked) > reach(configured)
}

pub fn resolve_unconfigured(
    dir: &Path,
    input: &super::PlanInput,
    task: &Task,
    opts: &Options,
) -> Result<Outcome, SelectError> {
    let profile = |e: super::ProfileError| SelectError::SavedState(Box::new(e));
    // A provider's answer answers a pending selection the ledger recorded, once, recorded
    // itself: an unrecorded resolve has none to answer (outside review 106: it answered a
    // recorded pending selection three times with three candidates, loading each body).
    if opts.request.proposal.is_some() {
        return Err(profile(super::ProfileError::Refused(
            "--proposal answers a pending selection the ledger recorded: answer it with `ledger select` \
             (or `profile resolve --state-root`), which records the answer"
                .to_owned(),
        )));
    }
    let mut state = super::read_state(dir)?;
    refuse_source_drift(&state)?;
    if opts.request.load
        && let Some(ledger) = state.ledger
    {
        super::refuse_pending_transaction(dir, ledger, &state).map_err(profile)?;
    }
    let cp = &state.context_profiles;
    let (registry, registry_digest) = match (&cp.registry, cp.registry_digest) {
        (Some(r), Some(d)) => (r.clone(), d),
        _ => return Err(profile(crate::runtime::profile::PlanError::NoRegistry.into())),
    };
    let plan = input.plan(cp, &registry, registry_digest).map_err(|e| profile(e.into()))?;
    // The configured mode holds as the configured exclusions do: a load recorded nowhere
    // returns no body the configuration withholds — none under `suggest`, only explicit ids
    // under `manual` (outside review 147 F1: `--selection auto --load` returned a routed
    // skill's body under a configured `suggest` or `manual` mode, and no entry said so).
    if opts.request.load
        && let Some(configured) = cp.current().map(|c| c.selection.mode)
        && loads_more(plan.selection().mode, configured)
    {
        let wire = |m: SelectionMode| crate::runtime::wire(&m).to_ascii_lowercase();
        // The way out that works (outside review 151 F6: `--selection suggest --load` is
        // refused too — suggest loads no body).
        let instead = match configured {
            SelectionMode::Suggest => "resolve without `--load` (suggest returns no body)".to_owned(),
            other => format!("resolve with `--selection {}`", wire(other)),
        };
        return Err(profile(super::ProfileError::Refused(format!(
            "the configured selection mode is {}: an unrecorded `--load` under `--selection {}` would return \
             bodies it withholds — {instead}, or change the mode (`ledger profile mode`)",
            wire(configured),
            wire(plan.selection().mode),
        ))));
    }
    // What `set` would refuse for this plan is refused here too (outside review 59).
    super::installs_manual_only_natively(&registry, &plan).map_err(profile)?;
    let (manifest, _) = crate::runtime::profile::generation(&registry, &plan)
        .map_err(|e| profile(super::ProfileError::Refused(e.to_string())))?;
    let event = ledger_schema::events::ProfileRevisionRecorded {
        action: ledger_schema::events::profile::RevisionAction::Set,
        revision: cp.revision().saturating_add(1),
        selection: plan.selection(),
        // No root is touched; the selection binds none (a placeholder `apply` accepts).
        state_root: "/unconfigured".to_owned(),
        plan_digest: plan.digest(),
        rollback_to: None,
        registry_digest,
        generation_digest: manifest.digest(),
    };
    let seq = state.entries;
    crate::runtime::profile::apply_revision(&mut state, &event, seq)
        .map_err(|e| profile(super::ProfileError::Refused(e.to_string())))?;
    let (event, resources, mode) = decide_and_load(&state, task, opts)?;
    let previous_set_aside = sel::previous_set_aside(&state, &event);
    let installed_explicit = sel::installed_explicit(&state, &event);
    Ok(Outcome {
        event,
        seq: None,
        duplicate: false,
        resources,
        mode,
        previous_set_aside,
        installed_explicit,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic

    /// A byte-order mark before a task input is named, UTF-8 or UTF-16 (outside review 97
    /// F12: "not one JSON object (line 1, column 1)"); the same object without one parses.
    #[test]
    fn a_byte_order_mark_is_named() {
        let task = br#"{"sessionId":"s","taskId":"t","revision":1,"phase":"discovery"}"#;
        for (mark, named) in
            [(&[0xEF, 0xBB, 0xBF][..], "UTF-8 byte-order mark"), (&[0xFF, 0xFE][..], "UTF-16")]
        {
            let bytes = [mark, &task[..]].concat();
            let err = super::parse_task(&bytes).unwrap_err().to_string();
            assert!(err.contains(named), "{err}");
        }
        assert!(super::parse_task(task).is_ok());
    }
}
