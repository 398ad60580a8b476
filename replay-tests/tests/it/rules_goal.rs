//! Goals: revision strictly +1, content bounded.

use closure_ledger::lifecycle::*;
use closure_ledger::runtime::command::*;
use closure_ledger::runtime::{Command, Rule};
use ledger_schema::events::WorkerEventKind;
use replay_tests::world::{Stage, World, rule_of};

fn revise(revision: u32) -> Command {
    Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision, content: goal_content() })
}

/// Revisions go strictly +1: skipping or repeating a revision is refused; +1 is admitted.
#[test]
fn goal_revision_not_next() {
    let mut w = World::at(Stage::Setup);
    w.refused(revise(3), Rule::GoalRevisionNotNext);
    w.refused(revise(1), Rule::GoalRevisionNotNext);
    let first = w.ok(revise(2));
    assert_eq!(w.ledger.state().goals[&lid(GOAL)].revision, 2);
    // Exactly the same revision again is a redelivery (the original receipt); revision 2
    // with other content is refused.
    let again = w.ok(revise(2));
    assert!(again.duplicate && again.seq == first.seq);
    let Command::ReviseGoal(mut other) = revise(2) else { unreachable!() };
    other.content.objective.push_str(" And the lexer.");
    w.refused(Command::ReviseGoal(other), Rule::GoalRevisionNotNext);
}

/// Revising an unknown goal is refused.
#[test]
fn unknown_goal() {
    let mut w = World::at(Stage::Setup);
    w.refused(
        Command::ReviseGoal(ReviseGoal { goal_id: lid(0xdead), revision: 2, content: goal_content() }),
        Rule::Unknown,
    );
}

/// A goal id is created once: the same id with other content is refused (exactly the same
/// command is a redelivery: `redelivery.rs`).
#[test]
fn id_reused_goal() {
    let mut w = World::at(Stage::Setup);
    let mut content = goal_content();
    content.objective.push_str(" Also the lexer.");
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(GOAL), content }), Rule::IdReused);
}

/// Blank objectives, text over 65,536 bytes and lists over 128 items are refused.
#[test]
fn out_of_bounds_goal_content() {
    let mut w = World::at(Stage::Setup);
    let mut c = goal_content();
    c.objective = "  ".into();
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
    let mut c = goal_content();
    c.scope = vec!["x".repeat(65_537)];
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
    let mut c = goal_content();
    c.success_criteria = vec!["c".into(); 129];
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
}

/// Regression (found in review): every field within its own bound could still add up to an
/// entry over the 1 MiB decoder limit, which would have been written and then made the
/// whole ledger unreadable. Such a command is refused and nothing is written.
#[test]
fn regression_oversized_entry_is_refused_not_written() {
    let mut w = World::at(Stage::Setup);
    let mut c = goal_content();
    c.scope = vec!["s".repeat(60_000); 20]; // 1.2 MB in total, each item within bounds
    w.refused(Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c }), Rule::OutOfBounds);
}

/// Every required text is non-blank and every required list non-empty, in every command:
/// a Goal needs an objective, a success criterion and a scope (non-goals and preservation
/// constraints may be empty), and no list item may be blank; the same holds for a
/// revision, scenario, attempt summary, evidence detail and acceptance reasons.
/// Each edit of the reference goal content is refused (`OutOfBounds`) by a new Goal and by
/// a revision, writing nothing.
fn refused_as_goal_content(w: &mut World, cases: Vec<fn(&mut ledger_schema::events::GoalContent)>) {
    for edit in cases {
        let mut c = goal_content();
        edit(&mut c);
        w.refused(
            Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c.clone() }),
            Rule::OutOfBounds,
        );
        w.refused(
            Command::ReviseGoal(ReviseGoal { goal_id: lid(GOAL), revision: 2, content: c }),
            Rule::OutOfBounds,
        );
    }
}

#[test]
fn blank_and_empty_content() {
    let mut w = World::at(Stage::Setup);
    let create = |c| Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c });
    let cases: Vec<fn(&mut ledger_schema::events::GoalContent)> = vec![
        |c| c.success_criteria.clear(),
        |c| c.success_criteria = vec!["  ".into()],
        |c| c.success_criteria.push("\t".into()),
        |c| c.scope.clear(),
        |c| c.scope = vec![String::new()],
        |c| c.non_goals = vec![" ".into()],
        |c| c.preservation_constraints = vec!["".into()],
        |c| c.objective = "\n".into(),
    ];
    refused_as_goal_content(&mut w, cases);
    let mut c = goal_content();
    c.non_goals.clear();
    c.preservation_constraints.clear();
    w.ok(create(c));

    w.refused(
        Command::RecordScenario(RecordScenario {
            scenario_id: lid(0x49),
            goal_id: lid(GOAL),
            title: "t".into(),
            description: " ".into(),
        }),
        Rule::OutOfBounds,
    );
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))
    })
    .unwrap();
    w.refused(
        Command::FinishAttempt(FinishAttempt {
            attempt_id: lid(0x60),
            result_kind: ledger_schema::types::ResultKind::Proposals,
            summary: "  ".into(),
        }),
        Rule::OutOfBounds,
    );

    let mut w = World::at(Stage::Frozen);
    w.with(|s| s.advance(ledger_schema::types::Phase::EvidenceBuild)).unwrap();
    // A check's output is recorded as the runner wrote it, blank too: a failure is never
    // refused for its output (outside review 221 F1; commands.md, `recordEvidence`).
    w.ok(Command::RecordEvidence(RecordEvidence {
        evidence_id: lid(0x90),
        workflow_id: lid(WORKFLOW),
        generation_id: lid(0x80),
        candidate_digest: digest_of("candidate 1"),
        obligation_id: lid(OBLIGATION),
        check_spec_id: lid(CHECK_SPEC),
        check_spec_digest: digest_of("check: cargo test parser::trailing"),
        result: ledger_schema::types::CheckResult::Fail,
        detail: " ".into(),
    }));
    w.with(|s| s.advance(ledger_schema::types::Phase::FinalVerify)).unwrap();
    for reasons in [vec![], vec![" ".to_owned()]] {
        w.refused(
            Command::DecideAcceptance(DecideAcceptance {
                decision_id: lid(0xa0),
                workflow_id: lid(WORKFLOW),
                generation_id: lid(0x80),
                verdict: ledger_schema::types::Verdict::RejectRepairable,
                evidence_ids: None,
                reasons,
            }),
            Rule::OutOfBounds,
        );
    }
}

/// Text the compiler renders to a worker holds no character that reads differently than it
/// is (an ESC sequence, a right-to-left override), a blank made of zero-width characters is
/// blank, and a list the catalog treats as a set names no item twice (outside review 16:
/// each was admitted, and the goal text reached `compile --markdown` raw). A Worker payload
/// — never rendered to a worker, printed JSON-escaped — may carry a terminal's colours.
#[test]
fn text_that_reads_differently_blank_look_alikes_and_repeated_items_are_refused() {
    let mut w = World::at(Stage::Setup);
    let create = |c| Command::CreateGoal(CreateGoal { goal_id: lid(0x21), content: c });
    let cases: Vec<fn(&mut ledger_schema::events::GoalContent)> = vec![
        |c| c.objective = "fix \u{1b}[2J\u{1b}[31mRED".into(),
        |c| c.objective = "fix \u{202e}live".into(),
        |c| c.objective = "fix \u{2066}it".into(),
        |c| c.objective = "a\u{7f}b".into(),
        |c| c.objective = "\u{200b}".into(),
        |c| c.success_criteria = vec!["\u{feff} \u{2060}".into()],
        |c| c.success_criteria = vec!["tests pass".into(), "tests pass".into()],
        |c| c.scope = vec!["src/".into(), "docs/".into(), "src/".into()],
        |c| c.preservation_constraints = vec!["keep the API".into(), "keep the API".into()],
        |c| c.non_goals = vec!["x\u{85}y".into()],
        // Outside review 17: TAG characters (a hidden ASCII instruction), bidi marks,
        // separators; blanks made of other invisible characters.
        |c| c.objective = "fix it\u{E0049}\u{E0067}\u{E006E}".into(),
        |c| c.objective = "\u{E0041}".into(),
        |c| c.objective = "yes\u{FE00}\u{FE01}\u{FE02}".into(),
        |c| c.objective = "fix\u{200B}\u{200B}it".into(),
        |c| c.objective = "fix\u{2028}it".into(),
        |c| c.scope = vec!["\u{3164}".into()],
        |c| c.scope = vec!["\u{2800}\u{FE0F}".into()],
    ];
    refused_as_goal_content(&mut w, cases);
    // Tabs, line feeds, carriage returns and ordinary non-ASCII text are text.
    let mut c = goal_content();
    c.objective = "fix the parser:\r\n\tall of it — naïvely, 修正, \u{5e9}\u{5dc}\u{5d5}\u{5dd}\u{200F}, 🏳\u{FE0F}\u{200D}🌈, 1\u{FE0F}\u{20E3}".into();
    w.ok(create(c));
    // A Worker payload is held to its bounds only.
    w.with(|s| {
        s.start(0x60, 0x61)?;
        s.claim(lid(0x60))?;
        s.deliver(lid(0x60), 0x70, payload(WorkerEventKind::ToolActivity, 1, "\u{1b}[32mok\u{1b}[0m"))
    })
    .unwrap();
    let blank = payload(WorkerEventKind::Progress, 2, "\u{200b}");
    let err = w.with(|s| s.deliver(lid(0x60), 0x71, blank)).unwrap_err();
    assert!(err.to_string().contains("blank"), "{err}");
}

/// One invisible character after each visible one encodes as much as a run (outside review
/// 20: a variation selector after every letter of a skill body carried "rm -rf / now";
/// zero-width characters between letters too): an invisible character is text only where a
/// script or an emoji gives it a meaning. Emoji, keycaps, ideographic variation sequences,
/// Persian's non-joiner, bidi marks in Hebrew and a leading byte-order mark stay text.
#[test]
fn invisible_characters_that_carry_no_meaning_are_refused() {
    let mut w = World::at(Stage::Setup);
    let hidden: String = "rm -rf /"
        .chars()
        .map(|c| format!("{c}{}", char::from_u32(0xE0100 + c as u32 - 0x20).unwrap()))
        .collect();
    let cases: Vec<String> = vec![
        format!("fix the parser {hidden}"),
        "h\u{200B}e\u{200C}l\u{200D}l\u{2060}o".into(),
        "co-\u{00AD}operate".into(),
        "plain\u{FE0F} text".into(),
        "ascii only\u{200E}".into(),
        "\u{180B}x".into(),
        "x\u{E0080}".into(),
        "1\u{FE0F} not a keycap".into(),
        // Outside review 20, second pass: a selector after each Cyrillic letter, private-use
        // and hieroglyph format controls next to ASCII.
        "\u{43F}\u{FE00}\u{440}\u{FE01}\u{438}\u{FE0F}".into(),
        "fix \u{E000}it".into(),
        "fix\u{13430}\u{13431} it".into(),
        // The third pass: a selector after a space variant between ASCII words, and a
        // private-use character between two non-ASCII letters.
        "the\u{2002}\u{FE05}the".into(),
        "the\u{3000}\u{FE0F}the".into(),
        "caf\u{E9}\u{F0041}\u{E9}".into(),
        "caf\u{E9}\u{FDD0}\u{E9}".into(),
        "fix\u{FFFE} it".into(),
        "\u{2500}\u{FE0E}\u{2500}\u{FE0F}".into(),
        "flag \u{1F1EB}\u{FE0F}".into(),
    ];
    for (i, text) in cases.into_iter().enumerate() {
        let mut c = goal_content();
        c.objective = text.clone();
        let err = w.fails(Command::CreateGoal(CreateGoal { goal_id: lid(0x30 + i as u128), content: c }));
        assert_eq!(rule_of(&err), Some(Rule::OutOfBounds), "{text:?}: {err}");
        let e = err.to_string();
        assert!(
            e.contains("invisible character") || e.contains("would not read as written"),
            "{text:?}: {err}"
        );
    }
    for (i, text) in [
        "\u{FEFF}fix the parser",
        "ship it ❤\u{FE0F} now, 👨\u{200D}👩\u{200D}👧 and 🏳\u{FE0F}\u{200D}🌈, press 1\u{FE0F}\u{20E3}, ™\u{FE0F} ↔\u{FE0F} ⭐\u{FE0F} ☀\u{FE0E}",
        "葛\u{E0100}城 and 辻\u{E0101}",
        "\u{645}\u{6CC}\u{200C}\u{62E}\u{648}\u{627}\u{647}\u{645} (Persian)",
        "\u{5E9}\u{5DC}\u{5D5}\u{5DD} C++\u{200E} is fine",
        "\u{0915}\u{094D}\u{200D}\u{0937}",
        // Outside review 20, fifth pass: ordinary German and Malayalam.
        "Donau\u{00AD}dampf\u{00AD}schiff",
        "\u{0D28}\u{0D4D}\u{200D} \u{0D15}",
    ]
    .into_iter()
    .enumerate()
    {
        let mut c = goal_content();
        c.objective = text.to_owned();
        w.ok(Command::CreateGoal(CreateGoal { goal_id: lid(0x50 + i as u128), content: c }));
    }
}

/// A goal whose preservation constraints no policy's feedback limits could carry to a repair
/// worker — over 126 (beside one failed check and the parent change set, in at most 128
/// items), or one whose item would exceed the largest item any policy allows — is refused
/// when it is stated (outside review 75: it was admitted and could never start a workflow).
#[test]
fn preservation_constraints_a_repair_could_never_carry_are_refused() {
    let goal = |id: u128, constraints: Vec<String>| {
        let mut content = goal_content();
        content.preservation_constraints = constraints;
        Command::CreateGoal(CreateGoal { goal_id: lid(id), content })
    };
    let many = |n: usize| (0..n).map(|i| format!("keep behaviour {i} unchanged")).collect::<Vec<_>>();
    let mut w = World::at(Stage::Setup);
    let err = w.fails(goal(0x21, many(127)));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(err.to_string().contains("at most 126"), "{err}");
    let err = w.fails(goal(0x21, vec!["x".repeat(4_090)]));
    assert_eq!(replay_tests::world::rule_of(&err), Some(Rule::OutOfBounds), "{err}");
    assert!(err.to_string().contains("shorten it"), "{err}");
    w.ok(goal(0x21, many(126)));
    w.ok(goal(0x22, vec!["x".repeat(3_900)]));
}
