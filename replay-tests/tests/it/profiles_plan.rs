//! `ledger profile preview` (issue #14): the plan is a pure projection of ledger state and
//! flags — byte-identical across processes, whatever the flag order — with every refusal.

use super::profiles_util::{Setup, cli, write};
use serde_json::json;

fn preview(s: &Setup, rest: &[&str]) -> serde_json::Value {
    let mut args = rest.to_vec();
    args.push("--json");
    s.json(&["profile", "preview"], &args)
}

/// Lean over the fixture: required and eager selected with reasons, the selectable rest
/// routed, manual-only, authority-bearing and dynamic sources excluded by rule; every
/// source in exactly one list; nothing written.
#[test]
fn lean_plan_over_the_fixture() {
    let s = Setup::scanned();
    let before = s.head();
    let p = preview(&s, &["lean"]);
    assert_eq!(p["selectedIds"], json!(["skill:python-patterns", "skill:testing"]));
    assert_eq!(p["entries"][0]["reason"], "required");
    assert_eq!(p["entries"][1]["reason"], "eager");
    assert_eq!(p["routedIds"], json!(["skill:api-design", "skill:security-review"]));
    assert_eq!(
        p["excludedIds"],
        json!([
            {"id": "skill:deploy", "rule": "manual-only"},
            {"id": "skill:git-status", "rule": "dynamic-content"},
            {"id": "skill:shell-tools", "rule": "authority-bearing"}
        ])
    );
    // bytes/4, rounded up, per entry: "python-patterns" + its 79-byte description = 94 -> 24.
    assert_eq!(p["entries"][0]["bytes"], 94);
    assert_eq!(p["entries"][0]["tokens"], 24);
    assert_eq!(p["estimate"]["tokens"], 41);
    assert_eq!(p["estimate"]["budgetMode"], "blocking");
    for key in ["registryDigest", "profileDigest", "planDigest", "generationDigest"] {
        assert!(p[key].as_str().unwrap().starts_with("b3:"), "{key}");
    }
    assert_eq!(p["profileId"], "lean@1");
    assert_eq!(s.head(), before, "preview writes nothing");
    // The source tree is not consulted: the registry in the ledger is the input.
    std::fs::remove_dir_all(&s.src).unwrap();
    assert_eq!(preview(&s, &["lean"]), p);
}

/// Includes close over dependencies (with the reason naming the dependent); a user
/// exclusion of a routed source is reported with rule `exclude`; Full selects every
/// selectable source and reports its budget without refusing.
#[test]
fn include_closes_over_dependencies_and_full_reports_budget() {
    let s = Setup::scanned();
    let p = preview(&s, &["lean", "--include", "skill:api-design", "--exclude", "skill:security-review"]);
    assert_eq!(p["selectedIds"], json!(["skill:api-design", "skill:python-patterns", "skill:testing"]));
    assert_eq!(p["entries"][0]["reason"], "include");
    assert_eq!(p["routedIds"], json!([]));
    assert_eq!(p["excludedIds"][2], json!({"id": "skill:security-review", "rule": "exclude"}));
    let s2 = Setup::scanned();
    std::fs::write(
        s2.src.join("manifests/context-packs/skill-registry@1.json"),
        r#"{"version":1,"skills":[{"id":"skill:security-review","dependencies":["skill:deploy"]}]}"#,
    )
    .unwrap();
    write(
        &s2.src.join("manifests/context-profiles/lean@1.json"),
        r#"{"id":"lean@1","eager":[],"required":[],"budgetTokens":1000,"budgetMode":"blocking"}"#,
    );
    assert_eq!(s2.scan().0, 0);
    let p = preview(&s2, &["lean", "--include", "skill:security-review"]);
    let dep = p["entries"].as_array().unwrap().iter().find(|e| e["id"] == "skill:deploy").unwrap().clone();
    assert_eq!(dep["reason"], "dependency of skill:security-review", "a manual-only dependency is selected");
    let full = preview(&s, &["full"]);
    assert_eq!(
        full["selectedIds"],
        json!([
            "skill:api-design",
            "skill:deploy",
            "skill:python-patterns",
            "skill:security-review",
            "skill:testing"
        ])
    );
    assert_eq!(full["estimate"]["budgetMode"], "report-only");
    assert_eq!(full["estimate"]["overBudget"], true, "Full reports, never refuses");
}

/// Lean's budget blocks at the exact boundary: tokens == budget passes, one token less
/// of budget refuses (exit 1).
#[test]
fn lean_budget_blocks_at_the_exact_boundary() {
    for (budget, ok) in [(41, true), (40, false)] {
        let s = Setup::new();
        write(
            &s.src.join("manifests/context-profiles/lean@1.json"),
            &format!(
                r#"{{"id":"lean@1","eager":["skill:testing"],"required":["skill:python-patterns"],"budgetTokens":{budget},"budgetMode":"blocking"}}"#
            ),
        );
        assert_eq!(s.scan().0, 0);
        let (code, _, err) = s.run(&["profile", "preview"], &["lean", "--json"]);
        if ok {
            assert_eq!(code, 0, "{err}");
        } else {
            assert_eq!(code, 1);
            assert!(err.contains("41 metadata tokens (an estimate"), "{err}");
            assert!(err.contains("over its blocking budget of 40"), "{err}");
        }
    }
}

/// Every refusal: exit 1, one line, nothing written.
#[test]
fn preview_refusals() {
    let s = Setup::scanned();
    let before = s.head();
    let cases: &[(&[&str], &str)] = &[
        (&["lean", "--include", "skill:nope"], "unknown source id \"skill:nope\""),
        (&["lean", "--exclude", "skill:nope"], "unknown source id"),
        (
            &["lean", "--include", "skill:api-design", "--exclude", "skill:api-design"],
            "both included and excluded",
        ),
        (
            &["lean", "--include", "skill:api-design", "--include", "skill:api-design"],
            "given twice in --include",
        ),
        (&["lean", "--exclude", "skill:deploy", "--exclude", "skill:deploy"], "given twice in --exclude"),
        (&["lean", "--exclude", "skill:python-patterns"], "required by the profile"),
        (
            &["lean", "--exclude", "skill:testing", "--include", "skill:api-design"],
            "is a dependency of selected",
        ),
        (&["full", "--exclude", "skill:testing"], "is a dependency of selected \"skill:api-design\""),
        (&["lean", "--include", "skill:shell-tools"], "never selectable (authority-bearing)"),
        (&["lean", "--include", "skill:git-status"], "never selectable (dynamic-content)"),
        (&["medium"], "unknown profile"),
        // An include the profile installs anyway adds nothing but a new plan digest (outside
        // review 224 F3: it made a revision that set every earlier receipt aside).
        (
            &["lean", "--include", "skill:python-patterns"],
            "installed by profile \"lean\" without --include (required)",
        ),
        (&["lean", "--include", "skill:testing"], "installed by profile \"lean\" without --include (eager)"),
        (
            &["full", "--include", "skill:api-design"],
            "installed by profile \"full\" without --include (eager)",
        ),
    ];
    for (args, expect) in cases {
        let (code, out, err) = s.run(&["profile", "preview"], args);
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1);
    }
    let fresh = Setup::new();
    let (code, _, err) = fresh.run(&["profile", "preview"], &["lean"]);
    assert_eq!(code, 1);
    assert!(err.contains("no source registry"), "{err}");
    assert_eq!(s.head(), before);
}

const CHILD: &str = "PROFILES_PLAN_CHILD_ARGS";

/// The same inputs give byte-identical output in separate processes, whatever the order
/// of `--include`/`--exclude` flags.
#[test]
fn preview_is_byte_identical_across_processes_and_flag_orders() {
    if let Ok(args) = std::env::var(CHILD) {
        let args: Vec<&str> = args.split('\u{1f}').collect();
        let (code, out, err) = cli(&args);
        assert_eq!(code, 0, "{err}");
        print!("<<<{out}>>>");
        return;
    }
    let s = Setup::scanned();
    let run = |flags: &[&str]| {
        let mut args = vec!["profile", "preview", s.dir(), "full", "--json", "--target", "claude"];
        args.extend_from_slice(flags);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "profiles_plan::preview_is_byte_identical_across_processes_and_flag_orders",
                "--nocapture",
            ])
            .env(CHILD, args.join("\u{1f}"))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let start = text.find("<<<").unwrap() + 3;
        let end = text.find(">>>").unwrap();
        text[start..end].to_owned()
    };
    let a = run(&["--exclude", "skill:security-review", "--exclude", "skill:deploy"]);
    let b = run(&["--exclude", "skill:deploy", "--exclude", "skill:security-review"]);
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(v["exclude"], json!(["skill:deploy", "skill:security-review"]));
    assert_eq!(v["target"], "claude");
    let c = run(&["--exclude", "skill:deploy"]);
    assert_ne!(a, c);
}

/// A source whose dependencies bring in one never selectable (authority-bearing) or
/// manual-only is not routed — its load would be refused — and an eager-all profile leaves
/// it out with the same rule instead of refusing the whole plan (seed 003: "Native
/// manual-only flags and authority-bearing metadata are checked before selection"; outside
/// review 79: such a skill was ranked and shortlisted, and `select` then failed on a skill
/// the user never named). A dependency the user excluded still refuses Full, by name.
#[test]
fn a_source_needing_an_unselectable_one_is_not_routed() {
    let s = Setup::new();
    let registry = s.src.join("manifests/context-packs/skill-registry@1.json");
    let text = std::fs::read_to_string(&registry).unwrap();
    let text = text.replace(
        "\"id\": \"skill:api-design\",",
        "\"id\": \"skill:security-review\",\n      \"dependencies\": [\"skill:shell-tools\"]\n    },\n    {\n      \"id\": \"skill:api-design\",",
    );
    write(&registry, &text);
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let lean = preview(&s, &["lean"]);
    assert_eq!(lean["routedIds"], json!(["skill:api-design"]), "{lean}");
    assert!(
        lean["excludedIds"]
            .as_array()
            .unwrap()
            .contains(&json!({"id": "skill:security-review", "rule": "dependency-not-selectable"})),
        "{lean}"
    );
    let full = preview(&s, &["full"]);
    assert!(!full["selectedIds"].as_array().unwrap().contains(&json!("skill:security-review")), "{full}");
    assert!(full["selectedIds"].as_array().unwrap().contains(&json!("skill:deploy")), "{full}");
    let (code, _, err) = s.run(&["profile", "preview"], &["full", "--exclude", "skill:testing"]);
    assert_eq!(code, 1);
    assert!(err.contains("is a dependency of selected \"skill:api-design\""), "{err}");
}

/// A source that with its dependencies is more than one selection loads (8) is not routed
/// (`closure-too-large`); one at the bound is (outside review 80: a ten-skill chain's head
/// was shortlisted, and selecting it refused the whole `select`).
#[test]
fn a_source_whose_closure_is_over_the_bound_is_not_routed() {
    let s = Setup::new();
    let mut skills = Vec::new();
    for i in 0..9 {
        let dir = s.src.join(format!("skills/ch{i}"));
        write(
            &dir.join("SKILL.md"),
            &format!(
                "---\nname: ch{i}\ndescription: Chain link {i} of a long dependency chain.\n---\n\n# ch{i}\n"
            ),
        );
        if i < 8 {
            skills
                .push(format!("    {{\"id\": \"skill:ch{i}\", \"dependencies\": [\"skill:ch{}\"]}},", i + 1));
        }
    }
    let registry = s.src.join("manifests/context-packs/skill-registry@1.json");
    let text = std::fs::read_to_string(&registry).unwrap();
    write(&registry, &text.replacen("\"skills\": [", &format!("\"skills\": [\n{}", skills.join("\n")), 1));
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let lean = preview(&s, &["lean"]);
    let routed: Vec<&str> =
        lean["routedIds"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(!routed.contains(&"skill:ch0") && routed.contains(&"skill:ch1"), "{lean}");
    assert!(
        lean["excludedIds"]
            .as_array()
            .unwrap()
            .contains(&json!({"id": "skill:ch0", "rule": "closure-too-large"})),
        "{lean}"
    );
}

/// A source whose load would be refused — a file it needs recorded by digest only, or its
/// bytes over one load's budget (32,000) — is not routed (`not-loadable`), so no query can
/// rank or cite it into a `select --load` that refuses the whole task (outside review 85).
#[test]
fn a_source_that_could_not_be_loaded_is_not_routed() {
    let s = Setup::new();
    let skill = |dir: &str, body: &str| {
        write(
            &s.src.join(format!("skills/{dir}/SKILL.md")),
            &format!("---\nname: {dir}\ndescription: The {dir} skill for large corpora.\n---\n\n{body}\n"),
        );
    };
    skill("zz-big", &"x".repeat(40_000));
    skill("zz-corpus", "# corpus");
    std::fs::write(s.src.join("skills/zz-corpus/corpus.md"), "corpus line\n".repeat(300 * 1024 / 12))
        .unwrap();
    skill("zz-fits", &"y".repeat(20_000));
    // A required file that is not text (outside review 86: routed, then its load refused).
    skill("zz-bin", "# binary data");
    std::fs::write(s.src.join("skills/zz-bin/data.bin"), [0xff_u8, 0xfe, 0x00, 0x01]).unwrap();
    let registry = s.src.join("manifests/context-packs/skill-registry@1.json");
    let text = std::fs::read_to_string(&registry).unwrap();
    let entry = "    {\"id\": \"skill:zz-corpus\", \"requiredResources\": [\"skills/zz-corpus/corpus.md\"]},\n    {\"id\": \"skill:zz-bin\", \"requiredResources\": [\"skills/zz-bin/data.bin\"]},";
    write(&registry, &text.replacen("\"skills\": [", &format!("\"skills\": [\n{entry}"), 1));
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let lean = preview(&s, &["lean"]);
    let routed: Vec<&str> =
        lean["routedIds"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(routed.contains(&"skill:zz-fits"), "a load within the budget is routed: {lean}");
    for id in ["skill:zz-big", "skill:zz-corpus", "skill:zz-bin"] {
        assert!(!routed.contains(&id), "{id}: {lean}");
        assert!(
            lean["excludedIds"].as_array().unwrap().contains(&json!({"id": id, "rule": "not-loadable"})),
            "{id}: {lean}"
        );
    }
}
