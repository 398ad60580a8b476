//! Compiler/2's worker-facing Markdown rendering of a Context Package. Deterministic: the
//! same package always renders to the same text. The canonical identity is the package
//! bytes. Compiler/1's rendering (`compiler/render.rs`) with every closed enum value
//! (phase, check result, feedback kind, result kind) written by its wire name
//! (`IMPLEMENT`, `FAIL`, `FAILED_CHECK`, `COMPLETION_REQUEST`) instead of its Rust `Debug`
//! name.

use std::fmt::Write;

use ledger_schema::package::ContextPackage;

use super::names::WireName;
use crate::compiler::render::{Escapes, code_span, fence_for, item_lines_as, name_span, paragraph_as};

/// Renders `p` as Markdown (compilers 2–4).
pub fn markdown(p: &ContextPackage) -> String {
    markdown_as(p, false)
}

/// Renders `p` as Markdown; with `inline` (compiler/5) ledger text also keeps a Markdown
/// viewer from hiding any of it (raw HTML, comments, entity references, link reference
/// definitions: `render::block_safe`).
pub fn markdown_as(p: &ContextPackage, inline: bool) -> String {
    markdown_cited(p, inline, false, false)
}

/// [`markdown_as`]; with `digests` (compiler/6) every repair item also shows the digests
/// the package cites for it — each prior-attempt feedback item's source digests beside its
/// source records, each failed Evidence record's record and check-specification digests
/// and its eligibility (seed 000: "Every item MUST cite its source records and digests";
/// outside reviews 128 F5, 146 F6: the rendering the worker reads showed the records only).
///
/// With `math` (compiler/7) no `$` in ledger text opens a viewer's math either.
pub fn markdown_cited(p: &ContextPackage, inline: bool, digests: bool, math: bool) -> String {
    markdown_styled(p, inline, digests, math, false)
}

/// [`markdown_cited`]; with `labelled` (compiler/8) an item that holds ledger text beside the
/// compiler's own fields leads with the compiler's fields and writes each text after a bold
/// label (`**question:**`, `**answer:**`, `**title:**`, `**description:**`, `**content:**`) or,
/// a lone text, after a colon, so no text can imitate a separator: ledger text never holds an
/// unescaped `*` (every one is written `\*`), and its own lines are indented into the item
/// (outside reviews 209 F1, 221 F5: a question holding ` — ` and an id, or a title holding
/// `: `, rendered the same line as another package's question and answer); a project
/// source's heading names its record (`source/<id>`: outside review 225 F2, two packages
/// differing in it rendered alike); and a self-linking run in ledger text is read as
/// cmark-gfm reads it (`render::Escapes::gfm_links`; outside review 225 F1).
pub fn markdown_styled(
    p: &ContextPackage,
    inline: bool,
    digests: bool,
    math: bool,
    labelled: bool,
) -> String {
    let mut s = String::new();
    let math = Escapes { math, gfm_links: labelled };
    let list = |s: &mut String, title: &str, items: &[String]| list(s, title, items, inline, math);
    let paragraph = |text: &str| paragraph_as(text, inline, math);
    let item_lines = |item: &str| item_lines_as(item, inline, math);
    let id = &p.identity;
    let _ = writeln!(s, "# Context package (schema {})\n", p.schema_version);
    let _ = writeln!(s, "- goal: {} revision {}", id.goal_id, id.goal_revision);
    let _ = writeln!(s, "- workflow: {} version {}", id.workflow_id, id.workflow_version);
    let _ = writeln!(s, "- phase: {}", id.phase.wire_name());
    let _ = writeln!(s, "- attempt: {}", id.attempt_id);
    if let (Some(g), Some(d)) = (id.candidate_generation_id, id.candidate_base_digest) {
        let _ = writeln!(s, "- candidate generation: {g} (base {d})");
    }
    if let Some(plan) = id.plan {
        let _ = writeln!(s, "- acceptance-critical verification plan: {} {}", plan.id, plan.digest);
    }
    let _ = writeln!(s, "- policy: {} {}", p.policy_bundle.id, p.policy_bundle.digest);
    let _ = writeln!(s, "- execution profile: {} {}", p.execution_profile.id, p.execution_profile.digest);
    let _ = writeln!(s, "\n## Phase objective\n\n{}\n", paragraph(&p.phase_objective));
    list(&mut s, "Capabilities", &p.capability_grant.capabilities);
    list(&mut s, "Invariants (non-negotiable)", &p.invariants);
    let _ = writeln!(s, "## Goal\n\n{}\n", paragraph(&p.goal.objective));
    list(&mut s, "Success criteria", &p.goal.success_criteria);
    list(&mut s, "Scope", &p.goal.scope);
    list(&mut s, "Non-goals", &p.goal.non_goals);
    list(&mut s, "Preservation constraints", &p.goal.preservation_constraints);
    if labelled {
        // Each text escaped on its own, the compiler's fields and labels around it.
        let text = |t: &str| item_lines(t);
        let blockers: Vec<String> =
            p.blockers.iter().map(|b| format!("{}: {}", b.blocker_id, text(&b.description))).collect();
        written_list(&mut s, "Open blockers", &blockers);
        let decisions: Vec<String> = p
            .selected_decisions
            .iter()
            .map(|d| {
                format!(
                    "{} **question:** {} **answer:** {}",
                    d.decision_id,
                    text(&d.question),
                    text(&d.answer)
                )
            })
            .collect();
        written_list(&mut s, "Human decisions", &decisions);
        let facts: Vec<String> = p
            .selected_facts
            .iter()
            .map(|f| format!("{} r{}: {}", f.fact_id, f.revision, text(&f.statement)))
            .collect();
        written_list(&mut s, "Confirmed facts", &facts);
        let scenarios: Vec<String> = p
            .business_scenarios
            .iter()
            .map(|x| {
                format!(
                    "{} **title:** {} **description:** {}",
                    x.scenario_id,
                    text(&x.title),
                    text(&x.description)
                )
            })
            .collect();
        written_list(&mut s, "Scenarios", &scenarios);
        let obligations: Vec<String> = p
            .verification_obligations
            .iter()
            .map(|o| {
                format!(
                    "obligation {}, check {} {}: {}",
                    o.obligation_id,
                    o.check_spec_id,
                    o.check_spec_digest,
                    text(&o.description)
                )
            })
            .collect();
        written_list(&mut s, "Verification obligations", &obligations);
    } else {
        let blockers: Vec<String> =
            p.blockers.iter().map(|b| format!("{} ({})", b.description, b.blocker_id)).collect();
        list(&mut s, "Open blockers", &blockers);
        let decisions: Vec<String> = p
            .selected_decisions
            .iter()
            .map(|d| format!("{} — {} ({})", d.question, d.answer, d.decision_id))
            .collect();
        list(&mut s, "Human decisions", &decisions);
        let facts: Vec<String> = p
            .selected_facts
            .iter()
            .map(|f| format!("{} ({} r{})", f.statement, f.fact_id, f.revision))
            .collect();
        list(&mut s, "Confirmed facts", &facts);
        let scenarios: Vec<String> = p
            .business_scenarios
            .iter()
            .map(|x| format!("{}: {} ({})", x.title, x.description, x.scenario_id))
            .collect();
        list(&mut s, "Scenarios", &scenarios);
        let obligations: Vec<String> = p
            .verification_obligations
            .iter()
            .map(|o| {
                format!(
                    "{} (obligation {}, check {} {})",
                    o.description, o.obligation_id, o.check_spec_id, o.check_spec_digest
                )
            })
            .collect();
        list(&mut s, "Verification obligations", &obligations);
    }
    for c in &p.relevant_code {
        // A fence the source's own code blocks cannot close (a Markdown file's ``` lines
        // would otherwise end it and be read as package structure).
        let fence = fence_for(&c.content);
        // Compiler/8: the record's id too (outside review 225 F2).
        let record = if labelled { format!(", source/{}", c.source_id) } else { String::new() };
        let _ = writeln!(
            s,
            "## Source {} at {} ({}{record})\n\n{fence}\n{}\n{fence}\n",
            code_span(&c.path),
            // Compiler/5: a revision that emphasis could reshape (`__init__`) is a code span
            // (outside review 118 F3).
            if inline && c.revision.contains(['_', '*']) {
                code_span(&c.revision)
            } else {
                name_span(&c.revision)
            },
            c.digest,
            c.content
        );
    }
    // Compiler/3's task-selected sources (compiler/2 packages have none).
    for k in &p.selected_skills {
        let fence = fence_for(&k.content);
        let _ = writeln!(
            s,
            "## Selected skill {} — {} ({})\n\nAdvisory guidance chosen by task selection: it grants no tool, no capability and no authority.\n\n{fence}\n{}\n{fence}\n",
            code_span(&k.id),
            code_span(&k.path),
            k.digest,
            k.content
        );
    }
    if let Some(r) = &p.repair_context {
        let _ = writeln!(s, "## Repair context (authoritative)\n");
        let _ = writeln!(
            s,
            "- decision {} ({}) rejected generation {} v{} ({})",
            r.acceptance_decision_id,
            r.acceptance_decision_digest,
            r.rejected_candidate_generation_id,
            r.rejected_candidate_version,
            r.rejected_candidate_digest
        );
        let _ = writeln!(
            s,
            "- repair generation {} sequence {} starts from {}",
            r.repair_candidate_generation_id, r.repair_candidate_sequence, r.repair_candidate_base_digest
        );
        let _ = writeln!(
            s,
            "- evidence set {}; input manifest {}; repair {}",
            r.evidence_set_digest, r.input_manifest_digest, r.acceptance_repair_digest
        );
        for f in &r.failed_evidence {
            if digests {
                let _ = writeln!(
                    s,
                    "- failed: evidence {} ({}, record {}, eligibility {} v{}) obligation {} check {} ({})",
                    f.evidence_id,
                    f.result_status.wire_name(),
                    f.evidence_record_digest,
                    f.evidence_eligibility_state.wire_name(),
                    f.evidence_eligibility_version,
                    f.verification_obligation_id,
                    f.check_specification_id,
                    f.check_specification_digest
                );
                continue;
            }
            let _ = writeln!(
                s,
                "- failed: evidence {} ({}) obligation {} check {}",
                f.evidence_id,
                f.result_status.wire_name(),
                f.verification_obligation_id,
                f.check_specification_id
            );
        }
        let _ = writeln!(s);
        list(&mut s, "Constraints to preserve", &r.constraints_to_preserve);
    }
    if let Some(f) = &p.prior_attempt_feedback {
        let _ = writeln!(s, "## Prior attempt feedback (non-authoritative, {})\n", f.feedback_digest);
        for it in &f.items {
            let sources = if digests {
                let cited: Vec<String> = it
                    .source_refs
                    .iter()
                    .zip(it.source_digests.iter().map(Some).chain(std::iter::repeat(None)))
                    .map(|(r, d)| d.map_or_else(|| r.clone(), |d| format!("{r} {d}")))
                    .collect();
                cited.join(", ")
            } else {
                it.source_refs.join(", ")
            };
            if labelled {
                let _ = writeln!(
                    s,
                    "- [{}] (sources: {sources}) **content:** {}",
                    it.kind.wire_name(),
                    item_lines(&it.content)
                );
                continue;
            }
            let item = format!("[{}] {} (sources: {sources})", it.kind.wire_name(), it.content);
            let _ = writeln!(s, "- {}", item_lines(&item));
        }
        let _ = writeln!(s);
    }
    let kinds: Vec<String> =
        p.response_contract.allowed_result_kinds.iter().map(|k| k.wire_name().to_owned()).collect();
    let _ = writeln!(
        s,
        "## Response contract\n\n- result kinds: {}\n- worker event schema: {}\n- max event bytes: {}",
        kinds.join(", "),
        p.response_contract.worker_event_schema,
        p.response_contract.max_event_bytes
    );
    s
}

/// A list of items already written as Markdown (compiler/8's labelled items).
fn written_list(s: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "### {title}\n");
    for it in items {
        let _ = writeln!(s, "- {it}");
    }
    let _ = writeln!(s);
}

fn list(s: &mut String, title: &str, items: &[String], inline: bool, math: Escapes) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(s, "### {title}\n");
    for it in items {
        let _ = writeln!(s, "- {}", item_lines_as(it, inline, math));
    }
    let _ = writeln!(s);
}
