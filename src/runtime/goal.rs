//! Goals: revision 1 at creation, then strictly +1, each revision in full.

use ledger_schema::Event;
use ledger_schema::events::{GoalContent, GoalCreated, GoalRevised};

use super::command::{CreateGoal, ReviseGoal};
use super::state::{GoalState, State};
use super::{Rule, RuleViolation, ensure, fresh, get_mut, list, required_list, required_text};

pub fn decide_create(c: &CreateGoal) -> Event {
    Event::GoalCreated(GoalCreated { goal_id: c.goal_id, content: c.content.clone() })
}

pub fn decide_revise(c: &ReviseGoal) -> Event {
    Event::GoalRevised(GoalRevised { goal_id: c.goal_id, revision: c.revision, content: c.content.clone() })
}

pub(crate) fn check_content(c: &GoalContent) -> Result<(), RuleViolation> {
    required_text("objective", &c.objective)?;
    required_list("successCriteria", &c.success_criteria)?;
    required_list("scope", &c.scope)?;
    list("nonGoals", &c.non_goals)?;
    list("preservationConstraints", &c.preservation_constraints)?;
    // Each preservation constraint reaches a repair worker as one feedback item, beside at
    // least one failed check and the parent change set: a goal no policy's feedback limits
    // could carry (over 126 constraints, or one over the largest item) could never run a
    // workflow (outside review 75: it was admitted, and every start was refused).
    let room = usize::from(super::MAX_FEEDBACK_ITEMS) - 2;
    ensure!(
        c.preservation_constraints.len() <= room,
        Rule::OutOfBounds,
        "{} preservation constraints: a repair carries each as a feedback item beside a failed check and the parent change set, and no policy holds more than {} items — at most {room}",
        c.preservation_constraints.len(),
        super::MAX_FEEDBACK_ITEMS
    );
    for constraint in &c.preservation_constraints {
        let item = ledger_schema::package::FeedbackItem::preservation_constraint(
            constraint,
            ledger_schema::Id::default(),
            u32::MAX,
            ledger_schema::Digest::ZERO,
        );
        let size = ledger_schema::codec::encoded_len(&item);
        ensure!(
            size <= super::MAX_FEEDBACK_ITEM_BYTES as usize,
            Rule::OutOfBounds,
            "a preservation constraint of {} bytes encodes as a feedback item of {size} bytes, over the largest any policy allows ({}): shorten it",
            constraint.len(),
            super::MAX_FEEDBACK_ITEM_BYTES
        );
    }
    Ok(())
}

/// A text as a reader sees it: its UTS #39 confusable skeleton after NFKC, invisible
/// characters dropped, white space collapsed and trimmed (see [`judging_key`]).
pub fn reading(t: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let compatible: String = t.nfkc().collect();
    let seen: String = unicode_security::skeleton(&compatible).filter(|c| !super::invisible(*c)).collect();
    seen.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The ASCII a full-width, mathematical, circled or squared form of an ASCII letter, digit
/// or mark is, or a Roman numeral's letters (its NFKC form, in those blocks only) — not a
/// superscript, subscript, fraction, ligature or other compatibility form, which stays as
/// written (`2³` is not `23`, `Aᵀ` not `AT`: outside reviews 71, 256 F1/F2; `Ⅱ` is `II`:
/// outside review 260 F1, the skeleton read it `ll`).
pub(super) fn width_form(c: char) -> Option<String> {
    use unicode_normalization::UnicodeNormalization;
    let blocks = matches!(u32::from(c), 0xFF01..=0xFF5E | 0x1D400..=0x1D7FF | 0x24B6..=0x24E9 | 0x1F130..=0x1F189 | 0x2160..=0x217F);
    if !blocks {
        return None;
    }
    let form: String = std::iter::once(c).nfkc().collect();
    (!form.is_empty() && form.is_ascii()).then_some(form)
}

/// The ASCII a non-letter outside ASCII is read as where a statement is compared: a
/// full-width or mathematical digit or mark is the character it is a form of (NFKC, in those
/// blocks only: a superscript or a fraction stays meaning — `2³` is not `23`, outside review
/// 71), a typographic apostrophe, quote, hyphen, dash, minus, slash or ellipsis the ASCII
/// marks its confusable skeleton is (`’` `'`, `‐` `−` `–` `-`, `⁄` `/`, `“` `"`, `…` `...`),
/// an em dash `--` and German and French quotes `"` (what word processors type for them) —
/// outside reviews 253 F1, 256 F3: "Shouldn’t we …?" and "Shouldn't we …?", `3０` and `30`,
/// `parser—then` and `parser--then` took two answers.
fn ascii_mark(c: char, c_text: &str) -> Option<String> {
    if let Some(form) = width_form(c) {
        return Some(form);
    }
    match c {
        // What a word processor types for `--` and `"` (outside review 256 F3).
        '\u{2014}' => return Some("--".to_owned()),
        '\u{201E}' | '\u{AB}' | '\u{BB}' => return Some("\"".to_owned()),
        _ => {}
    }
    let seen: String = unicode_security::skeleton(c_text).collect();
    match seen.as_bytes() {
        // (The skeleton of `"` itself, and of the curly double quotes.)
        b"''" => Some("\"".to_owned()),
        // One mark or a run of them (`…` is `...`).
        marks if !marks.is_empty() && marks.iter().all(u8::is_ascii_punctuation) => Some(seen),
        _ => None,
    }
}

/// A text as a statement, a question's looks and a goal's judging key compare it: NFC,
/// invisible characters dropped, white space collapsed and trimmed, ASCII as it is (`l`, `1`
/// and `I`, `m` and `rn`, stay apart: outside reviews 71, 260 F2), each non-ASCII letter as
/// the ASCII letter it is a width form of ([`width_form`]) or else its UTS #39 confusable
/// skeleton (a Cyrillic `а`, a Greek `ο`, a ligature), each non-ASCII mark as [`ascii_mark`]
/// reads it.
pub(super) fn as_read(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let visible: String = text.nfc().filter(|c| !super::invisible(*c)).collect();
    let collapsed = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut key = String::with_capacity(collapsed.len());
    for c in collapsed.chars() {
        if c.is_ascii() {
            key.push(c);
            continue;
        }
        let mut one = [0u8; 4];
        let c_text: &str = c.encode_utf8(&mut one);
        if c.is_alphabetic() {
            match width_form(c).filter(|form| form.bytes().all(|b| b.is_ascii_alphabetic())) {
                Some(form) => key.push_str(&form),
                None => key.extend(unicode_security::skeleton(c_text)),
            }
            continue;
        }
        key.push_str(&ascii_mark(c, c_text).unwrap_or_else(|| c_text.to_owned()));
    }
    key
}

/// What a judgment of bytes is made against (`candidate::judged_failing`): the goal's
/// content as a reader sees it — each text [`as_read`], as facts are compared (so an NFD
/// accent, a ligature, a full-width form or a letter from another script that looks the same
/// reads the same; ASCII is never mapped, so `-I` and `-l`, `modem` and `modern` are two
/// requirements: outside review 260 F2; a superscript or fraction is what it says: 256 F2),
/// and every list (a set) sorted and without repeats. Two revisions with equal keys are one
/// goal to an auditor (outside reviews 49 and 51: a revision differing only in an NFD
/// accent, a trailing or no-break space, the order of its criteria, a Cyrillic `а` or a
/// `ﬁ` ligature re-opened rejected bytes). Case and every other visible change count.
pub fn judging_key(c: &GoalContent) -> ledger_schema::Digest {
    let text = as_read;
    let set = |v: &[String]| {
        let mut v: Vec<String> = v.iter().map(|t| text(t)).collect();
        v.sort();
        v.dedup();
        v
    };
    GoalContent {
        objective: text(&c.objective),
        scope: set(&c.scope),
        non_goals: set(&c.non_goals),
        success_criteria: set(&c.success_criteria),
        preservation_constraints: set(&c.preservation_constraints),
    }
    .digest()
}

pub fn apply_created(state: &mut State, e: &GoalCreated, seq: u64) -> Result<(), RuleViolation> {
    fresh(&state.goals, e.goal_id, "goal")?;
    check_content(&e.content)?;
    let digest = e.content.digest();
    let revision_keys = vec![judging_key(&e.content)];
    state
        .goals
        .insert(e.goal_id, GoalState { revision: 1, content: e.content.clone(), digest, seq, revision_keys });
    Ok(())
}

pub fn apply_revised(state: &mut State, e: &GoalRevised, seq: u64) -> Result<(), RuleViolation> {
    check_content(&e.content)?;
    let goal = get_mut(&mut state.goals, e.goal_id, "goal")?;
    ensure!(
        Some(e.revision) == goal.revision.checked_add(1),
        Rule::GoalRevisionNotNext,
        "goal {} is at revision {}; a revision must be {}",
        e.goal_id,
        goal.revision,
        goal.revision.saturating_add(1)
    );
    let digest = e.content.digest();
    goal.revision_keys.push(judging_key(&e.content));
    goal.revision = e.revision;
    goal.content = e.content.clone();
    goal.digest = digest;
    goal.seq = seq;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{GoalContent, judging_key};

    fn content(objective: &str, criteria: &[&str]) -> GoalContent {
        GoalContent {
            objective: objective.to_owned(),
            success_criteria: criteria.iter().map(|c| (*c).to_owned()).collect(),
            scope: vec!["src".to_owned()],
            non_goals: Vec::new(),
            preservation_constraints: Vec::new(),
        }
    }

    /// Revisions no reader tells apart have one judging key (outside review 49); any visible
    /// change, case included, makes another.
    #[test]
    fn a_judging_key_is_what_a_reader_sees() {
        let base = judging_key(&content("Keep the r\u{e9}sum\u{e9} page", &["a", "b"]));
        for same in [
            content("Keep the re\u{301}sume\u{301} page", &["a", "b"]),
            content("Keep  the\u{A0}r\u{e9}sum\u{e9} page ", &["b", "a"]),
            content("Keep the r\u{e9}sum\u{e9}\u{200B} page", &["a", "b", "a"]),
            content("\u{FEFF}Keep the r\u{e9}sum\u{e9}\npage", &[" a", "b\t"]),
            // Look-alikes (outside review 51): a Cyrillic а, a ligature, a one-dot leader.
            content("Keep the r\u{e9}sum\u{e9} p\u{430}ge", &["a", "b"]),
            content("Keep the r\u{e9}sum\u{e9} page", &["\u{430}", "b"]),
        ] {
            assert_eq!(judging_key(&same), base, "{same:?}");
        }
        let fi = judging_key(&content("Reject a fine file.", &["a"]));
        assert_eq!(judging_key(&content("Reject a \u{FB01}ne \u{FB01}le\u{2024}", &["a"])), fi);
        for other in [
            content("keep the r\u{e9}sum\u{e9} page", &["a", "b"]),
            content("Keep the resume page", &["a", "b"]),
            content("Keep the r\u{e9}sum\u{e9} page", &["a", "b", "c"]),
            content("Keep the r\u{e9}sum\u{e9} page.", &["a", "b"]),
        ] {
            assert_ne!(judging_key(&other), base, "{other:?}");
        }
        // A full-width letter reads as its letter; a superscript or a fraction is what the
        // requirement says (outside review 256 F2: `2³` and `23` were one goal).
        let mb = judging_key(&content("Accept uploads up to 23 MB", &["a"]));
        assert_eq!(judging_key(&content("Accept uploads up to \u{FF12}\u{FF13} MB", &["a"])), mb);
        for other in [
            "Accept uploads up to 2\u{B3} MB",
            "Accept uploads up to 2\u{2083} MB",
            "Accept uploads up to \u{BD}3 MB",
        ] {
            assert_ne!(judging_key(&content(other, &["a"])), mb, "{other}");
        }
        assert_ne!(
            judging_key(&content("Return A\u{1D40}", &["a"])),
            judging_key(&content("Return AT", &["a"]))
        );
        // ASCII is never mapped (outside review 260 F2: `-I` and `-l`, `modem` and `modern`
        // were one goal), a Roman numeral is its letters (260 F1).
        for (a, b) in [
            ("the build passes -I to cc", "the build passes -l to cc"),
            ("keep the modem", "keep the modern"),
        ] {
            assert_ne!(judging_key(&content(a, &["x"])), judging_key(&content(b, &["x"])), "{a} / {b}");
        }
        assert_eq!(
            judging_key(&content("Ship version \u{2161}", &["x"])),
            judging_key(&content("Ship version II", &["x"]))
        );
    }
}
