//! `ledger select` (issue #15): argument parsing and reporting only; the decision is
//! `runtime::selection` (pure), the I/O `profiles::select`.

use std::io::Write;
use std::path::PathBuf;

use ledger_schema::Digest;
use ledger_schema::events::profile::SelectionMode;
use serde_json::{Value, json};

use crate::cli::{EXIT_USAGE_OR_IO, EXIT_VERIFY_FAILED, Failure};
use crate::profiles::select::{self as ps, Options, Receipt, SelectError};
use crate::runtime::selection::{MAX_PROPOSAL_BYTES, MAX_TASK_INPUT_BYTES, Request};

/// Select sources for a task over the configured profile (its mode, include, exclude
/// and target; none can be overridden here) and record the decision as one entry.
#[derive(clap::Args, Debug)]
pub struct SelectArgs {
    dir: PathBuf,
    /// The task input: one UTF-8 JSON object (at most 65,536 bytes), or `-` for stdin.
    #[arg(long, value_name = "FILE|-")]
    task_input: PathBuf,
    /// Return the selected sources' SKILL.md and required resources (≤ 32,000 bytes).
    #[arg(long, conflicts_with = "dry_run")]
    load: bool,
    /// A receipt saved from an earlier selection, to reuse its completed decision.
    #[arg(long, value_name = "RECEIPT.json")]
    previous: Option<PathBuf>,
    /// Refuse (nothing loaded, nothing recorded) unless the decision's selectionDigest is D.
    #[arg(long, value_name = "D")]
    expected_digest: Option<Digest>,
    /// A provider's answer to a pending selection: `{"selectedIds": [...]}` (zero or one id).
    #[arg(long, value_name = "PROPOSAL.json")]
    proposal: Option<PathBuf>,
    /// Decide and report; record nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long)]
    json: bool,
}

fn failure(e: SelectError) -> Failure {
    let code = if e.is_refusal() { EXIT_VERIFY_FAILED } else { EXIT_USAGE_OR_IO };
    Failure { code, message: e.to_string() }
}

fn emit(out: &mut dyn Write, line: impl std::fmt::Display) -> Result<(), Failure> {
    writeln!(out, "{line}")
        .map_err(|e| Failure { code: EXIT_USAGE_OR_IO, message: format!("write to stdout: {e}") })
}

/// The `--json` view of an outcome.
pub fn outcome_json(o: &ps::Outcome) -> Value {
    let e = &o.event;
    let loaded_ids: Vec<&str> = {
        let mut v: Vec<&str> = o.resources.iter().map(|r| r.id.as_str()).collect();
        v.dedup();
        v
    };
    json!({
        "decision": e.decision,
        "reason": e.reason,
        "reused": e.reused,
        "mode": o.mode,
        "recorded": o.seq.is_some(),
        "seq": o.seq,
        "duplicate": o.duplicate,
        "selectedIds": e.selected_ids,
        "explicitIds": e.explicit_ids,
        "loadedIds": loaded_ids,
        "candidates": e.candidates,
        "resources": if e.load { json!(o.resources) } else { json!(e.resources) },
        "selectionDigest": e.selection_digest,
        "bindingDigest": e.binding_digest,
        "routingPolicy": e.routing_policy,
        "previousSetAside": o.previous_set_aside,
        "receipt": Receipt::of(e),
    })
}

impl SelectArgs {
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }
}

pub fn run_select(a: SelectArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    run_select_over(a, None, out, err)
}

/// `select`, or with `over` (`profile resolve PROFILE`) the same decision over that plan as
/// if it were configured, recording nothing.
pub fn run_select_over(
    a: SelectArgs,
    over: Option<crate::profiles::PlanInput>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let task_bytes = ps::read_bounded(&a.task_input, MAX_TASK_INPUT_BYTES, "task input").map_err(failure)?;
    let task = ps::parse_task(&task_bytes).map_err(failure)?;
    let previous = match &a.previous {
        Some(p) => Some(
            ps::parse_receipt(&ps::read_bounded(p, MAX_TASK_INPUT_BYTES, "--previous").map_err(failure)?)
                .map_err(failure)?,
        ),
        None => None,
    };
    let proposal = match &a.proposal {
        Some(p) => Some(
            ps::parse_proposal(&ps::read_bounded(p, MAX_PROPOSAL_BYTES, "--proposal").map_err(failure)?)
                .map_err(failure)?,
        ),
        None => None,
    };
    let opts = Options {
        request: Request { load: a.load, previous, proposal },
        expected_digest: a.expected_digest,
        dry_run: a.dry_run,
    };
    let o = match &over {
        None => ps::select(&a.dir, &task, &opts),
        Some(input) => ps::resolve_unconfigured(&a.dir, input, &task, &opts),
    }
    .map_err(failure)?;
    // Notes on stderr (a failed write of a note fails nothing), in `--json` too.
    if let Some(why) = &o.previous_set_aside {
        let _ = writeln!(err, "ledger: note: --previous was not reused: {why}");
    }
    if o.event.reason == crate::runtime::selection::REASON_NEGATED {
        // The word read as a refusal, named (outside review 132 F3: the note named none).
        let word = task.query.as_deref().and_then(crate::runtime::selection::refusal_in);
        let word = word.map(|w| format!(" (\"{}\")", crate::profiles::scan::shown(&w))).unwrap_or_default();
        let _ = writeln!(
            err,
            "ledger: note: the query refuses something{word}, so its words choose no skill (a word list reads refusals: \
             `not`, `don't`, `skip`, …): name the skill in explicitIds to load it (outside review 126)"
        );
    }
    if o.event.reason == crate::runtime::selection::REASON_DISGUISED {
        let _ = writeln!(
            err,
            "ledger: note: the query's words disguise letters (a word mixing scripts with a letter that looks like \
             an ASCII one, or a small capital or like letter beside ASCII letters), so they choose no skill by \
             themselves: the choice is pending — answer it with a proposal, or name the skill in explicitIds \
             (outside review 230)"
        );
    }
    if o.event.reason == crate::runtime::selection::REASON_CITED_UNROUTED {
        let _ = writeln!(
            err,
            "ledger: note: the query cites only skills ranking cannot choose — ones this profile does not route \
             (manual-only, excluded or never selectable), maybe beside ones it installs, in the worker's context \
             already: a manual-only one loads when named in explicitIds; an excluded one only once the profile's \
             exclusions change (outside reviews 132 F5, 207 F4)"
        );
    }
    if o.event.reason == crate::runtime::selection::REASON_CITED_INSTALLED {
        let _ = writeln!(
            err,
            "ledger: note: the query directs only to skills the profile installs: they are in the worker's context \
             already, and nothing more is chosen (outside review 178 F8)"
        );
    }
    if !o.installed_explicit.is_empty() {
        let _ = writeln!(
            err,
            "ledger: note: explicitIds name skills the profile installs already ({}): they are in the worker's \
             context, and {} their bodies again (the package and the load bound count them) — leave them out \
             unless that is meant (outside review 234 F1)",
            o.installed_explicit.join(", "),
            if o.event.load { "this load adds" } else { "loading them adds" }
        );
    }
    // A selection recorded now stands whether or not its report can be written (outside
    // review 217 F2: a closed pipe or a full disk read as a bare I/O error, as if nothing
    // had been recorded).
    print_outcome(&o, a.json, out).map_err(|f| match o.seq {
        Some(seq) if !o.duplicate => Failure {
            code: f.code,
            message: format!(
                "{}: the selection is recorded (seq {seq}), but this report was not written; the same `select` \
                 again prints it (a duplicate: nothing more is written)",
                f.message
            ),
        },
        _ => f,
    })
}

/// Prints what `select` decided (and loaded).
fn print_outcome(o: &ps::Outcome, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    if json {
        let text = serde_json::to_string_pretty(&outcome_json(o))
            .map_err(|e| Failure { code: EXIT_USAGE_OR_IO, message: format!("json: {e}") })?;
        return emit(out, text);
    }
    let e = &o.event;
    emit(
        out,
        format!(
            "{} ({}{}) in {} mode: [{}]{}",
            crate::runtime::wire(&e.decision),
            e.reason,
            // The reason of a reuse is `reused` itself: said once.
            if e.reused && e.reason != crate::runtime::selection::REASON_REUSED { ", reused" } else { "" },
            crate::runtime::wire(&o.mode),
            e.selected_ids.join(", "),
            match o.seq {
                Some(seq) if o.duplicate => format!(" already recorded at seq {seq} (nothing written)"),
                Some(seq) => format!(" recorded at seq {seq}"),
                None => " (dry run: nothing recorded)".to_owned(),
            }
        ),
    )?;
    for c in &e.candidates {
        emit(out, format!("  candidate {} score {} matched [{}]", c.id, c.score, c.matched.join(", ")))?;
    }
    if o.mode == SelectionMode::Suggest
        && e.decision != ledger_schema::events::selection::SelectionDecision::Pending
    {
        emit(out, "  suggest mode: nothing is loaded")?;
    }
    for r in &o.resources {
        emit(out, format!("--- {} {} ({} bytes, {})", r.id, r.path, r.bytes, r.digest))?;
        emit(out, r.content.as_deref().unwrap_or_default())?;
    }
    emit(out, format!("selection {}  receipt {}", e.selection_digest, Receipt::of(e).receipt_digest))
}
