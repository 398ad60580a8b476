//! Worker events. Admission order (DESIGN §5): strict decode (JSON/CBOR) → size →
//! an existing dispatch claim → dedup (same id + same canonical payload = duplicate; any
//! other byte = conflict) → binding and staleness, which end in an ignored receipt.

use ledger_schema::events::{
    CompactionRequested, IgnoredReason, WorkerDeliveryIgnored, WorkerEventAdmitted, WorkerEventKind,
    WorkerPayload,
};
use ledger_schema::types::{CompactionMode, ResultKind};
use ledger_schema::{Digest, Event, Id};

use super::command::{DeliverWorkerEvent, RequestCompaction};
use super::state::{AttemptState, State};
use super::{Decided, Rejection, Rule, RuleViolation, ensure, get, get_mut, result_kind_allowed, wire};

/// Why a delivery for `attempt_id` bound to `manifest_digest` is stale, if it is.
pub fn staleness(state: &State, attempt_id: Id, manifest_digest: Digest) -> Option<IgnoredReason> {
    let attempt = state.attempts.get(&attempt_id)?;
    if !attempt.status.is_active() {
        return Some(IgnoredReason::AttemptEnded);
    }
    let wf = state.workflows.get(&attempt.workflow_id)?;
    if wf.version != attempt.workflow_version {
        return Some(IgnoredReason::WorkflowVersionChanged);
    }
    if wf.active_attempt != Some(attempt_id) {
        return Some(IgnoredReason::StaleAttempt);
    }
    if manifest_digest != attempt.manifest_digest {
        return Some(IgnoredReason::ManifestMismatch);
    }
    // Checked last, so receipts recorded before this reason existed keep their reason.
    if state.goals.get(&wf.goal_id).is_some_and(|g| g.revision != wf.goal_revision) {
        return Some(IgnoredReason::GoalRevised);
    }
    // Marked by the admission step after an input-changing entry; after every older reason.
    if attempt.context_changed {
        return Some(IgnoredReason::ContextChanged);
    }
    // The stream ended with the terminal event: after every older reason.
    if attempt.result_delivered {
        return Some(IgnoredReason::StreamEnded);
    }
    None
}

/// The size `maxEventBytes` bounds (seed: "Admission measures the strictly decoded event's
/// canonical UTF-8 JSON bytes against that limit"): the decoded payload serialized by
/// `serde_json` as a JSON value — object keys sorted by code point, no whitespace, strings
/// with serde_json's escapes (`\"`, `\\`, `\b \f \n \r \t`, other control characters as
/// `\u00XX`, everything else as raw UTF-8), integers in decimal. Key order cannot change the
/// length; a payload that cannot be serialized measures `usize::MAX` (fail closed).
///
/// Counted, not serialized: `{"items":[…],"kind":"…","observedAtMs":N,"text":"…"}` has a
/// fixed skeleton, and a string's length is its UTF-8 length, its quotes, and one extra byte
/// per two-character escape or five per `\u00XX`. The tests hold it to serde_json's output.
pub fn canonical_json_len(payload: &WorkerPayload) -> usize {
    // `{` `}`, three commas, and the four keys with their quotes and colons.
    const SKELETON: usize =
        2 + 3 + r#""items":"#.len() + r#""kind":"#.len() + r#""observedAtMs":"#.len() + r#""text":"#.len();
    let items = payload
        .items
        .iter()
        .fold(2 + payload.items.len().saturating_sub(1), |n, item| n.saturating_add(json_str_len(item)));
    SKELETON
        .saturating_add(items)
        .saturating_add(json_str_len(kind_name(payload.kind)))
        .saturating_add(decimal_len(payload.observed_at_ms))
        .saturating_add(json_str_len(&payload.text))
}

/// The wire name of a Worker event kind (its serde name).
const fn kind_name(kind: WorkerEventKind) -> &'static str {
    match kind {
        WorkerEventKind::Progress => "PROGRESS",
        WorkerEventKind::ToolActivity => "TOOL_ACTIVITY",
        WorkerEventKind::CompactionStarted => "COMPACTION_STARTED",
        WorkerEventKind::CompactionCompleted => "COMPACTION_COMPLETED",
        WorkerEventKind::Proposals => "PROPOSALS",
        WorkerEventKind::CompletionRequest => "COMPLETION_REQUEST",
    }
}

/// Length of `s` as a serde_json string: quotes, raw UTF-8, `\"` `\\` `\b` `\f` `\n` `\r`
/// `\t` for those bytes, `\u00XX` for every other byte below 0x20.
fn json_str_len(s: &str) -> usize {
    /// Bytes serde_json writes for `b` beyond `b` itself.
    fn escape_extra(b: u8) -> usize {
        match b {
            b'"' | b'\\' | 0x08 | b'\t' | b'\n' | 0x0c | b'\r' => 1,
            0x00..=0x1f => 5,
            _ => 0,
        }
    }
    // Most text escapes nothing: test a chunk at a time for any byte that escapes (a
    // branch-free OR the compiler vectorizes), and count only in chunks that have one.
    let extra: usize = s
        .as_bytes()
        .chunks(32)
        .filter(|chunk| chunk.iter().fold(false, |any, &b| any | (b < 0x20) | (b == b'"') | (b == b'\\')))
        .map(|chunk| chunk.iter().map(|&b| escape_extra(b)).sum::<usize>())
        .sum();
    s.len().saturating_add(2).saturating_add(extra)
}

/// Digits of `n` in decimal.
const fn decimal_len(n: u64) -> usize {
    match n.checked_ilog10() {
        Some(log) => log as usize + 1,
        None => 1,
    }
}

/// A current event must be one the Attempt's phase's response contract permits:
/// PROPOSALS only in DISCOVERY/PLAN, COMPLETION_REQUEST only in IMPLEMENT (seed: "a
/// phase-incompatible result fails closed before it can advance the Workflow"). Refused
/// (`ResultKind`), never admitted.
///
/// A compaction lifecycle event (COMPACTION_STARTED / COMPACTION_COMPLETED) needs the
/// Workflow-bound Execution Profile to select compaction (MANUAL or AUTOMATIC; seed:
/// compaction mode is "selected by the Workflow-bound Execution Profile rather than adapter
/// discretion"): under DISABLED it is refused (`CompactionMode`), never admitted.
fn check_kind(state: &State, attempt: &AttemptState, payload: &WorkerPayload) -> Result<(), RuleViolation> {
    if matches!(payload.kind, WorkerEventKind::CompactionStarted | WorkerEventKind::CompactionCompleted) {
        let wf = get(&state.workflows, attempt.workflow_id, "workflow")?;
        let profile = get(&state.profiles, wf.profile.id, "profile")?;
        ensure!(
            profile.profile.compaction != CompactionMode::Disabled,
            Rule::CompactionMode,
            "a {} event under Execution Profile {} whose compaction is DISABLED",
            wire(&payload.kind),
            wf.profile.id
        );
        // Under MANUAL the trigger is the Runtime's: a compaction starts only on a directive
        // (`requestCompaction`), one each (outside review 84: an unrequested — automatic —
        // compaction was recorded exactly like an authorized one).
        ensure!(
            payload.kind != WorkerEventKind::CompactionStarted
                || attempt.compacting
                || profile.profile.compaction != CompactionMode::Manual
                || attempt.compaction_directive.is_some(),
            Rule::CompactionMode,
            "a COMPACTION_STARTED under Execution Profile {} (compaction MANUAL) with no compaction directive: the Runtime authorizes each manual compaction first (requestCompaction); one it did not ask for is the adapter's or the App Server's own",
            wf.profile.id
        );
    }
    // The progress of a compaction's own turn is maintenance: no text, no items.
    if inside_compaction(attempt, payload) {
        ensure!(
            payload.text.is_empty() && payload.items.is_empty(),
            Rule::CompactionPayload,
            "a {} event inside a compaction is a lifecycle observation: its text is empty and it has no \
             items (private reasoning and opaque compaction state never enter the ledger)",
            wire(&payload.kind)
        );
    }
    // Compactions open and close in turn, and a result does not arrive inside one (seed:
    // a manual compaction's turn progress "is not a new Worker dispatch, Attempt, or
    // completion request and MUST NOT be admitted as one"; outside review 39).
    let open = attempt.compacting;
    let order = match payload.kind {
        WorkerEventKind::CompactionStarted if open => {
            Some("COMPACTION_STARTED while a compaction is already open")
        }
        WorkerEventKind::CompactionCompleted if !open => Some("COMPACTION_COMPLETED with no compaction open"),
        WorkerEventKind::Proposals | WorkerEventKind::CompletionRequest if open => Some(
            "a result while a compaction is open: its turn is worker-session maintenance, not a result \
             (COMPACTION_COMPLETED first)",
        ),
        _ => None,
    };
    if let Some(why) = order {
        return Err(super::violation(Rule::CompactionOrder, format!("{}: {why}", wire(&payload.kind))));
    }
    let result = match payload.kind {
        WorkerEventKind::Proposals => ResultKind::Proposals,
        WorkerEventKind::CompletionRequest => ResultKind::CompletionRequest,
        _ => return Ok(()),
    };
    ensure!(
        result_kind_allowed(attempt.phase) == Some(result),
        Rule::ResultKind,
        "a {} event is not a result the {} response contract permits",
        wire(&payload.kind),
        wire(&attempt.phase)
    );
    Ok(())
}

/// Progress of an active Attempt while its compaction is open: the compaction turn's own
/// maintenance (outside review 49).
fn inside_compaction(attempt: &AttemptState, payload: &WorkerPayload) -> bool {
    attempt.compacting
        && attempt.status == super::state::AttemptStatus::Dispatched
        && matches!(payload.kind, WorkerEventKind::Progress | WorkerEventKind::ToolActivity)
}

/// The size, claim and bounds checks every delivery passes first.
fn check_delivery(
    state: &State,
    attempt: &AttemptState,
    payload: &WorkerPayload,
) -> Result<(), RuleViolation> {
    let wf = get(&state.workflows, attempt.workflow_id, "workflow")?;
    let policy = get(&state.policies, wf.policy.id, "policy")?;
    let len = canonical_json_len(payload);
    ensure!(
        len <= policy.bundle.max_event_bytes as usize,
        Rule::PayloadTooLarge,
        "canonical JSON payload of {len} bytes exceeds maxEventBytes {}",
        policy.bundle.max_event_bytes
    );
    ensure!(
        attempt.dispatched,
        Rule::MissingDispatchClaim,
        "the attempt has no dispatch claim (a control-plane error, not the worker's)"
    );
    // A compaction event is a lifecycle observation and nothing more (seed 000: CodeClosure
    // "does not require a human-readable compaction payload", and private reasoning and
    // opaque compaction state "MUST NOT be copied into" the Store; outside review 47) — and
    // so is the progress of a compaction's own turn, inside it (its "turn/* progress" is
    // maintenance; outside review 49: the summary moved one event over). A result inside a
    // compaction is left to `CompactionOrder`.
    // (Progress inside a compaction is held to that where the event is current —
    // `check_kind`; a stale one becomes an ignored receipt, which keeps only the payload's
    // digest: outside review 51.)
    if matches!(payload.kind, WorkerEventKind::CompactionStarted | WorkerEventKind::CompactionCompleted) {
        ensure!(
            payload.text.is_empty() && payload.items.is_empty(),
            Rule::CompactionPayload,
            "a {} event is a lifecycle observation: its text is empty and it has no items (private \
             reasoning and opaque compaction state never enter the ledger)",
            wire(&payload.kind)
        );
        return Ok(());
    }
    // The empty text of a compaction turn's progress — also once its Attempt ended with the
    // compaction open: a late one is an ignored receipt like any other (outside review 211
    // F1: refused as blank after a cancel, fail or restart).
    let compaction_turn = attempt.compacting
        && matches!(payload.kind, WorkerEventKind::Progress | WorkerEventKind::ToolActivity);
    if !(compaction_turn && payload.text.is_empty()) {
        super::payload_text("payload text", &payload.text)?;
    }
    ensure!(
        payload.items.len() <= super::MAX_ITEMS,
        Rule::OutOfBounds,
        "payload items has {} items, over {}",
        payload.items.len(),
        super::MAX_ITEMS
    );
    payload.items.iter().try_for_each(|item| super::payload_text("payload items", item))
}

pub fn decide_deliver(state: &State, c: &DeliverWorkerEvent) -> Result<Decided, Rejection> {
    let attempt = get(&state.attempts, c.attempt_id, "attempt")?;
    check_delivery(state, attempt, &c.payload)?;
    if let Some(seq) = state.worker_events.get(&c.worker_event_id) {
        return Ok(Decided::Redelivered { seq });
    }
    let payload_digest = c.payload.digest();
    let event = match staleness(state, c.attempt_id, c.manifest_digest) {
        None => {
            check_kind(state, attempt, &c.payload)?;
            Event::WorkerEventAdmitted(WorkerEventAdmitted {
                attempt_id: c.attempt_id,
                worker_event_id: c.worker_event_id,
                manifest_digest: c.manifest_digest,
                payload: c.payload.clone(),
                payload_digest,
            })
        }
        Some(reason) => Event::WorkerDeliveryIgnored(WorkerDeliveryIgnored {
            attempt_id: c.attempt_id,
            worker_event_id: c.worker_event_id,
            manifest_digest: c.manifest_digest,
            payload_digest,
            reason,
        }),
    };
    Ok(Decided::Events(vec![event]))
}

/// A redelivery of a Worker event id first recorded by `original` at `seq`: the same
/// attempt, the same manifest and the same canonical payload make a duplicate (`Ok`: the
/// original's seq is the receipt); any other byte is a conflict — a delivery naming another
/// manifest (say, the current one after a MANIFEST_MISMATCH receipt) is another delivery
/// and needs its own id, so a duplicate receipt always stands for the dispatch it names. The projection keeps only id → seq (the dedup
/// index must stay small: one item per worker event ever recorded), so the caller hands
/// over the original entry's event from the store.
pub fn redelivery(c: &DeliverWorkerEvent, original: &Event, seq: u64) -> Result<(), Rejection> {
    let recorded = match original {
        Event::WorkerEventAdmitted(e) => {
            Some((e.worker_event_id, e.attempt_id, e.manifest_digest, e.payload_digest))
        }
        Event::WorkerDeliveryIgnored(e) => {
            Some((e.worker_event_id, e.attempt_id, e.manifest_digest, e.payload_digest))
        }
        _ => None,
    };
    let differs = match recorded {
        Some((id, attempt_id, manifest_digest, payload_digest)) if id == c.worker_event_id => {
            if attempt_id != c.attempt_id {
                "for another attempt"
            } else if manifest_digest != c.manifest_digest {
                "for another manifest"
            } else if payload_digest != c.payload.digest() {
                "with a different payload"
            } else {
                return Ok(());
            }
        }
        _ => "as another record",
    };
    Err(Rejection::Conflict { worker_event_id: c.worker_event_id, original_seq: seq, differs })
}

fn fresh_event(state: &State, id: Id) -> Result<(), RuleViolation> {
    ensure!(!state.worker_events.contains_key(&id), Rule::IdReused, "worker event {id} already exists");
    Ok(())
}

pub fn apply_admitted(state: &mut State, e: &WorkerEventAdmitted, seq: u64) -> Result<(), RuleViolation> {
    fresh_event(state, e.worker_event_id)?;
    let attempt = get(&state.attempts, e.attempt_id, "attempt")?;
    check_delivery(state, attempt, &e.payload)?;
    let digest = e.payload.digest();
    ensure!(
        e.payload_digest == digest,
        Rule::PayloadDigest,
        "payload digest {} is not the payload's {digest}",
        e.payload_digest
    );
    let stale = staleness(state, e.attempt_id, e.manifest_digest);
    ensure!(
        stale.is_none(),
        Rule::DeliveryStaleness,
        "a stale delivery ({}) cannot be admitted",
        stale.map_or_else(String::new, |r| wire(&r))
    );
    check_kind(state, attempt, &e.payload)?;
    state.worker_events.insert(e.worker_event_id, seq);
    let attempt = get_mut(&mut state.attempts, e.attempt_id, "attempt")?;
    attempt.events_admitted = attempt.events_admitted.saturating_add(1);
    match e.payload.kind {
        // The terminal event of the stream (its kind is the phase's result kind: `check_kind`).
        WorkerEventKind::Proposals | WorkerEventKind::CompletionRequest => attempt.result_delivered = true,
        WorkerEventKind::CompactionStarted => {
            attempt.compacting = true;
            // The directive it started on is used (under AUTOMATIC one may stand unused).
            attempt.compaction_directive = None;
        }
        WorkerEventKind::CompactionCompleted => attempt.compacting = false,
        _ => {}
    }
    Ok(())
}

pub fn decide_request_compaction(c: &RequestCompaction) -> Event {
    Event::CompactionRequested(CompactionRequested { attempt_id: c.attempt_id, directive_id: c.directive_id })
}

/// A compaction directive: for a dispatched, active Attempt of an open workflow under a
/// profile that selects compaction, whose context is still current, with no compaction
/// open and no directive standing (one compaction each).
pub fn apply_compaction_requested(state: &mut State, e: &CompactionRequested) -> Result<(), RuleViolation> {
    ensure!(
        !state.compaction_directives.contains_key(&e.directive_id),
        Rule::IdReused,
        "compaction directive {} already exists",
        e.directive_id
    );
    let attempt = get(&state.attempts, e.attempt_id, "attempt")?;
    // An Attempt's own end is named first, as for every command on an Attempt that ended
    // with its cancelled workflow (commands.md, `cancelWorkflow`; outside review 211).
    ensure!(
        attempt.status == super::state::AttemptStatus::Dispatched,
        Rule::AttemptNotActive,
        "attempt {} is {}: a compaction is of a dispatched, active Attempt's Thread",
        e.attempt_id,
        super::attempt::status_name(attempt.status)
    );
    // After its result the stream has ended: a compaction would be an ignored receipt
    // (STREAM_ENDED) — as for a changed context (outside review 86).
    ensure!(
        !attempt.result_delivered,
        Rule::AttemptNotActive,
        "attempt {} has delivered its result: its stream has ended, and a compaction event of it would be an ignored receipt",
        e.attempt_id
    );
    ensure!(
        !attempt.context_changed,
        Rule::ManifestStale,
        "attempt {}'s context changed after its dispatch claim: its worker events are ignored receipts, so a compaction of it would be too",
        e.attempt_id
    );
    let wf = super::live_workflow(state, attempt.workflow_id)?;
    let profile = get(&state.profiles, wf.profile.id, "profile")?;
    // A directive is the manual trigger; only a MANUAL profile selects one (outside review
    // 90: one was admitted under AUTOMATIC, which selects no trigger; seed 000: "any manual
    // trigger [is] selected by the Workflow-bound Execution Profile").
    ensure!(
        profile.profile.compaction == CompactionMode::Manual,
        Rule::CompactionMode,
        "Execution Profile {} selects {} compaction: a compaction directive is a manual trigger, which only a MANUAL profile selects",
        wf.profile.id,
        if profile.profile.compaction == CompactionMode::Disabled { "no" } else { "AUTOMATIC" }
    );
    ensure!(
        !attempt.compacting && attempt.compaction_directive.is_none(),
        Rule::CompactionOrder,
        "attempt {} {}: one compaction at a time",
        e.attempt_id,
        if attempt.compacting { "has a compaction open" } else { "has a compaction directive not yet used" }
    );
    let attempt = get_mut(&mut state.attempts, e.attempt_id, "attempt")?;
    attempt.compaction_directive = Some(e.directive_id);
    state.compaction_directives.insert(e.directive_id, e.attempt_id);
    Ok(())
}

pub fn apply_ignored(state: &mut State, e: &WorkerDeliveryIgnored, seq: u64) -> Result<(), RuleViolation> {
    fresh_event(state, e.worker_event_id)?;
    let attempt = get(&state.attempts, e.attempt_id, "attempt")?;
    ensure!(
        attempt.dispatched,
        Rule::MissingDispatchClaim,
        "the attempt has no dispatch claim (a control-plane error, not the worker's)"
    );
    let stale = staleness(state, e.attempt_id, e.manifest_digest);
    ensure!(
        stale == Some(e.reason),
        Rule::DeliveryStaleness,
        "an ignored receipt says {}, the delivery is {}",
        wire(&e.reason),
        stale.map_or_else(|| "current".to_owned(), |r| wire(&r))
    );
    state.worker_events.insert(e.worker_event_id, seq);
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    /// A conflict says what differs from the stored original: the attempt (outside review
    /// 16: it said "a different payload" for an identical one), or the payload.
    #[test]
    fn a_conflict_says_what_differs() {
        let p = WorkerPayload {
            kind: WorkerEventKind::Progress,
            text: "a".into(),
            items: vec![],
            observed_at_ms: 1,
        };
        let original = Event::WorkerEventAdmitted(WorkerEventAdmitted {
            payload: p.clone(),
            attempt_id: Id(1),
            payload_digest: p.digest(),
            worker_event_id: Id(7),
            manifest_digest: Digest::ZERO,
        });
        let command = |attempt: u128, text: &str| DeliverWorkerEvent {
            attempt_id: Id(attempt),
            worker_event_id: Id(7),
            manifest_digest: Digest::ZERO,
            payload: WorkerPayload { text: text.into(), ..p.clone() },
        };
        let said = |attempt, text| redelivery(&command(attempt, text), &original, 3).unwrap_err().to_string();
        assert_eq!(redelivery(&command(1, "a"), &original, 3), Ok(()));
        assert!(said(2, "a").ends_with("at seq 3 for another attempt"), "{}", said(2, "a"));
        assert!(said(2, "b").ends_with("at seq 3 for another attempt"));
        assert!(said(1, "b").ends_with("at seq 3 with a different payload"), "{}", said(1, "b"));
    }

    /// The reference: serde_json's own output for the payload as a JSON value.
    fn serde_len(payload: &WorkerPayload) -> usize {
        serde_json::to_value(payload).and_then(|v| serde_json::to_vec(&v)).map(|b| b.len()).unwrap()
    }

    const KINDS: [WorkerEventKind; 6] = [
        WorkerEventKind::Progress,
        WorkerEventKind::ToolActivity,
        WorkerEventKind::CompactionStarted,
        WorkerEventKind::CompactionCompleted,
        WorkerEventKind::Proposals,
        WorkerEventKind::CompletionRequest,
    ];

    #[test]
    fn counted_length_is_serde_jsons_for_every_byte_kind_and_digit_count() {
        // Every byte class that escapes differently, one at a time and mixed.
        let mut chars: Vec<char> = (0u8..0x80).map(char::from).collect();
        chars.extend(['é', '€', '𝄞', '\u{7f}', '\u{2028}']);
        let mut texts: Vec<String> = chars.iter().map(|c| c.to_string()).collect();
        texts.push(String::new());
        texts.push(chars.iter().collect());
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for len in 0..200 {
            let mut t = String::new();
            for _ in 0..len % 37 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                t.push(chars[(seed % chars.len() as u64) as usize]);
            }
            texts.push(t);
        }
        // One escaping byte at every offset across several 32-byte chunks.
        for special in ['\u{1}', '"', '\n'] {
            for at in 0..100 {
                let mut t: Vec<char> = std::iter::repeat_n('x', 100).collect();
                t[at] = special;
                texts.push(t.into_iter().collect());
            }
        }
        let times = [0, 1, 9, 10, 99, 100, 1_000_000_007, u64::MAX / 10, u64::MAX];
        for (i, text) in texts.iter().enumerate() {
            let items: Vec<String> = texts.iter().skip(i).take(i % 4).cloned().collect();
            let payload = WorkerPayload {
                kind: KINDS[i % KINDS.len()],
                text: text.clone(),
                items,
                observed_at_ms: times[i % times.len()],
            };
            assert_eq!(canonical_json_len(&payload), serde_len(&payload), "{payload:?}");
        }
        for kind in KINDS {
            for observed_at_ms in times {
                let payload = WorkerPayload { kind, text: "t".into(), items: vec![], observed_at_ms };
                assert_eq!(canonical_json_len(&payload), serde_len(&payload), "{payload:?}");
            }
        }
    }
}
