//! Task selection (seed 003, issue #15): the routing decision as a pure function of the
//! ledger state and a task, and the rule (`Rule::Selection`) that re-derives every
//! recorded `selectionRecorded` from the state before it — live, on reopen and in
//! `ledger replay`.
//!
//! Routing, in the seed's order: `noWorkflow` → nothing; explicit ids; a completed pinned
//! decision reused from `--previous` (same binding); manual mode → nothing more; admitted
//! agent-proposed ids (the task's `proposedIds`, or a provider's answer to a pending
//! decision); in Auto and Suggest: exactly one directive citation, or an unambiguous
//! ranked match over the bar; otherwise **pending** with a shortlist of at most five.
//!
//! The task prose never reaches the ledger (only its digest), so `apply` cannot re-run the
//! lexical step: for a `directive`, `ranked` or pending decision it checks the recorded
//! candidates instead (routable, bounded, ordered, over the bar for `ranked`); every
//! other step is re-derived exactly. No I/O, no clock.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use ledger_schema::events::profile::{Registry, RegistrySource, SelectionMode};
use ledger_schema::events::selection::{
    LoadedResource, SelectionBinding, SelectionCandidate, SelectionDecision, SelectionRecorded,
    selection_digest,
};
use ledger_schema::types::Phase;
use ledger_schema::{Digest, DigestKind, Id, codec};
use serde::Serialize;

use super::profile::{Plan, unselectable};
use super::state::Map;
use super::{Rule, RuleViolation, State, ensure, violation};

/// The routing policy this build applies (recorded in every selection and its binding).
/// Tokens: lowercase alphanumeric runs of ≥ 2 characters, stop words dropped, a trailing
/// `ing` (≥ 6 characters) or `s` (≥ 4, not `ss`) stripped. Documents: a source's name
/// (weight 2) and description (its triggers). BM25 with k1 = 1.2, b = 0.75, idf =
/// ln(1 + (N − n + 0.5)/(n + 0.5)) over the routable sources; scores × 1000, rounded.
/// Ties by id. The bar: top ≥ [`BAR_MIN_SCORE`] and top ≥ [`BAR_RATIO`] × the runner-up,
/// with at least [`MIN_MATCHED_TERMS`] matched terms. A directive decides only when the
/// query cites no other skill ([`citations`]: outside review 56).
///
/// A query that refuses something and names no skill is left pending over what ranking
/// shortlists, for a bounded proposal — seed 003: "Ambiguous free text shortlists up to
/// five candidates for a bounded proposal" (outside review 160 F3: routing/3–5 recorded a
/// completed `none`, so a bug report saying what does *not* work never reached a skill);
/// the agent's own `proposedIds` still do not decide it (outside review 64).
///
/// Routing/7 reads more ways of refusing (phrases such as "steer clear of", "discontinue", "abstain",
/// "postpone", "resist": outside review 172 F1 — "Please discontinue the X skill" was a
/// directive and loaded it).
///
/// Routing/8 reads a manual-only skill the profile installs (Full) as unrouted, not as
/// installed: a directive at it is `cited-not-routed`, whose note names `explicitIds`
/// (outside review 206 F2: routing/7 recorded `cited-installed` and told the user the skill
/// was in the worker's context, where its native flags keep the agent from loading it).
///
/// Routing/9 reads the query and every source's name and description as NFKC before it
/// cuts them into tokens, so the same words typed in another Unicode form (NFD accents, as
/// macOS input and many copies give them; fullwidth letters) rank alike, as directives and
/// citations are read (outside review 224 F1: "café résumé menu" in NFD matched only `menu`
/// and was left pending where the NFC query loaded the skill).
///
/// Routing/10 reads a refusal also where a digit, a bar or a like mark stands for a letter
/// inside a word (`AV0ID`, `PROH1B1TED`, `AVO|D`, a Hebrew paseq in `AVO׀D`), and a small `l`
/// inside a word of capitals as the `I` it shows (`AVOlD`): outside review 231 F2, each loaded
/// the skill it refused. Its other readings, and what replay checks, are routing/9's.
///
/// Routing/11 reads those words as they show — without invisible characters or annotations,
/// in NFKC, a digit of another script as the digit, without a combining mark after a digit,
/// an em dash as a space — and a `!` or a bar after such a word as its end, a bar before a
/// closing bracket or quote as a separator (outside reviews 240, 241, 244: `AV0ID!`,
/// `N3VER!!1`, `AV0ID|`, `NEV\u{AD}3R`, `AV0̲ID`, `NEV٣R`, `Just kidding—`, `(just kidding|)`
/// loaded the skill they refused).
pub const ROUTING_POLICY: &str = "closure-ledger-routing/11";

/// The tenth routing policy: routing/11 reading stand-ins only in the text as typed.
/// Selections recorded under it are checked under it
/// (as routing/11's: the query is not recorded); its receipts are not reused under routing/11.
pub const ROUTING_POLICY_V10: &str = "closure-ledger-routing/10";

/// The ninth routing policy: routing/10 without its reading of digits and marks inside a
/// refusal word. Selections recorded under it are checked under it (as routing/10's: the
/// query is not recorded); its receipts are not reused under routing/10.
pub const ROUTING_POLICY_V9: &str = "closure-ledger-routing/9";

/// Whether `policy` is routing/9 or later (NFKC, words of mixed scripts read as they show,
/// `disguised`).
fn from_v9(policy: &str) -> bool {
    policy == ROUTING_POLICY || policy == ROUTING_POLICY_V10 || policy == ROUTING_POLICY_V9
}

/// The eighth routing policy: routing/9 cutting tokens from the text as typed (no NFKC).
/// Selections recorded under it are checked under it; its receipts are not reused under
/// routing/9.
pub const ROUTING_POLICY_V8: &str = "closure-ledger-routing/8";

/// Whether `policy` is routing/8 or later (a manual-only skill the profile installs is
/// unrouted).
fn from_v8(policy: &str) -> bool {
    from_v9(policy) || policy == ROUTING_POLICY_V8
}

/// The seventh routing policy: routing/8 reading a directive at a manual-only skill the
/// profile installs as at any installed skill (`cited-installed`). Selections recorded under
/// it are checked under it; its receipts are not reused under routing/8.
pub const ROUTING_POLICY_V7: &str = "closure-ledger-routing/7";

/// Whether `policy` is routing/7 or later (`cited-installed`).
fn from_v7(policy: &str) -> bool {
    from_v8(policy) || policy == ROUTING_POLICY_V7
}

/// The sixth routing policy: routing/7 with fewer refusal words and phrases (the lexical
/// step is not re-run on replay — the query is not recorded — so its recorded outcome is
/// checked as routing/7's). Selections recorded under it are checked under it; its receipts
/// are not reused under routing/7 (the binding names the policy).
pub const ROUTING_POLICY_V6: &str = "closure-ledger-routing/6";

/// Whether `policy` is routing/6 or later (a refusing query naming no skill is pending over
/// ranking's shortlist).
fn from_v6(policy: &str) -> bool {
    from_v7(policy) || policy == ROUTING_POLICY_V6
}

/// The fifth routing policy: routing/6 whose query refusing something, citing no skill,
/// was a completed `none` (`negated`) rather than a pending shortlist. Selections recorded
/// under it are checked under it.
pub const ROUTING_POLICY_V5: &str = "closure-ledger-routing/5";

/// Whether `policy` is routing/5 or later (its reasons: `several-cited`, `mentioned`,
/// `cited-not-routed`).
fn from_v5(policy: &str) -> bool {
    from_v6(policy) || policy == ROUTING_POLICY_V5
}

/// The fourth routing policy: routing/5 without its reasons and stricter readings — a skill
/// only named was left pending as `several-directives` (outside review 114) and was chosen
/// where ranking agreed with it, a directive at an unrouted skill was left pending over
/// an empty shortlist, and a refusal in another sentence did not stop a directive.
/// Selections recorded under it are checked under it.
pub const ROUTING_POLICY_V4: &str = "closure-ledger-routing/4";

/// Whether `policy` is routing/4 or later: it reads refusals against named skills and keeps
/// the agent's ids from choosing past them.
fn from_v4(policy: &str) -> bool {
    from_v5(policy) || policy == ROUTING_POLICY_V4
}

/// The third routing policy: routing/4 whose directive decided even when the query cited
/// another skill beside it ("use the X skill and the Y skill" selected X alone). Selections
/// recorded under it are checked under it.
pub const ROUTING_POLICY_V3: &str = "closure-ledger-routing/3";

/// The second routing policy: routing/3 without its two-term floor ([`MIN_MATCHED_TERMS`]).
/// Selections recorded under it are checked under it.
pub const ROUTING_POLICY_V2: &str = "closure-ledger-routing/2";

/// The first routing policy: a task's agent-proposed ids decided before the lexical step, so
/// they overrode a skill the user's own query cited or ranked unambiguously. Selections
/// recorded under it are re-derived under it; new ones are decided under
/// [`ROUTING_POLICY`], which takes a decisive lexical step first (seed 003: "Auto uses
/// explicit user IDs first, then a completed pinned decision, an unambiguous ranked match,
/// one cited skill name, or admitted agent-proposed IDs"; outside review 26).
pub const ROUTING_POLICY_V1: &str = "closure-ledger-routing/1";
/// Largest task input (bytes).
pub const MAX_TASK_INPUT_BYTES: usize = 65_536;
/// Largest query (bytes).
pub const MAX_QUERY_BYTES: usize = 8192;
/// Longest `sessionId` / `taskId` (bytes).
pub const MAX_TASK_ID_BYTES: usize = 128;
/// Longest `phase` (bytes).
pub const MAX_PHASE_BYTES: usize = 64;
/// Most `explicitIds` / `proposedIds`.
pub const MAX_TASK_IDS: usize = 8;
/// Most sources in a selection's dependency closure.
pub const MAX_CLOSURE: usize = 8;
/// Most candidates in a pending shortlist.
pub const MAX_SHORTLIST: usize = 5;
/// Longest candidate description (characters); longer ones are cut and flagged.
pub const MAX_DESCRIPTION_CHARS: usize = 2048;
/// Most bytes `--load` returns across every loaded resource.
pub const MAX_LOAD_BYTES: u64 = 32_000;
/// Largest provider proposal document (bytes).
pub const MAX_PROPOSAL_BYTES: usize = 65_536;
/// The bar's floor (BM25 × 1000): a match of at least two informative terms.
pub const BAR_MIN_SCORE: u32 = 2000;
/// The bar's margin: the top score is at least this many times the runner-up's.
pub const BAR_RATIO: u32 = 2;
/// Routing/3's floor of informative terms: the top candidate of a ranked match matched at
/// least this many distinct query terms. BM25's idf grows with the number of routable
/// sources, so from six sources on one shared word cleared [`BAR_MIN_SCORE`] alone, and
/// "don't use the alpha skill" selected `skill:alpha` (outside review 52).
pub const MIN_MATCHED_TERMS: usize = 2;

/// Why a selection was made (recorded `reason`).
pub const REASON_NO_WORKFLOW: &str = "no-workflow";
pub const REASON_EXPLICIT: &str = "explicit";
pub const REASON_REUSED: &str = "reused";
pub const REASON_MANUAL: &str = "manual";
pub const REASON_AGENT_PROPOSAL: &str = "agent-proposal";
pub const REASON_PROVIDER_PROPOSAL: &str = "provider-proposal";
pub const REASON_PROPOSAL_DECLINED: &str = "proposal-declined";
pub const REASON_DIRECTIVE: &str = "directive";
pub const REASON_RANKED: &str = "ranked";
pub const REASON_SEVERAL_DIRECTIVES: &str = "several-directives";
/// Routing/5: the query cites several skills (pending, the cited ones first).
pub const REASON_SEVERAL_CITED: &str = "several-cited";
/// Routing/5: the query cites only skills the profile does not route (manual-only,
/// excluded, never selectable): nothing is chosen for it — an explicit id loads such a skill.
pub const REASON_CITED_UNROUTED: &str = "cited-not-routed";
/// Routing/7: the query directs only to skills the profile installs (its base): nothing
/// more to load, and ranking adds nothing beside them (outside reviews 175 F6, 178 F8).
pub const REASON_CITED_INSTALLED: &str = "cited-installed";
/// Routing/5: the query names one skill without a directive (or directs to it in a query
/// that refuses something elsewhere): pending, it first — ranking does not choose it.
pub const REASON_MENTIONED: &str = "mentioned";
pub const REASON_AMBIGUOUS: &str = "ambiguous";
/// Routing/9: the query's words disguise letters (`unmixed` respells them): what a directive
/// or ranking would have chosen is left pending, it first.
pub const REASON_DISGUISED: &str = "disguised";
pub const REASON_NO_QUERY: &str = "no-query";
pub const REASON_NO_MATCH: &str = "no-match";
/// Routing/3: the query negates something, so ranking decides nothing ([`negates`]):
/// routing/3–5 record nothing chosen, routing/6 a pending shortlist (none if nothing ranks).
pub const REASON_NEGATED: &str = "negated";

/// A task, as the task input gives it (already within its bounds; see `profiles::select`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Task {
    pub session_id: String,
    pub task_id: String,
    pub revision: u32,
    pub phase: String,
    pub query: Option<String>,
    /// Sorted, unique.
    pub explicit_ids: Vec<String>,
    /// Sorted, unique.
    pub proposed_ids: Vec<String>,
    pub no_workflow: bool,
}

/// What a selection asks besides the task.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// `--load`.
    pub load: bool,
    /// The `receiptDigest` of the `--previous` receipt (recomputed by the caller).
    pub previous: Option<Digest>,
    /// A provider's answer (`--proposal`): its `selectedIds`.
    pub proposal: Option<Vec<String>>,
}

/// Why a selection was refused. Nothing is recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectionError {
    #[error(
        "no profile is configured: run `ledger profile set` first (a first `profile set` that was interrupted shows in `ledger profile status DIR --state-root ROOT`; `ledger profile recover` finishes it)"
    )]
    NotConfigured,
    #[error(
        "the configured generation is stale: registry {current} (source drift) changes it: run `ledger profile set` again"
    )]
    StaleSource { current: Digest },
    /// Source drift left the configured selection without a plan (e.g. a blocking budget it
    /// no longer fits: outside review 72 — `set` again would be refused the same way).
    #[error(
        "the configured selection no longer plans over registry {current} (source drift): {why} — `ledger profile set` a selection that does"
    )]
    NoPlan { current: Digest, why: String },
    #[error("task input: {0}")]
    Task(String),
    /// The id as shown (`shown_id`).
    #[error("unknown source id {0}")]
    UnknownId(String),
    #[error("{id:?} is excluded by the profile (a configured exclusion, or one `--exclude` added)")]
    Excluded { id: String },
    #[error(
        "{id:?} is a dependency of {of:?} and is excluded by the profile (a configured exclusion, or one `--exclude` added)"
    )]
    ExcludedDependency { id: String, of: String },
    #[error("{id:?} is never selectable ({rule})")]
    NotSelectable { id: String, rule: &'static str },
    #[error("{id:?} is manual-only: it loads only when its own id is explicit{}", .of.as_ref().map(|o| format!(" (a dependency of {o:?})")).unwrap_or_default())]
    ManualOnly { id: String, of: Option<String> },
    /// `id` as shown (`shown_id`).
    #[error("agent-proposed {id} is not routable ({rule})")]
    NotRoutable { id: String, rule: String },
    #[error("the selection closes over {0} sources, more than {MAX_CLOSURE}")]
    ClosureTooLarge(usize),
    #[error("the --previous receipt is not a selection recorded in this ledger")]
    PreviousUnknown,
    #[error(
        "a proposal answers a pending selection: --previous must name its receipt, with the same binding (session, task, revision, phase, plan, query){0}"
    )]
    ProposalWithoutPending(String),
    #[error(
        "pending selection {pending} was already answered by selection {by}: a pending proposal is answered once (one provider proposal call)"
    )]
    AlreadyAnswered { pending: Digest, by: Digest },
    #[error(
        "a proposal answers a pending selection, but this one is decided otherwise ({0}): drop --proposal, or name the pending selection with --previous and no other ids"
    )]
    ProposalUnused(String),
    #[error(
        "manual selection takes explicit ids only (seed 003): drop proposedIds, or name the ids as explicitIds"
    )]
    ProposedUnderManual,
    #[error("a proposal selects zero or one id, not {0}")]
    ProposalTooMany(usize),
    /// The id as shown (`shown_id`).
    #[error("proposed {0} is not in the pending shortlist")]
    ProposalNotInShortlist(String),
    #[error("suggest mode never loads bodies")]
    SuggestNeverLoads,
    #[error("{id} resource {path:?} is recorded by digest only: it cannot be loaded")]
    NotLoadable { id: String, path: String },
    #[error("{id} resource {path:?} is not deliverable text ({why}): it cannot be loaded as instructions")]
    NotText { id: String, path: String, why: &'static str },
    #[error("the load needs {bytes} bytes, over the budget of {MAX_LOAD_BYTES}: nothing loaded")]
    OverBudget { bytes: u64 },
}

/// A recorded selection, as later selections see it (keyed by its receipt digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectionState {
    pub seq: u64,
    pub binding_digest: Digest,
    pub decision: SelectionDecision,
    pub selection_digest: Digest,
    pub explicit_ids: Vec<String>,
    pub selected_ids: Vec<String>,
    pub candidates: Vec<SelectionCandidate>,
    /// What an Attempt start that names the selection checks (stage 3): the task it was
    /// made for, the plan and triggers its binding covered, and what it loaded.
    pub task_id: String,
    pub task_revision: u32,
    pub phase: String,
    pub no_workflow: bool,
    pub plan_digest: Digest,
    pub trigger_digest: Digest,
    /// The configured store revision it resolved against: any later profile revision
    /// (`set`, `mode`, `rollback`) makes it stale for an Attempt, even one that returns to
    /// the same plan.
    pub profile_revision: u32,
    pub resources: Vec<LoadedResource>,
    /// A pending selection's answer: the receipt of the selection that answered it with a
    /// provider proposal (a pending selection is answered once). Omitted while unanswered,
    /// so the state's encoding is unchanged for every ledger without an answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<Digest>,
    /// The rest of its binding, so a `--previous` that is set aside can be told why
    /// ([`previous_set_aside`]). Not encoded: the binding digest above covers them.
    #[serde(skip)]
    pub session_id: String,
    #[serde(skip)]
    pub query_digest: Option<Digest>,
    #[serde(skip)]
    pub routing_policy: String,
}

/// The projection of selections: every recorded one by its receipt digest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Selections {
    pub by_receipt: Map<Digest, SelectionState>,
}

impl Selections {
    pub fn is_empty(&self) -> bool {
        self.by_receipt.is_empty()
    }
}

// ---------------------------------------------------------------------------------------
// Lexical ranking and directives

const STOP_WORDS: [&str; 40] = [
    "a", "about", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "how", "i", "in",
    "into", "is", "it", "me", "my", "of", "on", "or", "our", "please", "should", "so", "that", "the", "then",
    "this", "to", "up", "we", "what", "when", "with", "you", "your",
];

fn stem(word: &str) -> String {
    let n = word.chars().count();
    if n >= 6 && word.ends_with("ing") {
        word.trim_end_matches("ing").to_owned()
    } else if n >= 4 && word.ends_with('s') && !word.ends_with("ss") {
        word.strip_suffix('s').unwrap_or(word).to_owned()
    } else {
        word.to_owned()
    }
}

/// The current routing policy's tokens of `text`.
pub fn tokens(text: &str) -> Vec<String> {
    tokens_as(ROUTING_POLICY, text)
}

/// Routing policy `policy`'s tokens of `text`. From routing/9 the text is read as a reader
/// sees it: its NFKC form, without the invisible characters that show nothing (a soft
/// hyphen or zero-width space inside a word), a word that mixes scripts — a Latin word with
/// a Cyrillic `о` — as the letters it shows (`unmixed`; outside review 226 F3: each of
/// those dropped a word from the match and turned a pending choice into a ranked load).
pub fn tokens_as(policy: &str, text: &str) -> Vec<String> {
    use unicode_normalization::UnicodeNormalization;
    let read: String = if from_v9(policy) {
        // (NFKC first — an NFD accent is one letter — but a Greek lunate sigma, which NFKC
        // spells as `σ`, as the `c` it looks like: outside review 230 F7.)
        let lunate = |c: char| match c {
            '\u{3F2}' => 'c',
            '\u{3F9}' => 'C',
            c => c,
        };
        let seen: String = text.chars().filter(|c| !super::invisible(*c)).map(lunate).nfkc().collect();
        unmixed(&seen)
    } else {
        text.to_owned()
    };
    read.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 2 && !STOP_WORDS.contains(w))
        .map(stem)
        .collect()
}

fn cut(description: &str) -> (String, bool) {
    match description.char_indices().nth(MAX_DESCRIPTION_CHARS) {
        Some((at, _)) => (description.get(..at).unwrap_or_default().to_owned(), true),
        None => (description.to_owned(), false),
    }
}

fn candidate(source: &RegistrySource, score: u32, matched: Vec<String>) -> SelectionCandidate {
    let (description, truncated) = cut(&source.description);
    SelectionCandidate { id: source.id.clone(), score, matched, truncated, description }
}

/// BM25 of `query` over `sources` (the routable ones): every source with a score above
/// zero, best first, ties by id.
pub fn rank(query: &str, sources: &[&RegistrySource]) -> Vec<SelectionCandidate> {
    rank_as(ROUTING_POLICY, query, sources)
}

/// [`rank`] under routing policy `policy` (its tokens: [`tokens_as`]).
pub fn rank_as(policy: &str, query: &str, sources: &[&RegistrySource]) -> Vec<SelectionCandidate> {
    rank_terms(policy, &tokens_as(policy, query).into_iter().collect(), sources)
}

/// [`rank`] over the query's terms `q`. A source's score and `matched` words depend only
/// on the terms of `q` its document holds, and a term's weight only on the sources: so
/// ranking over any part of `q` that holds a candidate's matched words gives that
/// candidate the very score and words ranking over `q` gave it (replay's check of a
/// recorded shortlist, [`lexical_recorded`]).
fn rank_terms(policy: &str, q: &BTreeSet<String>, sources: &[&RegistrySource]) -> Vec<SelectionCandidate> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    if q.is_empty() || sources.is_empty() {
        return Vec::new();
    }
    let docs: Vec<Vec<String>> = sources
        .iter()
        .map(|s| {
            let name = tokens_as(policy, &s.name);
            let mut doc = name.clone();
            doc.extend(name);
            doc.extend(tokens_as(policy, &s.description));
            doc
        })
        .collect();
    let n = docs.len() as f64;
    let avgdl = (docs.iter().map(Vec::len).sum::<usize>() as f64 / n).max(1.0);
    let mut df: BTreeMap<&str, f64> = BTreeMap::new();
    for term in q {
        let count = docs.iter().filter(|d| d.iter().any(|t| t == term)).count();
        df.insert(term.as_str(), count as f64);
    }
    let mut out = Vec::new();
    for (source, doc) in sources.iter().zip(&docs) {
        let dl = doc.len() as f64;
        let mut score = 0.0f64;
        let mut matched = Vec::new();
        for term in q {
            let tf = doc.iter().filter(|t| *t == term).count() as f64;
            if tf == 0.0 {
                continue;
            }
            let n_t = df.get(term.as_str()).copied().unwrap_or(0.0);
            let idf = (1.0 + (n - n_t + 0.5) / (n_t + 0.5)).ln();
            score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
            matched.push(term.clone());
        }
        let milli = (score * 1000.0).round();
        if milli >= 1.0 {
            let milli = if milli >= f64::from(u32::MAX) { u32::MAX } else { milli as u32 };
            out.push(candidate(source, milli, matched));
        }
    }
    out.sort_by(|a, b| b.score.cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    out
}

/// Whether `top` is an unambiguous match over `second` (the runner-up, if any).
pub fn clears_bar(top: u32, second: Option<u32>) -> bool {
    top >= BAR_MIN_SCORE && second.is_none_or(|s| u64::from(top) >= u64::from(BAR_RATIO) * u64::from(s))
}

/// Whether a recorded selection's top candidate clears its routing policy's bar against
/// the recorded runner-up.
fn recorded_clears_bar(e: &SelectionRecorded) -> bool {
    let second = e.candidates.get(1).map(|c| c.score);
    e.candidates.first().is_some_and(|top| clears_bar_as(&e.routing_policy, top, second))
}

/// Whether the query says not to do something (a negation word, or a word ending in
/// `n't`): under routing/3 such a query never makes a ranked match — ranking cannot tell
/// what is negated (outside review 53: "don't use kubernetes-deploy" ranked that skill on
/// its two name words). It may still decide by a directive, which reads the negation.
pub fn negates(query: &str) -> bool {
    refusal_in(query).is_some()
}

/// The first word or phrase of the query that [`negates`] reads as a refusal, as read
/// (for the note that says why nothing was chosen: outside review 132).
pub fn refusal_in(query: &str) -> Option<String> {
    // Read as a reader sees it (NFKC, the confusable skeleton, invisible characters dropped:
    // outside review 66 — "n\u{AD}ot", a Cyrillic `о`, a fullwidth apostrophe), the word
    // lists read the same way; from routing/9 a word that mixes scripts first as the letters
    // it shows ([`unmixed`]).
    let read = |t: &str| super::goal::reading(&t.to_lowercase().replace(APOSTROPHES, "'"));
    refusal_read(&unmixed(query), query, &read).or_else(|| {
        // Routing/10: digits and marks standing for letters ([`respelled_words`]).
        respelled_words(query).iter().find_map(|spelled| refusal_read(&unmixed(spelled), spelled, &read))
    })
}

/// A character that stands for a letter in a word — leetspeak's digits and signs, a bar —
/// and the letter (`one`: `i` or `l`, for a character that may read as either).
fn stand_in(c: char, one: char) -> Option<char> {
    Some(match c {
        '0' => 'o',
        '1' => one,
        '3' => 'e',
        '4' | '@' => 'a',
        '5' | '$' => 's',
        '7' => 't',
        '8' => 'b',
        '9' => 'g',
        '!' => 'i',
        '\u{20AC}' => 'e',
        c if is_bar(c) => one,
        _ => return None,
    })
}

/// A vertical bar or line that reads as `I` or `l` in a word: `|`, `¦`, box-drawing and
/// bracket-piece lines, `∣`, `｜`, a Hebrew paseq, a danda — any mark whose confusable
/// skeleton is `l`.
fn is_bar(c: char) -> bool {
    if c.is_alphanumeric() || c.is_whitespace() {
        return false;
    }
    matches!(
        c,
        '|' | '\u{A6}'
            | '\u{2016}'
            | '\u{2223}'
            | '\u{2225}'
            | '\u{2502}'
            | '\u{2503}'
            | '\u{2551}'
            | '\u{239C}'
            | '\u{239F}'
            | '\u{23A2}'
            | '\u{23A5}'
            | '\u{23AA}'
            | '\u{23B8}'
            | '\u{23B9}'
            | '\u{23D0}'
            | '\u{2758}'
            | '\u{2759}'
            | '\u{275A}'
            | '\u{FF5C}'
            | '\u{FFE8}'
            | '\u{5C0}'
            | '\u{964}'
            | '\u{965}'
    ) || {
        let mut buf = [0u8; 4];
        let mut k = unicode_security::skeleton(c.encode_utf8(&mut buf));
        matches!((k.next(), k.next()), (Some('l'), None))
    }
}

/// Brackets, quotes and emphasis marks that open a phrase, before which a bar at a word's edge
/// is a separator ([`respelled_words`]).
const EDGE_OPENING: [char; 10] = ['(', '[', '{', '"', '\u{201C}', '\u{2018}', '\u{AB}', '*', '_', '`'];
/// … and those that close one, after which it is.
const EDGE_CLOSING: [char; 11] = [')', ']', '}', '"', '\'', '\u{201D}', '\u{2019}', '\u{BB}', '*', '_', '`'];

/// Routing/10: `text` read three more ways for refusals — each word's stand-in characters
/// ([`stand_in`]) as the letters they stand for, a bar-like one as `i` and then as `l`, a
/// small `l` between capitals as `I`; and a bar at a word's outer edge as the separator it is
/// there (`kidding|`). A word here is a run of letters, stand-ins and apostrophes from its
/// first letter to its last, of at least three characters (`N0`, `$top`, `4way` are names;
/// `k8s`, `c0nfig` spell no refusal); routing/11 reads the text as it shows first
/// ([`as_shown`]). Read for
/// refusals only, where a wrong reading leaves the choice to the user (outside reviews 231
/// F2, 236: `AV0ID`, `AVO|D`, `4VOID`, `S70P`, `D0N'7`, `H0ld off`, `AVO!D`, `Do|not` loaded
/// the skill they refused).
fn respelled_words(text: &str) -> [String; 3] {
    // Where a bar at a word's edge is a separator: beside white space, sentence punctuation,
    // the text's end, or an opening (before the word) or closing (after it) bracket, quote or
    // emphasis mark — not after a closing bracket (`Some(x)|None`) nor before a dash
    // (`--no|--yes`): outside reviews 238 F3, 240.
    let open = |c: Option<char>, quotes: &[char]| {
        c.is_none_or(|c| {
            c.is_whitespace() || matches!(c, '.' | ',' | ';' | ':' | '!' | '?') || quotes.contains(&c)
        })
    };
    // Routing/11: read as the text shows — without its invisible characters, in NFKC (a
    // superscript or fullwidth digit is the digit), without a combining mark after an ASCII
    // letter, digit or stand-in (outside review 240: `NEV\u{AD}3R`, `NEV\u{200D}3R`, `AV0̲ID`,
    // `kidding|\u{200B}` were not read).
    let shown = as_shown(text);
    let text = shown.as_str();
    let spell = |one: char| {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        while let Some(&c) = chars.get(at) {
            let in_word = |c: char| c.is_alphabetic() || c == '\'' || stand_in(c, one).is_some();
            if !in_word(c) {
                out.push(c);
                at += 1;
                continue;
            }
            let run_end = chars.iter().skip(at).position(|c| !in_word(*c)).map_or(chars.len(), |n| at + n);
            // The word is the run from its first letter to its last: a stand-in before or after
            // them is a name's or the sentence's, kept as typed — `$top`, `4way`, `x86` are
            // names, not disguised `stop`, `away` (outside review 238 F2); routing/11: a `!`,
            // `!!1` or a bar after the word ends it (outside reviews 240, 241 F1, F2: `AV0ID!`,
            // `N3VER!!1`, `AV0ID|` were read as words ending in a stand-in).
            let letter_at = |k: &usize| chars.get(*k).is_some_and(|c| c.is_alphabetic());
            let (first, last) = match ((at..run_end).find(letter_at), (at..run_end).rev().find(letter_at)) {
                (Some(first), Some(last)) => (first, last + 1),
                _ => (run_end, run_end),
            };
            // (A bar there separates where it stands at the edge of the text's words too:
            // `AV0ID|`, `|AV0ID` — outside review 241 F2.)
            let edge = |separates: bool| move |c: &char| if separates && is_bar(*c) { ' ' } else { *c };
            let before = at.checked_sub(1).and_then(|k| chars.get(k)).copied();
            let leading = edge(open(before, &EDGE_OPENING));
            out.extend(chars.get(at..first).unwrap_or_default().iter().map(leading));
            let word = chars.get(first..last).unwrap_or_default();
            // (Its letters capitals but a small `l`, which may stand for `I`: `AV0lD`.)
            let caps = word.iter().any(|c| c.is_uppercase())
                && word.iter().filter(|c| c.is_alphabetic() && **c != 'l').all(|c| c.is_uppercase());
            let spelled = word.len() >= 3;
            for (k, &w) in word.iter().enumerate() {
                // (Or beside a stand-in in a word of capitals: `AV0lD`, outside review 241 F6.)
                let capital = |c: &char| c.is_uppercase() || (caps && stand_in(*c, one).is_some());
                let between_caps = w == 'l'
                    && k.checked_sub(1).and_then(|b| word.get(b)).is_some_and(capital)
                    && word.get(k + 1).is_some_and(capital);
                let letter = if between_caps { Some(one) } else { stand_in(w, one).filter(|_| spelled) };
                match letter {
                    Some(l) if caps || between_caps => out.extend(l.to_uppercase()),
                    Some(l) => out.push(l),
                    None => out.push(w),
                }
            }
            let trailing = edge(open(chars.get(run_end).copied(), &EDGE_CLOSING));
            out.extend(chars.get(last..run_end).unwrap_or_default().iter().map(trailing));
            at = run_end;
        }
        out
    };
    // A bar at a word's outer edge — after white space before a letter, or after a letter
    // before white space, sentence punctuation or the end — as the separator it is there
    // (`kidding|`, `|Nope`: outside review 238 F1). Not between two letters (`Always|Never`,
    // `(yes|no)` are alternatives, not refusals: 238 F3) nor after a bracket (`Some(x)|None`).
    let chars: Vec<char> = text.chars().collect();
    let at = |k: Option<usize>| k.and_then(|k| chars.get(k)).copied();
    // (Routing/11: and a bar before a closing bracket, quote or emphasis mark, or after an
    // opening one — outside review 240: `(just kidding|)`.)
    let letter = |c: Option<char>| c.is_some_and(char::is_alphabetic);
    let separated: String = chars
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            let (before, after) = (at(k.checked_sub(1)), at(Some(k + 1)));
            let edge = (open(before, &EDGE_OPENING) && letter(after))
                || (letter(before) && open(after, &EDGE_CLOSING));
            if is_bar(c) && edge { ' ' } else { c }
        })
        .collect();
    [spell('i'), spell('l'), separated]
}

/// `text` as [`respelled_words`] reads it: without invisible characters and interlinear
/// annotations, in NFKC, each decimal digit of another script as its ASCII digit, without the
/// combining marks after an ASCII letter or digit or a stand-in, and an em dash as a space.
fn as_shown(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    // (Interlinear annotation controls too, as `unmixed` drops them, and an annotation they
    // close — `AV0ID` annotated `hidden` is `AV0ID`: outside review 241 F4.)
    let mut annotated = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('\u{FFFA}') {
        annotated.push_str(rest.get(..at).unwrap_or_default());
        let after = rest.get(at + '\u{FFFA}'.len_utf8()..).unwrap_or_default();
        rest = after.find('\u{FFFB}').and_then(|end| after.get(end..)).unwrap_or(after);
    }
    annotated.push_str(rest);
    let shown = |c: &char| !super::invisible(*c) && !('\u{FFF9}'..='\u{FFFB}').contains(c);
    let composed: String = annotated.chars().filter(shown).nfkc().collect();
    let mut out = String::with_capacity(composed.len());
    // (A precomposed accented letter keeps its accent: read bare, `décliné` and `hâte` were
    // `decline` and `hate` — outside review 244 F3, the first cut's cost.)
    let mut last: Option<char> = None;
    let mut chars = composed.chars().peekable();
    while let Some(c) = chars.next() {
        let plain = |p: char| p.is_ascii_alphanumeric() || stand_in(p, 'i').is_some();
        if unicode_normalization::char::is_combining_mark(c) && last.is_some_and(plain) {
            continue;
        }
        // A digit of another script is the digit it is (`NEV٣R` is `NEV3R`: outside reviews
        // 240, 244 F4 — read as a disguise, it left `B٢B`, `H٢O` pending).
        let c = decimal_digit(c).unwrap_or(c);
        // A dash ending a word is no letter of it (outside review 244 F1: `kidding—`); between
        // two words it joins them as typed (review 246 F1: read as a space, "the chart—no
        // downtime" left its directive pending).
        let dash = matches!(c, '\u{2014}' | '\u{2015}' | '\u{FE58}' | '\u{2E3A}' | '\u{2E3B}');
        let c = if dash && chars.peek().is_none_or(|n| !n.is_alphanumeric()) { ' ' } else { c };
        out.push(c);
        last = Some(c);
    }
    out
}

/// The ASCII digit a decimal digit of another script stands for (Arabic-Indic, Persian, NKo,
/// the Indic scripts, Thai, Lao, Tibetan, Myanmar, Khmer, Mongolian, …): `None` for any other
/// character (a fullwidth or mathematical digit is one already in NFKC).
fn decimal_digit(c: char) -> Option<char> {
    const ZEROS: [u32; 36] = [
        0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50,
        0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40,
        0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    ];
    let code = u32::from(c);
    let value = ZEROS.iter().find_map(|zero| code.checked_sub(*zero).filter(|v| *v <= 9))?;
    c.is_numeric().then(|| char::from_digit(value, 10)).flatten()
}

/// The ASCII letter or digit non-ASCII `c` looks like, by its confusable skeleton — in a word
/// of capitals (`caps`) the capital with that skeleton (the skeleton spells `I`, and the Greek
/// `Ι`, the Cyrillic `І` and `Ӏ`, the Lisu `ꓲ`, as a small `l`: outside reviews 228 F1, 230
/// F1 read `AVOΙD` as `avold`); `None` for an ASCII character or one whose skeleton is not one
/// such letter.
fn ascii_look_alike(c: char, caps: bool) -> Option<char> {
    if c.is_ascii() {
        return None;
    }
    let seen = |x: char| {
        let mut buf = [0u8; 4];
        let mut k = unicode_security::skeleton(x.encode_utf8(&mut buf));
        match (k.next(), k.next()) {
            (Some(a), None) => Some(a),
            _ => None,
        }
    };
    let a = seen(c).filter(char::is_ascii_alphanumeric)?;
    // (In a word of capitals, the capital with that skeleton: the skeleton spells `I` as `l`.)
    let capital = if caps { ('A'..='Z').find(|u| seen(*u) == Some(a)) } else { None };
    Some(capital.unwrap_or(a))
}

/// Routing/9: `text` with each word that mixes scripts spelled with the ASCII letters and
/// digits its letters of other scripts look like — a Greek capital `Ν` in `Νever`, a
/// Cyrillic `о` in `terrаform` — where one letter's confusable skeleton is one ASCII letter
/// or digit (outside review 226 F2: lower-cased first, `Ν` became `ν`, whose look-alike is
/// `v`, so "Νever use the X skill" loaded X; F3: ranking dropped such a word from the
/// match). A word of one script (Greek, Cyrillic, Japanese, …) is left as written, and so
/// is every ASCII character (the skeleton spells `I` as `l` and `m` as `rn`).
fn unmixed(text: &str) -> String {
    // Interlinear annotation controls draw as nothing and are no character of a word
    // (outside review 228 F2: `AVO\u{FFF9}ID` was not read as `AVOID`).
    let text: String = text.chars().filter(|c| !('\u{FFF9}'..='\u{FFFB}').contains(c)).collect();
    // A capital `İ` lower-cases to `i` and a combining dot, which split the word (outside
    // review 228 F1: Turkish capitals hid `AVOİD`): read as the `I` it is typed for.
    let text = text.replace('\u{130}', "I");
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    for c in text.chars() {
        let marks = unicode_normalization::char::is_combining_mark(c);
        if c.is_alphanumeric() || c == '\'' || APOSTROPHES.contains(&c) || super::invisible(c) || marks {
            word.push(c);
        } else {
            respelled(&mut word, &mut out);
            out.push(c);
        }
    }
    respelled(&mut word, &mut out);
    out
}

/// One word for [`unmixed`], appended to `out` (and `word` cleared): a word that mixes scripts
/// or holds an ASCII letter is spelled with the ASCII letters its other letters look like
/// (in a word of capitals, a letter that looks like `I` or `l` as `I`; else as the skeleton
/// spells it — outside review 230 F3: `decΙine` is `decline`), and without the combining marks
/// after its ASCII letters (230 F2: `N̲E̲V̲E̲R̲`, `avoi̇d`); a word of one other script stays.
fn respelled(word: &mut String, out: &mut String) {
    use unicode_security::MixedScript;
    let ascii_letters = word.chars().any(|c| c.is_ascii_alphabetic());
    if !ascii_letters && word.as_str().is_single_script() {
        out.push_str(word);
        word.clear();
        return;
    }
    let l_like = |c: char| c == 'l' || c == 'I' || ascii_look_alike(c, false) == Some('l');
    let letters = || word.chars().filter(|c| c.is_alphabetic() && !l_like(*c));
    let caps = letters().count() >= 1 && letters().all(|c| !c.is_lowercase());
    let mut after_ascii = false;
    for c in word.chars() {
        if unicode_normalization::char::is_combining_mark(c) && after_ascii {
            continue;
        }
        let read = if caps && l_like(c) { 'I' } else { ascii_look_alike(c, caps).unwrap_or(c) };
        after_ascii = read.is_ascii_alphanumeric();
        out.push(read);
    }
    word.clear();
}

/// [`refusal_in`] with the query (`unmixed`; `typed`, as typed) and the word lists read by
/// `read`.
fn refusal_read(query: &str, typed: &str, read: &dyn Fn(&str) -> String) -> Option<String> {
    let raw = typed;
    // Negations that ask for what follows are none (routing/7, outside review 183 F6).
    let mut query = read(query);
    for phrase in AFFIRMING {
        query = blank_phrase(&query, &read(phrase));
    }
    let listed: Vec<String> = NEGATIONS
        .iter()
        .chain(&NEGATIONS_UNMARKED)
        .chain(&REFUSALS)
        .chain(&TAKE_BACK)
        .chain(&FORBIDDING)
        .map(|w| read(w))
        .collect();
    let nt = read("n't");
    // A closing phrase is looked for in the text as typed (NFKC, lower case): the skeleton
    // spells a dash after it as a letter (`—` as `ー`).
    let typed: String = {
        use unicode_normalization::UnicodeNormalization;
        raw.to_lowercase().replace(APOSTROPHES, "'").nfkc().collect()
    };
    if let Some(phrase) = retraction_in(&query, &read, &RETRACTIONS, false)
        .or_else(|| retraction_in(&typed, &|w: &str| w.to_owned(), &RETRACTIONS_CLOSING, true))
    {
        return Some(phrase);
    }
    // Other languages' refusals, as typed (routing/7, outside review 175 F2: "NEIN", "Nah",
    // "Ne déployez pas", "Não faça", "Не деплой", "不要" loaded the skill); not through the
    // confusable skeleton, which spells the Cyrillic `не` as the English `he`.
    let typed_words: Vec<&str> = typed.split(|c: char| !(c.is_alphanumeric() || c == '\'')).collect();
    // (A refusal typed with a letter of another layout — `нeт` with a Latin `e` — is the
    // refusal it shows; outside review 230 F6. Only a word holding a letter of its script:
    // the English `he` is not the Russian `не`.)
    let shown = |w: &str| unicode_security::skeleton(w).collect::<String>();
    let alike =
        |w: &str, r: &str| shown(w) == shown(r) || shown(&w.to_uppercase()) == shown(&r.to_uppercase());
    if let Some(word) = typed_words.iter().find(|w| {
        FOREIGN_REFUSALS.contains(*w) || (!w.is_ascii() && FOREIGN_REFUSALS.iter().any(|r| alike(w, r)))
    }) {
        return Some((*word).to_owned());
    }
    // French `pas` after `ne`/`n'` (`PAS` alone is an acronym: outside review 178 F1).
    if let Some(at) = typed_words.iter().position(|w| *w == "pas")
        && typed_words.get(..at).is_some_and(|b| b.iter().any(|w| *w == "ne" || w.starts_with("n'")))
    {
        return Some("ne … pas".to_owned());
    }
    if let Some(phrase) = UNSPACED_REFUSALS.iter().find(|p| typed.contains(**p)) {
        return Some((*phrase).to_owned());
    }
    if typed_words.contains(&"disagree") {
        return Some("disagree".to_owned());
    }
    // A sentence that is only "Undo", "Cancel" or "Revert" (outside review 183 F5; "use the
    // git skill to undo" is no take-back).
    if let Some(word) = typed
        .split(['.', '!', '?', ';', '\n'])
        .map(|s| s.trim().trim_matches(|c: char| !c.is_alphanumeric()))
        .find(|s| matches!(*s, "undo" | "cancel" | "revert"))
    {
        return Some(word.to_owned());
    }
    // A word joined by `-` or `_` is an identifier, not the word (`no-op`, `--no-verify`,
    // `no_std`: outside review 182 F4).
    query
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '\'' | '-' | '_')))
        .map(|w| w.trim_matches(['-', '_']))
        .find(|w| !w.is_empty() && (listed.iter().any(|l| l == w) || w.ends_with(nt.as_str())))
        .map(str::to_owned)
}

/// Refusal words of other languages (routing/7), read as typed: German `nein`, `niemals`;
/// French `jamais` (and `pas` after `ne`); Spanish and Portuguese `nunca`, `não`; Russian
/// `не`, `нет`, `никогда`, `нельзя`; and `nah`. (`non` is left out — "non-blocking" — and
/// so are `nie` and `nao`: "the nie/tak toggle", the NAO robot; outside review 178 F1.)
/// Routing/10 adds Ukrainian `ні`, `ніколи`, Dutch `nooit`, Turkish `kullanma` (outside
/// review 236 F5; not Dutch `niet`, which is German `nicht`: any Dutch string holds it —
/// 238 F4).
const FOREIGN_REFUSALS: [&str; 14] = [
    "nein",
    "niemals",
    "jamais",
    "nunca",
    "não",
    "не",
    "нет",
    "никогда",
    "нельзя",
    "nah",
    "ні",
    "ніколи",
    "nooit",
    "kullanma",
];

/// Refusals of languages written without spaces between words, read anywhere in the text
/// (routing/7): Chinese `不要`, `不用`, `别用`, `别使用`, `禁止`, `请勿`, `切勿`; Japanese
/// `ないで` (`しないで`, `使わないで`); Korean `하지 마`, `하지마`, `말고`.
/// (Routing/10 adds `別用`, `不能用`, `不许用`, `不許用`, `使うな`: outside review 236 F5; not
/// `禁用`, a UI's "Disable": 238 F4.)
const UNSPACED_REFUSALS: [&str; 16] = [
    "不要",
    "不用",
    "别用",
    "别使用",
    "禁止",
    "请勿",
    "切勿",
    "ないで",
    "하지 마",
    "하지마",
    "말고",
    "別用",
    "不能用",
    "不许用",
    "不許用",
    "使うな",
];

/// Phrases that take back or set aside what was said (outside review 129 F1: "Use the X
/// skill. Wait, scratch that", "just kidding", "oops, wrong repo", "only as a last resort",
/// "we got rid of …" selected the skill the user withdrew), anywhere in the text.
const RETRACTIONS: [&str; 22] = [
    "just kidding",
    // Routing/11 (outside review 241 F6; `joking` alone is not — "joking aside" — nor `I'm
    // joking`: read anywhere, "users say I was joking" dropped a directive, review 246 F3).
    "just joking",
    "only joking",
    "only kidding",
    "never mind",
    "wrong repo",
    "wrong repository",
    "wrong project",
    "wrong branch",
    "last resort",
    "got rid of",
    "gotten rid of",
    "second thought",
    "second thoughts",
    "changed my mind",
    "change of plans",
    "take that back",
    "scratch the above",
    "ignore the above",
    "disregard the above",
    // Outside review 182 F5.
    "wrong skill",
    "wrong chat",
];

/// Phrases that refuse the directive after them in its sentence (routing/7, outside review
/// 172 F1: "give up on", "steer clear of", "hold off on", "it's a bad idea to", "I am
/// against using" the X skill read as a directive) — only before its verb: after it, or
/// with no directive, they are the task's own words ("document how users opt out of
/// telemetry", "check it against the use cases": outside review 178 F1). Phrases, not their words:
/// "against" alone is "test against staging", "keep from" is "keep from breaking the build",
/// and "rule out" ("rule out a leak") is left out.
const REFUSING_PHRASES: [&str; 25] = [
    "give up",
    "giving up",
    "gave up",
    "steer clear",
    "steering clear",
    "hold off",
    "holding off",
    "bad idea",
    "terrible idea",
    "not a good idea",
    "i am against",
    "i'm against",
    "we are against",
    "we're against",
    "against using",
    "against the use",
    "keep from using",
    "too early to",
    "too soon to",
    "pause using",
    "pause the use",
    "opt out of",
    "opting out of",
    "leave out",
    "leaving out",
];

/// Phrases that take back what was said only where nothing follows them in the sentence
/// ("Scratch that." — not "cancel that flaky CI job": outside review 132 F3).
const RETRACTIONS_CLOSING: [&str; 9] = [
    "scratch that",
    "scratch this",
    "strike that",
    "undo that",
    "cancel that",
    "belay that",
    "forget that",
    // Outside review 182 F5.
    "scratch it",
    "delete that",
];

/// The first of `phrases` in `text` (each read by `read`, as `text` was: the confusable
/// skeleton spells `m` as `rn`) between word boundaries — where `closing`, followed by the
/// end or a punctuation mark, nothing more of its sentence.
fn retraction_in(
    text: &str,
    read: &dyn Fn(&str) -> String,
    phrases: &[&str],
    closing: bool,
) -> Option<String> {
    let boundary = |c: Option<char>| c.is_none_or(|c| !c.is_alphanumeric());
    let found = |phrase: &str| {
        let p = read(phrase);
        text.match_indices(p.as_str()).any(|(at, _)| {
            let before = text.get(..at).and_then(|t| t.chars().next_back());
            let rest = text.get(at + p.len()..).unwrap_or_default();
            let after = if closing { rest.trim_start().chars().next() } else { rest.chars().next() };
            boundary(before) && boundary(after)
        })
    };
    phrases.iter().find(|p| found(p)).map(|p| (*p).to_owned())
}

/// Verbs that tell the agent to leave something out (`skip the kubernetes rollout`, `stop
/// using …`, `exclude …`): as negations for ranking — ranking cannot tell what they refuse
/// (the fifteenth session left them ranking; routing/4 reads them).
const REFUSALS: [&str; 27] = [
    "skip",
    "skipping",
    "exclude",
    "excluding",
    "except",
    "omit",
    "omitting",
    "ignore",
    "ignoring",
    "stop",
    "disable",
    "disabling",
    "forgo",
    "neither",
    "forget",
    "rather",
    "banned",
    "away",
    "quit",
    "cease",
    "refuse",
    "decline",
    "mistake",
    "nicht",
    "kein",
    "keine",
    "hate",
];

/// Words that take back what was said (outside reviews 129 F1, 132 F2): refusals too, and
/// under routing/7 they stop a directive anywhere in its sentence ([`takes_back`]).
const TAKE_BACK: [&str; 10] = [
    "nevermind",
    "nvm",
    "jk",
    "nope",
    "belay",
    "disregard",
    "disregarding",
    "kidding",
    "retract",
    "retracted",
];

/// Routing/7's refusal verbs that count only before a directive's verb in its sentence —
/// "Please discontinue using the X skill" (outside review 172 F1) — as
/// [`REFUSING_PHRASES`] do: after it, or with no directive, they are the task's own words
/// ("document how we discontinue the v1 API", "the voting module's abstain option":
/// outside review 178 F1).
const REFUSALS_BEFORE: [&str; 7] =
    ["discontinue", "discontinuing", "abstain", "abstaining", "postpone", "postponing", "resist"];

/// Whether `sentence` takes a request back or forbids it: a retraction phrase, a take-back
/// word (`nevermind`, `nvm`, `jk`, `nope`, `belay`, `disregard`, `kidding`, `retract`), or a
/// word that forbids (`forbidden`, `prohibited`, `refrain`, …) — read as [`refusal_in`] reads.
fn takes_back(sentence: &str) -> bool {
    match refusal_in(sentence) {
        None => false,
        // ("Wrong chat", "wrong repo" are a task's words as often: they leave the directive
        // pending, as any refusal does — outside review 184 F4.)
        Some(read) => {
            (RETRACTIONS.contains(&read.as_str()) && !read.starts_with("wrong "))
                || RETRACTIONS_CLOSING.contains(&read.as_str())
                || TAKE_BACK.contains(&read.as_str())
                || FORBIDDING.contains(&read.as_str())
                || unmixed(sentence).split(|c: char| !c.is_alphanumeric()).any(|w| {
                    let w = w.to_lowercase();
                    TAKE_BACK.contains(&w.as_str()) || FORBIDDING.contains(&w.as_str())
                })
        }
    }
}

/// Apostrophes a query may be typed with (smart punctuation, a modifier letter), read as
/// `'` (outside review 54: "don’t use …" was not a negation).
const APOSTROPHES: [char; 8] =
    ['\u{2019}', '\u{2018}', '\u{2BC}', '\u{B4}', '\u{201B}', '\u{2032}', '\u{FF07}', '`'];

/// Contractions typed without their apostrophe (`dont` is among [`NEGATIONS`]).
const NEGATIONS_UNMARKED: [&str; 10] =
    ["wont", "cant", "cannot", "isnt", "arent", "doesnt", "didnt", "shouldnt", "wouldnt", "mustnt"];

/// The bar of routing policy `policy` for the top candidate `top` and the runner-up's score:
/// [`clears_bar`], and under routing/3 (and later) at least [`MIN_MATCHED_TERMS`] matched terms.
pub fn clears_bar_as(policy: &str, top: &SelectionCandidate, second: Option<u32>) -> bool {
    let older = policy == ROUTING_POLICY_V1 || policy == ROUTING_POLICY_V2;
    clears_bar(top.score, second) && (older || top.matched.len() >= MIN_MATCHED_TERMS)
}

const DIRECTIVE_VERBS: [&str; 6] = ["use", "apply", "load", "follow", "invoke", "using"];
const NEGATIONS: [&str; 12] =
    ["not", "no", "never", "don't", "dont", "without", "avoid", "instead", "nor", "nobody", "none", "noone"];
const QUESTION_WORDS: [&str; 19] = [
    "should", "can", "could", "would", "will", "do", "does", "did", "is", "are", "shall", "may", "why",
    "what", "which", "how", "who", "whom", "whose",
];
const ARTICLES: [&str; 6] = ["the", "a", "an", "our", "your", "this"];

/// The routable ids the query cites as a directive ("use the X skill", "apply skill:X"),
/// sorted, unique. A bare mention, a question, a negated or a quoted mention is not a
/// directive.
pub fn directives(query: &str, sources: &[&RegistrySource]) -> Vec<String> {
    citations(query, sources).directed
}

/// Whether a word among the (up to three) words before a citation negates it.
fn negated(before: &[&str]) -> bool {
    let joined = before.join(" ");
    // (Routing/10: and as respelled — `h0ld off`, `av0id`, `do|not`.)
    negated_in(&joined)
        || respelled_words(&joined).iter().any(|spelled| *spelled != joined && negated_in(spelled))
}

/// [`negated`] over the words before a citation, joined by spaces.
fn negated_in(before: &str) -> bool {
    // Phrases whose negation affirms ("Don't forget to use …", "No matter what, use …":
    // routing/7, outside review 183 F6) are read as blanks.
    let mut joined = format!(" {before} ");
    for phrase in AFFIRMING {
        joined = joined.replace(&format!(" {phrase} "), " ");
    }
    let words: Vec<&str> = joined.split_whitespace().collect();
    let joined = words.join(" ");
    retraction_in(&joined, &|w: &str| w.to_owned(), &RETRACTIONS, false).is_some()
        || retraction_in(&joined, &|w: &str| w.to_owned(), &REFUSING_PHRASES, false).is_some()
        || words.iter().any(|b| {
            let b = &b.trim_end_matches(':');
            NEGATIONS.contains(b)
                || NEGATIONS_UNMARKED.contains(b)
                || REFUSALS.contains(b)
                || TAKE_BACK.contains(b)
                || REFUSALS_BEFORE.contains(b)
                || REPORTED.contains(b)
                || FORBIDDING.contains(b)
                || b.ends_with("n't")
        })
}

/// `text` with each `phrase` that stands between word boundaries made blanks.
fn blank_phrase(text: &str, phrase: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut previous: Option<char> = None;
    while let Some(at) = rest.find(phrase) {
        let before = rest.get(..at).unwrap_or_default();
        let prior = before.chars().next_back().or(previous);
        let after = rest.get(at + phrase.len()..).unwrap_or_default();
        let bounded = prior.is_none_or(|c| !c.is_alphanumeric())
            && after.chars().next().is_none_or(|c| !c.is_alphanumeric());
        out.push_str(before);
        if bounded {
            out.extend(phrase.chars().map(|_| ' '));
        } else {
            out.push_str(phrase);
        }
        previous = phrase.chars().next_back();
        rest = after;
    }
    out.push_str(rest);
    out
}

/// Phrases with a negation that ask for what follows (routing/7, outside review 183 F6).
const AFFIRMING: [&str; 9] = [
    "don't forget to",
    "do not forget to",
    "dont forget to",
    "no matter what",
    "no matter",
    "no rush but",
    "no rush",
    "no worries",
    "never skip this",
];

/// Words that forbid what follows them in a sentence ("It is forbidden to use …", "Please
/// refrain from using …": outside review 64).
const FORBIDDING: [&str; 6] = ["refrain", "forbidden", "forbid", "prohibited", "prohibit", "mustn't"];

/// How a query cites sources ([`citations`]), each list sorted, unique.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Citations {
    /// As directives ([`directives`]: a directive verb before the skill).
    pub directed: Vec<String>,
    /// By name anywhere (`mentions`: named as a skill, or as a compound name; quoted,
    /// negated or in a question too).
    pub mentioned: Vec<String>,
}

/// Quotation marks that open a quote, each with the marks that close it (routing/7 adds
/// all but `"`, `` ` `` and `“`; outside review 175 F1).
const QUOTES: [(char, &[char]); 17] = [
    ('"', &['"']),
    ('`', &['`']),
    ('\u{201c}', &['\u{201d}']),
    ('\u{ab}', &['\u{bb}']),
    ('\u{201e}', &['\u{201c}', '\u{201d}']),
    ('\u{2039}', &['\u{203a}']),
    ('\u{300c}', &['\u{300d}']),
    ('\u{300e}', &['\u{300f}']),
    ('\u{ff02}', &['\u{ff02}']),
    ('\u{201a}', &['\u{2018}', '\u{2019}']),
    // Outside review 178 F2: `»…«`, `《…》`, `〝…〟`, `〈…〉`.
    ('\u{bb}', &['\u{ab}']),
    ('\u{300a}', &['\u{300b}']),
    ('\u{301d}', &['\u{301e}', '\u{301f}']),
    ('\u{3008}', &['\u{3009}']),
    // Outside review 230 F10: `‟…”`, the Hebrew gershayim `״…״`, the ditto mark `〃…〃`.
    ('\u{201f}', &['\u{201d}', '\u{201c}']),
    ('\u{5f4}', &['\u{5f4}']),
    ('\u{3003}', &['\u{3003}']),
];

/// `text` with every span from `open` to `close` (both included) made blanks, one per
/// character; a span left open runs to the end.
fn blank_spans(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(open) {
        out.push_str(rest.get(..at).unwrap_or_default());
        let inner = rest.get(at + open.len()..).unwrap_or_default();
        let end = inner.find(close).map_or(inner.len(), |e| e + close.len());
        let span = rest.get(at..at + open.len() + end).unwrap_or_default();
        out.extend(span.chars().map(|_| ' '));
        rest = inner.get(end..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// `text` with what each closed pair of backticks holds made blanks (the backticks kept); a
/// backtick left open is left to the quote reading.
fn blank_code_spans(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('`') {
        let inner = rest.get(at + 1..).unwrap_or_default();
        let Some(end) = inner.find('`') else { break };
        out.push_str(rest.get(..=at).unwrap_or_default());
        out.extend(inner.get(..end).unwrap_or_default().chars().map(|_| ' '));
        out.push('`');
        rest = inner.get(end + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// `text` with each line indented by four blanks or a tab (a Markdown code block), or
/// quoted by a leading `>` (a blockquote: outside review 182 F5), made blanks.
fn blank_indented_code(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            if line.starts_with("    ") || line.starts_with('\t') || line.trim_start().starts_with('>') {
                line.chars().map(|c| if c == '\n' { c } else { ' ' }).collect()
            } else {
                line.to_owned()
            }
        })
        .collect()
}

/// Words that report what someone else said (routing/7: "Bob said to use the X skill, but I
/// disagree" — outside review 175 F1), before a directive's verb in its sentence, a colon
/// after them too ("Bob said: use …": outside review 178 F2): the directive is not the
/// user's. After the verb they are the task's words ("the PR that Bob wrote").
const REPORTED: [&str; 30] = [
    "said",
    "says",
    "told",
    "tells",
    "claimed",
    "claims",
    "suggested",
    "suggests",
    "wrote",
    "writes",
    "recommended",
    "recommends",
    "advised",
    "advises",
    "according",
    "quoted",
    "quoting",
    // Outside review 180 F5.
    "asked",
    "wants",
    "wanted",
    "mentioned",
    "proposed",
    "per",
    "reads",
    "states",
    "stated",
    "replied",
    "insists",
    "insisted",
    // Outside review 183 F5 ("example", "comment", "added" were ordinary words too often:
    // 184 F5).
    "wonder",
];

/// The ids of `sources` the query cites ([`Citations`]).
pub fn citations(query: &str, sources: &[&RegistrySource]) -> Citations {
    use unicode_normalization::UnicodeNormalization;
    // Routing/9: a word mixing scripts as the letters it shows (outside review 226 F2).
    let query = &unmixed(query);
    // NFKC first: an NFD accent is one letter, as a reader sees it (outside review 87: an
    // NFD `café` was not read as citing `café`).
    // (Apostrophe look-alikes first: NFKC spells `´` as a space and a combining accent.)
    // (A backtick stays one: it quotes code — routing/7; read as an apostrophe, `…` and a
    // fenced block were never blanked: outside review 175 F1.)
    let apostrophe = |c: char| c != '`' && APOSTROPHES.contains(&c);
    let composed: String = query.replace(apostrophe, "'").nfkc().collect();
    let lower = composed.to_lowercase().replace(apostrophe, "'");
    // Quoted text ("...", `...`, “...”, «...», „...“, 「...」, ...), struck-out text (`~~...~~`)
    // and an HTML comment are not an instruction: blank them out (routing/7, outside review
    // 175 F1: a directive quoted so, struck out, commented out or pasted in a fenced block
    // loaded the skill). A quote or span left open blanks the rest.
    // Code first — in a code span or an indented code block markup is inert (outside review
    // 178 F3: `x ~~ y` blanked the rest of the query; F2: an indented block was read).
    let code_blanked = blank_indented_code(&blank_code_spans(&lower));
    let lower_spans = blank_spans(&blank_spans(&code_blanked, "<!--", "-->"), "~~", "~~");
    let mut unquoted = String::with_capacity(lower.len());
    let mut open: Option<&[char]> = None;
    for c in lower_spans.chars() {
        match open {
            None => match QUOTES.iter().find(|(o, _)| *o == c) {
                Some((_, closers)) => {
                    open = Some(closers);
                    unquoted.push(' ');
                }
                None => unquoted.push(c),
            },
            Some(closers) => {
                if closers.contains(&c) {
                    open = None;
                }
                unquoted.push(' ');
            }
        }
    }
    // A directory or name as a query's citations read it (`cited_forms`: any case, NFKC,
    // look-alike letters, and a hyphen, an underscore, a space or any dash alike — outside
    // review 87: `code_review` for `code-review` was not read as one citation; outside
    // review 197 F4: `python—patterns` with an em dash, or an en dash, was cited but no
    // directive). The scan refuses two skills sharing a form, so a form names one skill.
    let resolve = |word: &str| -> Option<String> {
        let forms = cited_forms(word.strip_prefix("skill:").unwrap_or(word));
        sources
            .iter()
            .find(|s| {
                let dir = s.id.strip_prefix("skill:").unwrap_or(&s.id);
                [dir, s.name.as_str()].iter().any(|n| cited_forms(n).iter().any(|f| forms.contains(f)))
            })
            .map(|s| s.id.clone())
    };
    let mut cited = BTreeSet::new();
    let mut sentence = String::new();
    // A single line break is white space inside a sentence (a hard-wrapped prompt: outside
    // review 65, "I do not want you to\nuse the X skill" was a directive); a blank line
    // ends one.
    let mut previous = ' ';
    let chars: Vec<char> = unquoted.chars().chain("\n\n".chars()).collect();
    for (k, &read) in chars.iter().enumerate() {
        let line_break = read == '\n';
        let mut c = if line_break && previous != '\n' { ' ' } else { read };
        previous = if line_break { '\n' } else { c };
        // A `.` ends a sentence only before white space, and not in a run of dots: `3.2`,
        // `docs/a.md`, "not... use" are inside one (outside review 66).
        let dotted = |at: Option<usize>| at.and_then(|a| chars.get(a)) == Some(&'.');
        if c == '.' && (chars.get(k + 1).is_some_and(|n| !n.is_whitespace()) || dotted(k.checked_sub(1))) {
            c = ' ';
        }
        if matches!(c, '.' | '!' | '?' | ';' | '\n') {
            let question = c == '?';
            let words: Vec<&str> = sentence
                .split_whitespace()
                .map(|w| {
                    w.trim_matches(|c: char| !(c.is_alphanumeric() || matches!(c, ':' | '-' | '_' | '\'')))
                })
                .filter(|w| !w.is_empty())
                .collect();
            let asks = question || words.first().is_some_and(|w| QUESTION_WORDS.contains(w));
            // Routing/4 reads a refusal anywhere in the directive's sentence, after the verb
            // too ("Using the X skill is forbidden": outside review 66).
            // Routing/7: only a take-back or a prohibition anywhere in the sentence stops the
            // directive here ("Use the X skill, just kidding", "Using the X skill is
            // forbidden"); another refusal after the verb leaves it pending (`mentioned`, by
            // the query's refusal) instead of a completed `none` (outside review 182 F4:
            // "review the no-op handler", "confirm the fix doesn't break the build" recorded
            // nothing chosen); one before the verb still stops it.
            if !asks && !takes_back(&sentence) {
                for (i, w) in words.iter().enumerate() {
                    if !DIRECTIVE_VERBS.contains(w) {
                        continue;
                    }
                    // Any negation earlier in the sentence (outside review 64: "I do not want
                    // you to use the X skill" was a directive; routing/1–3 read three words).
                    // (The verb too: routing/7's phrases end in it, "keep from using".)
                    if negated(words.get(..=i).unwrap_or_default()) {
                        continue;
                    }
                    let mut j = i + 1;
                    // "Use only the X skill" (routing/7, outside review 180 F6).
                    if words.get(j) == Some(&"only") {
                        j += 1;
                    }
                    if words.get(j).is_some_and(|a| ARTICLES.contains(a)) {
                        j += 1;
                    }
                    let Some(target) = words.get(j) else { continue };
                    // `skill` may end the sentence's lead-in: "Use the X skill: check nulls"
                    // (outside review 120 F2).
                    let skill_word = |k: &&str| k.trim_end_matches(':') == "skill";
                    let directive = target.starts_with("skill:") || words.get(j + 1).is_some_and(skill_word);
                    let id = if directive { resolve(target) } else { None };
                    // A name of several words (`name: Diff Reviewer`): those words, then
                    // `skill` (outside review 63: only a one-word name was read).
                    let id = id.or_else(|| {
                        sources.iter().find_map(|s| {
                            let name: Vec<String> = s
                                .name
                                .to_lowercase()
                                .split(|c: char| c.is_whitespace() || matches!(c, '-' | '_'))
                                .filter(|w| !w.is_empty())
                                .map(str::to_owned)
                                .collect();
                            let n = name.len();
                            (n > 1
                                && words
                                    .get(j..j + n)
                                    .is_some_and(|ws| ws.iter().zip(&name).all(|(a, b)| a == b))
                                && words.get(j + n).is_some_and(skill_word))
                            .then(|| s.id.clone())
                        })
                    });
                    if let Some(id) = id {
                        cited.insert(id);
                    }
                }
            }
            sentence.clear();
            // Keep the colon of `skill:x` (only sentence terminators split).
        } else {
            sentence.push(c);
        }
    }
    Citations { directed: cited.into_iter().collect(), mentioned: mentions(query, sources) }
}

/// The words of `t` as a query's citations read them (lower case, NFKC and the confusable
/// skeleton: `goal::reading`), each with whether one hyphen or underscore — nothing else —
/// joins it to the word before (`code-review`, not `the _code`). An invisible character
/// joins too: a soft hyphen or zero-width space inside a name must not hide it (outside
/// review 59).
fn words(t: &str) -> Vec<(String, bool)> {
    words_of(t, true)
}

/// U+30FC, what the confusable skeleton makes of a dash drawn as a long line.
const PROLONGED_SOUND_MARK: char = '\u{30FC}';

/// [`words`], the text lower-cased before its skeleton (`fold_first`) or only after (a
/// capital whose small letter has no look-alike: Cherokee `Ꭰ` reads as `D`, its small
/// `ꭰ` as itself).
fn words_of(t: &str, fold_first: bool) -> Vec<(String, bool)> {
    use unicode_normalization::UnicodeNormalization;
    // (Not folded first: the skeleton before NFKC too — NFKC spells a Greek lunate `ϲ` as
    // `ς` and a long `ſ` as `s`, losing their look-alikes `c` and `f`: outside review 141.)
    let folded = if fold_first { t.to_lowercase() } else { unicode_security::skeleton(t).collect() };
    let marked: String = folded.chars().map(|c| if super::invisible(c) { '-' } else { c }).collect();
    // Lower case again after the skeleton, and without combining marks (outside review 139
    // F5: `I0-utils` read as `IO-utils`, which lower case made `io-utils`; Cherokee `Ꭰeploy`
    // as `Deploy`; `İdp` kept a dot).
    let seen: String = super::goal::reading(&marked)
        .nfd()
        .filter(|c| !unicode_normalization::char::is_combining_mark(*c))
        .flat_map(char::to_lowercase)
        .collect();
    let mut out: Vec<(String, bool)> = Vec::new();
    let (mut word, mut joined, mut run, mut joiner) = (String::new(), false, 0usize, false);
    for c in seen.chars() {
        // (The skeleton spells an em dash, a horizontal bar, a box-drawing line and the
        // CJK `一` as the prolonged sound mark `ー`, which is a letter: read as the dash it
        // looks like — outside review 195 F3: `python—patterns` was a name of its own beside
        // `python-patterns`, and a query citing one selected the other.)
        if c.is_alphanumeric() && c != PROLONGED_SOUND_MARK {
            if word.is_empty() {
                joined = run == 1 && joiner && !out.is_empty();
                run = 0;
            }
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push((std::mem::take(&mut word), joined));
        }
        run += 1;
        joiner = matches!(c, '-' | '_' | '\u{2010}'..='\u{2015}' | '\u{2212}' | PROLONGED_SOUND_MARK);
    }
    if !word.is_empty() {
        out.push((word, joined));
    }
    out
}

/// A skill name as a query's citations read it: its words (`words`) joined by `-`, so
/// two names with one form are one citation (`code-review`, `Code_Review`, `cоde‑review`
/// with a Cyrillic `о` and a non-breaking hyphen, `ﬁle-ops` beside `file-ops`). A name with
/// no letter or digit is its own form.
pub fn cited_form(name: &str) -> String {
    let form: Vec<String> = words(name).into_iter().map(|(w, _)| w).collect();
    if form.is_empty() { name.to_owned() } else { form.join("-") }
}

/// [`cited_form`], and the form read with its capitals' look-alikes before lower case: two
/// names sharing either are one citation to a reader (outside review 139 F5).
pub fn cited_forms(name: &str) -> [String; 2] {
    let second: Vec<String> = words_of(name, false).into_iter().map(|(w, _)| w).collect();
    [cited_form(name), if second.is_empty() { name.to_owned() } else { second.join("-") }]
}

/// The routable ids the query names as skills anywhere — quoted, negated, in a question
/// or not, read as a reader sees them (NFKC and confusable skeleton: `goal::reading`; any
/// case; hyphens, underscores and spaces alike): a source's directory or name next to the
/// word `skill`/`skills` (`X skill`, `X's skill`, `skill X`, `skill: X`, `skill named X`),
/// or a compound name (`code-review`) written as one anywhere. A match is a whole word or
/// compound: `review` is not named inside `code-review`. Reading on the safe side (outside
/// reviews 57 and 58: "and don't forget the Y skill", `the 'Y' skill`, `the skill Y`,
/// "… plus code-review", a Cyrillic letter or fullwidth form were not read as citing Y,
/// so a directive beside them selected alone).
fn mentions(query: &str, sources: &[&RegistrySource]) -> Vec<String> {
    let query = words(query);
    // The marker words read the same way as the query (a skeleton may respell them).
    let read = |t: &str| words(t).into_iter().map(|(w, _)| w).collect::<Vec<_>>();
    let (skill, naming, s_word) = (read("skill skills"), read("named called"), read("s"));
    let at = |i: Option<usize>, of: &[String]| {
        i.and_then(|i| query.get(i)).is_some_and(|(w, _)| of.iter().any(|o| o == w))
    };
    // Each citation's span of words; one inside another's longer span (`Diff Reviewer` in
    // `Diff Reviewer Pro`) is that other's, not a second citation.
    let mut spans: Vec<(usize, usize, &str)> = Vec::new();
    for s in sources {
        let forms = [words(s.id.strip_prefix("skill:").unwrap_or(&s.id)), words(&s.name)];
        for form in forms.iter().filter(|f| !f.is_empty()) {
            for i in 0..query.len() {
                let j = i + form.len();
                let Some(found) = query.get(i..j) else { break };
                // A whole word or compound — though `X-skill` is `X skill`.
                if !found.iter().zip(form).all(|((a, _), (b, _))| a == b)
                    || found.first().is_some_and(|(_, joined)| *joined)
                    || query.get(j).is_some_and(|(w, joined)| *joined && !skill.contains(w))
                {
                    continue;
                }
                // A name or directory of several words counts wherever it is written, joined
                // or spaced (outside review 64: "… and the Diff Reviewer", "plus docker
                // compose" were missed).
                let compound = form.len() > 1;
                let before = |k: usize| i.checked_sub(k);
                if compound
                    || at(Some(j), &skill)
                    || (at(Some(j), &s_word) && at(Some(j + 1), &skill))
                    || at(before(1), &skill)
                    || (at(before(1), &naming) && at(before(2), &skill))
                {
                    spans.push((i, j, s.id.as_str()));
                }
            }
        }
    }
    let inside = |&(i, j, _): &(usize, usize, &str)| {
        spans.iter().any(|&(a, b, _)| a <= i && j <= b && (a, b) != (i, j))
    };
    let named: BTreeSet<String> =
        spans.iter().filter(|span| !inside(span)).map(|&(_, _, id)| id.to_owned()).collect();
    named.into_iter().collect()
}

// ---------------------------------------------------------------------------------------
// The decision

/// What the lexical step decided (Auto and Suggest only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lexical {
    /// The chosen root (a `directive` or `ranked` decision), or none.
    pub root: Option<String>,
    pub pending: bool,
    pub reason: &'static str,
    pub candidates: Vec<SelectionCandidate>,
}

/// The lexical step over the query (live): directives first, then the ranked match.
pub fn lexical(query: Option<&str>, routable: &[&RegistrySource]) -> Lexical {
    lexical_as(ROUTING_POLICY, query, routable)
}

/// [`lexical`] under routing policy `policy` (its bar: [`clears_bar_as`]).
pub fn lexical_as(policy: &str, query: Option<&str>, routable: &[&RegistrySource]) -> Lexical {
    lexical_over(policy, query, routable, &[], &[])
}

/// [`lexical_as`], knowing `unrouted`: the registry's sources the plan neither routes nor
/// installs (manual-only, excluded, never selectable). Under routing/4 a skill the query
/// cites among them is a named skill ranking cannot choose, so the choice is left open
/// rather than ranked or directed elsewhere (outside review 106: "use the dba-manual
/// skill …", manual-only, was recorded as a `ranked` choice of another skill).
///
/// `installed`: the sources the plan installs (its base). Routing/7 reads a directive at
/// one as at an unrouted skill — the install satisfies it, and ranking must not add another
/// skill beside it (outside reviews 175 F6, 178 F8: "Use the python-patterns skill to
/// review code changes", python-patterns in the base, loaded code-review); a base skill only
/// named changes nothing.
pub fn lexical_over(
    policy: &str,
    query: Option<&str>,
    routable: &[&RegistrySource],
    unrouted: &[&RegistrySource],
    installed: &[&RegistrySource],
) -> Lexical {
    let lexical = lexical_read(policy, query, routable, unrouted, installed);
    // Routing/9: a query whose words disguise letters (a word mixing scripts, a look-alike or
    // a combining mark beside ASCII letters) chooses nothing by itself — its reading may not
    // be its reader's: the choice is left pending over what it would have chosen (outside
    // review 230: each respelling rule closed one disguise and left the next — `saꓲd`, where
    // `ꓲ` may be read as `I` or as `l`).
    if from_v9(policy) && lexical.root.is_some() && query.is_some_and(disguised) {
        return Lexical {
            root: None,
            pending: true,
            reason: REASON_DISGUISED,
            candidates: lexical.candidates,
        };
    }
    lexical
}

/// Whether `query` disguises letters (routing/9): a word that mixes scripts holds a letter
/// of another script that looks like an ASCII one (`Νever`, `saꓲd`, `kubernеtes`), or a word
/// beside ASCII letters holds one of the Latin letters no alphabet uses in ordinary text and
/// the confusable tables do not respell — small capitals (`ʟAST`, `jᴋ`), `ĸ`, the click
/// letters, `ſ`, `ɑ`, `ɡ` (outside review 230 F4). Letters of national alphabets (Turkish `ı`,
/// Romanian `ș`, Vietnamese `ư`, Azerbaijani `ə`, Akan `ɛ` `ɔ`, Hausa `ƙ`) and combining
/// marks are no disguise (outside review 231 F1: they left ordinary queries pending).
fn disguised(query: &str) -> bool {
    use unicode_security::MixedScript;
    let odd = |c: char| {
        matches!(c, '\u{138}' | '\u{17F}' | '\u{1A6}' | '\u{1C0}'..='\u{1C3}' | '\u{251}' | '\u{261}'
            | '\u{26A}' | '\u{274}' | '\u{280}' | '\u{28F}' | '\u{299}' | '\u{29C}' | '\u{29F}'
            | '\u{1D00}'..='\u{1D2B}')
    };
    query.split(|c: char| !(c.is_alphanumeric() || c == '\'' || APOSTROPHES.contains(&c))).any(|w| {
        let looks_ascii = |c: char| !c.is_ascii() && ascii_look_alike(c, false).is_some();
        (!w.is_single_script() && w.chars().any(looks_ascii))
            || (w.chars().any(|c| c.is_ascii_alphabetic()) && w.chars().any(odd))
    })
}

/// [`lexical_over`] before its routing/9 check of a disguised query.
fn lexical_read(
    policy: &str,
    query: Option<&str>,
    routable: &[&RegistrySource],
    unrouted: &[&RegistrySource],
    installed: &[&RegistrySource],
) -> Lexical {
    let none = |reason| Lexical { root: None, pending: false, reason, candidates: Vec::new() };
    let Some(query) = query.filter(|q| !tokens_as(policy, q).is_empty() || q.contains("skill:")) else {
        return none(REASON_NO_QUERY);
    };
    let v5 = from_v5(policy);
    let v4 = from_v4(policy);
    let several = if v5 { REASON_SEVERAL_CITED } else { REASON_SEVERAL_DIRECTIVES };
    let ranked = rank_as(policy, query, routable);
    let Citations { directed, mentioned } = citations(query, routable);
    // The skills the query names that the profile does not route, and those of them it
    // directs to (routing/4 left such a directive pending as one more named skill).
    let (mut unroutable, mut unrouted_directed): (Vec<String>, Vec<String>) = if v4 && !unrouted.is_empty() {
        let c = citations(query, unrouted);
        let directed = if v5 { c.directed.clone() } else { Vec::new() };
        (c.directed.into_iter().chain(c.mentioned).collect(), directed)
    } else {
        (Vec::new(), Vec::new())
    };
    let mut installed_directed = Vec::new();
    if from_v7(policy) && !installed.is_empty() {
        installed_directed = citations(query, installed).directed;
        unroutable.extend(installed_directed.iter().cloned());
        unrouted_directed.extend(installed_directed.iter().cloned());
    }
    // Why nothing is chosen when every skill cited is one ranking cannot choose.
    let not_routed = |ids: &[String]| {
        if !ids.is_empty() && ids.iter().all(|id| installed_directed.contains(id)) {
            REASON_CITED_INSTALLED
        } else {
            REASON_CITED_UNROUTED
        }
    };
    let named: Vec<String> =
        mentioned.iter().chain(&unroutable).cloned().collect::<BTreeSet<_>>().into_iter().collect();
    // Routing/4: a directive decides only when it is the one skill the query cites; any
    // other skill cited beside it ("and the Y skill", "skill:Y") leaves the choice open.
    // Routing/5 reads a directive at an unrouted skill the same way.
    let decisive: Vec<String> = directed.iter().chain(&unrouted_directed).cloned().collect();
    let cited: Vec<String> = if v4 && !decisive.is_empty() {
        decisive.iter().chain(named.iter()).cloned().collect::<BTreeSet<_>>().into_iter().collect()
    } else {
        decisive.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect()
    };
    let scored = |id: &str| {
        ranked
            .iter()
            .find(|c| c.id == id)
            .cloned()
            .or_else(|| routable.iter().find(|s| s.id == id).map(|s| candidate(s, 0, Vec::new())))
    };
    // Pending over the skills the query named, then the ranked rest (≤ MAX_SHORTLIST);
    // routing/5: nothing to choose from is no choice, not a proposal over nothing.
    let named_first = |ids: &[String], reason: &'static str| {
        let mut shortlist: Vec<SelectionCandidate> = ids.iter().filter_map(|id| scored(id)).collect();
        shortlist.extend(ranked.iter().filter(|c| !ids.contains(&c.id)).cloned());
        shortlist.truncate(MAX_SHORTLIST);
        if v5 && shortlist.is_empty() {
            return none(not_routed(ids));
        }
        Lexical { root: None, pending: true, reason, candidates: shortlist }
    };
    match cited.as_slice() {
        // Routing/5: the one skill directed to is one the profile does not route.
        [one] if unroutable.contains(one) => return none(not_routed(std::slice::from_ref(one))),
        // Routing/5: a directive in a query that refuses something in another sentence
        // ("Use the X skill. Actually, don't.": outside review 120 F1; but also "Use the X
        // skill. Don't push to main.") does not decide alone: the choice is left open, the
        // directed skill first (its own sentence's refusal already stopped it).
        [_] if v5 && negates(query) => return named_first(&cited, REASON_MENTIONED),
        [one] => {
            return Lexical {
                root: Some(one.clone()),
                pending: false,
                reason: REASON_DIRECTIVE,
                candidates: scored(one).into_iter().collect(),
            };
        }
        [] => {}
        // Routing/4: several cited in a query that also refuses something — which one it
        // refuses cannot be told, so nothing is decided, and no proposal can pick the
        // refused one (outside review 65: "don't use the X skill; use the Y skill" with
        // `proposedIds: [X]` selected X).
        _ if v4 && negates(query) => return none(REASON_NEGATED),
        many => return named_first(many, several),
    }
    // Routing/3: a query that says not to do something decides nothing by ranking (it
    // cannot tell what is negated); a directive above reads the negation itself.
    if (v4 || policy == ROUTING_POLICY_V3) && negates(query) {
        // Routing/6: a query that names no skill — free text saying what does not work —
        // is pending over ranking's shortlist, for a bounded proposal to choose. One that
        // names a skill may be refusing it ("use the X skill, just kidding": outside
        // reviews 53, 64, 120): nothing is chosen, as before.
        if from_v6(policy) && named.is_empty() && !ranked.is_empty() {
            return Lexical {
                root: None,
                pending: true,
                reason: REASON_NEGATED,
                candidates: ranked.into_iter().take(MAX_SHORTLIST).collect(),
            };
        }
        return none(REASON_NEGATED);
    }
    let top = ranked.first().filter(|t| clears_bar_as(policy, t, ranked.get(1).map(|c| c.score)));
    let ranking_agrees = named.len() == 1 && top.is_some_and(|t| named.contains(&t.id));
    // Routing/5: a skill only named — not directed to ("my writing skills", "the X skill
    // is unnecessary", "with the X skill disabled", "delete skill:X": outside reviews 115,
    // 117) — decides nothing, even where ranking would choose it (its words may reject it);
    // the choice is left open, the named first.
    if v5 && !named.is_empty() {
        return named_first(&named, if named.len() == 1 { REASON_MENTIONED } else { several });
    }
    // Routing/4: with no directive, a query that names skills decides by ranking only when it
    // names exactly the one ranking chooses; two named, or one ranking would not choose,
    // leave the choice open, the named ones first (outside review 64: "… with the
    // security-review skill and the code-review skill" ranked one of them alone).
    if v4 && !named.is_empty() && !ranking_agrees {
        return named_first(&named, several);
    }
    match ranked.as_slice() {
        [] => none(REASON_NO_MATCH),
        [top, rest @ ..] if clears_bar_as(policy, top, rest.first().map(|c| c.score)) => Lexical {
            root: Some(top.id.clone()),
            pending: false,
            reason: REASON_RANKED,
            candidates: ranked.iter().take(2).cloned().collect(),
        },
        _ => Lexical {
            root: None,
            pending: true,
            reason: REASON_AMBIGUOUS,
            candidates: ranked.into_iter().take(MAX_SHORTLIST).collect(),
        },
    }
}

/// The recorded candidates as ranking made them (outside review 91: a shortlist's scores,
/// matched words and descriptions were not checked, so a pending decision could be
/// relabelled `ranked` by lowering its runner-up's score): each candidate's description is
/// its source's (cut to the bound), and its score and matched words are what ranking over
/// the recorded matched words gives it — exactly what ranking over the query gave it
/// ([`rank_terms`]); a candidate no such word matches is scored 0 with none. A `ranked` or
/// `ambiguous` outcome lists them in ranking order, and no source left out ranks ahead of
/// the last one listed over those words (nor at all while the list is not full). What only
/// the query could show — a word of it that no listed candidate matched — is not checked.
fn candidates_as_ranked(e: &SelectionRecorded, routable: &[&RegistrySource]) -> Result<(), RuleViolation> {
    let terms: BTreeSet<String> = e.candidates.iter().flat_map(|c| c.matched.iter().cloned()).collect();
    let ranked = rank_terms(&e.routing_policy, &terms, routable);
    for c in &e.candidates {
        let Some(source) = routable.iter().find(|s| s.id == c.id) else {
            return Err(violation(Rule::Selection, format!("candidate {} is not routable", c.id)));
        };
        let expected =
            ranked.iter().find(|r| r.id == c.id).cloned().unwrap_or_else(|| candidate(source, 0, Vec::new()));
        ensure!(
            *c == expected,
            Rule::Selection,
            "candidate {}: its recorded score, matched words or description are not what ranking over the \
             registry gives it (score {}, matched {:?})",
            c.id,
            expected.score,
            expected.matched
        );
    }
    let cap = match e.reason.as_str() {
        REASON_RANKED => 2,
        REASON_AMBIGUOUS => MAX_SHORTLIST,
        REASON_NEGATED if from_v6(&e.routing_policy) => MAX_SHORTLIST,
        _ => return Ok(()),
    };
    let ahead = |a: &SelectionCandidate, b: &SelectionCandidate| {
        b.score.cmp(&a.score).then_with(|| a.id.cmp(&b.id)) == std::cmp::Ordering::Less
    };
    ensure!(
        e.candidates.iter().zip(e.candidates.iter().skip(1)).all(|(a, b)| ahead(a, b)),
        Rule::Selection,
        "the recorded candidates are not in ranking order (score, then id)"
    );
    let full = e.candidates.len() >= cap;
    for r in ranked.iter().filter(|r| e.candidates.iter().all(|c| c.id != r.id)) {
        ensure!(
            full && e.candidates.last().is_some_and(|last| !ahead(r, last)),
            Rule::Selection,
            "source {} ranks {} over the recorded matched words and is missing from the candidates",
            r.id,
            r.score
        );
    }
    Ok(())
}

/// The lexical step as recorded (replay: the prose is not in the ledger), checked for
/// what can be checked without it.
fn lexical_recorded(
    e: &SelectionRecorded,
    plan: &Plan,
    sources: &[&RegistrySource],
    installs_manual_only: bool,
) -> Result<Lexical, RuleViolation> {
    let routable = |id: &str| plan.routed_ids.iter().any(|r| r == id);
    ensure!(
        e.candidates.len() <= MAX_SHORTLIST,
        Rule::Selection,
        "{} candidates, over {MAX_SHORTLIST}",
        e.candidates.len()
    );
    let mut seen = BTreeSet::new();
    for c in &e.candidates {
        ensure!(routable(&c.id), Rule::Selection, "candidate {} is not routable", c.id);
        ensure!(seen.insert(c.id.as_str()), Rule::Selection, "candidate {} twice", c.id);
        ensure!(
            c.description.chars().count() <= MAX_DESCRIPTION_CHARS,
            Rule::Selection,
            "candidate {} description over {MAX_DESCRIPTION_CHARS} characters",
            c.id
        );
    }
    candidates_as_ranked(e, sources)?;
    let v5 = from_v5(&e.routing_policy);
    let first = e.candidates.first().map(|c| c.id.clone());
    let lex = |root: Option<String>, pending, reason| Lexical {
        root,
        pending,
        reason,
        candidates: e.candidates.clone(),
    };
    Ok(match e.reason.as_str() {
        REASON_NO_QUERY => lex(None, false, REASON_NO_QUERY),
        REASON_NO_MATCH => lex(None, false, REASON_NO_MATCH),
        REASON_DIRECTIVE => {
            ensure!(e.candidates.len() == 1, Rule::Selection, "a directive names exactly one candidate");
            lex(first, false, REASON_DIRECTIVE)
        }
        REASON_RANKED => {
            ensure!(
                e.candidates.len() <= 2 && recorded_clears_bar(e),
                Rule::Selection,
                "a ranked choice records its match and runner-up, over the bar"
            );
            lex(first, false, REASON_RANKED)
        }
        REASON_SEVERAL_DIRECTIVES if !v5 => lex(None, true, REASON_SEVERAL_DIRECTIVES),
        REASON_SEVERAL_CITED if v5 => {
            ensure!(!e.candidates.is_empty(), Rule::Selection, "several cited skills leave a shortlist");
            lex(None, true, REASON_SEVERAL_CITED)
        }
        REASON_MENTIONED if v5 => {
            ensure!(!e.candidates.is_empty(), Rule::Selection, "a skill only named leaves a shortlist");
            lex(None, true, REASON_MENTIONED)
        }
        // Routing/7: a directive at an installed skill — the plan installs one.
        REASON_CITED_INSTALLED if from_v7(&e.routing_policy) => {
            ensure!(
                e.candidates.is_empty() && e.query_digest.is_some() && !plan.selected_ids.is_empty(),
                Rule::Selection,
                "a query citing only installed skills has a query, no candidates, and a plan that installs a source"
            );
            lex(None, false, REASON_CITED_INSTALLED)
        }
        REASON_CITED_UNROUTED if v5 => {
            // The plan must leave a source unrouted (manual-only, excluded, never
            // selectable) for a query to cite one (outside review 115: relabelled over a
            // plan that routes or installs every source).
            // Routing/8: or a manual-only source the plan installs (outside review 206 F2).
            let manual_installed = from_v8(&e.routing_policy) && installs_manual_only;
            ensure!(
                e.candidates.is_empty()
                    && e.query_digest.is_some()
                    && (!plan.excluded_ids.is_empty() || manual_installed),
                Rule::Selection,
                "a query citing only unrouted skills has a query, no candidates, and a plan that leaves a source unrouted"
            );
            lex(None, false, REASON_CITED_UNROUTED)
        }
        // Routing/2: agent-proposed ids after a lexical step that decided nothing; its
        // shortlist (if any) is recorded as the candidates.
        REASON_AGENT_PROPOSAL if e.routing_policy != ROUTING_POLICY_V1 => {
            if e.candidates.is_empty() {
                lex(None, false, REASON_NO_MATCH)
            } else {
                ensure!(
                    e.query_digest.is_some() && !recorded_clears_bar(e),
                    Rule::Selection,
                    "an agent proposal's recorded shortlist is an ambiguous query's: a query, its top under the bar"
                );
                lex(None, true, REASON_AMBIGUOUS)
            }
        }
        REASON_DISGUISED if from_v9(&e.routing_policy) => {
            ensure!(!e.candidates.is_empty(), Rule::Selection, "a disguised query leaves a shortlist");
            lex(None, true, REASON_DISGUISED)
        }
        REASON_AMBIGUOUS => {
            ensure!(
                !e.candidates.is_empty() && !recorded_clears_bar(e),
                Rule::Selection,
                "an ambiguous shortlist is non-empty and its top does not clear the bar"
            );
            lex(None, true, REASON_AMBIGUOUS)
        }
        // Routing/6: pending over a ranked shortlist (none when nothing ranks).
        REASON_NEGATED if from_v6(&e.routing_policy) && !e.candidates.is_empty() => {
            ensure!(e.query_digest.is_some(), Rule::Selection, "a negated query's shortlist has a query");
            lex(None, true, REASON_NEGATED)
        }
        REASON_NEGATED if from_v4(&e.routing_policy) || e.routing_policy == ROUTING_POLICY_V3 => {
            ensure!(
                e.candidates.is_empty() && e.query_digest.is_some(),
                Rule::Selection,
                "a negated query's outcome has a query and no candidates"
            );
            lex(None, false, REASON_NEGATED)
        }
        other => {
            return Err(violation(Rule::Selection, format!("reason {other:?} is not a lexical outcome")));
        }
    })
}

#[derive(Serialize)]
struct Trigger<'a> {
    id: &'a str,
    name: &'a str,
    description: &'a str,
}

/// `Digest::of(SelectionTriggers, [{id, name, description}])` of the routable sources.
pub fn trigger_digest(routable: &[&RegistrySource]) -> Digest {
    let t: Vec<Trigger<'_>> =
        routable.iter().map(|s| Trigger { id: &s.id, name: &s.name, description: &s.description }).collect();
    codec::record_digest(DigestKind::SelectionTriggers, &t).0
}

/// The bounds every task obeys (the parser enforces them first; `apply` again).
pub fn check_task(task: &Task) -> Result<(), SelectionError> {
    let bad = |m: &str| Err(SelectionError::Task(m.to_owned()));
    // An id shows as itself: no control, invisible, bidi embedding or override, or line or
    // paragraph separator character (outside review 79: a U+202E in a sessionId reordered
    // what `show` printed of it).
    // Nor a private-use character (it shows as anything a font likes) or a space that is not
    // ASCII's (a no-break space reads as one): outside review 80.
    let hidden = |c: char| {
        c.is_control()
            || super::invisible(c)
            || ('\u{2028}'..='\u{202E}').contains(&c)
            || (c.is_whitespace() && c != ' ')
            || ('\u{E000}'..='\u{F8FF}').contains(&c)
            || c >= '\u{F0000}'
    };
    // Nor blank, or with a space at either end: "s" and "s " show alike (outside review 129
    // F6: a sessionId of two spaces was accepted).
    let id_ok =
        |v: &str, max: usize| !v.is_empty() && v.len() <= max && !v.chars().any(hidden) && v.trim() == v;
    if !id_ok(&task.session_id, MAX_TASK_ID_BYTES) {
        return bad(
            "sessionId must be 1 to 128 bytes, not blank, without a space at either end or control, invisible, bidi-control, private-use or non-ASCII space characters",
        );
    }
    if !id_ok(&task.task_id, MAX_TASK_ID_BYTES) {
        return bad(
            "taskId must be 1 to 128 bytes, not blank, without a space at either end or control, invisible, bidi-control, private-use or non-ASCII space characters",
        );
    }
    if !id_ok(&task.phase, MAX_PHASE_BYTES) || task.phase.chars().any(char::is_whitespace) {
        return bad(
            "phase must be 1 to 64 bytes without whitespace, control, invisible, bidi-control or private-use characters",
        );
    }
    if task.revision == 0 {
        return bad("revision must be an integer of at least 1");
    }
    if task.query.as_ref().is_some_and(|q| q.len() > MAX_QUERY_BYTES) {
        return bad("query is over 8192 bytes");
    }
    // A bidirectional override or isolate shows the query in another order than it is read
    // (outside review 230 F8: `\u{202E}gniddik tsuj\u{202C}` showed as "just kidding" and the skill
    // loaded).
    if task
        .query
        .as_ref()
        .is_some_and(|q| q.chars().any(|c| matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')))
    {
        return bad(
            "query holds a bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069): it would read in another order than it is",
        );
    }
    for (field, ids) in [("explicitIds", &task.explicit_ids), ("proposedIds", &task.proposed_ids)] {
        if ids.len() > MAX_TASK_IDS {
            return Err(SelectionError::Task(format!("{field} holds more than {MAX_TASK_IDS} ids")));
        }
        if ids.windows(2).any(|w| w.first() >= w.get(1)) {
            return Err(SelectionError::Task(format!("{field} holds an id twice")));
        }
    }
    if task.no_workflow && !(task.explicit_ids.is_empty() && task.proposed_ids.is_empty()) {
        return bad("noWorkflow cannot be given together with explicitIds or proposedIds");
    }
    Ok(())
}

/// The configured profile's plan over the current registry, that registry, the store
/// revision and the registry digest. After source drift the plan is re-derived over the
/// newest registry: when the configured generation is unchanged (the drift touched only
/// routed sources) routing uses the re-derived plan (so its digest, and every binding,
/// moves); when the generation would change, the configured generation is stale: refused.
fn configured(state: &State) -> Result<(Cow<'_, Plan>, &Registry, u32, Digest), SelectionError> {
    let cp = &state.context_profiles;
    let current = cp.current().ok_or(SelectionError::NotConfigured)?;
    let (registry, current_digest) = match (&cp.registry, cp.registry_digest) {
        (Some(r), Some(d)) => (r.as_ref(), d),
        _ => return Err(SelectionError::NotConfigured),
    };
    let plan = if current.registry_digest == current_digest {
        Cow::Borrowed(current.plan.as_ref())
    } else {
        let stale = SelectionError::StaleSource { current: current_digest };
        let plan = super::profile::plan_of(registry, current_digest, &current.selection)
            .map_err(|e| SelectionError::NoPlan { current: current_digest, why: e.to_string() })?;
        let (manifest, _) = super::profile::generation(registry, &plan).map_err(|_| stale.clone())?;
        if manifest.digest() != current.generation_digest {
            return Err(stale);
        }
        Cow::Owned(plan)
    };
    Ok((plan, registry, cp.revision(), current_digest))
}

/// The newest registry's digest when the configured generation is stale against it — what
/// every selection then refuses ([`SelectionError::StaleSource`]); `None` when selections
/// route (no drift, or drift in routed sources only) or nothing is configured.
/// Why the configured selection cannot route though its generation may be unchanged: the
/// drift left it no plan ([`SelectionError::NoPlan`]'s reason; outside review 251 F3: `status`
/// called that "the sources changed since" the generation, which had not changed).
pub fn no_plan(state: &State) -> Option<String> {
    match configured(state) {
        Err(SelectionError::NoPlan { why, .. }) => Some(why),
        _ => None,
    }
}

pub fn stale_generation(state: &State) -> Option<Digest> {
    match configured(state) {
        Err(SelectionError::StaleSource { current } | SelectionError::NoPlan { current, .. }) => {
            Some(current)
        }
        _ => None,
    }
}

/// An unknown id refused: shown (quoted) when it has a source id's form — `skill:` and a
/// name, one line, bounded — and otherwise only by its length: a task input's ids are the
/// caller's text, and may hold secrets (outside review 106: `explicitIds: ["… password is
/// …"]` was echoed on stderr).
fn unknown_id(id: &str) -> SelectionError {
    SelectionError::UnknownId(shown_id(id))
}

/// An id of a task input or a proposal as a refusal shows it: quoted when it has a source
/// id's form, otherwise only its length (outside reviews 106, 107: free text and a token
/// given as an id were echoed on stderr).
pub(crate) fn shown_id(id: &str) -> String {
    let shaped = id.len() > "skill:".len()
        && id.starts_with("skill:")
        && id.len() <= MAX_NAME_BYTES_SHOWN
        && !id.chars().any(|c| c.is_whitespace() || c.is_control());
    if shaped {
        format!("{id:?}")
    } else {
        format!("<an id of {} bytes, not shown: it has no source id's form, and may hold secrets>", id.len())
    }
}

/// The longest unknown id shown in a refusal.
const MAX_NAME_BYTES_SHOWN: usize = 128;

/// The sources task routing may choose: the plan's `routedIds`.
pub fn routable<'r>(plan: &Plan, registry: &'r Registry) -> Vec<&'r RegistrySource> {
    registry.sources.iter().filter(|s| plan.routed_ids.contains(&s.id)).collect()
}

fn by_id(registry: &Registry) -> BTreeMap<&str, &RegistrySource> {
    registry.sources.iter().map(|s| (s.id.as_str(), s)).collect()
}

/// The sorted dependency closure of `roots`, checked: excluded ids (roots and
/// dependencies), never-selectable ones, manual-only ones not explicit, at most eight.
pub fn closure(
    plan: &Plan,
    registry: &Registry,
    roots: &[String],
    explicit: &[String],
) -> Result<Vec<String>, SelectionError> {
    closure_over(
        &by_id(registry),
        &|id| plan.exclude.iter().any(|x| x == id),
        &|id| explicit.iter().any(|x| x == id),
        roots,
        MAX_CLOSURE,
    )
}

/// [`closure`]'s walk over `sources`: `excluded` ids refused, never-selectable ones
/// refused, manual-only ones refused unless `manual_ok`, more than `max` refused. A plan
/// routes only sources this admits, so a routed source's load is never refused for its
/// closure (`profile::plan`; outside reviews 79, 80).
pub(crate) fn closure_over(
    sources: &BTreeMap<&str, &RegistrySource>,
    excluded: &dyn Fn(&str) -> bool,
    manual_ok: &dyn Fn(&str) -> bool,
    roots: &[String],
    max: usize,
) -> Result<Vec<String>, SelectionError> {
    let mut out: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<(String, Option<String>)> = roots.iter().rev().map(|r| (r.clone(), None)).collect();
    // Past `max` the walk goes on only to count the whole closure, so the refusal names its
    // size (outside review 224 F2: it named the first size past the bound); it visits each
    // source of the registry at most once.
    let mut over = false;
    while let Some((id, of)) = stack.pop() {
        if out.contains(&id) {
            continue;
        }
        let source = match sources.get(id.as_str()) {
            Some(source) => source,
            None if over => continue,
            None => return Err(unknown_id(&id)),
        };
        if !over {
            if excluded(&id) {
                return Err(match of {
                    Some(of) => SelectionError::ExcludedDependency { id, of },
                    None => SelectionError::Excluded { id },
                });
            }
            if let Some(rule) = unselectable(source) {
                return Err(SelectionError::NotSelectable { id, rule });
            }
            if source.manual_only && !manual_ok(&id) {
                return Err(SelectionError::ManualOnly { id, of });
            }
        }
        for dep in source.dependencies.iter().rev() {
            stack.push((dep.clone(), Some(id.clone())));
        }
        out.insert(id);
        over |= out.len() > max;
    }
    if over {
        return Err(SelectionError::ClosureTooLarge(out.len()));
    }
    Ok(out.into_iter().collect())
}

/// What `--load` returns for `selected`: each source's `SKILL.md` and declared required
/// resources, deduplicated, sorted by (id, path), with their bytes from the ledger.
pub fn load<'r>(
    registry: &'r Registry,
    selected: &[String],
) -> Result<Vec<(LoadedResource, &'r [u8])>, SelectionError> {
    let sources = by_id(registry);
    let mut out = Vec::new();
    let mut total = 0u64;
    for id in selected {
        let source = sources.get(id.as_str()).ok_or_else(|| unknown_id(id))?;
        let mut paths: BTreeSet<&str> = source.required_resources.iter().map(String::as_str).collect();
        paths.insert("SKILL.md");
        for path in paths {
            let r = source
                .resources
                .iter()
                .find(|r| r.path == path)
                .ok_or_else(|| SelectionError::NotLoadable { id: id.clone(), path: path.to_owned() })?;
            let bytes = r
                .content
                .as_ref()
                .ok_or_else(|| SelectionError::NotLoadable { id: id.clone(), path: path.to_owned() })?;
            // Loaded as instructions: deliverable text (a binary file is copied into a
            // generation but never loaded). Here, so routing, a RESUME's check and `select`
            // share the one rule (outside review 86: a skill requiring a file that is not
            // UTF-8 was routed, and its load refused the whole `select`).
            deliverable_text(&bytes.0).map_err(|why| SelectionError::NotText {
                id: id.clone(),
                path: path.to_owned(),
                why,
            })?;
            total = total.saturating_add(r.bytes);
            out.push((
                LoadedResource { id: id.clone(), path: r.path.clone(), bytes: r.bytes, digest: r.digest },
                bytes.0.as_slice(),
            ));
        }
    }
    if total > MAX_LOAD_BYTES {
        return Err(SelectionError::OverBudget { bytes: total });
    }
    Ok(out)
}

/// The lexical step `decide` calls when routing reaches it.
pub type LexicalStep<'a> = dyn Fn(&Plan, &[&RegistrySource]) -> Result<Lexical, SelectionError> + 'a;

/// The event that records `task` and `request` over `state`: the whole routing
/// decision. `lexical` runs the lexical step when routing reaches it (live: over the query;
/// in `apply`: the recorded outcome, checked).
pub fn decide(
    state: &State,
    task: &Task,
    query_digest: Option<Digest>,
    request: &Request,
    policy: &'static str,
    lexical_step: &LexicalStep<'_>,
) -> Result<SelectionRecorded, SelectionError> {
    check_task(task)?;
    let (plan, registry, profile_revision, registry_digest) = configured(state)?;
    let plan: &Plan = &plan;
    let sources = by_id(registry);
    for id in task.explicit_ids.iter().chain(&task.proposed_ids) {
        if !sources.contains_key(id.as_str()) {
            return Err(unknown_id(id));
        }
    }
    let routable_sources = routable(plan, registry);
    let trigger = trigger_digest(&routable_sources);
    let binding_digest = SelectionBinding {
        phase: &task.phase,
        task_id: &task.task_id,
        session_id: &task.session_id,
        no_workflow: task.no_workflow,
        plan_digest: plan.digest(),
        query_digest,
        task_revision: task.revision,
        routing_policy: policy,
        trigger_digest: trigger,
    }
    .digest();
    let previous = match request.previous {
        Some(d) => Some(state.selections.by_receipt.get(&d).ok_or(SelectionError::PreviousUnknown)?),
        None => None,
    };
    let same_binding = previous.filter(|p| p.binding_digest == binding_digest);
    let routable_rule = |id: &str| -> Result<(), SelectionError> {
        if plan.routed_ids.iter().any(|r| r == id) {
            return Ok(());
        }
        let rule = match plan.excluded_ids.iter().find(|x| x.id == id) {
            Some(x) => x.rule.clone(),
            None if plan.selected_ids.iter().any(|s| s == id) => "selected by the base profile".to_owned(),
            None => return Err(unknown_id(id)),
        };
        Err(SelectionError::NotRoutable { id: shown_id(id), rule })
    };
    // (roots, decision, reason, reused, candidates, explicit ids the decision honours)
    let mut explicit_for_digest = task.explicit_ids.clone();
    let mut candidates: Vec<SelectionCandidate> = Vec::new();
    let mut reused = false;
    let mut answered: Option<(Digest, Digest)> = None;
    // An agent's proposal is held to its rules whichever step decides: refused under Manual
    // (seed 003: "Manual uses explicit IDs"), each id routable otherwise — never dropped
    // unchecked beside explicit ids, a reused decision or `noWorkflow` (outside reviews 96
    // F7, 97 F6).
    if !task.proposed_ids.is_empty() {
        if plan.selection_mode == SelectionMode::Manual {
            return Err(SelectionError::ProposedUnderManual);
        }
        for id in &task.proposed_ids {
            routable_rule(id)?;
        }
    }
    let (roots, pending, reason): (Vec<String>, bool, &str) = if task.no_workflow {
        (Vec::new(), false, REASON_NO_WORKFLOW)
    } else if !task.explicit_ids.is_empty() {
        (task.explicit_ids.clone(), false, REASON_EXPLICIT)
    } else if let Some(p) = same_binding.filter(|p| p.decision != SelectionDecision::Pending) {
        reused = true;
        explicit_for_digest = p.explicit_ids.clone();
        candidates = p.candidates.clone();
        (p.selected_ids.clone(), false, REASON_REUSED)
    } else if plan.selection_mode == SelectionMode::Manual {
        (Vec::new(), false, REASON_MANUAL)
    } else if policy == ROUTING_POLICY_V1 && !task.proposed_ids.is_empty() {
        for id in &task.proposed_ids {
            routable_rule(id)?;
        }
        (task.proposed_ids.clone(), false, REASON_AGENT_PROPOSAL)
    } else if let Some(answer) = &request.proposal {
        // A task that proposes ids and a provider's answer at once: the agent's ids are the
        // task's own decision, so the answer would be dropped; refused (as routing/1 did).
        if !task.proposed_ids.is_empty() {
            for id in &task.proposed_ids {
                routable_rule(id)?;
            }
            return Err(SelectionError::ProposalUnused(REASON_AGENT_PROPOSAL.to_owned()));
        }
        let p = same_binding.filter(|p| p.decision == SelectionDecision::Pending).ok_or_else(|| {
            // Why the receipt named is not that pending selection (outside review 206 F5: a
            // stale one was refused without the part of its binding that changed).
            let why = previous.and_then(|p| {
                let now = Binding {
                    session_id: &task.session_id,
                    task_id: &task.task_id,
                    task_revision: task.revision,
                    phase: &task.phase,
                    no_workflow: task.no_workflow,
                    query_digest,
                    trigger_digest: trigger,
                    routing_policy: policy,
                    plan_digest: plan.digest(),
                    profile_revision,
                };
                binding_differs(state, p, &now).or_else(|| {
                    (p.decision != SelectionDecision::Pending)
                        .then(|| "it is not a pending decision".to_owned())
                })
            });
            SelectionError::ProposalWithoutPending(why.map(|w| format!(": {w}")).unwrap_or_default())
        })?;
        // Answered already: only the very same answer (its receipt) may be derived again.
        answered = request.previous.zip(p.answered_by);
        candidates = p.candidates.clone();
        match answer.as_slice() {
            [] => (Vec::new(), false, REASON_PROPOSAL_DECLINED),
            [id] => {
                if !p.candidates.iter().any(|c| &c.id == id) {
                    return Err(SelectionError::ProposalNotInShortlist(shown_id(id)));
                }
                routable_rule(id)?;
                (vec![id.clone()], false, REASON_PROVIDER_PROPOSAL)
            }
            more => return Err(SelectionError::ProposalTooMany(more.len())),
        }
    } else {
        // Routing/2: the agent's proposed ids are admitted only where the lexical step is not
        // decisive (no single cited skill, no unambiguous ranked match): a user's own words
        // come first. They are checked routable either way.
        for id in &task.proposed_ids {
            routable_rule(id)?;
        }
        let lex = lexical_step(plan, &routable_sources)?;
        candidates = lex.candidates;
        match lex.root {
            Some(root) => {
                routable_rule(&root)?;
                (vec![root], false, lex.reason)
            }
            // Routing/4: a query that refuses something is not overridden by the agent's ids
            // (outside review 64: "don't use the X skill" with proposedIds [X] selected X).
            // (Routing/6 leaves it pending, for a provider's answer from its shortlist.)
            None if matches!(lex.reason, REASON_NEGATED | REASON_CITED_UNROUTED | REASON_CITED_INSTALLED)
                && from_v4(policy) =>
            {
                (Vec::new(), lex.pending, lex.reason)
            }
            // Nor does the agent pick among, or past, the skills the user's own words named
            // (outside review 66: "use the Y skill rather than the X skill" with
            // `proposedIds: [X]` selected X; "use the X skill and the Y skill" with [Z]
            // selected Z): the choice stays pending for the user or a provider's answer.
            None if matches!(
                lex.reason,
                REASON_SEVERAL_DIRECTIVES | REASON_SEVERAL_CITED | REASON_MENTIONED
            ) && from_v4(policy) =>
            {
                (Vec::new(), true, lex.reason)
            }
            None if !task.proposed_ids.is_empty() => {
                // The shortlist is recorded only where the query was ambiguous (its top under
                // the bar), so replay can hold it to that (outside review 28).
                if lex.reason != REASON_AMBIGUOUS {
                    candidates = Vec::new();
                }
                (task.proposed_ids.clone(), false, REASON_AGENT_PROPOSAL)
            }
            None => (Vec::new(), lex.pending, lex.reason),
        }
    };
    let explicit_set: Vec<String> =
        if reused { explicit_for_digest.clone() } else { task.explicit_ids.clone() };
    let selected_ids = closure(plan, registry, &roots, &explicit_set)?;
    let decision = if pending {
        SelectionDecision::Pending
    } else if selected_ids.is_empty() {
        SelectionDecision::None
    } else {
        SelectionDecision::Selected
    };
    let resources = if request.load {
        if plan.selection_mode == SelectionMode::Suggest {
            return Err(SelectionError::SuggestNeverLoads);
        }
        load(registry, &selected_ids)?.into_iter().map(|(r, _)| r).collect()
    } else {
        Vec::new()
    };
    let selection_digest =
        selection_digest(binding_digest, decision, &candidates, &explicit_for_digest, &selected_ids);
    let event = SelectionRecorded {
        load: request.load,
        phase: task.phase.clone(),
        reason: reason.to_owned(),
        reused,
        task_id: task.task_id.clone(),
        decision,
        previous: request.previous,
        proposal: request.proposal.clone(),
        resources,
        session_id: task.session_id.clone(),
        candidates,
        no_workflow: task.no_workflow,
        plan_digest: plan.digest(),
        explicit_ids: task.explicit_ids.clone(),
        proposed_ids: task.proposed_ids.clone(),
        query_digest,
        selected_ids,
        task_revision: task.revision,
        binding_digest,
        routing_policy: policy.to_owned(),
        trigger_digest: trigger,
        registry_digest,
        profile_revision,
        selection_digest,
    };
    if let Some((pending, by)) = answered
        && event.receipt().digest() != by
    {
        return Err(SelectionError::AlreadyAnswered { pending, by });
    }
    // A proposal is an answer to a pending selection, or it is refused: never silently
    // dropped because an earlier step decided (outside review 20: with `--previous` naming a
    // completed selection, or with `proposedIds`, the proposal left no trace).
    if request.proposal.is_some() && !matches!(reason, REASON_PROVIDER_PROPOSAL | REASON_PROPOSAL_DECLINED) {
        return Err(SelectionError::ProposalUnused(reason.to_owned()));
    }
    Ok(event)
}

/// Why the `--previous` receipt `e` names was not reused (none where `e` reused it, answers
/// it, or names none): what decided first, or which part of the binding differs — seed 003:
/// "Source, trigger content, routing-policy version, profile, mode, exclusions, session,
/// task revision, phase, and a digest of the query invalidate stale reuse" (outside review
/// 114: a stale receipt was set aside without a word).
/// The explicit ids of `e` that the configured profile installs already (its base): the
/// skill's body then reaches the worker twice — natively and in the package — and counts
/// against the load bound (outside review 234 F1: said nowhere, where a directive at it is
/// `cited-installed`). Not a manual-only one: Full installs it behind its native flags, so
/// the worker's agent does not load it of itself, and naming it is the way to load it
/// (outside review 254 F1: the note said it was in the worker's context already, the
/// routing note said to name it — a circle).
pub fn installed_explicit(state: &State, e: &SelectionRecorded) -> Vec<String> {
    let Ok((plan, registry, ..)) = configured(state) else { return Vec::new() };
    let sources = by_id(registry);
    let chosen = e.selected_ids.iter().filter(|id| e.explicit_ids.contains(id));
    chosen
        .filter(|id| plan.selected_ids.contains(id))
        .filter(|id| sources.get(id.as_str()).is_some_and(|s| !s.manual_only))
        .cloned()
        .collect()
}

pub fn previous_set_aside(state: &State, e: &SelectionRecorded) -> Option<String> {
    let p = state.selections.by_receipt.get(&e.previous?)?;
    if e.reused || matches!(e.reason.as_str(), REASON_PROVIDER_PROPOSAL | REASON_PROPOSAL_DECLINED) {
        return None;
    }
    if e.no_workflow {
        return Some("the task sets noWorkflow, which decides first".to_owned());
    }
    if !e.explicit_ids.is_empty() {
        return Some("the task's explicitIds decide first".to_owned());
    }
    binding_differs(state, p, &Binding::of(e)).or_else(|| {
        (p.decision == SelectionDecision::Pending)
            .then(|| "it is a pending decision: only a completed one is reused".to_owned())
    })
}

/// What a selection's binding is made of, as compared with an earlier receipt's.
struct Binding<'a> {
    session_id: &'a str,
    task_id: &'a str,
    task_revision: u32,
    phase: &'a str,
    no_workflow: bool,
    query_digest: Option<Digest>,
    trigger_digest: Digest,
    routing_policy: &'a str,
    plan_digest: Digest,
    profile_revision: u32,
}

impl<'a> Binding<'a> {
    fn of(e: &'a SelectionRecorded) -> Binding<'a> {
        Binding {
            session_id: &e.session_id,
            task_id: &e.task_id,
            task_revision: e.task_revision,
            phase: &e.phase,
            no_workflow: e.no_workflow,
            query_digest: e.query_digest,
            trigger_digest: e.trigger_digest,
            routing_policy: &e.routing_policy,
            plan_digest: e.plan_digest,
            profile_revision: e.profile_revision,
        }
    }
}

/// Which part of the binding of `e` differs from the earlier receipt `p`'s, named (none
/// where none does).
fn binding_differs(state: &State, p: &SelectionState, e: &Binding<'_>) -> Option<String> {
    let mut differs: Vec<String> = Vec::new();
    let mut note = |same: bool, what: String| {
        if !same {
            differs.push(what);
        }
    };
    note(p.session_id == e.session_id, "the session".to_owned());
    note(p.task_id == e.task_id, "the task id".to_owned());
    note(
        p.task_revision == e.task_revision,
        format!("the task revision ({} → {})", p.task_revision, e.task_revision),
    );
    note(p.phase == e.phase, "the phase".to_owned());
    note(p.no_workflow == e.no_workflow, "noWorkflow".to_owned());
    note(p.query_digest == e.query_digest, "the query".to_owned());
    note(p.trigger_digest == e.trigger_digest, "the routable sources' triggers".to_owned());
    note(p.routing_policy == e.routing_policy, format!("the routing policy ({})", p.routing_policy));
    if p.plan_digest != e.plan_digest {
        // Which part of the configured plan, from the revisions each was made under
        // (outside review 115 F9: one text for profile, target, mode, exclusions, sources).
        let cp = &state.context_profiles;
        match (cp.revisions.get(&p.profile_revision), cp.revisions.get(&e.profile_revision)) {
            (Some(was), Some(now)) => {
                let (a, b) = (&was.selection, &now.selection);
                let parts: [(bool, String); 6] = [
                    (a.profile != b.profile, format!("the profile ({} → {})", a.profile, b.profile)),
                    (
                        a.target != b.target,
                        format!("the target ({} → {})", super::wire(&a.target), super::wire(&b.target)),
                    ),
                    (
                        a.mode != b.mode,
                        format!("the mode ({} → {})", super::wire(&a.mode), super::wire(&b.mode)),
                    ),
                    (a.exclude != b.exclude, "the exclusions".to_owned()),
                    (a.include != b.include, "the inclusions".to_owned()),
                    (
                        was.registry_digest != now.registry_digest,
                        "the sources (a newer registry snapshot)".to_owned(),
                    ),
                ];
                let named: Vec<String> = parts.into_iter().filter(|(d, _)| *d).map(|(_, t)| t).collect();
                if named.is_empty() {
                    // One revision, two plans: its routing re-derived over a newer snapshot
                    // (drift in routed sources only; outside review 117 F9).
                    differs.push("the sources (a newer registry snapshot)".to_owned());
                }
                differs.extend(named);
            }
            _ => differs.push("the configured plan".to_owned()),
        }
    }
    (!differs.is_empty()).then(|| format!("its binding differs: {}", differs.join(", ")))
}

/// The live decision over a task with its query.
pub fn decide_live(
    state: &State,
    task: &Task,
    request: &Request,
) -> Result<SelectionRecorded, SelectionError> {
    let query_digest = task.query.as_ref().map(|q| Digest::of(DigestKind::TaskQuery, q.as_bytes()));
    let query = task.query.as_deref();
    let registry = state.context_profiles.registry.as_deref();
    decide(state, task, query_digest, request, ROUTING_POLICY, &|plan, routable| {
        // A manual-only skill the plan installs is installed behind its native flags — the
        // worker's agent does not load it of itself — so a query citing it is read as citing
        // an unrouted skill, whose body an explicit id loads (outside review 206 F2: under
        // Full, "use the deploy skill" was told the skill was in the worker's context).
        let (unrouted, installed): (Vec<&RegistrySource>, Vec<&RegistrySource>) = registry
            .map(|r| {
                r.sources
                    .iter()
                    .filter(|s| !plan.routed_ids.contains(&s.id))
                    .partition(|s| s.manual_only || !plan.selected_ids.contains(&s.id))
            })
            .unwrap_or_default();
        Ok(lexical_over(ROUTING_POLICY, query, routable, &unrouted, &installed))
    })
}

/// Folds a `selectionRecorded`: the state re-derives the whole event (the lexical step
/// from its recorded outcome, checked), which must equal the recorded one.
pub fn apply_selection(state: &mut State, e: &SelectionRecorded, seq: u64) -> Result<(), RuleViolation> {
    let policy = [
        ROUTING_POLICY,
        ROUTING_POLICY_V10,
        ROUTING_POLICY_V9,
        ROUTING_POLICY_V8,
        ROUTING_POLICY_V7,
        ROUTING_POLICY_V6,
        ROUTING_POLICY_V5,
        ROUTING_POLICY_V4,
        ROUTING_POLICY_V3,
        ROUTING_POLICY_V2,
        ROUTING_POLICY_V1,
    ]
    .into_iter()
    .find(|p| *p == e.routing_policy)
    .ok_or_else(|| {
        violation(
            Rule::Selection,
            format!(
                "routing policy {:?} is not {ROUTING_POLICY}, {ROUTING_POLICY_V10}, {ROUTING_POLICY_V9}, {ROUTING_POLICY_V8}, {ROUTING_POLICY_V7}, {ROUTING_POLICY_V6}, {ROUTING_POLICY_V5}, {ROUTING_POLICY_V4}, \
                     {ROUTING_POLICY_V3}, {ROUTING_POLICY_V2} or {ROUTING_POLICY_V1}",
                e.routing_policy
            ),
        )
    })?;
    let task = Task {
        session_id: e.session_id.clone(),
        task_id: e.task_id.clone(),
        revision: e.task_revision,
        phase: e.phase.clone(),
        query: None,
        explicit_ids: e.explicit_ids.clone(),
        proposed_ids: e.proposed_ids.clone(),
        no_workflow: e.no_workflow,
    };
    let request = Request { load: e.load, previous: e.previous, proposal: e.proposal.clone() };
    let recorded_lexical = |plan: &Plan, routable: &[&RegistrySource]| {
        let installs_manual_only =
            state.context_profiles.registry.as_deref().is_some_and(|r| {
                r.sources.iter().any(|s| s.manual_only && plan.selected_ids.contains(&s.id))
            });
        lexical_recorded(e, plan, routable, installs_manual_only).map_err(|v| SelectionError::Task(v.detail))
    };
    let expected = decide(state, &task, e.query_digest, &request, policy, &recorded_lexical)
        .map_err(|err| violation(Rule::Selection, err.to_string()))?;
    ensure!(
        expected == *e,
        Rule::Selection,
        "the recorded selection is not the one the state derives (decision {:?}, selected {:?})",
        expected.decision,
        expected.selected_ids
    );
    let receipt = e.receipt().digest();
    // A selection is recorded once: the same `select` again is answered as a duplicate and
    // writes nothing, so a second record of one receipt is no command's (outside review 226
    // F1: a copy of a pending selection reopened it, and it was answered twice).
    if let Some(earlier) = state.selections.by_receipt.get(&receipt) {
        return Err(violation(
            Rule::Selection,
            format!(
                "selection {receipt} is recorded already (seq {}): a selection is recorded once (the same `select` \
                 again is answered as a duplicate)",
                earlier.seq
            ),
        ));
    }
    state.selections.by_receipt.insert(
        receipt,
        SelectionState {
            seq,
            binding_digest: e.binding_digest,
            decision: e.decision,
            selection_digest: e.selection_digest,
            explicit_ids: if e.reused {
                state
                    .selections
                    .by_receipt
                    .get(&e.previous.unwrap_or(Digest::ZERO))
                    .map(|p| p.explicit_ids.clone())
                    .unwrap_or_default()
            } else {
                e.explicit_ids.clone()
            },
            selected_ids: e.selected_ids.clone(),
            candidates: e.candidates.clone(),
            task_id: e.task_id.clone(),
            task_revision: e.task_revision,
            phase: e.phase.clone(),
            no_workflow: e.no_workflow,
            plan_digest: e.plan_digest,
            trigger_digest: e.trigger_digest,
            profile_revision: e.profile_revision,
            resources: e.resources.clone(),
            answered_by: None,
            session_id: e.session_id.clone(),
            query_digest: e.query_digest,
            routing_policy: e.routing_policy.clone(),
        },
    );
    // A provider's answer (or its declining) closes the pending selection it answers.
    if matches!(e.reason.as_str(), REASON_PROVIDER_PROPOSAL | REASON_PROPOSAL_DECLINED)
        && let Some(pending) = e.previous.and_then(|d| state.selections.by_receipt.get_mut(&d))
    {
        pending.answered_by = Some(receipt);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Into the Context Compiler (stage 3)

/// Why an Attempt cannot carry the selection it names. The rule refuses the start
/// (`Rule::AttemptSelection`); the compiler reports it as a context that no longer
/// compiles (a dispatch claim is then `ManifestStale`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttemptSelectionError {
    #[error("no selection with receipt digest {0} is recorded")]
    Unknown(Digest),
    #[error(
        "selection {0} is pending: answer it with a proposal first (a pending decision is not a completed one)"
    )]
    Pending(Digest),
    #[error("selection {0} was made for a task with noWorkflow")]
    NoWorkflow(Digest),
    #[error("selection {0} selected sources without loading them (select again with --load)")]
    NotLoaded(Digest),
    #[error("selection {0} was made in suggest mode: suggestions are never delivered to a worker")]
    Suggest(Digest),
    #[error("selection {receipt} is for task {task:?}, not goal {goal}")]
    OtherGoal { receipt: Digest, task: String, goal: Id },
    #[error(
        "selection {receipt} is for task revision {task_revision}, the goal is at revision {goal_revision}"
    )]
    OtherRevision { receipt: Digest, task_revision: u32, goal_revision: u32 },
    #[error("selection {receipt} is for phase {selected:?}, the workflow is in {current}")]
    OtherPhase { receipt: Digest, selected: String, current: String },
    #[error("selection {receipt} is stale: {why}")]
    Stale { receipt: Digest, why: String },
    #[error("selection {receipt}: {id} resource {path:?} is not in the registry with its recorded digest")]
    Resource { receipt: Digest, id: String, path: String },
    #[error("selection {receipt}: {id} resource {path:?} is not deliverable text ({why})")]
    NotText { receipt: Digest, id: String, path: String, why: &'static str },
}

/// A resource's bytes as text a worker (and a supervisor's terminal) may be given: UTF-8,
/// nothing that reads differently than it is (`runtime::undeliverable`: no control
/// character but tab, line feed and carriage return, no bidirectional override or isolate,
/// no TAG character, …) and no invisible character that carries data nobody sees
/// (`runtime::hidden`: two in a row, or one where the text gives it no meaning), and no
/// carriage return but before a line feed: a lone one returns a terminal to the start of
/// the line, so what follows is shown over what precedes it, which a worker still reads
/// (outside review 94 F5).
pub fn deliverable_text(bytes: &[u8]) -> Result<&str, &'static str> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8")?;
    if super::lone_cr(text) {
        return Err(super::LONE_CR);
    }
    match text.chars().find(|c| super::undeliverable(*c)) {
        Some(c) if c.is_control() => Err("a control character"),
        Some(_) => Err(
            "a bidirectional override or isolate, a separator, a TAG character, a private-use code point or a noncharacter",
        ),
        None => match super::hidden(text) {
            Some((_, why)) if why == super::IN_A_ROW => Err("invisible characters in a row"),
            Some(_) => Err("an invisible character where the text gives it no meaning"),
            None => Ok(text),
        },
    }
}

/// One loaded resource as an Attempt's context carries it: its record and its text, the
/// registry's bytes re-hashed against the recorded digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Material<'s> {
    pub resource: &'s LoadedResource,
    pub text: &'s str,
}

/// What a task selection an Attempt carries is held to besides its goal, phase and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SelectionCurrency {
    /// The configured profile: the selection's profile revision is the configured one, not
    /// in suggest mode, with the plan and routable triggers it was decided over (an
    /// Attempt's start, its dispatch claim, a dispatched Attempt's context).
    #[default]
    Configured,
    /// The selection as it was decided: a finished result's currency proof (a freeze, an
    /// ACCEPT). Seed 003 keeps an existing session's context through a profile change, so
    /// a later profile revision does not make the result stale; its loaded bytes must still
    /// be the registry's, and every other bound input is checked as ever.
    AsDecided,
}

/// The selection `receipt` an Attempt of `goal_id` at `goal_revision` in `phase` may carry,
/// checked over the state: recorded; completed (`selected` or `none`, never pending); made
/// for a workflow (not `noWorkflow`); loaded when it selected anything; for this goal (its
/// `taskId` is the goal id), this goal revision and this phase (its wire name); under
/// [`SelectionCurrency::Configured`], its binding still current (the configured plan and
/// the routable sources' triggers are the ones it was decided over: no source drift, no
/// profile change since); every loaded resource still in the registry with its recorded
/// digest, as UTF-8 text.
pub fn attempt_material<'s>(
    state: &'s State,
    receipt: Digest,
    goal_id: Id,
    goal_revision: u32,
    phase: Phase,
    currency: SelectionCurrency,
) -> Result<(&'s SelectionState, Vec<Material<'s>>), AttemptSelectionError> {
    use AttemptSelectionError as E;
    let s = state.selections.by_receipt.get(&receipt).ok_or(E::Unknown(receipt))?;
    if s.decision == SelectionDecision::Pending {
        return Err(E::Pending(receipt));
    }
    if s.no_workflow {
        return Err(E::NoWorkflow(receipt));
    }
    if s.decision == SelectionDecision::Selected && s.resources.is_empty() {
        // Made in suggest mode it could not have been loaded: say that (outside review 52:
        // "select again with --load", which suggest mode refuses).
        let suggested = state
            .context_profiles
            .revisions
            .get(&s.profile_revision)
            .is_some_and(|r| r.selection.mode == SelectionMode::Suggest);
        return Err(if suggested { E::Suggest(receipt) } else { E::NotLoaded(receipt) });
    }
    if s.task_id != goal_id.to_string() {
        return Err(E::OtherGoal { receipt, task: s.task_id.clone(), goal: goal_id });
    }
    if s.task_revision != goal_revision {
        return Err(E::OtherRevision { receipt, task_revision: s.task_revision, goal_revision });
    }
    let current = super::wire(&phase);
    if !s.phase.eq_ignore_ascii_case(&current) {
        return Err(E::OtherPhase { receipt, selected: s.phase.clone(), current });
    }
    let registry = match currency {
        SelectionCurrency::Configured => configured_for(state, s, receipt)?,
        SelectionCurrency::AsDecided => state
            .context_profiles
            .registry
            .as_deref()
            .ok_or_else(|| E::Stale { receipt, why: SelectionError::NotConfigured.to_string() })?,
    };
    let sources = by_id(registry);
    let mut material = Vec::with_capacity(s.resources.len());
    for r in &s.resources {
        let missing = || E::Resource { receipt, id: r.id.clone(), path: r.path.clone() };
        let stored = sources
            .get(r.id.as_str())
            .and_then(|source| source.resources.iter().find(|x| x.path == r.path))
            .ok_or_else(missing)?;
        let bytes = stored.content.as_ref().ok_or_else(missing)?;
        if stored.digest != r.digest
            || ledger_schema::events::profile::SourceResource::digest_of(&bytes.0) != r.digest
        {
            return Err(missing());
        }
        let text = deliverable_text(&bytes.0).map_err(|why| E::NotText {
            receipt,
            id: r.id.clone(),
            path: r.path.clone(),
            why,
        })?;
        material.push(Material { resource: r, text });
    }
    Ok((s, material))
}

/// The registry a selection is checked against under [`SelectionCurrency::Configured`]:
/// the configured one, the selection's profile revision still the configured revision, not
/// in suggest mode, its plan and routable triggers the ones it was decided over.
fn configured_for<'s>(
    state: &'s State,
    s: &SelectionState,
    receipt: Digest,
) -> Result<&'s Registry, AttemptSelectionError> {
    use AttemptSelectionError as E;
    let stale = |why: String| E::Stale { receipt, why };
    let (plan, registry, revision, _) = configured(state).map_err(|e| stale(e.to_string()))?;
    if revision != s.profile_revision {
        return Err(stale(format!(
            "the profile is at revision {revision}, the selection resolved against revision {}",
            s.profile_revision
        )));
    }
    if plan.selection_mode == SelectionMode::Suggest {
        return Err(E::Suggest(receipt));
    }
    if plan.digest() != s.plan_digest {
        return Err(stale(format!(
            "the configured plan is {} now, it was decided over {}",
            plan.digest(),
            s.plan_digest
        )));
    }
    if trigger_digest(&routable(&plan, registry)) != s.trigger_digest {
        return Err(stale("the routable sources' triggers changed".to_owned()));
    }
    Ok(registry)
}

#[cfg(test)]
mod tests {
    /// A dash drawn as a long line — em dash, horizontal bar, box-drawing line, the CJK
    /// `一`, the prolonged sound mark itself — reads as a hyphen in a cited name, as the
    /// en dash and the minus sign did (outside review 195 F3: the skeleton spells the first
    /// ones as `ー`, a letter, and `python—patterns` was a name of its own).
    #[test]
    fn a_dash_drawn_as_a_long_line_reads_as_a_hyphen() {
        let plain = super::cited_forms("python-patterns");
        for dash in ['\u{2013}', '\u{2014}', '\u{2015}', '\u{2212}', '\u{2500}', '\u{4E00}', '\u{30FC}'] {
            let name = format!("python{dash}patterns");
            let forms = super::cited_forms(&name);
            assert!(forms.iter().any(|f| plain.contains(f)), "{name}: {forms:?} vs {plain:?}");
        }
        // Letters stay letters.
        assert_ne!(super::cited_form("pythonpatterns"), super::cited_form("python-patterns"));
    }

    /// `negates` reads the retraction phrases as it reads the query (the confusable
    /// skeleton spells `m` as `rn`: compared as written, "never mind" never matched).
    #[test]
    fn retraction_phrases_are_read_as_the_query_is() {
        for p in super::RETRACTIONS.iter().chain(&super::RETRACTIONS_CLOSING) {
            assert_eq!(super::refusal_in(&format!("Use it. {p}.")).as_deref(), Some(*p), "{p}");
            assert!(super::negates(&format!("Use it. {}.", p.to_uppercase())), "{p}");
        }
        // A closing phrase with more of its sentence after it is not one (outside review 132 F3).
        for q in
            ["Follow the X skill, then cancel that flaky CI job.", "Use the X skill to undo that migration"]
        {
            assert_eq!(super::refusal_in(q), None, "{q}");
        }
        for q in ["Get rid of the warning using the X skill.", "Oops, I forgot: use the X skill."] {
            assert_eq!(super::refusal_in(q), None, "{q}");
        }
        assert!(super::negates("Use the X skill. Wait, scratch that."));
        assert!(!super::negates("Rewrite it from scratch using the X skill"));
    }
}
