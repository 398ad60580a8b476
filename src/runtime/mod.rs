//! The runtime: the projection [`State`], [`apply`] — the one place every admission rule
//! lives — and [`decide`], which turns a [`Command`] into events. Pure: no clock, no
//! randomness, no I/O. Live admission, strict reopen and `ledger replay` all fold entries
//! through the same `apply`.

mod acceptance;
mod attempt;
mod authority;
mod candidate;
pub mod command;
pub mod dedup;
mod evidence;
mod goal;
mod map;
pub mod profile;
mod repair;
pub mod secrets;
pub mod selection;
pub mod seq_index;
pub mod skill;
mod source;
pub mod state;
mod worker;
mod workflow;

use ledger_schema::{Entry, Event, Id};

pub use attempt::{
    AttemptBinding, ContextInput, attempt_binding, current_binding, in_flight, in_flight_binding, input_of,
    mark_context_changed, result_binding, result_kind_allowed, status_name, thread_history_withdrawn,
};
pub use command::Command;
pub use evidence::DEFAULT_WORKING_BUDGET_BYTES;
pub use evidence::evidence_set;
pub use source::{MAX_PRINCIPAL_BYTES, MAX_RETIREMENT_REASON, question_key};
pub use state::State;
pub use worker::{canonical_json_len, redelivery, staleness};
pub use workflow::next_phase;

/// Longest text field a command or worker may write (bytes).
pub const MAX_TEXT_BYTES: usize = 65_536;
/// Most items in any list field.
pub const MAX_ITEMS: usize = 128;
/// Largest canonical Worker event payload any policy may allow (the default).
pub const MAX_EVENT_BYTES: u32 = 65_536;
/// Feedback limits a policy may set: 1–128 items of at most 4,096 bytes.
pub const MAX_FEEDBACK_ITEMS: u16 = 128;
pub const MAX_FEEDBACK_ITEM_BYTES: u32 = 4096;

/// The named admission rules. Each has a test named for it (see docs/rules.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[non_exhaustive]
pub enum Rule {
    /// Entries are folded in seq order starting at genesis.
    EntryOutOfOrder,
    /// Genesis first and only first.
    Genesis,
    /// An id is used once per kind of record.
    IdReused,
    /// Text ≤ 65,536 bytes, lists ≤ 128 items; required text non-blank, required lists non-empty, no blank list item.
    OutOfBounds,
    /// A Policy Bundle's or Execution Profile's digest is the digest of its content.
    AuthorityDigest,
    /// A Policy Bundle within its bounds (event size, feedback limits, sorted classes).
    PolicyBounds,
    /// A referenced policy/profile/goal/workflow/... exists.
    Unknown,
    /// Goal revisions go strictly +1.
    GoalRevisionNotNext,
    /// Work or a result bound to a Goal revision that is no longer current is refused.
    StaleGoalRevision,
    /// A Workflow's policy/profile binding names the installed digest.
    AuthorityBinding,
    /// The plan pair is present exactly under a protected profile and equals the Workflow's.
    PlanPair,
    /// Phases advance one step (or back to IMPLEMENT for a repair child); version +1.
    PhaseTransition,
    /// A closed Workflow (ACCEPT / REJECT_TERMINAL / cancelled) takes no more work, by any command that names it.
    WorkflowClosed,
    /// One active Attempt per Workflow; nothing that changes its binding while one runs.
    AttemptActive,
    /// Worker Attempts only in DISCOVERY, PLAN and IMPLEMENT, in the current phase and version.
    AttemptBinding,
    /// IMPLEMENT names the exact active MUTABLE Candidate; DISCOVERY/PLAN name none.
    CandidateBinding,
    /// A finish needs a current terminal Worker event (PROPOSALS / COMPLETION_REQUEST, the
    /// phase's result kind) admitted for the Attempt: terminal stream accounting.
    TerminalEvent,
    /// A task selection an Attempt carries is recorded, completed (never pending), made for
    /// a workflow, loaded, for this goal, goal revision and phase, and still current (no
    /// source drift or profile change since), its loaded bytes still the registry's.
    AttemptSelection,
    /// The manifest binds exactly the state's identities, and its digest is its digest.
    ManifestBinding,
    /// A dispatch claim revalidates workflow version, profile, digests and plan pair.
    DispatchClaim,
    /// An App Server's effective inputs beside the package (instruction sources, tools,
    /// permission profile, configuration, managed requirements) are bound by the profile,
    /// and a claim's report stays within the binding (seed 000, "M2 App Server input closure").
    InputClosure,
    /// Cancellation (of an Attempt or a Workflow), restart and dispatch serialize on the workflow version.
    StaleWorkflowVersion,
    /// An Attempt that ended (or never started) takes no result, claim or cancel.
    AttemptNotActive,
    /// A result needs a dispatched Attempt.
    NotDispatched,
    /// PROPOSALS for DISCOVERY/PLAN, COMPLETION_REQUEST for IMPLEMENT: results and current worker events alike.
    ResultKind,
    /// Canonical worker payload ≤ the policy's maxEventBytes.
    PayloadTooLarge,
    /// The payload digest is the digest of the canonical payload.
    PayloadDigest,
    /// A worker event needs the Attempt's dispatch claim.
    MissingDispatchClaim,
    /// Stale or mismatched deliveries (incl. a superseded Goal revision) become only an ignored receipt; current ones are admitted.
    DeliveryStaleness,
    /// A Fact is confirmed only from PROPOSED at the same revision; invalidated is final.
    FactStatus,
    /// A Fact is confirmed, and a Human Decision made, by a human principal (`human:NAME`):
    /// no worker or runtime principal turns inference into authority.
    HumanAuthority,
    /// A goal has one Human Decision per question: a second answer to a question already
    /// decided for the goal is refused (two answers would both be authoritative).
    DecisionConflict,
    /// A project source's digest is the digest of its content.
    SourceDigest,
    /// A blocker resolves once.
    BlockerResolved,
    /// A repair dispatch's context carries its bounded feedback projection (seed: "For each
    /// repair dispatch, the compiler MUST … render … a bounded feedback projection").
    RepairFeedback,
    /// A scenario or obligation is retired once, and only after a goal revision made after
    /// it was recorded: requirements change with the goal (outside review 55).
    RequirementRetired,
    /// A project source is withdrawn once, by its path's current record (outside review
    /// 100).
    SourceWithdrawn,
    /// A Human Decision is withdrawn once, by a human, while it stands on its question
    /// (outside review 135).
    DecisionWithdrawn,
    /// A workflow's first generation is opened once, with no parent or repair link.
    GenerationOpen,
    /// Only a MUTABLE generation freezes; frozen is final.
    GenerationNotMutable,
    /// Evidence and decisions need the generation frozen.
    GenerationNotFrozen,
    /// Evidence is for the exact active Candidate generation and its frozen digest.
    EvidenceCandidate,
    /// Evidence names its obligation's exact check specification.
    EvidenceObligation,
    /// A passing re-run of a check that already passed on the generation adds nothing.
    EvidenceRepeated,
    /// Acceptance happens in FINAL_VERIFY.
    AcceptancePhase,
    /// One decision per generation.
    AlreadyDecided,
    /// The Acceptance Input Manifest binds the current goal revision, workflow version, policy.
    InputManifest,
    /// The Evidence Set is exactly every current, eligible record of the generation (computed, never chosen), non-empty, and its digest matches.
    EvidenceSet,
    /// The decision digest is the digest of the decision.
    DecisionDigest,
    /// ACCEPT needs every check passed and every obligation covered; REJECT_REPAIRABLE needs a failure.
    Verdict,
    /// A runner error is an engine error: no ACCEPT or REJECT_REPAIRABLE over it.
    RunnerError,
    /// A repair needs the exact current REJECT_REPAIRABLE decision, once.
    RepairDecision,
    /// A repair's digests match the decision exactly and its parent is the decided generation.
    RepairBinding,
    /// A repair preserves every Goal preservation constraint.
    RepairConstraints,
    /// The repair digest is the digest of the repair.
    RepairDigest,
    /// The repair child: sequence = parent + 1, base = parent's frozen digest, linked both ways.
    RepairChild,
    /// Evidence is recorded only in EVIDENCE_BUILD (after the freeze, before FINAL_VERIFY).
    EvidencePhase,
    /// Evidence eligibility is derived by the ledger: recorded as version 1, ELIGIBLE.
    EvidenceEligibility,
    /// A FRESH thread is a never-used Worker Session; RESUME only where the profile allows it.
    ThreadPolicy,
    /// Candidates live in IMPLEMENT: a first generation opens and any generation freezes only while its workflow is in IMPLEMENT.
    CandidatePhase,
    /// A freeze needs a finished COMPLETION_REQUEST Attempt on the generation; a repair child differs from its parent.
    CandidateWork,
    /// A dispatch claim needs the Attempt's manifest still current: recompiled over the state at the claim, it is the recorded one; a result of an Attempt whose context changed after dispatch does not advance the workflow.
    ManifestStale,
    /// ACCEPT needs every blocker raised on the workflow resolved.
    OpenBlocker,
    /// A compaction lifecycle worker event needs the bound Execution Profile's compaction enabled (MANUAL or AUTOMATIC).
    CompactionMode,
    /// A compaction opens (COMPACTION_STARTED) and closes (COMPACTION_COMPLETED) in turn, and no result event is admitted while one is open: its turn is maintenance, not a completion request.
    CompactionOrder,
    /// A compaction lifecycle worker event carries no text and no items: private reasoning and opaque compaction state never enter the ledger.
    CompactionPayload,
    /// A source registry snapshot is well formed, closed and its digests are its digests.
    SourceRegistry,
    /// Profile revisions go strictly +1; mode and rollback change only what they name.
    ProfileRevision,
    /// A revision's plan and generation digests are the ones the state derives.
    ProfilePlan,
    /// A task selection is the one the state derives from its task, request and configured profile.
    Selection,
    /// New text for workers — a project source, a Human Decision, a fact, a goal, an
    /// obligation, a scenario, a blocker — holds no secret
    /// by its form (`runtime::secrets`). Checked at admission only (`admission::decide`):
    /// the reader's forms change between builds, and replay must not.
    SecretMaterial,
}

impl std::fmt::Display for Rule {
    /// The rule's name, as docs/rules.md lists it (`IdReused`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}

/// An event that breaks a rule: refused live, and fails replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{rule:?}: {detail}")]
pub struct RuleViolation {
    pub rule: Rule,
    pub detail: String,
}

/// Builds a [`RuleViolation`].
pub fn violation(rule: Rule, detail: impl Into<String>) -> RuleViolation {
    RuleViolation { rule, detail: detail.into() }
}

macro_rules! ensure {
    ($cond:expr, $rule:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err($crate::runtime::violation($rule, format!($($fmt)+)));
        }
    };
}
pub(crate) use ensure;

/// The runtime's share of a refusal (the admission step adds the compiler's, in
/// `admission::Refusal`, the one type an embedder sees). Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    #[error("rule {0}")]
    Rule(#[from] RuleViolation),
    #[error("worker event {worker_event_id} was already recorded at seq {original_seq} {differs}")]
    Conflict { worker_event_id: Id, original_seq: u64, differs: &'static str },
}

/// Context of a submission, produced outside the pure core: the admission time the ledger
/// seals the entries with (deciding a command never reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctx {
    /// Admission time (ms since the Unix epoch).
    pub time_ms: u64,
}

/// What a command becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decided {
    /// Events to admit, in order (each through `apply`).
    Events(Vec<Event>),
    /// The command's step (its own id, or its record and version) is already recorded,
    /// with its receipt at `seq`: whoever holds the history resolves it against the stored
    /// original — a Worker event with [`redelivery`] (a duplicate or a conflict), any other
    /// command with [`dedup::same_command`] (a duplicate, or decided anew by
    /// [`decide_new`], whose rules refuse a step already taken).
    Redelivered { seq: u64 },
}

/// Text the compiler may render to a worker (and `ledger compile --markdown` to a
/// supervisor's terminal): at most `MAX_TEXT_BYTES`, and no character that makes it read
/// differently than it is — a control character but tab, line feed and carriage return (an
/// ESC sequence), or a bidirectional override or isolate (the rule skill bodies follow:
/// [`selection::deliverable_text`]).
pub(crate) fn text(field: &str, value: &str) -> Result<(), RuleViolation> {
    bounded_text(field, value)?;
    if let Some(c) = value.chars().find(|c| undeliverable(*c)) {
        return Err(violation(
            Rule::OutOfBounds,
            format!(
                "{field} holds the character U+{:04X}, which a worker or a terminal would not read as written",
                u32::from(c)
            ),
        ));
    }
    if let Some((c, why)) = hidden(value) {
        return Err(violation(
            Rule::OutOfBounds,
            format!(
                "{field} holds the invisible character U+{:04X}, which {why}: data no reader would see",
                u32::from(c)
            ),
        ));
    }
    Ok(())
}

/// What `shown_text` puts before text it escaped (a check's output shown to a worker).
pub const ESCAPED_MARK: &str = "[shown escaped: each \\u{XXXX} is a character of the recorded text no reader would see as written, each \\\\ one backslash] ";

/// `value` as a worker may be shown it: itself where it is [`text`]; otherwise, after
/// [`ESCAPED_MARK`], each backslash doubled and every
/// character [`text`] refuses — a control character, a bidi override, an invisible one — as
/// a visible escape `\u{XXXX}`, the rest as written. For text recorded whatever it holds —
/// a check's output, which is recorded as written so that no failure is ever refused
/// (outside review 221 F1: a FAIL with a terminal colour code was refused, and a passing
/// re-run of the same check was then accepted). Text the rules admitted before (every
/// [`text`]) is shown as before.
pub(crate) fn shown_text(value: &str) -> std::borrow::Cow<'_, str> {
    if text("", value).is_ok() {
        return std::borrow::Cow::Borrowed(value);
    }
    // Marked as escaped, its own backslashes doubled: a character shown escaped never reads
    // as the same escape typed as text (outside review 222 F2).
    let mut shown = String::with_capacity(value.len() + 64);
    shown.push_str(ESCAPED_MARK);
    for c in value.chars() {
        if c == '\\' {
            shown.push_str("\\\\");
        } else if undeliverable(c) || invisible(c) {
            push_code_point(&mut shown, c);
        } else {
            shown.push(c);
        }
    }
    std::borrow::Cow::Owned(shown)
}

/// Why a lone carriage return is refused.
pub(crate) const LONE_CR: &str =
    "a carriage return not followed by a line feed, which a terminal shows as overwriting its line";

/// A carriage return not followed by a line feed: a terminal returns to the start of the
/// line, so what follows is shown over what precedes it, which a worker still reads
/// (outside reviews 94, 96, 97: in a skill body, then in a project source's fenced content).
/// Refused in what is rendered verbatim — a skill resource, a project source's content; the
/// rest of the ledger's text is rendered with every line break a line feed
/// (`compiler::render`), so a lone CR there is a line break.
pub(crate) fn lone_cr(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(at, b)| *b == b'\r' && bytes.get(at + 1) != Some(&b'\n'))
}

/// A character that makes text read differently than it is: a control character but tab,
/// line feed and carriage return; a bidirectional override or isolate (U+202A–U+202E,
/// U+2066–U+2069; the marks U+200E, U+200F, U+061C cannot reorder text and are allowed —
/// Hebrew and Arabic text uses them); a line or paragraph separator (U+2028, U+2029);
/// an interlinear annotation (U+FFF9–U+FFFB); or a TAG character (U+E0000–U+E007F: shown
/// as nothing, read by a model as ASCII — a hidden instruction); or a private-use code point
/// or a noncharacter (U+FDD0–U+FDEF, U+xxFFFE, U+xxFFFF).
pub(crate) fn undeliverable(c: char) -> bool {
    (c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
                // Private use: no reader shares a meaning for it (outside review 20: one
                // between two letters carried 17 bits).
                | '\u{E000}'..='\u{F8FF}'
                | '\u{F0000}'..='\u{FFFFD}'
                | '\u{100000}'..='\u{10FFFD}'
                // Noncharacters: never text by definition.
                | '\u{FDD0}'..='\u{FDEF}'
        )
        || (u32::from(c) & 0xFFFE) == 0xFFFE
}

/// At most `MAX_TEXT_BYTES` (what a Worker payload is held to: it is never rendered to a
/// worker, and readers print it JSON-escaped).
pub(crate) fn bounded_text(field: &str, value: &str) -> Result<(), RuleViolation> {
    ensure!(
        value.len() <= MAX_TEXT_BYTES,
        Rule::OutOfBounds,
        "{field} is {} bytes, over {MAX_TEXT_BYTES}",
        value.len()
    );
    Ok(())
}

/// `text` as one line a terminal shows as written, for a message: a line break becomes
/// `\n` or `\r`, a tab `\t`, and any other control character, or one that reads differently or
/// shows nothing (`undeliverable`, `invisible`), becomes `\u{XXXX}` (outside review 20:
/// a path holding a line feed or an ESC sequence split or coloured the line). The one
/// escaping every message uses (outside review 83: two forms of ESC). Idempotent.
pub fn escaped(text: &str) -> String {
    let hidden = |c: char| c.is_control() || undeliverable(c) || invisible(c);
    if !text.chars().any(hidden) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) => push_code_point(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// `c` written as the escape every message and escaped text uses: `\u{XXXX}`.
fn push_code_point(out: &mut String, c: char) {
    use std::fmt::Write as _;
    let _ = write!(out, "\\u{{{:04X}}}", u32::from(c));
}

/// A character that shows nothing: Unicode's Default_Ignorable_Code_Point set (zero-width
/// space, joiners and non-joiners, bidi marks, word joiner and the invisible operators,
/// the byte-order mark, a soft hyphen, the combining grapheme joiner, variation selectors,
/// Hangul fillers, Mongolian free variation selectors, shorthand format controls, musical
/// symbol formatting, TAG characters and the rest of U+E0000–U+E0FFF), plus the Braille
/// blank.
pub(crate) fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2060}'..='\u{206F}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
            // Format controls outside that set that show nothing either (Arabic and Syriac
            // abbreviation and number marks, Kaithi and Egyptian hieroglyph format controls;
            // outside review 20: runs of them passed next to ASCII).
            | '\u{0600}'..='\u{0605}'
            | '\u{06DD}'
            | '\u{070F}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08E2}'
            | '\u{110BD}'
            | '\u{110CD}'
            | '\u{13430}'..='\u{1345F}'
    )
}

/// Blank: nothing but white space and [`invisible`] characters.
fn blank(value: &str) -> bool {
    value.chars().all(|c| c.is_whitespace() || invisible(c))
}

/// An [`invisible`] character that carries data nobody sees — a model reads it, a person
/// does not — with why: invisible characters in a row (a run of variation selectors or
/// zero-width characters encodes bytes; the one pair text uses is a variation selector
/// before a zero-width joiner inside an emoji sequence), or one where the text gives it no
/// meaning (outside review 20: one after each visible character encodes as much):
///
/// - an ideographic variation selector (U+E0100–U+E01EF) not after a CJK ideograph;
/// - a variation selector U+FE00–U+FE0F not after a non-ASCII character that is not white
///   space, except after `0`–`9`, `#` or `*` in a keycap (followed by U+20E3);
/// - a Mongolian free variation selector not after a Mongolian letter;
/// - a bidi mark (U+200E, U+200F, U+061C) in a text without a right-to-left letter;
/// - any other of U+E0000–U+E0FFF (TAG characters and unassigned format characters);
/// - any other invisible character (zero-width space, joiners, word joiner, soft hyphen,
///   Hangul fillers, …) next to an ASCII character, where no script needs one — except a
///   byte-order mark at the very start.
///
/// What is left is an invisible character where a script or an emoji uses one, between
/// non-ASCII characters; each still cannot be followed by another.
pub(crate) fn hidden(value: &str) -> Option<(char, &'static str)> {
    // Whether the text has a right-to-left letter: read only if a bidi mark needs it (every
    // text passes here; almost none holds a mark).
    let rtl = std::cell::OnceCell::new();
    let rtl = || *rtl.get_or_init(|| value.chars().any(right_to_left));
    let mut prev: Option<char> = None;
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if invisible(c)
            && let Some(why) = meaningless(prev, c, chars.peek().copied(), &rtl)
        {
            return Some((c, why));
        }
        prev = Some(c);
    }
    None
}

/// [`hidden`]'s reason for an invisible character right after another.
pub(crate) const IN_A_ROW: &str = "follows another invisible character";

/// Why the invisible `c` between `prev` and `next` carries no meaning, if it does not
/// (see [`hidden`]).
fn meaningless(
    prev: Option<char>,
    c: char,
    next: Option<char>,
    rtl: &dyn Fn() -> bool,
) -> Option<&'static str> {
    let after = |f: fn(char) -> bool| prev.is_some_and(f);
    if after(invisible) && !(matches!(prev, Some('\u{FE0E}' | '\u{FE0F}')) && c == '\u{200D}') {
        return Some(IN_A_ROW);
    }
    let ascii_next = prev.is_some_and(|p| p.is_ascii()) || next.is_some_and(|n| n.is_ascii());
    match c {
        '\u{E0100}'..='\u{E01EF}' => {
            (!after(ideograph)).then_some("is an ideographic variation selector not after a CJK ideograph")
        }
        '\u{FE00}'..='\u{FE0F}' => {
            let keycap = after(|p| p.is_ascii_digit() || p == '#' || p == '*') && next == Some('\u{20E3}');
            let base = if matches!(c, '\u{FE0E}' | '\u{FE0F}') {
                after(takes_presentation)
            } else {
                after(takes_variant)
            };
            (!(keycap || base)).then_some("is a variation selector after a character that takes none")
        }
        '\u{180B}'..='\u{180D}' | '\u{180F}' => (!after(|p| ('\u{1820}'..='\u{18AF}').contains(&p)))
            .then_some("is a Mongolian variation selector not after a Mongolian letter"),
        '\u{200E}' | '\u{200F}' | '\u{061C}' => {
            (!rtl()).then_some("is a bidi mark in a text without a right-to-left letter")
        }
        '\u{E0000}'..='\u{E0FFF}' => Some("is a TAG or unassigned format character"),
        '\u{FEFF}' if prev.is_none() => None,
        // A soft hyphen between two letters is a hyphenation hint (German, Dutch, …), and a
        // joiner or non-joiner after a letter of a script that uses them may end a word
        // (Malayalam's old-style chillu before a space): outside review 20, fifth pass.
        '\u{00AD}' if after(char::is_alphabetic) && next.is_some_and(char::is_alphabetic) => None,
        '\u{200C}' | '\u{200D}' if after(|p| !p.is_ascii() && !p.is_whitespace()) => None,
        _ => ascii_next.then_some("sits next to an ASCII character, where no script uses one"),
    }
}

/// A character a text or emoji presentation selector (U+FE0E, U+FE0F) may follow: a symbol
/// or pictograph with an emoji presentation (©, ®, ‼, ⁉, the symbols of U+2100–U+2BFF that
/// have one, the miscellaneous symbols and dingbats, 〰, 〽, ㊗, ㊙, the enclosed and emoji
/// blocks but regional indicators and skin-tone modifiers) — not a letter, a space, general
/// punctuation or box drawing, where it would carry data and mean nothing (outside review
/// 20: one after each Cyrillic letter, after each U+2002 space, after box drawing).
fn takes_presentation(c: char) -> bool {
    matches!(
        c,
        '\u{00A9}'
            | '\u{00AE}'
            | '\u{203C}'
            | '\u{2049}'
            // The symbols of U+2100–U+2BFF with an emoji variation sequence (Unicode's
            // emoji-variation-sequences list; box drawing, most arrows and math are not).
            | '\u{2122}'
            | '\u{2139}'
            | '\u{2194}'..='\u{2199}'
            | '\u{21A9}'..='\u{21AA}'
            | '\u{231A}'..='\u{231B}'
            | '\u{2328}'
            | '\u{23CF}'
            | '\u{23E9}'..='\u{23F3}'
            | '\u{23F8}'..='\u{23FA}'
            | '\u{24C2}'
            | '\u{25AA}'..='\u{25AB}'
            | '\u{25B6}'
            | '\u{25C0}'
            | '\u{25FB}'..='\u{25FE}'
            | '\u{2600}'..='\u{27BF}'
            | '\u{2934}'..='\u{2935}'
            | '\u{2B05}'..='\u{2B07}'
            | '\u{2B1B}'..='\u{2B1C}'
            | '\u{2B50}'
            | '\u{2B55}'
            | '\u{3030}'
            | '\u{303D}'
            | '\u{3297}'
            | '\u{3299}'
            | '\u{1F000}'..='\u{1F1E5}'
            | '\u{1F200}'..='\u{1F3FA}'
            | '\u{1F400}'..='\u{1FAFF}'
    )
}

/// A character a standardized variation selector U+FE00–U+FE0D may follow: a CJK ideograph,
/// a mathematical or other symbol (U+2100–U+2BFF), or a letter of the scripts with
/// standardized variants (Myanmar, Phags-pa, Manichaean, mathematical letters) — never a
/// space.
fn takes_variant(c: char) -> bool {
    ideograph(c)
        || matches!(
            c,
            '\u{2100}'..='\u{2BFF}'
                | '\u{1000}'..='\u{109F}'
                | '\u{A9E0}'..='\u{A9FF}'
                | '\u{AA60}'..='\u{AA7F}'
                | '\u{A840}'..='\u{A877}'
                | '\u{10AC0}'..='\u{10AFF}'
                | '\u{1D400}'..='\u{1D7FF}'
        )
}

/// A CJK unified or compatibility ideograph (what an ideographic variation sequence follows).
fn ideograph(c: char) -> bool {
    matches!(c, '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{323AF}')
}

/// A letter of a right-to-left script (Hebrew, Arabic, Syriac, Thaana, N'Ko, …, their
/// presentation forms and the supplementary right-to-left blocks), not the Arabic letter mark.
fn right_to_left(c: char) -> bool {
    c != '\u{061C}'
        && matches!(
            c,
            '\u{0590}'..='\u{08FF}'
                | '\u{FB1D}'..='\u{FDFF}'
                | '\u{FE70}'..='\u{FEFC}'
                | '\u{10800}'..='\u{10FFF}'
                | '\u{1E800}'..='\u{1EFFF}'
        )
}

pub(crate) fn required_text(field: &str, value: &str) -> Result<(), RuleViolation> {
    text(field, value)?;
    ensure!(!blank(value), Rule::OutOfBounds, "{field} is blank");
    Ok(())
}

/// A list of at most `MAX_ITEMS` items, each a non-blank [`text`], none twice: every such
/// list of the catalog is a set (criteria, scope, constraints, capabilities, reasons, …),
/// where a repeated item says nothing more and makes two lists of one meaning.
pub(crate) fn list(field: &str, values: &[String]) -> Result<(), RuleViolation> {
    ensure!(
        values.len() <= MAX_ITEMS,
        Rule::OutOfBounds,
        "{field} has {} items, over {MAX_ITEMS}",
        values.len()
    );
    values.iter().try_for_each(|v| required_text(field, v))?;
    let mut seen = std::collections::BTreeSet::new();
    if let Some(twice) = values.iter().find(|v| !seen.insert(v.as_str())) {
        return Err(violation(Rule::OutOfBounds, format!("{field} lists {twice:?} twice")));
    }
    Ok(())
}

/// A name (a path, a revision): [`required_text`] on one line, with no [`invisible`]
/// character and no white space at either end, so two names that look the same are the
/// same bytes (and a name shown in a heading cannot start a block of its own).
pub(crate) fn name_text(field: &str, value: &str) -> Result<(), RuleViolation> {
    required_text(field, value)?;
    ensure!(
        !value.chars().any(|c| invisible(c) || c.is_control()) && value.trim() == value,
        Rule::OutOfBounds,
        "{field} {value:?} holds an invisible character, a line break or white space at an end"
    );
    Ok(())
}

/// A Worker payload's text: bounded and non-blank, nothing more (see [`bounded_text`]).
pub(crate) fn payload_text(field: &str, value: &str) -> Result<(), RuleViolation> {
    bounded_text(field, value)?;
    ensure!(!blank(value), Rule::OutOfBounds, "{field} is blank");
    Ok(())
}

/// A closed value (phase, verdict, result kind, ...) as it is written on the wire
/// (`IMPLEMENT`, `COMPLETION_REQUEST`): what error messages show instead of Rust `Debug`.
pub fn wire<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

/// A [`list`] with at least one item.
pub(crate) fn required_list(field: &str, values: &[String]) -> Result<(), RuleViolation> {
    list(field, values)?;
    ensure!(!values.is_empty(), Rule::OutOfBounds, "{field} is empty");
    Ok(())
}

pub(crate) fn fresh<V>(map: &state::Map<Id, V>, id: Id, what: &str) -> Result<(), RuleViolation> {
    ensure!(!map.contains_key(&id), Rule::IdReused, "{what} {id} already exists");
    Ok(())
}

pub(crate) fn get<'a, V>(map: &'a state::Map<Id, V>, id: Id, what: &str) -> Result<&'a V, RuleViolation> {
    map.get(&id).ok_or_else(|| violation(Rule::Unknown, format!("unknown {what} {id}")))
}

pub(crate) fn get_mut<'a, V: Clone>(
    map: &'a mut state::Map<Id, V>,
    id: Id,
    what: &str,
) -> Result<&'a mut V, RuleViolation> {
    map.get_mut(&id).ok_or_else(|| violation(Rule::Unknown, format!("unknown {what} {id}")))
}

/// The workflow, which must be open (not closed by ACCEPT, REJECT_TERMINAL or a
/// cancellation).
pub(crate) fn open_workflow(state: &State, workflow_id: Id) -> Result<&state::WorkflowState, RuleViolation> {
    let wf = get(&state.workflows, workflow_id, "workflow")?;
    ensure!(!wf.closed, Rule::WorkflowClosed, "workflow {workflow_id} is closed");
    Ok(wf)
}

/// The workflow, which must be open and bound to its goal's current revision.
pub(crate) fn live_workflow(state: &State, workflow_id: Id) -> Result<&state::WorkflowState, RuleViolation> {
    let wf = open_workflow(state, workflow_id)?;
    let goal = get(&state.goals, wf.goal_id, "goal")?;
    ensure!(
        goal.revision == wf.goal_revision,
        Rule::StaleGoalRevision,
        "workflow {workflow_id} is bound to goal revision {}, the goal is at {}",
        wf.goal_revision,
        goal.revision
    );
    Ok(wf)
}

/// Folds one entry into the state, or refuses it. The state is unchanged on refusal.
pub fn apply(state: &mut State, entry: &Entry) -> Result<(), RuleViolation> {
    ensure!(
        entry.seq == state.entries,
        Rule::EntryOutOfOrder,
        "entry seq {} folded at {}",
        entry.seq,
        state.entries
    );
    let seq = entry.seq;
    match &entry.event {
        Event::LedgerInitialized(g) => {
            ensure!(seq == 0 && state.ledger.is_none(), Rule::Genesis, "ledgerInitialized at seq {seq}");
            // A catalog this build does not know is refused, never guessed (outside review 24).
            ensure!(
                g.catalog == ledger_schema::events::CATALOG_VERSION,
                Rule::Genesis,
                "the ledger announces event catalog {}; this build reads catalog {}",
                g.catalog,
                ledger_schema::events::CATALOG_VERSION
            );
            state.ledger = Some(entry.ledger);
        }
        other => {
            ensure!(state.ledger.is_some(), Rule::Genesis, "{} before genesis", other.kind());
            apply_event(state, other, seq)?;
            dedup::index(state, other, seq);
        }
    }
    state.entries = seq + 1;
    state.last_time_ms = entry.time_ms;
    Ok(())
}

fn apply_event(state: &mut State, event: &Event, seq: u64) -> Result<(), RuleViolation> {
    match event {
        Event::LedgerInitialized(_) => Err(violation(Rule::Genesis, "a second ledgerInitialized")),
        Event::PolicyBundleInstalled(e) => authority::apply_policy(state, e),
        Event::ExecutionProfileInstalled(e) => authority::apply_profile(state, e),
        Event::GoalCreated(e) => goal::apply_created(state, e, seq),
        Event::GoalRevised(e) => goal::apply_revised(state, e, seq),
        Event::WorkflowStarted(e) => workflow::apply_started(state, e),
        Event::PhaseAdvanced(e) => workflow::apply_advanced(state, e),
        Event::FactProposed(e) => source::apply_fact_proposed(state, e),
        Event::FactConfirmed(e) => source::apply_fact_confirmed(state, e, seq),
        Event::FactInvalidated(e) => source::apply_fact_invalidated(state, e, seq),
        Event::HumanDecisionRecorded(e) => source::apply_human_decision(state, e, seq),
        Event::ProjectSourceRecorded(e) => source::apply_project_source(state, e, seq),
        Event::ScenarioRecorded(e) => source::apply_scenario(state, e, seq),
        Event::ObligationRecorded(e) => source::apply_obligation(state, e, seq),
        Event::BlockerRaised(e) => source::apply_blocker_raised(state, e, seq),
        Event::BlockerResolved(e) => source::apply_blocker_resolved(state, e, seq),
        Event::ScenarioRetired(e) => source::apply_scenario_retired(state, e, seq),
        Event::ObligationRetired(e) => source::apply_obligation_retired(state, e, seq),
        Event::ProjectSourceWithdrawn(e) => source::apply_project_source_withdrawn(state, e, seq),
        Event::HumanDecisionWithdrawn(e) => source::apply_human_decision_withdrawn(state, e, seq),
        Event::CompactionRequested(e) => worker::apply_compaction_requested(state, e),
        Event::GenerationOpened(e) => candidate::apply_opened(state, e),
        Event::GenerationFrozen(e) => candidate::apply_frozen(state, e),
        Event::AttemptStarted(e) => attempt::apply_started(state, e, seq),
        Event::DispatchClaimed(e) => attempt::apply_dispatch(state, e),
        Event::AttemptFinished(e) => attempt::apply_finished(state, e),
        Event::AttemptFailed(e) => attempt::apply_failed(state, e),
        Event::AttemptCancelled(e) => attempt::apply_cancelled(state, e, seq),
        Event::WorkerEventAdmitted(e) => worker::apply_admitted(state, e, seq),
        Event::WorkerDeliveryIgnored(e) => worker::apply_ignored(state, e, seq),
        Event::EvidenceRecorded(e) => evidence::apply_recorded(state, e, seq),
        Event::AcceptanceDecided(e) => acceptance::apply_decided(state, e, seq),
        Event::RepairRecorded(e) => repair::apply_recorded(state, e, seq),
        Event::SourceRegistryRecorded(e) => profile::apply_registry(state, e, seq),
        Event::ProfileRevisionRecorded(e) => profile::apply_revision(state, e, seq),
        Event::SelectionRecorded(e) => selection::apply_selection(state, e, seq),
        Event::WorkflowCancelled(e) => workflow::apply_cancelled(state, e),
    }
}

/// The first entry of a `restartAttempt`: the interrupted Attempt's cancellation (its
/// replacement's start is compiled by the admission step over the state after it).
pub fn restart_cancellation(c: &command::RestartAttempt) -> Event {
    Event::AttemptCancelled(ledger_schema::events::AttemptCancelled {
        attempt_id: c.attempt_id,
        workflow_version: c.workflow_version,
        reason: c.reason.clone(),
    })
}

/// Folds `event` into `state` as the next entry would be folded, without an entry (for
/// deciding a command whose later events depend on its earlier ones). The state is
/// unchanged on refusal.
pub fn fold_pending(state: &mut State, event: &Event) -> Result<(), RuleViolation> {
    ensure!(state.ledger.is_some(), Rule::Genesis, "{} before genesis", event.kind());
    apply_event(state, event, state.entries)?;
    dedup::index(state, event, state.entries);
    state.entries += 1;
    Ok(())
}

/// How an Attempt start becomes its `attemptStarted` event: the Context Compiler, which the
/// runtime does not know — the admission step passes it in. Called over the state the start
/// is decided against (for a restart, the state after the interrupted Attempt's end).
pub type CompileStart<'a, E> = &'a dyn Fn(&State, &command::StartAttempt) -> Result<Event, E>;

/// Turns a command into the events that would record it (each still passes through
/// `apply`), or — when the step it takes is already recorded ([`dedup::recorded`]) — into
/// [`Decided::Redelivered`], which whoever holds the history resolves against the stored
/// original ([`dedup::same_command`]: a duplicate, else [`decide_new`] refuses it).
/// An Attempt start's event is made by `compile`.
pub fn decide<E: From<Rejection>>(
    state: &State,
    command: &Command,
    compile: CompileStart<'_, E>,
) -> Result<Decided, E> {
    match dedup::recorded(state, command) {
        Some(seq) => Ok(Decided::Redelivered { seq }),
        None => decide_new(state, command, compile),
    }
}

/// [`decide`] as if the command had never been submitted: every rule decides it (a step
/// already taken is refused by its rule). Worker events keep their own dedup here.
pub fn decide_new<E: From<Rejection>>(
    state: &State,
    command: &Command,
    compile: CompileStart<'_, E>,
) -> Result<Decided, E> {
    use Command as C;
    let one = |e: Event| Ok(Decided::Events(vec![e]));
    match command {
        C::StartWorkflow(c) => one(workflow::decide_start(state, c)?),
        C::DeliverWorkerEvent(c) => Ok(worker::decide_deliver(state, c)?),
        C::DecideAcceptance(c) => one(acceptance::decide(state, c)?),
        C::RecordRepair(c) => Ok(repair::decide(state, c).map(Decided::Events)?),
        C::StartAttempt(c) => one(compile(state, c)?),
        C::RestartAttempt(c) => {
            // The interrupted Attempt ends first; the replacement compiles over the state
            // after that, exactly as admission will re-derive it.
            let cancel = restart_cancellation(c);
            let mut after = state.clone();
            fold_pending(&mut after, &cancel).map_err(|mut v| {
                // Said as the restart it is (outside review 47: it read "cancel for …").
                v.detail = format!("restartAttempt cancels attempt {} first: {}", c.attempt_id, v.detail);
                Rejection::from(v)
            })?;
            // The replacement carries the interrupted Attempt's task selection, if any
            // (refused if that selection is no longer current: start a new Attempt).
            let interrupted = after.attempts.get(&c.attempt_id);
            let start = command::StartAttempt {
                attempt_id: c.replacement_attempt_id,
                workflow_id: interrupted.map(|a| a.workflow_id).unwrap_or_default(),
                worker_session_id: c.worker_session_id,
                thread: ledger_schema::types::ThreadChoice::Fresh,
                selection_receipt: interrupted.and_then(|a| a.selection_receipt),
            };
            // A selection gone stale stops the restart, which carries it: say the way out
            // (the interrupted Attempt is still active when this is refused).
            if let Err(mut v) = attempt::attempt_binding(&after, &start)
                && v.rule == Rule::AttemptSelection
            {
                v.detail = format!(
                    "{}; restartAttempt carries the interrupted Attempt's task selection: cancel it (cancelAttempt) \
                     and start a new Attempt with a fresh selection",
                    v.detail
                );
                return Err(Rejection::from(v).into());
            }
            // The replacement names the Attempt it replaces (outside review 74).
            let mut started = compile(&after, &start)?;
            if let Event::AttemptStarted(a) = &mut started {
                a.replaces = Some(c.attempt_id);
            }
            Ok(Decided::Events(vec![cancel, started]))
        }
        // Every other command is decided from the command alone (an exhaustive table).
        other => match decide_from_command(other) {
            Some(event) => one(event),
            None => unreachable!("decide_from_command decides every remaining command, not {}", other.kind()),
        },
    }
}

/// The one event of a command whose event depends on nothing but the command (its rules are
/// checked when it is applied); `None` for the commands decided against the state or by the
/// compiler. Shared by [`decide_new`] and the redelivery check (`dedup::same_command`), so a
/// resubmission is compared with exactly what deciding it would record.
pub fn decide_from_command(command: &Command) -> Option<Event> {
    use Command as C;
    Some(match command {
        C::InstallPolicy(c) => authority::decide_policy(c),
        C::InstallProfile(c) => authority::decide_profile(c),
        C::CreateGoal(c) => goal::decide_create(c),
        C::ReviseGoal(c) => goal::decide_revise(c),
        C::AdvancePhase(c) => workflow::decide_advance(c),
        C::ProposeFact(c) => source::decide_propose_fact(c),
        C::ConfirmFact(c) => source::decide_confirm_fact(c),
        C::InvalidateFact(c) => source::decide_invalidate_fact(c),
        C::RecordHumanDecision(c) => source::decide_human_decision(c),
        C::RecordProjectSource(c) => source::decide_project_source(c),
        C::RecordScenario(c) => source::decide_scenario(c),
        C::RecordObligation(c) => source::decide_obligation(c),
        C::RaiseBlocker(c) => source::decide_raise_blocker(c),
        C::ResolveBlocker(c) => source::decide_resolve_blocker(c),
        C::RetireScenario(c) => source::decide_retire_scenario(c),
        C::RetireObligation(c) => source::decide_retire_obligation(c),
        C::WithdrawProjectSource(c) => source::decide_withdraw_project_source(c),
        C::WithdrawHumanDecision(c) => source::decide_withdraw_human_decision(c),
        C::RequestCompaction(c) => worker::decide_request_compaction(c),
        C::OpenGeneration(c) => candidate::decide_open(c),
        C::FreezeGeneration(c) => candidate::decide_freeze(c),
        C::ClaimDispatch(c) => attempt::decide_claim(c),
        C::FinishAttempt(c) => attempt::decide_finish(c),
        C::FailAttempt(c) => attempt::decide_fail(c),
        C::CancelAttempt(c) => attempt::decide_cancel(c),
        C::RecordEvidence(c) => evidence::decide_record(c),
        C::CancelWorkflow(c) => workflow::decide_cancel(c),
        C::StartWorkflow(_)
        | C::StartAttempt(_)
        | C::RestartAttempt(_)
        | C::DeliverWorkerEvent(_)
        | C::DecideAcceptance(_)
        | C::RecordRepair(_) => return None,
    })
}
