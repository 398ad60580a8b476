//! Plans on replay (issue #14): `apply` re-derives every recorded plan and generation
//! digest, so a forged one is refused live and `ledger replay` proves the real ones.

use super::profiles_util::{Setup, cli};
use closure_ledger::ledger::Ledger;
use closure_ledger::runtime::Ctx;
use closure_ledger::store::DiskStore;
use ledger_schema::events::profile::{
    ProfileRevisionRecorded, ProfileSelection, RevisionAction, SelectionMode, Target,
};
use ledger_schema::{Digest, Event};

fn lean_event(s: &Setup) -> ProfileRevisionRecorded {
    let state = closure_ledger::profiles::read_state(&s.ledger).unwrap();
    let cp = &state.context_profiles;
    let registry = cp.registry.clone().unwrap();
    let digest = cp.registry_digest.unwrap();
    let plan = closure_ledger::runtime::profile::plan(
        &registry,
        digest,
        "lean",
        Target::Codex,
        SelectionMode::Manual,
        &[],
        &[],
    )
    .unwrap();
    let (manifest, _) = closure_ledger::runtime::profile::generation(&registry, &plan).unwrap();
    ProfileRevisionRecorded {
        action: RevisionAction::Set,
        revision: 1,
        selection: plan.selection(),
        state_root: "/srv/store".into(),
        plan_digest: plan.digest(),
        rollback_to: None,
        registry_digest: digest,
        generation_digest: manifest.digest(),
    }
}

fn admit(s: &Setup, e: ProfileRevisionRecorded) -> Result<(), String> {
    let (mut ledger, _) = Ledger::<DiskStore>::open(&s.ledger).unwrap();
    ledger
        .admit(vec![Event::ProfileRevisionRecorded(e)], Ctx { time_ms: 1 })
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Forged revisions are refused by `apply`, each by its rule, writing nothing: a plan or
/// generation digest that is not the derived one, a selection that is not normalised, a
/// revision that is not +1, a rollback with nothing to return to, a mode change that
/// changes more than the mode.
#[test]
fn forged_revisions_are_refused_by_apply() {
    let s = Setup::scanned();
    let good = lean_event(&s);
    let before = s.head();
    let cases: Vec<(&str, ProfileRevisionRecorded, &str)> = vec![
        ("plan digest", ProfileRevisionRecorded { plan_digest: Digest::ZERO, ..good.clone() }, "ProfilePlan"),
        (
            "generation digest",
            ProfileRevisionRecorded { generation_digest: Digest::ZERO, ..good.clone() },
            "ProfilePlan",
        ),
        (
            "unnormalised selection",
            ProfileRevisionRecorded {
                selection: ProfileSelection {
                    exclude: vec!["skill:security-review".into(), "skill:api-design".into()],
                    ..good.selection.clone()
                },
                ..good.clone()
            },
            "ProfilePlan",
        ),
        ("revision +2", ProfileRevisionRecorded { revision: 2, ..good.clone() }, "ProfileRevision"),
        (
            "rollback at revision 0",
            ProfileRevisionRecorded {
                action: RevisionAction::Rollback,
                rollback_to: Some(0),
                ..good.clone()
            },
            "ProfileRevision",
        ),
        (
            "mode without a profile",
            ProfileRevisionRecorded { action: RevisionAction::Mode, ..good.clone() },
            "ProfileRevision",
        ),
        (
            "relative state root",
            ProfileRevisionRecorded { state_root: "store".into(), ..good.clone() },
            "ProfileRevision",
        ),
    ];
    // What `set` refuses, replay refuses too (outside review 91: `/` replayed).
    let mut cases = cases;
    for (name, root) in [
        ("the filesystem root", "/"),
        ("a trailing slash", "/tmp/store/"),
        ("an empty part", "/tmp//store"),
        ("a dot part", "/tmp/./store"),
        ("a dot-dot part", "/tmp/../store"),
        ("a control character", "/tmp/st\u{7}ore"),
        ("a bidi override", "/tmp/\u{202E}erots"),
    ] {
        cases.push((
            name,
            ProfileRevisionRecorded { state_root: root.into(), ..good.clone() },
            "ProfileRevision",
        ));
    }
    for (name, event, rule) in cases {
        let err = admit(&s, event).unwrap_err();
        assert!(err.contains(rule), "{name}: {err}");
    }
    assert_eq!(s.head(), before);
    admit(&s, good.clone()).unwrap();
    let mode_and_more = ProfileRevisionRecorded {
        action: RevisionAction::Mode,
        revision: 2,
        selection: ProfileSelection {
            mode: SelectionMode::Auto,
            include: vec!["skill:api-design".into()],
            ..good.selection.clone()
        },
        ..good.clone()
    };
    assert!(admit(&s, mode_and_more).unwrap_err().contains("ProfileRevision"));
    let same_again = ProfileRevisionRecorded { revision: 2, ..good };
    assert!(admit(&s, same_again).unwrap_err().contains("no-op"));
}

/// `ledger replay` re-derives every plan it recorded and reports how many.
#[test]
fn replay_counts_the_plans_it_proved() {
    let s = Setup::scanned();
    let root = s.tmp.path().join("store");
    let r = root.to_str().unwrap();
    for args in [&["lean"][..], &["full"][..]] {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--state-root", r]);
        assert_eq!(s.run(&["profile", "set"], &a).0, 0);
    }
    assert_eq!(s.run(&["profile", "mode"], &["auto", "--expected-revision", "2"]).0, 0);
    assert_eq!(s.run(&["profile", "rollback"], &["--state-root", r, "--expected-revision", "3"]).0, 0);
    let (code, out, err) = cli(&["replay", s.dir(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["plansProved"], 4);
}

/// `ledger demo` records a registry, applies Lean -> Full -> rollback and replays them.
#[test]
fn demo_applies_lean_full_rollback() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("demo");
    let (code, out, err) = cli(&["demo", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("profile set lean: revision 1"), "{out}");
    assert!(out.contains("profile set full: revision 2"), "{out}");
    assert!(out.contains("profile rollback: revision 3 lean@1"), "{out}");
    assert!(out.contains("replay re-derived 3 profile plan digests"), "{out}");
}
