//! Durable sources: Facts, Human Decisions, project sources, scenarios, obligations,
//! blockers.

use ledger_schema::events::{
    BlockerRaised, BlockerResolved, FactConfirmed, FactInvalidated, FactProposed, HumanDecisionRecorded,
    HumanDecisionWithdrawn, ObligationRecorded, ObligationRetired, ProjectSourceRecorded,
    ProjectSourceWithdrawn, ScenarioRecorded, ScenarioRetired,
};
use ledger_schema::{Digest, DigestKind, Event, Id};

use super::command::{
    ConfirmFact, InvalidateFact, ProposeFact, RaiseBlocker, RecordHumanDecision, RecordObligation,
    RecordProjectSource, RecordScenario, ResolveBlocker, RetireObligation, RetireScenario,
    WithdrawHumanDecision, WithdrawProjectSource,
};
use super::state::{
    BlockerState, FactState, FactStatus, HumanDecisionState, ObligationState, ScenarioState, SourceState,
    State, WithdrawnRevision,
};
use super::{Rule, RuleViolation, ensure, fresh, get, get_mut, live_workflow, required_text, text};

pub fn decide_propose_fact(c: &ProposeFact) -> Event {
    Event::FactProposed(FactProposed {
        fact_id: c.fact_id,
        goal_id: c.goal_id,
        revision: c.revision,
        statement: c.statement.clone(),
        provenance: c.provenance.clone(),
    })
}

pub fn decide_confirm_fact(c: &ConfirmFact) -> Event {
    Event::FactConfirmed(FactConfirmed {
        fact_id: c.fact_id,
        revision: c.revision,
        confirmed_by: c.confirmed_by.clone(),
    })
}

pub fn decide_invalidate_fact(c: &InvalidateFact) -> Event {
    Event::FactInvalidated(FactInvalidated {
        fact_id: c.fact_id,
        revision: c.revision,
        reason: c.reason.clone(),
        invalidated_by: c.invalidated_by.clone(),
    })
}

pub fn decide_human_decision(c: &RecordHumanDecision) -> Event {
    Event::HumanDecisionRecorded(HumanDecisionRecorded {
        decision_id: c.decision_id,
        goal_id: c.goal_id,
        question: c.question.clone(),
        answer: c.answer.clone(),
        decided_by: c.decided_by.clone(),
        supersedes: c.supersedes,
    })
}

pub fn decide_project_source(c: &RecordProjectSource) -> Event {
    Event::ProjectSourceRecorded(ProjectSourceRecorded {
        source_id: c.source_id,
        goal_id: c.goal_id,
        path: c.path.clone(),
        revision: c.revision.clone(),
        digest: Digest::of(DigestKind::Source, c.content.as_bytes()),
        content: c.content.clone(),
    })
}

pub fn decide_scenario(c: &RecordScenario) -> Event {
    Event::ScenarioRecorded(ScenarioRecorded {
        scenario_id: c.scenario_id,
        goal_id: c.goal_id,
        title: c.title.clone(),
        description: c.description.clone(),
    })
}

pub fn decide_obligation(c: &RecordObligation) -> Event {
    Event::ObligationRecorded(ObligationRecorded {
        obligation_id: c.obligation_id,
        goal_id: c.goal_id,
        description: c.description.clone(),
        check_spec_id: c.check_spec_id,
        check_spec_digest: c.check_spec_digest,
    })
}

pub fn decide_raise_blocker(c: &RaiseBlocker) -> Event {
    Event::BlockerRaised(BlockerRaised {
        blocker_id: c.blocker_id,
        workflow_id: c.workflow_id,
        description: c.description.clone(),
    })
}

pub fn decide_resolve_blocker(c: &ResolveBlocker) -> Event {
    Event::BlockerResolved(BlockerResolved { blocker_id: c.blocker_id, resolution: c.resolution.clone() })
}

pub fn decide_withdraw_project_source(c: &WithdrawProjectSource) -> Event {
    Event::ProjectSourceWithdrawn(ProjectSourceWithdrawn { reason: c.reason.clone(), source_id: c.source_id })
}

pub fn decide_withdraw_human_decision(c: &WithdrawHumanDecision) -> Event {
    Event::HumanDecisionWithdrawn(HumanDecisionWithdrawn {
        reason: c.reason.clone(),
        decision_id: c.decision_id,
        withdrawn_by: c.withdrawn_by.clone(),
    })
}

pub fn decide_retire_scenario(c: &RetireScenario) -> Event {
    Event::ScenarioRetired(ScenarioRetired { reason: c.reason.clone(), scenario_id: c.scenario_id })
}

pub fn decide_retire_obligation(c: &RetireObligation) -> Event {
    Event::ObligationRetired(ObligationRetired { reason: c.reason.clone(), obligation_id: c.obligation_id })
}

/// A Fact enters PROPOSED. Re-proposing an existing Fact is a new revision (+1) that is
/// PROPOSED again until confirmed — never confirmed by carrying over.
pub fn apply_fact_proposed(state: &mut State, e: &FactProposed) -> Result<(), RuleViolation> {
    get(&state.goals, e.goal_id, "goal")?;
    required_text("statement", &e.statement)?;
    required_text("provenance", &e.provenance)?;
    let expected = match state.facts.get(&e.fact_id) {
        None => 1,
        Some(f) => {
            ensure!(
                f.goal_id == e.goal_id,
                Rule::FactStatus,
                "fact {} belongs to goal {}",
                e.fact_id,
                f.goal_id
            );
            // A confirmed revision is a human's authority: a proposal does not displace it
            // (it would drop the confirmed statement from every later context: outside
            // review 39). A human withdraws it first (`invalidateFact`, `invalidatedBy`).
            ensure!(
                f.status != FactStatus::Confirmed,
                Rule::FactStatus,
                "fact {} is CONFIRMED at revision {} (by {}): a proposal does not replace a confirmed fact — a \
                 human invalidates it first (invalidateFact with invalidatedBy {HUMAN_PRINCIPAL}NAME), or propose \
                 the change as another fact",
                e.fact_id,
                f.revision,
                f.confirmed_by.as_deref().unwrap_or("a human")
            );
            f.revision.saturating_add(1)
        }
    };
    ensure!(
        e.revision == expected,
        Rule::FactStatus,
        "fact {} revision must be {expected}, not {}",
        e.fact_id,
        e.revision
    );
    // One statement is one fact of a goal: the same statement again under another id — read
    // as decision questions are compared (case, spacing, invisible characters, a closing
    // mark) — would reach workers twice as authority (outside review 67). An invalidated
    // one is no longer stated.
    // The window of the newest confirmed revision, kept across a re-proposal (outside review
    // 191 F4: a confirmed revision invalidated and a new one proposed before a claim left no
    // trace that an Attempt started over a confirmed fact no longer stands).
    let (confirmed_seq, withdrawn_seq, withdrawn) = state
        .facts
        .get(&e.fact_id)
        .map_or((None, None, Vec::new()), |f| (f.confirmed_seq, f.withdrawn_seq, f.withdrawn.clone()));
    let key = statement_key(&e.statement);
    if let Some((other, f)) = state.facts.iter().find(|(id, f)| {
        **id != e.fact_id
            && f.goal_id == e.goal_id
            && f.status != FactStatus::Invalidated
            && statement_key(&f.statement) == key
    }) {
        return Err(super::violation(
            Rule::FactStatus,
            format!(
                "fact {other} (revision {}, {}) already states this for goal {}: one statement is one fact — \
                 confirm or revise that one",
                f.revision,
                super::wire(&f.status),
                e.goal_id
            ),
        ));
    }
    state.facts.insert(
        e.fact_id,
        FactState {
            goal_id: e.goal_id,
            revision: e.revision,
            status: FactStatus::Proposed,
            statement: e.statement.clone(),
            provenance: e.provenance.clone(),
            confirmed_by: None,
            invalidated_by: None,
            withdrawn_seq,
            confirmed_seq,
            withdrawn,
        },
    );
    Ok(())
}

/// A fact's statement as a reader compares it, conservatively — two statements that differ
/// in anything a careful reader could mean stay two (outside review 71: a case change in an
/// identifier, `2³` against `23`, `modern` against `modem`, a `?` are meaning): NFC, invisible
/// characters dropped, white space collapsed and trimmed, one closing full stop (`.` or its
/// full-width, half-width, small or ideographic form) dropped, and each
/// letter outside ASCII read as the ASCII it is confusable with (UTS #39 skeleton: a Cyrillic
/// `а`, a Greek `ο`, a full-width `ｐ` read as `a`, `o`, `p`; outside review 69) — or, where
/// its compatibility form (NFKC) is ASCII letters, as those: a full-width, mathematical or
/// circled letter is the letter it is a form of (outside review 250 F3: the skeleton reads a
/// full-width `ｍ` as `rn`, and `ⓔ` as itself, so "Keep the ｅｎｕｍ?" stood beside "Keep the
/// enum?" with the opposite answer). ASCII itself is never mapped, so `l`, `1` and `I` stay
/// three characters, and no superscript digit is (a digit is no letter: `2³` is not `23`).
fn statement_key(statement: &str) -> String {
    let read = super::goal::as_read(statement);
    // A full stop in any of its forms (outside review 166 F2: `．`, `﹒`, `。` made another
    // fact), after the reading, so a closing `…` is `...` as inside a text (outside review
    // 260 F3: "the lock…" and "the lock..." were two facts).
    read.strip_suffix(['.', '｡', '。', '﹒']).unwrap_or(&read).trim_end().to_owned()
}

/// The fact, which must be at exactly `revision`.
fn fact_at(state: &mut State, fact_id: Id, revision: u32) -> Result<&mut FactState, RuleViolation> {
    let fact = get_mut(&mut state.facts, fact_id, "fact")?;
    ensure!(
        fact.revision == revision,
        Rule::FactStatus,
        "fact {fact_id} is at revision {}, not {revision}",
        fact.revision
    );
    Ok(fact)
}

/// The principal who confirms a Fact or makes a Human Decision: `human:` and a name (seed:
/// the compiler is not "a way to convert inference into authority" — a worker confirming its
/// own hypothesis, or answering its own question, would be exactly that).
/// The longest human principal, in bytes: a name, not a text (outside review 150 F2: a
/// withdrawal's 60 KB `withdrawnBy`, copied into the omission of every later context of the
/// goal, went round the bound on its reason).
pub const MAX_PRINCIPAL_BYTES: usize = 256;

fn human_principal(field: &str, value: &str) -> Result<(), RuleViolation> {
    required_text(field, value)?;
    ensure!(
        value.len() <= MAX_PRINCIPAL_BYTES,
        Rule::OutOfBounds,
        "{field} is {} bytes, over {MAX_PRINCIPAL_BYTES}: a human principal is a name (`{HUMAN_PRINCIPAL}NAME`)",
        value.len()
    );
    // A name: no blank or invisible character at either end, no second kind (`:`), and at
    // least one letter or digit — `human:.` or `human:worker:codex` names nobody.
    let named = value.strip_prefix(HUMAN_PRINCIPAL).is_some_and(|n| {
        let edge = |c: Option<char>| c.is_some_and(|c| c.is_whitespace() || super::invisible(c));
        !edge(n.chars().next())
            && !edge(n.chars().next_back())
            && !n.contains(':')
            && n.chars().any(char::is_alphanumeric)
    });
    ensure!(
        named,
        Rule::HumanAuthority,
        "{field} is {value:?}: authority comes from a human principal, written {HUMAN_PRINCIPAL}NAME (a name \
         with a letter or digit, no blank at either end, no `:`)"
    );
    Ok(())
}

/// A question as two decisions are compared: invisible characters dropped, blanks collapsed
/// and trimmed, case folded, the sentence's own marks at its ends dropped (`?`, `!`, `.`,
/// `…`, their full-width, half-width, small and Arabic forms, the Greek question mark and
/// `‼ ⁇ ⁈ ⁉` at the end (outside review 166 F2: `﹖` and U+037E let a second answer stand), `¿` and
/// `¡` at the start) and quotes, brackets or emphasis around the whole question — so a
/// byte-order mark, a soft hyphen, a double space, a capital or a missing `?` does not make
/// the same visible question a new one. Other punctuation at an end is a word's (`C++`,
/// `C#`, `5%`, `parse()`: outside review 47) and is kept. (Unicode normalisation forms are
/// not folded: a precomposed and a decomposed accent still differ.)
pub fn question_key(question: &str) -> String {
    let mut key = String::with_capacity(question.len());
    // Markup is no part of the question (outside review 177 F1: "Keep the `Error` enum?",
    // "Keep the \"Error\" enum?", "Keep the *Error* enum?" each stood beside "Keep the Error
    // enum?" as a second answer): backticks, quotes at a word's ends and emphasis marks
    // around a word are dropped, `&nbsp;` read as a blank. Only markup: a word's own `_`,
    // `*` or `-` stays (outside review 180 F1: `_id` and `id`, `*args` and `args`,
    // `user-name` and `user name` were refused as one question).
    // (A Markdown link's target is content: `[the docs](v1.md)` and `(v2.md)` are two
    // questions — outside review 184 F3.)
    // (And `&#x3F;`, a Markdown escape `\?`, `\*`, an HTML comment: outside review 185 F3.)
    let mut spaced = blank_html_comments(question)
        .replace("&nbsp;", " ")
        .replace("&#63;", "?")
        .replace("&#x3F;", "?")
        .replace("&#x3f;", "?")
        .replace("&amp;", "&");
    for escaped in ['?', '*', '_', '!', '.', '`', '[', ']', '(', ')', '#', '-', '\\'] {
        spaced = spaced.replace(&format!("\\{escaped}"), &escaped.to_string());
    }
    for br in ["<br>", "<br/>", "<br />", "<BR>", "<BR/>", "<BR />"] {
        spaced = spaced.replace(br, " ");
    }
    // Emphasis runs (`**`, `~~`, and `__` over several words) that open on one word and
    // close on another: a run that pairs with nothing is a word's own (`**kwargs`, and
    // `__init__` alone: outside review 182 F2).
    let words: Vec<&str> = spaced.split(char::is_whitespace).filter(|w| !w.is_empty()).collect();
    let paired = |mark: char| {
        let run: String = [mark, mark].iter().collect();
        let opens = words.iter().position(|w| w.trim_start_matches(['"', '\'']).starts_with(&run));
        let closes =
            words.iter().rposition(|w| w.trim_end_matches(['"', '\'', '?', '.', '!']).ends_with(&run));
        match (opens, closes) {
            (Some(o), Some(c)) => c > o || (c == o && mark != '_'),
            _ => false,
        }
    };
    let runs = [('*', paired('*')), ('_', paired('_')), ('~', paired('~'))];
    for word in spaced.split(char::is_whitespace) {
        // A word in backticks is code: its marks are its own.
        let code = word.contains('`');
        let word: String = word
            .chars()
            .filter(|c| !super::invisible(*c) && *c != '`')
            .flat_map(char::to_lowercase)
            .collect();
        let word = without_word_marks(&word, &runs, code);
        if !word.is_empty() {
            if !key.is_empty() {
                key.push(' ');
            }
            key.push_str(word);
        }
    }
    // A sentence's closing or opening mark does not make another question ("…enum" and
    // "…enum?", "¿…?": outside review 44); a word's punctuation does ("C++?", "C?": 47).
    // Quotes, brackets or emphasis around the whole question do not either ("\"…?\"",
    // "(…?)", "*…?*": outside reviews 49, 51), nor a clause's mark, the reversed or an
    // inverted mark at its end ("…enum;", "…enum:", "…enum?¿", "…enum⸮"), a dash after its
    // mark ("…enum?-", "…enum? — "), a quote or bracket closing nothing opened ("…enum?\"",
    // "…enum?)"), or a label before it ("Q: …", "1. …", "- …") — outside review 174 F1: each
    // stood beside the first as a second answer.
    let closing = |c: char| "?!.…？！。．｡؟۔‼⁇⁈⁉﹖﹗﹒\u{37E}⸮¿¡;:；：‽".contains(c) || c.is_whitespace();
    let opening = |c: char| "¿¡".contains(c) || c.is_whitespace();
    // Any opening quote or bracket with any closing one: a mismatched pair wraps as well
    // (outside review 51: `『…』`, `【…】`, `（…）`, `{…}`, `~~…~~`, `(…]` were new questions).
    const OPENERS: &str = "\"'“‘«„‹<([{*_`~「『【〈《（［｛＂＇";
    const CLOSERS: &str = "\"'”’»“›>)]}*_`~」』】〉》）］｝＂＇";
    let opener = |c: char| OPENERS.contains(c);
    let closer = |c: char| CLOSERS.contains(c);
    let mut key = key.as_str();
    loop {
        let trimmed = trim_end_marks(key, &closing).trim_start_matches(opening);
        let inner = inline_tag_end(trimmed)
            .or_else(|| trimmed.strip_prefix(opener).and_then(|rest| rest.strip_suffix(closer)))
            .or_else(|| unpaired_end(trimmed))
            .or_else(|| question_label(trimmed))
            .filter(|inner| !inner.trim().is_empty());
        match inner {
            Some(inner) => key = inner,
            None => return trimmed.to_owned(),
        }
    }
}

/// `word` without the quotes at its ends and the emphasis marks around it (the same run of
/// `*`, `_` or `~` at both ends, `*error*`, `__x__`); a word of marks alone is none.
fn without_word_marks<'w>(word: &'w str, runs: &[(char, bool)], code: bool) -> &'w str {
    const QUOTES: &str = "\"“”«»„‘’'＂＇";
    // A word of marks alone is the question's subject ("Use the ' character?", "Use * for
    // emphasis?": outside review 183 F1), kept whole.
    if word.chars().all(|c| QUOTES.contains(c) || matches!(c, '*' | '_' | '~')) {
        return word;
    }
    // (A quote after a digit is a unit: `5'`, `5"` — outside review 184 F3.)
    let mut word = word.trim_start_matches(|c: char| QUOTES.contains(c));
    let unit = word.trim_end_matches(|c: char| QUOTES.contains(c)).ends_with(|c: char| c.is_ascii_digit());
    if !unit {
        word = word.trim_end_matches(|c: char| QUOTES.contains(c));
    }
    if code {
        return word;
    }
    // A run of two or more at either end, where the question pairs it ([`question_key`]).
    for (mark, _) in runs.iter().copied().filter(|(_, paired)| *paired) {
        let twice: String = [mark, mark].iter().collect();
        if word.starts_with(&twice) {
            word = word.trim_start_matches(mark);
        }
        if word.ends_with(&twice) {
            word = word.trim_end_matches(mark);
        }
        word = word.trim_matches(|c: char| QUOTES.contains(c));
    }
    // One mark on each side, once (`*error*`); `__init__` is a name (outside review 185 F4).
    if let Some(mark) = word.chars().next().filter(|c| matches!(c, '*' | '_' | '~'))
        && let Some(inner) = word.strip_prefix(mark).and_then(|w| w.strip_suffix(mark))
        && !inner.is_empty()
        && !inner.starts_with(mark)
        && !inner.ends_with(mark)
    {
        return inner.trim_matches(|c: char| QUOTES.contains(c));
    }
    word
}

/// `text` without its HTML comments (`<!-- … -->`; one left open runs to the end).
fn blank_html_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("<!--") {
        out.push_str(rest.get(..at).unwrap_or_default());
        out.push(' ');
        let inner = rest.get(at + 4..).unwrap_or_default();
        rest = inner.find("-->").and_then(|end| inner.get(end + 3..)).unwrap_or_default();
    }
    out.push_str(rest);
    out
}

/// `key` without an inline HTML tag opening or closing it, if it has one.
fn inline_tag_end(key: &str) -> Option<&str> {
    let tag = |t: &str| INLINE_TAGS.contains(&t.trim().to_ascii_lowercase().as_str());
    if let Some((t, rest)) = key.strip_prefix('<').and_then(|k| k.split_once('>'))
        && tag(t)
    {
        return Some(rest);
    }
    key.strip_suffix('>').and_then(|k| k.rsplit_once("</")).filter(|(_, t)| tag(t)).map(|(rest, _)| rest)
}

/// Inline HTML tags a question may be wrapped in (`<b>…</b>`); only at its ends — `Replace
/// <b> with <strong>?` keeps its words (outside review 180 F1).
const INLINE_TAGS: &[&str] = &[
    "b", "i", "u", "s", "em", "strong", "code", "del", "ins", "mark", "small", "span", "kbd", "tt", "q", "p",
];

/// Pairs of quotes and brackets, as opened and closed.
const PAIRS: [(char, char); 25] = [
    ('"', '"'),
    ('\'', '\''),
    ('“', '”'),
    ('‘', '’'),
    ('«', '»'),
    ('„', '“'),
    ('‹', '›'),
    ('<', '>'),
    ('(', ')'),
    ('[', ']'),
    ('{', '}'),
    ('*', '*'),
    ('_', '_'),
    ('`', '`'),
    ('~', '~'),
    ('「', '」'),
    ('『', '』'),
    ('【', '】'),
    ('〈', '〉'),
    ('《', '》'),
    ('（', '）'),
    ('［', '］'),
    ('｛', '｝'),
    ('＂', '＂'),
    ('＇', '＇'),
];

/// `key` without a quote or bracket at its end that closes nothing opened in it, or at its
/// start that nothing closes ("…enum?\"", "…enum?)", "\"…enum?"), if it has one.
fn unpaired_end(key: &str) -> Option<&str> {
    let count = |c: char| key.chars().filter(|k| *k == c).count();
    let unpaired = |c: char, closing: bool| {
        let mut pairs = PAIRS.iter().filter(|(o, k)| if closing { *k == c } else { *o == c }).peekable();
        pairs.peek().is_some()
            && pairs.all(|(o, k)| if o == k { count(c) % 2 == 1 } else { count(*o) != count(*k) })
    };
    let last = key.chars().next_back()?;
    let first = key.chars().next()?;
    if unpaired(last, true) {
        key.strip_suffix(last)
    } else if unpaired(first, false) {
        key.strip_prefix(first)
    } else {
        None
    }
}

/// `key` without the closing marks at its end, and without a dash there where a closing
/// mark or a blank comes before it ("…enum?-", "…enum? —"; "C--?" keeps its dashes).
fn trim_end_marks<'k>(key: &'k str, closing: &dyn Fn(char) -> bool) -> &'k str {
    let mut key = key.trim_end_matches(closing);
    while let Some(rest) = key.strip_suffix(['-', '–', '—']) {
        let rest = rest.trim_end_matches(char::is_whitespace);
        if !rest.ends_with(closing) && rest.len() == key.len() - 1 {
            // A dash right after a letter or another dash is part of a word.
            break;
        }
        key = rest.trim_end_matches(closing);
    }
    key
}

/// The question after a label that opens it (`q:`, `question:`, `q1.`, `1.`, `2)`, a list
/// bullet), if it opens with one; `key` is lower case, its blanks single spaces.
fn question_label(key: &str) -> Option<&str> {
    // A trailing answer hint or footnote mark (outside review 177 F1: "… (yes/no)", "… [1]").
    for hint in ["(yes/no)", "(y/n)", "[y/n]", "[yes/no]", "(yes or no)", "(yes / no)", " y/n", " yes/no"] {
        if let Some(rest) = key.strip_suffix(hint) {
            return Some(rest);
        }
    }
    // (A footnote stands apart: `argv[1]` is an index — outside review 182 F2.)
    if let Some(rest) = key
        .strip_suffix(']')
        .and_then(|k| k.rsplit_once('['))
        .map(|(head, n)| (head, n.strip_prefix('^').unwrap_or(n)))
        .filter(|(_, n)| !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()))
        .filter(|(head, _)| head.trim_end().ends_with(['?', '!', '.']))
    {
        return Some(rest.0);
    }
    // An @-mention is content ("Assign the bug to @alice?" and "… @bob?" ask two things —
    // outside review 183 F1), but one after the question's closing mark addresses someone
    // (outside review 184 F2: "Keep the enum? @bob").
    if let Some((head, last)) = key.rsplit_once(' ')
        && last.len() > 1
        && last.starts_with('@')
        && head.trim_end().ends_with(['?', '!', '.', '？', '！'])
    {
        return Some(head);
    }
    let (first, rest) = key.split_once(' ')?;
    let digits = |n: &str| !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit());
    let roman = |n: &str| !n.is_empty() && n.len() <= 4 && n.chars().all(|c| matches!(c, 'i' | 'v' | 'x'));
    let letter = |n: &str| n.chars().count() == 1 && n.chars().all(char::is_alphabetic);
    let enumerator = |n: &str| digits(n) || roman(n) || letter(n);
    // `1.`, `2)`, `a.`, `iv)`, `(a)`, `(1)`, `q2:`, a heading's `#`s, a bullet, a task box.
    // (A single letter or `i` with `.` is a person's initial as often — "J. Smith to review?"
    // and "K. Smith …" are two questions: outside review 185 F4 — so only `)` or `:` after it.)
    let numbered = |w: &str| match w.strip_suffix('.') {
        Some(n) => digits(n) || (roman(n) && n.len() > 1),
        None => w.strip_suffix([')', ':', '：']).is_some_and(enumerator),
    };
    let labelled = numbered(first)
        || first.strip_prefix('(').and_then(|w| w.strip_suffix(')')).is_some_and(enumerator)
        || first.chars().all(|c| c == '#')
        || first.strip_prefix('q').is_some_and(numbered)
        || matches!(first, "-" | "–" | "—" | "•" | "·" | ">" | "+" | "q." | "q)" | "[x]" | "[]");
    // An address before it: `@bob:` (outside review 184 F2).
    if labelled || (first.len() > 2 && first.starts_with('@') && first.ends_with([':', ','])) {
        return Some(rest);
    }
    if first == "["
        && let Some(after) = rest.strip_prefix("] ")
    {
        return Some(after);
    }
    // A label and a colon (`Q:`, `Question:`, `Re:`, `Decision:`, `TODO:`, `Open question:`),
    // or `Question 1:` — labels, not any word: `staging:` and `production:` ask two things
    // (outside review 180 F1, F2).
    const LABELS: &[&str] =
        &["q", "question", "open question", "re", "decision", "todo", "note", "ask", "query", "fyi"];
    if let Some((head, tail)) = key.split_once([':', '：'])
        && LABELS.contains(&head.trim())
    {
        return Some(tail.trim_start());
    }
    let (second, after) = rest.split_once(' ')?;
    let question_word = matches!(first, "q" | "question");
    (question_word && second.strip_suffix([':', '：', ')', '.']).is_some_and(enumerator)).then_some(after)
}

/// The prefix of a human principal (`human:alice`).
pub const HUMAN_PRINCIPAL: &str = "human:";

pub fn apply_fact_confirmed(state: &mut State, e: &FactConfirmed, seq: u64) -> Result<(), RuleViolation> {
    human_principal("confirmedBy", &e.confirmed_by)?;
    let fact = fact_at(state, e.fact_id, e.revision)?;
    ensure!(
        fact.status == FactStatus::Proposed,
        Rule::FactStatus,
        "fact {} is {}: only a PROPOSED fact can be confirmed",
        e.fact_id,
        super::wire(&fact.status)
    );
    fact.status = FactStatus::Confirmed;
    fact.confirmed_by = Some(e.confirmed_by.clone());
    fact.confirmed_seq = Some(seq);
    Ok(())
}

/// A Fact revision is invalidated (final for that revision). A CONFIRMED one only by a
/// human principal (`invalidatedBy`), as only a human confirms it: a worker withdrawing a
/// confirmed fact would override human authority (outside review 39). A PROPOSED one by
/// anyone; a principal given for it is recorded as written.
pub fn apply_fact_invalidated(state: &mut State, e: &FactInvalidated, seq: u64) -> Result<(), RuleViolation> {
    required_text("reason", &e.reason)?;
    if let Some(by) = &e.invalidated_by {
        required_text("invalidatedBy", by)?;
    }
    let fact = fact_at(state, e.fact_id, e.revision)?;
    ensure!(
        fact.status != FactStatus::Invalidated,
        Rule::FactStatus,
        "fact {} is already invalidated",
        e.fact_id
    );
    if fact.status == FactStatus::Confirmed {
        let Some(by) = &e.invalidated_by else {
            return Err(super::violation(
                Rule::HumanAuthority,
                format!(
                    "fact {} is CONFIRMED at revision {}: only a human withdraws it (invalidatedBy \
                     {HUMAN_PRINCIPAL}NAME)",
                    e.fact_id, e.revision
                ),
            ));
        };
        human_principal("invalidatedBy", by)?;
        fact.withdrawn_seq = Some(seq);
        if let Some(confirmed_seq) = fact.confirmed_seq {
            let revision = fact.revision;
            fact.withdrawn.push(WithdrawnRevision { revision, confirmed_seq, withdrawn_seq: seq });
        }
    }
    fact.status = FactStatus::Invalidated;
    fact.invalidated_by.clone_from(&e.invalidated_by);
    Ok(())
}

pub fn apply_human_decision(
    state: &mut State,
    e: &HumanDecisionRecorded,
    seq: u64,
) -> Result<(), RuleViolation> {
    fresh(&state.human_decisions, e.decision_id, "human decision")?;
    get(&state.goals, e.goal_id, "goal")?;
    required_text("question", &e.question)?;
    required_text("answer", &e.answer)?;
    human_principal("decidedBy", &e.decided_by)?;
    let asked = question_key(&e.question);
    // The decision that stands on this question is the latest; one made before the goal's
    // current revision may be superseded by a new answer — the human's way to correct it
    // once the goal changed (outside review 39) — and the compiler then delivers only the
    // new one. One made at the current revision may not: two answers would both be authority.
    // A question that reads as another decision's of the goal but folds to another key (an
    // NFD accent, a Cyrillic letter) would stand beside it as a second answer to what reads
    // as one question (outside review 75): spelled as that one, or refused.
    // Look-alike letters are read in the case written as well as folded (outside review 138
    // F1: a Cyrillic `В` folds to `в`, which looks like no Latin letter, and "Keep the В
    // tree?" stood beside "Keep the B tree?" with the opposite answer).
    let ours = looks(&e.question);
    if let Some((id, d)) = state
        .human_decisions
        .iter()
        .find(|(_, d)| d.goal_id == e.goal_id && d.key != asked && d.looks.iter().any(|k| ours.contains(k)))
    {
        let change = match d.withdrawn_seq {
            Some(at) => format!("it was withdrawn at seq {at}: answer it so, without `supersedes`"),
            None => "and name the standing decision in `supersedes` to change its answer".to_owned(),
        };
        return Err(super::violation(
            Rule::DecisionConflict,
            format!(
                "the question {:?} reads as decision {id}'s {:?} of goal {} but is spelled otherwise: ask it as that one does ({change})",
                e.question, d.question, e.goal_id
            ),
        ));
    }
    let revised_at = state.goals.get(&e.goal_id).map_or(0, |g| g.seq);
    let standing = state
        .human_decisions
        .iter()
        .filter(|(_, d)| d.goal_id == e.goal_id && d.key == asked)
        .max_by_key(|(_, d)| d.seq);
    // A human changes an answer by naming the one it replaces: the decision standing on the
    // question (outside review 74); naming anything else is a conflicting input.
    if let Some(named) = e.supersedes {
        return match standing {
            // A withdrawn decision stands no more: the question is answered afresh.
            Some((id, d)) if *id == named && d.withdrawn_seq.is_some() => Err(super::violation(
                Rule::DecisionConflict,
                format!(
                    "decision {} supersedes {named}, which was withdrawn at seq {}: no decision stands on the question {:?} of goal {} — answer it without `supersedes`",
                    e.decision_id,
                    d.withdrawn_seq.unwrap_or_default(),
                    e.question,
                    e.goal_id
                ),
            )),
            Some((id, _)) if *id == named => {
                record_decision(state, e, seq);
                Ok(())
            }
            _ => Err(super::violation(
                Rule::DecisionConflict,
                format!(
                    "decision {} supersedes {named}, which is not the decision standing on the question {:?} of goal {} ({})",
                    e.decision_id,
                    e.question,
                    e.goal_id,
                    standing.map_or_else(
                        || "there is none".to_owned(),
                        |(id, d)| match d.withdrawn_seq {
                            Some(at) => format!(
                                "none stands: {id} was withdrawn at seq {at} — answer it without `supersedes`"
                            ),
                            None => format!("that is {id}"),
                        }
                    )
                ),
            )),
        };
    }
    if let Some((id, d)) = standing.filter(|(_, d)| d.seq > revised_at && d.withdrawn_seq.is_none()) {
        return Err(super::violation(
            Rule::DecisionConflict,
            format!(
                "goal {} already has decision {id} (seq {}) on the question {:?}, made at its current revision: a \
                 second answer would stand beside it as authority — to change the answer, name the decision it \
                 replaces (`supersedes`)",
                e.goal_id, d.seq, d.question
            ),
        ));
    }
    record_decision(state, e, seq);
    Ok(())
}

/// The two forms a question is read in for look-alikes: its key's confusable skeleton, and
/// the key of its skeleton (the case written as well as folded: outside review 138 F1).
fn looks(question: &str) -> [String; 2] {
    [statement_key(&question_key(question)), question_key(&statement_key(question))]
}

fn record_decision(state: &mut State, e: &HumanDecisionRecorded, seq: u64) {
    state.human_decisions.insert(
        e.decision_id,
        HumanDecisionState {
            goal_id: e.goal_id,
            question: e.question.clone(),
            answer: e.answer.clone(),
            decided_by: e.decided_by.clone(),
            seq,
            withdrawn_seq: None,
            withdrawn_reason: String::new(),
            withdrawn_by: String::new(),
            key: question_key(&e.question),
            looks: looks(&e.question),
        },
    );
}

/// A Human Decision withdrawn: by a human, with a reason, once, and only the decision
/// standing on its question (a superseded one reaches no worker already). No decision
/// stands on the question afterwards until a human answers it again — without
/// `supersedes`, as a first answer (outside review 135 F1: a decision made in error could
/// only be replaced by another answer, itself delivered as authority).
pub fn apply_human_decision_withdrawn(
    state: &mut State,
    e: &HumanDecisionWithdrawn,
    seq: u64,
) -> Result<(), RuleViolation> {
    let d = get(&state.human_decisions, e.decision_id, "human decision")?;
    copied_reason("a withdrawal", &e.reason)?;
    human_principal("withdrawnBy", &e.withdrawn_by)?;
    ensure!(
        d.withdrawn_seq.is_none(),
        Rule::DecisionWithdrawn,
        "human decision {} was withdrawn at seq {}",
        e.decision_id,
        d.withdrawn_seq.unwrap_or_default()
    );
    let asked = &d.key;
    if let Some((newer, n)) = state
        .human_decisions
        .iter()
        .filter(|(_, x)| x.goal_id == d.goal_id && x.seq > d.seq && x.key == *asked)
        .max_by_key(|(_, x)| x.seq)
    {
        let then = match n.withdrawn_seq {
            Some(at) => format!("itself withdrawn at seq {at}: no decision stands on it"),
            None => "withdraw the decision standing on it".to_owned(),
        };
        return Err(super::violation(
            Rule::DecisionWithdrawn,
            format!(
                "human decision {} is superseded by {newer} on the question {:?}, {then}",
                e.decision_id, d.question
            ),
        ));
    }
    let d = get_mut(&mut state.human_decisions, e.decision_id, "human decision")?;
    d.withdrawn_seq = Some(seq);
    d.withdrawn_reason = e.reason.clone();
    d.withdrawn_by = e.withdrawn_by.clone();
    Ok(())
}

/// The newest record of a goal's project path (its current one, unless withdrawn).
fn path_record<'s>(state: &'s State, goal: Id, path: &str) -> Option<(&'s Id, &'s SourceState)> {
    state.sources.iter().filter(|(_, s)| s.goal_id == goal && s.path == path).max_by_key(|(_, s)| s.seq)
}

pub fn apply_project_source(
    state: &mut State,
    e: &ProjectSourceRecorded,
    seq: u64,
) -> Result<(), RuleViolation> {
    fresh(&state.sources, e.source_id, "project source")?;
    get(&state.goals, e.goal_id, "goal")?;
    super::name_text("path", &e.path)?;
    ensure!(
        super::profile::safe_relative(&e.path),
        Rule::OutOfBounds,
        "path {:?} is not a relative path inside the project (`/`-separated, no empty, `.` or `..` part)",
        e.path
    );
    super::name_text("revision", &e.revision)?;
    text("content", &e.content)?;
    // Rendered verbatim inside a fence, where no line break is rewritten.
    ensure!(!super::lone_cr(&e.content), Rule::OutOfBounds, "content holds {}", super::LONE_CR);
    let digest = Digest::of(DigestKind::Source, e.content.as_bytes());
    ensure!(
        e.digest == digest,
        Rule::SourceDigest,
        "source digest {} is not the content's {digest}",
        e.digest
    );
    // One file at one revision has one content: a second, different one is a conflict (seed
    // 000: reject conflicting inputs). The same one again is refused while it is its path's
    // current record (it would change nothing, or be delivered twice), and admitted once a
    // later record of the path superseded it: the project went back to that revision, which
    // becomes current again (outside review 100: a file reverted could not be made current,
    // and workers kept getting the later, stale content). Only the newest record of a path
    // reaches a worker (`freshness.sourceSuperseded`), so it is delivered once.
    let recorded = state
        .sources
        .iter()
        .find(|(_, s)| s.goal_id == e.goal_id && s.path == e.path && s.revision == e.revision);
    if let Some((id, s)) = recorded {
        // (A withdrawn path has no current record: the file is back.)
        let current = path_record(state, e.goal_id, &e.path)
            .filter(|(_, latest)| latest.revision == e.revision && latest.withdrawn_seq.is_none());
        if s.digest != digest {
            return Err(super::violation(
                Rule::SourceDigest,
                format!(
                    "{}@{} is already recorded as project source {id} with digest {}; this content is {digest}",
                    e.path, e.revision, s.digest
                ),
            ));
        }
        if let Some((current, _)) = current {
            return Err(super::violation(
                Rule::SourceDigest,
                format!(
                    "{}@{} is already recorded as project source {current} with this content, its path's current record",
                    e.path, e.revision
                ),
            ));
        }
    }
    state.sources.insert(
        e.source_id,
        SourceState {
            goal_id: e.goal_id,
            path: e.path.clone(),
            revision: e.revision.clone(),
            digest,
            content: e.content.clone(),
            seq,
            withdrawn_seq: None,
            withdrawn_reason: String::new(),
        },
    );
    Ok(())
}

/// A project source withdrawn: its path left the project. Named by the path's current
/// record (the newest of its goal and path), once, with a reason; no record of the path
/// reaches a worker until the path is recorded again (outside review 100: a deleted or
/// renamed file stayed current for good, and the only way out — an empty revision — told
/// the worker the file still existed).
pub fn apply_project_source_withdrawn(
    state: &mut State,
    e: &ProjectSourceWithdrawn,
    seq: u64,
) -> Result<(), RuleViolation> {
    let s = get(&state.sources, e.source_id, "project source")?;
    copied_reason("a withdrawal", &e.reason)?;
    ensure!(
        s.withdrawn_seq.is_none(),
        Rule::SourceWithdrawn,
        "project source {} ({}@{}) was withdrawn at seq {}",
        e.source_id,
        s.path,
        s.revision,
        s.withdrawn_seq.unwrap_or_default()
    );
    if let Some((newer, n)) = path_record(state, s.goal_id, &s.path).filter(|(id, _)| **id != e.source_id) {
        return Err(super::violation(
            Rule::SourceWithdrawn,
            format!(
                "project source {} ({}@{}) is superseded by {newer} ({}@{}): withdraw the path's current record",
                e.source_id, s.path, s.revision, n.path, n.revision
            ),
        ));
    }
    let s = get_mut(&mut state.sources, e.source_id, "project source")?;
    s.withdrawn_seq = Some(seq);
    s.withdrawn_reason = e.reason.clone();
    Ok(())
}

pub fn apply_scenario(state: &mut State, e: &ScenarioRecorded, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.scenarios, e.scenario_id, "scenario")?;
    get(&state.goals, e.goal_id, "goal")?;
    required_text("title", &e.title)?;
    required_text("description", &e.description)?;
    // One scenario once (outside review 90: the same title and description again under a
    // new id were admitted, and delivered twice — as facts, decisions and sources are not).
    let key = (statement_key(&e.title), statement_key(&e.description));
    if let Some((other, _)) = state.scenarios.iter().find(|(_, s)| {
        s.goal_id == e.goal_id
            && s.retired_seq.is_none()
            && (statement_key(&s.title), statement_key(&s.description)) == key
    }) {
        return Err(super::violation(
            Rule::OutOfBounds,
            format!("scenario {other} of goal {} already states this: one scenario once", e.goal_id),
        ));
    }
    state.scenarios.insert(
        e.scenario_id,
        ScenarioState {
            goal_id: e.goal_id,
            title: e.title.clone(),
            description: e.description.clone(),
            seq,
            retired_seq: None,
            retired_reason: String::new(),
        },
    );
    Ok(())
}

pub fn apply_obligation(state: &mut State, e: &ObligationRecorded, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.obligations, e.obligation_id, "obligation")?;
    get(&state.goals, e.goal_id, "goal")?;
    required_text("description", &e.description)?;
    // A check specification id names one specification: another digest under a bound id is
    // a conflicting input (as a plan id names one plan digest; outside review 22).
    if let Some((other, o)) = state
        .obligations
        .iter()
        .find(|(_, o)| o.check_spec_id == e.check_spec_id && o.check_spec_digest != e.check_spec_digest)
    {
        return Err(super::violation(
            Rule::SourceDigest,
            format!(
                "check specification {} is bound to {} by obligation {other}; another digest under the same id is a conflicting input",
                e.check_spec_id, o.check_spec_digest
            ),
        ));
    }
    // One obligation once: the same description and check specification again, in force,
    // would be delivered twice and asked for twice (outside review 90).
    let key = statement_key(&e.description);
    if let Some((other, _)) = state.obligations.iter().find(|(_, o)| {
        o.goal_id == e.goal_id
            && o.retired_seq.is_none()
            && o.check_spec_digest == e.check_spec_digest
            && statement_key(&o.description) == key
    }) {
        return Err(super::violation(
            Rule::OutOfBounds,
            format!(
                "obligation {other} of goal {} already states this with this check specification: one obligation once",
                e.goal_id
            ),
        ));
    }
    // Each obligation in force needs its own passing Evidence record before an ACCEPT, and a
    // decision cites at most MAX_ITEMS records: a goal holds no more obligations in force, so
    // the signal to split the task comes when the task is stated, not after its work (outside
    // review 67: the 129th obligation was admitted and run, and only REJECT_TERMINAL was left).
    let in_force =
        state.obligations.values().filter(|o| o.goal_id == e.goal_id && o.retired_seq.is_none()).count();
    ensure!(
        in_force < super::MAX_ITEMS,
        Rule::OutOfBounds,
        "goal {} already holds {in_force} obligations in force, the most one Acceptance decision can cite Evidence for ({}): split the task into smaller goals, or retire one",
        e.goal_id,
        super::MAX_ITEMS
    );
    state.obligations.insert(
        e.obligation_id,
        ObligationState {
            goal_id: e.goal_id,
            description: e.description.clone(),
            check_spec_id: e.check_spec_id,
            check_spec_digest: e.check_spec_digest,
            seq,
            retired_seq: None,
            retired_reason: String::new(),
        },
    );
    Ok(())
}

/// Longest retirement reason (bytes).
pub const MAX_RETIREMENT_REASON: usize = 1024;

/// Whether a requirement of goal `goal` (a scenario or an obligation, `what` `id`) recorded
/// at `recorded` and retired at `retired` may be retired now: once, with a reason, and only
/// after a goal revision made after it was recorded — requirements change with the goal,
/// so a revision's own requirements stand until the next one (outside review 55: the
/// obligations and scenarios of revision 1 reached revision 2's workers as requirements
/// and held its ACCEPT to them, and nothing could withdraw them).
/// A retirement's or a withdrawal's reason: non-blank, and — copied into the omission of
/// every later context of the goal — bounded, so they cannot grow an Attempt start past the
/// entry bound (outside review 64: eighteen 60 KB retirement reasons blocked every later
/// Attempt of the goal; review 146 F1: the same with withdrawals of project files and Human
/// Decisions, which review 64's bound did not cover).
fn copied_reason(what: &str, reason: &str) -> Result<(), RuleViolation> {
    required_text("reason", reason)?;
    ensure!(
        reason.len() <= MAX_RETIREMENT_REASON,
        Rule::OutOfBounds,
        "{what}'s reason is {} bytes, over {MAX_RETIREMENT_REASON}: it is copied into every later Attempt manifest of the goal as an omission's reason",
        reason.len()
    );
    Ok(())
}

fn retirable(
    state: &State,
    what: &str,
    id: Id,
    goal: Id,
    recorded: u64,
    retired: Option<u64>,
    reason: &str,
) -> Result<(), RuleViolation> {
    copied_reason("a retirement", reason)?;
    if let Some(at) = retired {
        return Err(super::violation(
            Rule::RequirementRetired,
            format!("{what} {id} was already retired (entry {at})"),
        ));
    }
    let g = get(&state.goals, goal, "goal")?;
    ensure!(
        g.seq > recorded,
        Rule::RequirementRetired,
        "{what} {id} was recorded under goal {goal}'s current revision {}: requirements change with the goal — revise it (reviseGoal) before retiring one",
        g.revision
    );
    Ok(())
}

pub fn apply_scenario_retired(state: &mut State, e: &ScenarioRetired, seq: u64) -> Result<(), RuleViolation> {
    let s = get(&state.scenarios, e.scenario_id, "scenario")?;
    retirable(state, "scenario", e.scenario_id, s.goal_id, s.seq, s.retired_seq, &e.reason)?;
    let s = get_mut(&mut state.scenarios, e.scenario_id, "scenario")?;
    s.retired_seq = Some(seq);
    s.retired_reason = e.reason.clone();
    Ok(())
}

pub fn apply_obligation_retired(
    state: &mut State,
    e: &ObligationRetired,
    seq: u64,
) -> Result<(), RuleViolation> {
    let o = get(&state.obligations, e.obligation_id, "obligation")?;
    retirable(state, "obligation", e.obligation_id, o.goal_id, o.seq, o.retired_seq, &e.reason)?;
    // Evidence of it in a workflow still open would be judged — and fed to a repair —
    // under a requirement that no longer exists (outside review 57: an ACCEPT was refused
    // over the retired check's FAIL, a REJECT_REPAIRABLE stood on it alone, and the repair
    // worker was told to fix it): that workflow is decided or cancelled first.
    if let Some(ev) = state.evidence.values().find(|ev| {
        ev.record.obligation_id == e.obligation_id
            && state.workflows.get(&ev.record.workflow_id).is_some_and(|w| !w.closed)
    }) {
        return Err(super::violation(
            Rule::RequirementRetired,
            format!(
                "obligation {} has Evidence in open workflow {} (generation {}): retire it once that workflow is closed (ACCEPT, REJECT_TERMINAL or cancelWorkflow)",
                e.obligation_id, ev.record.workflow_id, ev.record.generation_id
            ),
        ));
    }
    let o = get_mut(&mut state.obligations, e.obligation_id, "obligation")?;
    o.retired_seq = Some(seq);
    o.retired_reason = e.reason.clone();
    Ok(())
}

pub fn apply_blocker_raised(state: &mut State, e: &BlockerRaised, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.blockers, e.blocker_id, "blocker")?;
    live_workflow(state, e.workflow_id)?;
    required_text("description", &e.description)?;
    // One open blocker once (outside review 90: "CI red" twice on one workflow).
    let key = statement_key(&e.description);
    if let Some((other, _)) = state.blockers.iter().find(|(_, b)| {
        b.workflow_id == e.workflow_id && b.resolved_seq.is_none() && statement_key(&b.description) == key
    }) {
        return Err(super::violation(
            Rule::OutOfBounds,
            format!(
                "blocker {other} of workflow {} is open and says this already: one blocker once",
                e.workflow_id
            ),
        ));
    }
    state.blockers.insert(
        e.blocker_id,
        BlockerState {
            workflow_id: e.workflow_id,
            description: e.description.clone(),
            resolution: None,
            seq,
            resolved_seq: None,
        },
    );
    Ok(())
}

pub fn apply_blocker_resolved(state: &mut State, e: &BlockerResolved, seq: u64) -> Result<(), RuleViolation> {
    required_text("resolution", &e.resolution)?;
    let workflow_id = get(&state.blockers, e.blocker_id, "blocker")?.workflow_id;
    live_workflow(state, workflow_id)?;
    let blocker = get_mut(&mut state.blockers, e.blocker_id, "blocker")?;
    ensure!(
        blocker.resolution.is_none(),
        Rule::BlockerResolved,
        "blocker {} is already resolved",
        e.blocker_id
    );
    blocker.resolution = Some(e.resolution.clone());
    blocker.resolved_seq = Some(seq);
    Ok(())
}
