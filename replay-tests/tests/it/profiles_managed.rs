//! Managed profile state (issue #14): revisions as ledger entries, generations under a
//! state root through the five-boundary transaction, state-root safety, integrity,
//! and recovery from a real SIGKILL at every boundary.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::profiles_util::{Setup, cli};

fn root_of(s: &Setup) -> PathBuf {
    s.tmp.path().join("store")
}

fn set(s: &Setup, root: &Path, rest: &[&str]) -> (u8, String, String) {
    let mut args = vec!["--state-root", root.to_str().unwrap(), "--json"];
    args.extend_from_slice(rest);
    s.run(&["profile", "set"], &args)
}

fn ok(r: (u8, String, String)) -> serde_json::Value {
    assert_eq!(r.0, 0, "{}{}", r.1, r.2);
    serde_json::from_str(&r.1).unwrap()
}

fn status(s: &Setup) -> (u8, String, String) {
    s.run(&["profile", "status"], &["--json"])
}

/// The text of `set` and `status` shows the configured include and exclude lists, which
/// a later `set` keeps: an exclusion made under Full keeps a skill from Lean, and the text
/// says why (outside review 224 F4: only `--json` showed it).
#[test]
fn the_text_report_shows_the_configured_filters() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let text = |r: (u8, String, String)| {
        assert_eq!(r.0, 0, "{}{}", r.1, r.2);
        r.1.lines().next().unwrap_or_default().to_owned()
    };
    let root_arg = root.to_str().unwrap();
    let first =
        text(s.run(&["profile", "set"], &["--state-root", root_arg, "full", "--exclude", "skill:deploy"]));
    assert!(first.ends_with("exclude [skill:deploy]"), "{first}");
    let lean = text(s.run(&["profile", "set"], &["--state-root", root_arg, "lean"]));
    assert!(lean.ends_with("exclude [skill:deploy]"), "{lean}");
    let st = text(s.run(&["profile", "status"], &[]));
    assert!(st.ends_with("exclude [skill:deploy]"), "{st}");
    let both = text(s.run(
        &["profile", "set"],
        &["--state-root", root_arg, "lean", "--include", "skill:api-design", "--clear-filters"],
    ));
    assert!(both.ends_with("include [skill:api-design]"), "{both}");
    let plain = text(s.run(&["profile", "set"], &["--state-root", root_arg, "lean", "--clear-filters"]));
    assert!(!plain.contains("include") && !plain.contains("exclude"), "{plain}");
}

/// Full -> Lean -> Full, then rollback twice: each a new revision; rollback returns to the
/// previous generation and selection, and rolling back twice toggles. Replay re-derives
/// every recorded plan.
#[test]
fn full_lean_full_and_rollback_toggles() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let r1 = ok(set(&s, &root, &["full"]));
    assert_eq!(r1["revision"], 1);
    let r2 = ok(set(
        &s,
        &root,
        &["lean", "--expected-revision", "1", "--selection", "auto", "--include", "skill:api-design"],
    ));
    assert_eq!(r2["revision"], 2);
    assert_eq!(r2["selectionMode"], "auto");
    let r3 = ok(set(&s, &root, &["full", "--expected-revision", "2", "--selection", "manual"]));
    assert_eq!(r3["generationDigest"], r1["generationDigest"], "content-addressed: the same generation");
    let back = ok(s.run(
        &["profile", "rollback"],
        &["--state-root", root.to_str().unwrap(), "--expected-revision", "3", "--json"],
    ));
    assert_eq!(back["revision"], 4);
    for key in
        ["generationDigest", "selectionMode", "include", "exclude", "profileId", "selectedIds", "planDigest"]
    {
        assert_eq!(back[key], r2[key], "{key}");
    }
    let again = ok(s.run(
        &["profile", "rollback"],
        &["--state-root", root.to_str().unwrap(), "--expected-revision", "4", "--json"],
    ));
    assert_eq!(again["revision"], 5);
    assert_eq!(again["generationDigest"], r3["generationDigest"]);
    assert_eq!(again["selectionMode"], "manual");
    let st = ok(status(&s));
    assert_eq!(st["revision"], 5);
    assert_eq!(st["recoveryRequired"], false);
    // Another state root than the configured one is named, not read (outside review 21: a
    // raw "No such file or directory" on a generation path in it).
    let other = s.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (code, _, err) = s.run(&["profile", "status"], &["--state-root", other.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("configured state root is") && !err.contains("os error"), "{err}");
    assert!(Path::new(st["generationRoot"].as_str().unwrap()).join("manifest.json").is_file());
    let (code, out, err) = cli(&["replay", s.dir(), "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let rep: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(rep["ok"], true);
}

/// The same generation with the same selection is a verified no-op (same revision, no
/// entry); the same generation with another selection is a new revision.
#[test]
fn same_selection_is_a_noop_other_selection_a_new_revision() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let first = ok(set(&s, &root, &["lean"]));
    let head = s.head();
    let again = ok(set(&s, &root, &["lean"]));
    assert_eq!(again["outcome"], "no-op");
    assert_eq!(again["revision"], first["revision"]);
    assert_eq!(s.head(), head, "nothing written");
    let other = ok(set(&s, &root, &["lean", "--selection", "suggest"]));
    assert_eq!(other["revision"], 2);
    assert_eq!(other["generationDigest"], first["generationDigest"]);
    assert_ne!(other["planDigest"], first["planDigest"]);
    // Seed 003's form, `profile mode … --state-root ROOT` (outside review 47: refused as an
    // unexpected argument): the configured root is checked, another refused writing nothing.
    let other = s.tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (code, _, err) = s.run(
        &["profile", "mode"],
        &["auto", "--state-root", other.to_str().unwrap(), "--expected-revision", "2"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("configured state root is"), "{err}");
    let m = ok(s.run(
        &["profile", "mode"],
        &["auto", "--state-root", root.to_str().unwrap(), "--expected-revision", "2", "--json"],
    ));
    assert_eq!(m["revision"], 3);
    assert_eq!(m["selectionMode"], "auto");
    assert_eq!(m["generationDigest"], first["generationDigest"]);
    // Exactly the seed's line, without `--expected-revision` (outside review 56: it was
    // required, so the seed's own form failed).
    let m = ok(s.run(&["profile", "mode"], &["suggest", "--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!((m["revision"].as_u64(), m["selectionMode"].as_str()), (Some(4), Some("suggest")));
}

/// A stale --expected-revision is refused before anything is written: not one ledger
/// byte, and a state root that did not exist is not created.
#[test]
fn expected_revision_is_checked_before_any_write() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let before = s.head();
    let (code, _, err) = set(&s, &root, &["lean", "--expected-revision", "3"]);
    assert_eq!(code, 1);
    assert!(err.contains("expected revision 3, the store is at revision 0"), "{err}");
    assert_eq!(s.head(), before);
    assert!(!root.exists(), "the state root was not created");
    ok(set(&s, &root, &["lean"]));
    let before = s.head();
    let (code, _, _) = set(&s, &root, &["full", "--expected-revision", "0"]);
    assert_eq!(code, 1);
    let (code, _, _) = s.run(&["profile", "mode"], &["auto", "--expected-revision", "0"]);
    assert_eq!(code, 1);
    let (code, _, err) = s
        .run(&["profile", "rollback"], &["--state-root", root.to_str().unwrap(), "--expected-revision", "0"]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = s
        .run(&["profile", "rollback"], &["--state-root", root.to_str().unwrap(), "--expected-revision", "1"]);
    assert_eq!(code, 1, "revision 1 has nothing to roll back to: {err}");
    assert_eq!(s.head(), before);
    assert!(!root.join("txn.json").exists());
}

/// Unsafe state roots are refused, untouched: relative, `/`, not normalised, under a
/// symlink, a non-empty directory it does not own, a wrong mode, another ledger's.
#[test]
fn state_root_safety() {
    let s = Setup::scanned();
    let tmp = s.tmp.path();
    let link = tmp.join("link");
    std::os::unix::fs::symlink(tmp, &link).unwrap();
    let foreign = tmp.join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("precious.txt"), "keep me").unwrap();
    let open = tmp.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases: Vec<(String, &str)> = vec![
        ("relative/store".into(), "absolute"),
        ("/".into(), "filesystem root"),
        (format!("{}/a/../store", tmp.display()), "not normalised"),
        (format!("{}/store", link.display()), "is a symlink"),
        (foreign.display().to_string(), "does not own (left untouched"),
        (open.display().to_string(), "not 0700"),
    ];
    let before = s.head();
    for (root, expect) in &cases {
        let (code, _, err) = s.run(&["profile", "set"], &["lean", "--state-root", root]);
        assert_eq!(code, 1, "{root}: {err}");
        assert!(err.contains(expect), "{root}: {err}");
    }
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 1, "the foreign directory is untouched");
    assert_eq!(s.head(), before);
    // Another ledger's state root.
    let other = Setup::scanned();
    let root = root_of(&other);
    ok(set(&other, &root, &["lean"]));
    let (code, _, err) = set(&s, &root, &["lean"]);
    assert_eq!(code, 1);
    assert!(err.contains("owned by another ledger"), "{err}");
    // `status` of an unconfigured ledger over it refuses it the same way (outside review 87:
    // it answered for the other ledger's root, exit 0).
    let (code, _, err) = s.run(&["profile", "status"], &["--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("owned by another ledger"), "{err}");
    let meta = std::fs::metadata(&root).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700, "created 0700");
    // Nor inside a state root, another ledger's or its own (a generation, `receipts/`), nor
    // inside a ledger's directory (outside review 96, P1: each was set, exit 0, and blocked
    // the owner's every command — `journal/` then held a file no open accepts).
    let generation = std::fs::read_dir(root.join("generations")).unwrap().next().unwrap().unwrap().path();
    let own = root_of(&s);
    ok(set(&s, &own, &["lean"]));
    let inside: Vec<(PathBuf, &str)> = vec![
        (generation.join("nested"), "a state root (it holds .closure-ledger-owner)"),
        (root.join("receipts/x"), "a state root (it holds .closure-ledger-owner)"),
        (own.join("receipts/x"), "a state root (it holds .closure-ledger-owner)"),
        (s.ledger.join("journal/store"), "a ledger's directory"),
        (s.ledger.join("sled/store"), "a ledger's directory"),
        (s.ledger.join("store"), "a ledger's directory"),
    ];
    let (before, listing) = (s.head(), |p: &Path| std::fs::read_dir(p).unwrap().count());
    let (in_generation, in_journal) = (listing(&generation), listing(&s.ledger.join("journal")));
    for (root, expect) in &inside {
        let (code, _, err) = set(&s, root, &["full"]);
        assert_eq!(code, 1, "{}: {err}", root.display());
        assert!(err.contains("lies inside") && err.contains(expect), "{}: {err}", root.display());
        assert!(!root.exists(), "{}: nothing made", root.display());
    }
    assert_eq!((listing(&generation), listing(&s.ledger.join("journal"))), (in_generation, in_journal));
    assert_eq!(s.head(), before);
    // A `journal/` alone does not make a ledger (outside review 97: `~/journal` of notes
    // blocked every root under the home directory).
    let notes = s.tmp.path().join("notes");
    std::fs::create_dir_all(notes.join("journal")).unwrap();
    ok(set(&s, &notes.join("store"), &["lean"]));
    // The reverse: no ledger, and no demo, is made inside a state root (outside review 97).
    let inside_root = own.join("receipts/ledger");
    let (code, _, err) = cli(&["init", inside_root.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("a state root") && !inside_root.exists(), "{err}");
    let (code, _, err) = cli(&["demo", own.join("demo").to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot hold the demo") && !own.join("demo").exists(), "{err}");
    let (code, _, err) = s.run(&["verify"], &[]);
    assert_eq!(code, 0, "{err}");
}

/// One writer at a time: a lock held by a live process or by another host is never
/// reclaimed; one left by a dead process on this host is.
#[test]
fn state_root_lock() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned();
    std::fs::write(root.join("lock"), format!("{} {host}", std::process::id())).unwrap();
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 2, "held by another writer: exit 2, as a held ledger");
    assert!(err.contains("is busy"), "{err}");
    std::fs::write(root.join("lock"), "1 some-other-host").unwrap();
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 2, "a foreign host's lock is never reclaimed: {err}");
    // Nor one behind a symlink (outside review 20: it read as empty and was reclaimed).
    std::fs::rename(root.join("lock"), s.tmp.path().join("foreign-lock")).unwrap();
    std::os::unix::fs::symlink(s.tmp.path().join("foreign-lock"), root.join("lock")).unwrap();
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 2, "a symlinked lock is never reclaimed: {err}");
    assert!(err.contains("not a small regular file"), "{err}");
    std::fs::remove_file(root.join("lock")).unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    std::fs::write(root.join("lock"), format!("{pid} {host}")).unwrap();
    let r = ok(set(&s, &root, &["full"]));
    assert_eq!(r["revision"], 2);
    assert!(!root.join("lock").exists());
    // An empty lock — what a writer killed between creating the file and writing its owner
    // left before the lock was staged and linked (outside review 20: it refused set,
    // rollback and recover for good) — is reclaimed; the lock is never left empty now.
    std::fs::write(root.join("lock"), "").unwrap();
    // The staged `lock.<pid>` a writer killed while taking the lock leaves is removed by the
    // next writer once its pid is gone (outside review 85: nothing ever removed it); a live
    // pid's (a writer taking the lock now) and another host's are left.
    std::fs::write(root.join(format!("lock.{pid}")), format!("{pid} {host}")).unwrap();
    let mut running = std::process::Command::new("sleep").arg("30").spawn().unwrap();
    let live = running.id();
    std::fs::write(root.join(format!("lock.{live}")), format!("{live} {host}")).unwrap();
    let r = ok(set(&s, &root, &["lean"]));
    running.kill().unwrap();
    running.wait().unwrap();
    assert_eq!(r["revision"], 3);
    assert!(!root.join(format!("lock.{pid}")).exists(), "a dead writer's staged lock is removed");
    assert!(root.join(format!("lock.{live}")).exists(), "a live pid's staged lock is left");
    std::fs::remove_file(root.join(format!("lock.{live}"))).unwrap();
    let names: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("lock")), "no lock or staged lock left: {names:?}");
    // A state root is one absolute line, for `status` as for `set` (exit 1, not an I/O error).
    for bad in ["relative/root", "/tmp/a\nb"] {
        let (code, _, err) = s.run(&["profile", "status"], &["--state-root", bad]);
        assert_eq!(code, 1, "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err:?}");
        let (code, _, err) = set(&s, Path::new(bad), &["lean"]);
        assert_eq!(code, 1, "{bad:?}: {err}");
    }
}

/// A generation file that was modified, added, replaced by a symlink or hard-linked
/// blocks status, set and rollback with a clear error (exit 1).
#[test]
fn tampered_generation_blocks_status_set_and_rollback() {
    type Tamper = fn(&Path);
    let tampers: [(&str, Tamper, &str); 9] = [
        (
            "modified",
            |g| std::fs::write(g.join(".codex/skills/testing/SKILL.md"), "changed").unwrap(),
            "was modified",
        ),
        ("added", |g| std::fs::write(g.join(".codex/skills/testing/extra.md"), "x").unwrap(), "was added"),
        (
            "symlink",
            |g| {
                let f = g.join(".codex/skills/testing/SKILL.md");
                std::fs::remove_file(&f).unwrap();
                std::os::unix::fs::symlink("/etc/hostname", &f).unwrap();
            },
            "replaced by a symlink",
        ),
        (
            "hard link",
            |g| {
                std::fs::hard_link(
                    g.join(".codex/skills/testing/SKILL.md"),
                    // Outside the state root (a stray file in generations/ is refused first).
                    g.parent().unwrap().parent().unwrap().parent().unwrap().join("outside"),
                )
                .unwrap()
            },
            "hard-linked",
        ),
        // Outside review 20: permissions and an empty directory went unnoticed.
        (
            "chmod 0777",
            |g| {
                use std::os::unix::fs::PermissionsExt;
                let f = g.join(".codex/skills/testing/SKILL.md");
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o777)).unwrap()
            },
            "wider than 0600",
        ),
        (
            "setuid",
            |g| {
                use std::os::unix::fs::PermissionsExt;
                let f = g.join(".codex/skills/testing/SKILL.md");
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o4600)).unwrap()
            },
            "wider than 0600",
        ),
        (
            "empty directory",
            |g| std::fs::create_dir(g.join(".codex/skills/testing/hooks")).unwrap(),
            "was added",
        ),
        // Outside review 85: a narrower mode the owner cannot read verified.
        (
            "chmod 0000",
            |g| {
                use std::os::unix::fs::PermissionsExt;
                let f = g.join(".codex/skills/testing/SKILL.md");
                std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o000)).unwrap()
            },
            "its owner can no longer read it",
        ),
        (
            "directory 0300",
            |g| {
                use std::os::unix::fs::PermissionsExt;
                let d = g.join(".codex/skills/testing");
                std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o300)).unwrap()
            },
            "its owner can no longer list and enter it",
        ),
    ];
    for (name, tamper, expect) in tampers {
        let s = Setup::scanned();
        let root = root_of(&s);
        ok(set(&s, &root, &["full"]));
        let r = ok(set(&s, &root, &["lean"]));
        tamper(Path::new(r["generationRoot"].as_str().unwrap()));
        // The way out is named (outside review 91: `status` said only what was wrong).
        let (_, _, err) = status(&s);
        assert!(err.contains("ledger profile recover"), "{name}: {err}");
        blocks_status_set_and_rollback(&s, &root, name, expect);
    }
}

/// `status`, `set` and `rollback` (at revision 2) each refuse with exit 1, `status` saying
/// `expect`, and the ledger is not written.
fn blocks_status_set_and_rollback(s: &Setup, root: &Path, name: &str, expect: &str) {
    let before = s.head();
    let (code, _, err) = status(s);
    assert_eq!(code, 1, "{name}: status: {err}");
    assert!(err.contains(expect), "{name}: {err}");
    let (code, _, err) = set(s, root, &["full"]);
    assert_eq!(code, 1, "{name}: set: {err}");
    let (code, _, err) = s
        .run(&["profile", "rollback"], &["--state-root", root.to_str().unwrap(), "--expected-revision", "2"]);
    assert_eq!(code, 1, "{name}: rollback: {err}");
    // `mode` verifies the configured generation as `status` does (outside review 27).
    let (code, _, err) = s.run(&["profile", "mode"], &["suggest", "--expected-revision", "2"]);
    assert_eq!(code, 1, "{name}: mode: {err}");
    assert_eq!(s.head(), before, "{name}: nothing written");
}

/// Status reports the configuration from the ledger alone: the source tree can be gone —
/// it says so (`source.state` `unreadable`) and still reports everything else.
#[test]
fn status_never_depends_on_the_source_tree() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let r = ok(set(&s, &root, &["lean", "--target", "claude"]));
    std::fs::remove_dir_all(&s.src).unwrap();
    let st = ok(status(&s));
    assert_eq!(st["source"]["state"], "unreadable", "{st}");
    for key in [
        "revision",
        "profileId",
        "target",
        "selectionMode",
        "include",
        "exclude",
        "selectedIds",
        "generationDigest",
        "generationRoot",
    ] {
        assert_eq!(st[key], r[key], "{key}");
    }
    assert_eq!(st["target"], "claude");
    assert!(
        Path::new(st["generationRoot"].as_str().unwrap()).join(".claude/skills/testing/SKILL.md").is_file()
    );
    // Source drift: a new registry is reported, the configured generation stays put.
    let fresh = Setup::scanned();
    let r = ok(set(&fresh, &root_of(&fresh), &["lean"]));
    std::fs::write(fresh.src.join("skills/testing/SKILL.md"), "---\nname: testing\ndescription: v2\n---\n")
        .unwrap();
    assert_eq!(fresh.scan().0, 0);
    let st = ok(status(&fresh));
    assert_eq!(st["registryCurrent"], false);
    assert_eq!(st["generationDigest"], r["generationDigest"]);
    let moved = ok(set(&fresh, &root_of(&fresh), &["lean"]));
    assert_eq!(moved["revision"], 2);
    assert_ne!(moved["generationDigest"], r["generationDigest"]);
    assert_eq!(moved["registryCurrent"], true);
}

const CHILD: &str = "PROFILES_MANAGED_CHILD";

/// Runs `ledger profile set` in a child process that pauses once `boundary` is durable,
/// and kills it there with SIGKILL.
fn killed_at(s: &Setup, root: &Path, boundary: &str, profile: &str) {
    let mut child = paused_at(s, root, "sigkill_at_every_boundary_then_recover", boundary, profile);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

/// Runs `ledger profile set` (test `test`'s child branch) in a child process that pauses
/// once `boundary` is durable, and returns it paused there, alive.
fn paused_at(s: &Setup, root: &Path, test: &str, boundary: &str, profile: &str) -> std::process::Child {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", &format!("profiles_managed::{test}"), "--nocapture"])
        .env(CHILD, format!("{}\u{1f}{}\u{1f}{profile}", s.dir(), root.display()))
        .env("CLOSURE_LEDGER_PROFILE_PAUSE_AT", boundary)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.find(|l| l.as_ref().map(|l| l.contains("PAUSED AT")).unwrap_or(true)).unwrap().unwrap();
    assert_eq!(line, format!("PAUSED AT {boundary}"));
    child
}

/// A real SIGKILL at each of the five boundaries, then `recover`: before the generation is
/// published it rolls back (revision unchanged, stage gone); after, it rolls forward
/// (the entry committed once); after the entry it completes. Recover is idempotent, and
/// the ledger replays.
#[test]
fn sigkill_at_every_boundary_then_recover() {
    if let Ok(args) = std::env::var(CHILD) {
        let a: Vec<&str> = args.split('\u{1f}').collect();
        let (code, out, err) = cli(&["profile", "set", a[0], a[2], "--state-root", a[1]]);
        panic!("the child was not killed: {code} {out} {err}");
    }
    for (boundary, outcome, revision) in [
        ("prepared", "rolled-back", 1),
        ("files", "rolled-back", 1),
        ("generation", "rolled-forward", 2),
        ("receipt", "rolled-forward", 2),
        ("state", "completed", 2),
    ] {
        let s = Setup::scanned();
        let root = root_of(&s);
        let first = ok(set(&s, &root, &["lean"]));
        killed_at(&s, &root, boundary, "full");
        let st = ok(status(&s));
        assert_eq!(st["recoveryRequired"], true, "{boundary}");
        let (code, _, err) = set(&s, &root, &["full"]);
        assert_eq!(code, 1, "{boundary}: set refuses until recovered");
        assert!(err.contains("recover"), "{boundary}: {err}");
        // So does `mode` (outside review 27: it recorded a revision over the interrupted
        // transaction, which `recover` then rolled back instead of forward).
        let head = s.head();
        let at = st["revision"].to_string();
        let (code, _, err) = s.run(&["profile", "mode"], &["suggest", "--expected-revision", &at]);
        assert_eq!(code, 1, "{boundary}: mode refuses until recovered: {err}");
        assert!(err.contains("recover"), "{boundary}: {err}");
        assert_eq!(s.head(), head, "{boundary}: mode wrote nothing");
        // No body is returned on the configuration the transaction replaces, by the named
        // resolve either (outside review 151 F1: it loaded a skill the interrupted `set`
        // excluded); deciding without `--load` returns none and stays open.
        let task = s.src.join("task.json");
        std::fs::write(&task, r#"{"sessionId":"s","taskId":"t","revision":1,"phase":"implement","explicitIds":["skill:deploy"]}"#).unwrap();
        let (code, out, err) =
            s.run(&["profile", "resolve"], &["lean", "--task-input", task.to_str().unwrap(), "--load"]);
        assert_eq!(code, 1, "{boundary}: {out}");
        assert!(err.contains("recover"), "{boundary}: {err}");
        let (code, _, err) =
            s.run(&["profile", "resolve"], &["lean", "--task-input", task.to_str().unwrap()]);
        assert_eq!(code, 0, "{boundary}: {err}");
        let r = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
        assert_eq!(r["outcome"], outcome, "{boundary}");
        assert_eq!(r["revision"], revision, "{boundary}");
        assert_eq!(r["recoveryRequired"], false, "{boundary}");
        if revision == 1 {
            assert_eq!(r["generationDigest"], first["generationDigest"]);
            let stage = root.join("stage");
            assert!(
                !stage.exists() || std::fs::read_dir(&stage).unwrap().count() == 0,
                "{boundary}: stage removed"
            );
        } else {
            assert!(root.join("receipts/2.json").is_file(), "{boundary}");
        }
        let again = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
        assert_eq!(again["outcome"], "nothing-to-recover", "{boundary}: idempotent");
        assert_eq!(again["revision"], revision);
        ok(status(&s));
        let (code, out, _) = cli(&["replay", s.dir(), "--json"]);
        assert_eq!(code, 0, "{boundary}: {out}");
        // The interrupted change can be made again.
        let redo = ok(set(&s, &root, &["full"]));
        assert_eq!(redo["outcome"], if revision == 1 { "set" } else { "no-op" }, "{boundary}");
    }
}

/// A task input file (an explicit selection of `skill:testing`) in `s`'s temp directory.
fn task_file(s: &Setup) -> PathBuf {
    let task = s.tmp.path().join("task.json");
    std::fs::write(
        &task,
        r#"{"sessionId":"s","taskId":"t","revision":1,"phase":"implement","explicitIds":["skill:testing"]}"#,
    )
    .unwrap();
    task
}

/// A `set` into a second state root killed at a boundary is seen from the ledger, though
/// the ledger records that root nowhere yet: `status` reports it (naming the root),
/// `status --state-root` of it, `select`, `mode`, `set` and `rollback` refuse until it is
/// recovered there, and `recover` clears it (outside review 101: `status` was clean,
/// `select` went on, and a `recover` much later switched the profile).
#[test]
fn a_set_interrupted_in_another_root_is_seen_from_the_ledger() {
    for (boundary, outcome) in [("generation", "rolled-forward"), ("files", "rolled-back")] {
        let s = Setup::scanned();
        let a = root_of(&s);
        let b = s.tmp.path().join("store-b");
        ok(set(&s, &a, &["lean", "--selection", "auto"]));
        killed_at(&s, &b, boundary, "full");
        let b_text = b.to_str().unwrap();
        let st = ok(status(&s));
        assert_eq!(st["recoveryRequired"], true, "{boundary}: {st}");
        assert_eq!(st["revision"], 1);
        assert!(st["note"].as_str().is_some_and(|n| n.contains(b_text) && n.contains("recover")), "{st}");
        let head = s.head();
        let task = task_file(&s);
        for (words, rest) in [
            (&["profile", "status"][..], vec!["--state-root", b_text]),
            (&["select"], vec!["--task-input", task.to_str().unwrap(), "--load"]),
            (&["profile", "mode"], vec!["suggest"]),
            (&["profile", "set"], vec!["lean", "--state-root", a.to_str().unwrap()]),
            (&["profile", "rollback"], vec!["--state-root", a.to_str().unwrap(), "--expected-revision", "1"]),
        ] {
            let (code, out, err) = s.run(words, &rest);
            assert_eq!(code, 1, "{boundary} {words:?}: {out}{err}");
            assert!(
                err.contains(&format!("recover DIR --state-root {b_text}")),
                "{boundary} {words:?}: {err}"
            );
        }
        assert_eq!(s.head(), head, "{boundary}: nothing recorded");
        let r = ok(s.run(&["profile", "recover"], &["--state-root", b_text, "--json"]));
        assert_eq!(r["outcome"], outcome, "{boundary}");
        let st = ok(status(&s));
        assert_eq!((st["recoveryRequired"].as_bool(), st["note"].as_str()), (Some(false), None), "{st}");
        assert!(
            !std::path::Path::new(s.dir()).join("profile-txn").exists(),
            "{boundary}: the note is cleared"
        );
    }
}

/// The note fails closed where it cannot be checked and is ignored where it is stale
/// (outside review 103): a root it names that is missing (moved, unmounted) blocks as an
/// interrupted one does, naming both ways out, until it is back and recovered; `recover` of
/// the configured root names the other root; a note naming a root another ledger owns
/// now (its own transaction interrupted there) is not this ledger's; what a note write cut
/// short left is removed by `recover`.
#[test]
fn a_note_naming_a_missing_or_foreign_root() {
    let s = Setup::scanned();
    let a = root_of(&s);
    let b = s.tmp.path().join("store-b");
    let (a_text, b_text) = (a.to_str().unwrap(), b.to_str().unwrap());
    ok(set(&s, &a, &["lean"]));
    killed_at(&s, &b, "receipt", "full");
    let r = ok(s.run(&["profile", "recover"], &["--state-root", a_text, "--json"]));
    assert_eq!(r["outcome"], "nothing-to-recover");
    assert_eq!(r["recoveryRequired"], true, "{r}");
    assert!(
        r["note"].as_str().is_some_and(|n| n.contains(&format!("recover DIR --state-root {b_text}"))),
        "{r}"
    );
    let (_, text, _) = s.run(&["profile", "status"], &[]);
    assert!(text.contains("RECOVERY REQUIRED: see the note") && text.contains(b_text), "{text}");
    // An unrelated root's `recover` names it too (outside review 105).
    let (code, _, err) =
        s.run(&["profile", "recover"], &["--state-root", s.tmp.path().join("r9").to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("holds nothing of this ledger's") && err.contains(b_text), "{err}");
    // Unmounted — an empty directory where it was — blocks as missing does (outside review
    // 105: taken for a stale note).
    let away = s.tmp.path().join("away");
    std::fs::rename(&b, &away).unwrap();
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new().mode(0o700).create(&b).unwrap();
    }
    let st = ok(status(&s));
    assert_eq!(st["recoveryRequired"], true, "{st}");
    assert!(st["note"].as_str().is_some_and(|n| n.contains("holds no ownership marker")), "{st}");
    // `set` into it is no third way out (outside review 105: it abandoned the transaction).
    let (code, _, err) = set(&s, &b, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("remove the note"), "{err}");
    std::fs::remove_dir(&b).unwrap();
    // Moved away: still blocked.
    let st = ok(status(&s));
    assert_eq!(st["recoveryRequired"], true, "{st}");
    assert!(
        st["note"].as_str().is_some_and(|n| n.contains("is missing") && n.contains("remove the note")),
        "{st}"
    );
    let task = task_file(&s);
    for (words, rest) in [
        (&["select"][..], vec!["--task-input", task.to_str().unwrap()]),
        (&["profile", "mode"], vec!["suggest"]),
        (&["profile", "recover"], vec!["--state-root", b_text]),
    ] {
        let (code, out, err) = s.run(words, &rest);
        assert_eq!(code, 1, "{words:?}: {out}{err}");
        assert!(err.contains("is missing"), "{words:?}: {err}");
    }
    // Behind a symlink: no state root either, blocked the same way (outside review 107:
    // the note pointed at a `recover` that refused the symlink).
    std::os::unix::fs::symlink(&away, &b).unwrap();
    let st = ok(status(&s));
    assert!(
        st["note"].as_str().is_some_and(|n| n.contains("not a directory") && n.contains("remove the note")),
        "{st}"
    );
    std::fs::remove_file(&b).unwrap();
    // Back: recovered where it is.
    std::fs::rename(&away, &b).unwrap();
    let r = ok(s.run(&["profile", "recover"], &["--state-root", b_text, "--json"]));
    assert_eq!(r["outcome"], "rolled-forward");
    assert_eq!(ok(status(&s))["recoveryRequired"], false);
    // Another ledger's transaction interrupted in a root this ledger's note names (the
    // note left stale by hand): not this ledger's.
    let other = Setup::scanned();
    let c = other.tmp.path().join("store-c");
    ok(set(&other, &c, &["lean"]));
    killed_at(&other, &c, "receipt", "full");
    std::fs::write(std::path::Path::new(s.dir()).join("profile-txn"), c.to_str().unwrap()).unwrap();
    let st = ok(status(&s));
    assert_eq!((st["recoveryRequired"].as_bool(), st["note"].as_str()), (Some(false), None), "{st}");
    ok(s.run(&["select"], &["--task-input", task.to_str().unwrap(), "--json"]));
    // A file there that is no note of this ledger's is kept, and refused (outside review 158
    // F1: unlinked whatever it held).
    let note_tmp = std::path::Path::new(s.dir()).join("profile-txn.tmp");
    std::fs::write(&note_tmp, b"OPERATOR NOTES: not a path\n").unwrap();
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", b_text, "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("profile-txn.tmp") && err.contains("move it out"), "{err}");
    assert_eq!(std::fs::read(&note_tmp).unwrap(), b"OPERATOR NOTES: not a path\n");
    // A note write cut short.
    std::fs::write(&note_tmp, b"/x").unwrap();
    ok(s.run(&["profile", "recover"], &["--state-root", b_text, "--json"]));
    assert!(!note_tmp.exists());
    // The note removed by hand (go on without it): a `set` into the root that still holds
    // the transaction is refused and writes no note again (outside review 107); `recover`
    // there still finishes it.
    std::fs::remove_file(std::path::Path::new(s.dir()).join("profile-txn")).unwrap();
    let d = s.tmp.path().join("store-d");
    killed_at(&s, &d, "receipt", "lean");
    let note = std::path::Path::new(s.dir()).join("profile-txn");
    std::fs::remove_file(&note).unwrap();
    let (code, _, err) = set(&s, &d, &["lean"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("interrupted transaction"), "{err}");
    assert!(!note.exists(), "a refused set writes no note");
    let r = ok(s.run(&["profile", "recover"], &["--state-root", d.to_str().unwrap(), "--json"]));
    assert_eq!(r["outcome"], "rolled-forward");
}

/// A `set` refused inside the transaction's preparation — its generation present but not
/// verifying — leaves no note (outside review 109: the note stayed, and once the unused
/// root was removed it blocked the ledger over a transaction that never was).
#[test]
fn a_set_refused_while_preparing_leaves_no_note() {
    let s = Setup::scanned();
    let a = root_of(&s);
    let b = s.tmp.path().join("store-b");
    ok(set(&s, &a, &["lean", "--selection", "auto"]));
    ok(set(&s, &b, &["full"]));
    let generation = std::fs::read_dir(a.join("generations")).unwrap().next().unwrap().unwrap().path();
    std::fs::create_dir(generation.join("extra")).unwrap();
    let (code, _, err) = set(&s, &a, &["lean"]);
    assert_eq!(code, 1, "{err}");
    assert!(!std::path::Path::new(s.dir()).join("profile-txn").exists(), "no note: {err}");
    std::fs::remove_dir_all(&a).unwrap();
    let st = ok(status(&s));
    assert_eq!((st["recoveryRequired"].as_bool(), st["note"].as_str()), (Some(false), None), "{st}");
}

/// Recover refuses a tampered stage (a file the transaction did not write) and leaves it.
#[test]
fn recover_refuses_a_tampered_stage() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    killed_at(&s, &root, "files", "full");
    let stage = std::fs::read_dir(root.join("stage")).unwrap().next().unwrap().unwrap().path();
    std::fs::write(stage.join("intruder.sh"), "rm -rf /").unwrap();
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("intruder.sh is not ours"), "{err}");
    assert!(stage.join("intruder.sh").exists(), "left in place");
    assert!(root.join("txn.json").exists());
}

/// A staged file cut short — a kill between two writes of one file leaves a prefix of its
/// bytes — is the transaction's own: `recover` rolls it back (outside review 87: every
/// `recover` refused it, and `set` waited for `recover`). The same length of other bytes is
/// not ours, and is refused and left.
#[test]
fn recover_rolls_back_a_stage_with_a_file_cut_short() {
    for cut_short in [true, false] {
        let s = Setup::scanned();
        let root = root_of(&s);
        ok(set(&s, &root, &["lean"]));
        killed_at(&s, &root, "files", "full");
        let stage = std::fs::read_dir(root.join("stage")).unwrap().next().unwrap().unwrap().path();
        let file = stage.join(".codex/skills/testing/SKILL.md");
        let bytes = std::fs::read(&file).unwrap();
        let mut short = bytes[..bytes.len() / 2].to_vec();
        if !cut_short {
            short[0] ^= 1;
        }
        std::fs::write(&file, &short).unwrap();
        let (code, out, err) =
            s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
        if cut_short {
            assert_eq!(code, 0, "{err}");
            let r: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(r["outcome"], "rolled-back", "{r}");
            assert!(!stage.exists(), "stage removed");
            ok(set(&s, &root, &["full"]));
        } else {
            assert_eq!(code, 1, "{err}");
            assert!(err.contains("does not hold the bytes the transaction wrote"), "{err}");
            assert!(file.exists(), "left in place");
        }
    }
}

/// Full (revision 1) then Lean (revision 2): the ledger, its state root, and a file of
/// revision 1's generation.
fn full_then_lean() -> (Setup, std::path::PathBuf, std::path::PathBuf) {
    let s = Setup::scanned();
    let root = root_of(&s);
    let full = ok(set(&s, &root, &["full"]));
    ok(set(&s, &root, &["lean", "--expected-revision", "1"]));
    let file = Path::new(full["generationRoot"].as_str().unwrap()).join(".codex/skills/deploy/SKILL.md");
    (s, root, file)
}

/// A refused `rollback` or `set` (its target generation, published by an earlier revision,
/// was tampered) leaves nothing behind: no `txn.json`, status is not blocked, and once the
/// file is restored `recover` has nothing to do — it never commits the refused operation.
#[test]
fn refused_set_or_rollback_leaves_no_transaction() {
    for command in ["rollback", "set"] {
        let (s, root, file) = full_then_lean();
        let original = std::fs::read(&file).unwrap();
        let mut tampered = original.clone();
        tampered.extend_from_slice(b"x\n");
        std::fs::write(&file, &tampered).unwrap();
        let before = s.head();
        let (code, _, err) = match command {
            "rollback" => s.run(
                &["profile", "rollback"],
                &["--state-root", root.to_str().unwrap(), "--expected-revision", "2"],
            ),
            _ => set(&s, &root, &["full", "--expected-revision", "2"]),
        };
        assert_eq!(code, 1, "{command}: {err}");
        assert!(err.contains("was modified"), "{command}: {err}");
        // The remedy is named (outside review 87).
        assert!(err.contains("move it out of the state root"), "{command}: {err}");
        assert!(!root.join("txn.json").exists(), "{command}: no prepared transaction left");
        // `status` names the altered earlier generation, not a transaction to recover
        // (outside review 136 F4: it passed every audit until a rollback refused it).
        let (code, _, err) = status(&s);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(err.contains("was modified") && err.contains("the generation of revision 1"), "{err}");
        // `recover`, where every other command sends the operator, says so too, never
        // "nothing to recover" (outside review 147 F2).
        let (code, out, err) =
            s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
        assert_eq!(code, 1, "{command}: {out}");
        assert!(err.contains("the generation of revision 1") && err.contains("move it out"), "{err}");
        std::fs::write(&file, &original).unwrap();
        let st = ok(status(&s));
        assert_eq!(st["recoveryRequired"], false, "{command}");
        assert_eq!(st["revision"], 2);
        let rec = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
        assert_eq!(rec["outcome"], "nothing-to-recover", "{command}");
        assert_eq!(rec["revision"], 2, "{command}: the refused operation was never committed");
        assert_eq!(s.head(), before, "{command}: nothing written");
    }
}

/// A stage no transaction names is reported by `profile recover` with its remedy, not
/// passed over as "nothing to recover" while `rollback` refuses it (outside review 147 F2).
#[test]
fn recover_names_a_left_over_stage() {
    let (s, root, _) = full_then_lean();
    let stage = root.join("stage").join("ab".repeat(32));
    std::fs::create_dir_all(stage.join(".codex")).unwrap();
    std::fs::write(stage.join(".codex/x.md"), b"half written\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        for (path, mode) in
            [(stage.as_path(), 0o700), (&stage.join(".codex"), 0o700), (&stage.join(".codex/x.md"), 0o600)]
        {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
    // `status` names it too, without failing (outside review 151 F4: it said nothing).
    let st = ok(status(&s));
    assert!(st["note"].as_str().is_some_and(|n| n.contains("left-over stage")), "{st}");
    let (code, out, err) =
        s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("left-over stage") && err.contains("move it out"), "{err}");
    assert!(stage.exists(), "kept for inspection");
    std::fs::remove_dir_all(&stage).unwrap();
    let rec = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!(rec["outcome"], "nothing-to-recover");
}

/// A stage of the configured generation that a rebuild cut short — every file in it the
/// generation's bytes or a prefix of them — is `recover`'s to clear, not a stray one to
/// refuse (outside review 151 F4: "nothing records it"); one holding another file is
/// still refused, and kept.
#[test]
fn recover_clears_its_own_cut_short_stage() {
    use std::os::unix::fs::PermissionsExt;
    let (s, root, _) = full_then_lean();
    let st = ok(status(&s));
    let digest = st["generationDigest"].as_str().unwrap().trim_start_matches("b3:").to_owned();
    let generation = root.join("generations").join(&digest);
    let stage = root.join("stage").join(&digest);
    let file = generation.join(".codex/skills/deploy/SKILL.md");
    let file = if file.exists() { file } else { generation.join("manifest.json") };
    let rel = file.strip_prefix(&generation).unwrap().to_owned();
    let bytes = std::fs::read(&file).unwrap();
    let put = |name: &std::path::Path, content: &[u8]| {
        let path = stage.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
        let mut dir = path.parent().unwrap().to_owned();
        while dir.starts_with(&root) && dir != root {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
            dir = dir.parent().unwrap().to_owned();
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    put(&rel, &bytes[..bytes.len() / 2]);
    let rec = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!(rec["outcome"], "repaired", "{rec}");
    assert!(!stage.exists(), "cleared");
    put(std::path::Path::new("evil.md"), b"not ours\n");
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("evil.md is not ours") && err.contains("move the stage out"), "{err}");
    assert!(stage.join("evil.md").exists(), "kept");
}

/// What a transaction left beside damage: a committed revision whose generation was lost
/// since is completed by rebuilding it (outside review 154 P1-1: refused as missing at every
/// `recover`, for good); an uncommitted one is not rolled forward over a receipt the ledger
/// does not vouch for, and a `receipts/N.tmp` that is not ours is refused and kept
/// (154 P1-2, P1-3: rolled forward, and the file unlinked).
#[test]
fn recover_neither_loops_nor_commits_over_damage() {
    // Committed (killed after the entry), its generation then lost.
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    killed_at(&s, &root, "state", "full");
    let digest = s.run(&["profile", "status"], &["--json"]).1;
    let digest: serde_json::Value = serde_json::from_str(&digest).unwrap_or_default();
    let generation = root
        .join("generations")
        .join(digest["generationDigest"].as_str().unwrap_or_default().trim_start_matches("b3:"));
    assert!(generation.is_dir(), "{digest}");
    std::fs::remove_dir_all(&generation).unwrap();
    let r = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!(r["outcome"], "completed", "{r}");
    assert!(generation.is_dir(), "rebuilt");
    ok(status(&s));

    // Committed, its receipt then altered: never overwritten by the completion (outside
    // review 157 P1-2: renamed over, unread).
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    killed_at(&s, &root, "state", "full");
    let receipt = root.join("receipts/2.json");
    let mut altered = std::fs::read(&receipt).unwrap();
    altered.extend_from_slice(b" ");
    std::fs::write(&receipt, &altered).unwrap();
    let (code, out, err) =
        s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{out}");
    assert!(err.contains("differs") && err.contains("move it out"), "{err}");
    assert_eq!(std::fs::read(&receipt).unwrap(), altered, "kept");

    // A `txn.tmp` that is not this ledger's is kept, by `recover` and by `set` (157 P1/P2-3).
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let tmp = root.join("txn.tmp");
    std::fs::write(&tmp, b"operator notes\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    // `status` names it, and the dry run refuses it as `set` does (outside review 212 F2:
    // both passed it).
    let st = ok(status(&s));
    assert!(st["note"].as_str().is_some_and(|n| n.contains("txn.tmp") && n.contains("move it out")), "{st}");
    let (code, _, err) = set(&s, &root, &["full", "--dry-run"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("txn.tmp") && err.contains("move it out"), "{err}");
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "refused, not success over it (158 F2): {err}");
    assert!(err.contains("txn.tmp") && err.contains("move it out"), "{err}");
    assert!(tmp.exists(), "kept by recover");
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("txn.tmp") && err.contains("move it out"), "{err}");
    assert_eq!(std::fs::read(&tmp).unwrap(), b"operator notes\n", "kept by set");

    // Uncommitted (killed once the generation is published): an altered receipt of an
    // earlier revision, then a foreign `N.tmp` of this one.
    for damage in ["altered", "foreign tmp"] {
        let s = Setup::scanned();
        let root = root_of(&s);
        ok(set(&s, &root, &["lean"]));
        killed_at(&s, &root, "generation", "full");
        let (path, bytes) = match damage {
            "altered" => {
                let path = root.join("receipts/1.json");
                let mut bytes = std::fs::read(&path).unwrap();
                bytes.extend_from_slice(b" ");
                (path, bytes)
            }
            _ => (root.join("receipts/2.tmp"), b"not a receipt of this ledger\n".to_vec()),
        };
        std::fs::write(&path, &bytes).unwrap();
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let head = s.head();
        let (code, out, err) =
            s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
        assert_eq!(code, 1, "{damage}: {out}");
        assert!(err.contains("move it out"), "{damage}: {err}");
        assert_eq!(s.head(), head, "{damage}: nothing committed");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{damage}: kept");
    }
}

/// An altered earlier generation refuses `set` to a third selection (and its dry run), as
/// `status` refuses it, naming the revision (outside review 139 F7: `set` committed over
/// it, and `status` refused right after).
#[test]
fn an_altered_earlier_generation_refuses_set_as_status_does() {
    let (s, root, file) = full_then_lean();
    refused_until_restored(&s, &root, &file);
}

/// A `set` into another state root than the configured one checks the earlier generations
/// this ledger committed there as `status` will once it is configured: an altered one
/// refuses `set` and its dry run, naming the revision (outside review 251 F1: `set` committed
/// over it, and every later command refused the store).
#[test]
fn an_altered_generation_in_another_root_refuses_set_there() {
    let s = Setup::scanned();
    let first = root_of(&s);
    let lean = ok(set(&s, &first, &["lean"]));
    ok(set(&s, &s.tmp.path().join("other"), &["full", "--expected-revision", "1"]));
    let skills = Path::new(lean["generationRoot"].as_str().unwrap()).join(".codex/skills");
    let skill = std::fs::read_dir(&skills).unwrap().next().unwrap().unwrap().path();
    refused_until_restored(&s, &first, &skill.join("SKILL.md"));
}

/// With `file` of revision 1's generation in `root` altered, `set` into `root` (and its dry
/// run) is refused naming that revision, committing nothing; restored, it commits revision 3.
fn refused_until_restored(s: &Setup, root: &Path, file: &Path) {
    let original = std::fs::read(file).unwrap();
    std::fs::write(file, b"altered\n").unwrap();
    let before = s.head();
    for dry in [true, false] {
        let mut args = vec!["full", "--exclude", "skill:deploy", "--expected-revision", "2"];
        if dry {
            args.push("--dry-run");
        }
        let (code, _, err) = set(s, root, &args);
        assert_eq!(code, 1, "dry run {dry}: {err}");
        assert!(err.contains("the generation of revision 1"), "dry run {dry}: {err}");
    }
    assert_eq!(s.head(), before, "nothing committed");
    std::fs::write(file, &original).unwrap();
    let third = ok(set(s, root, &["full", "--exclude", "skill:deploy", "--expected-revision", "2"]));
    assert_eq!(third["revision"], 3);
    ok(status(s));
}

/// A receipt's file name is the revision as the ledger writes it: `01.json` is no receipt of
/// revision 1 — an exact copy there is a second file for one revision, and an altered one is
/// named itself, not the intact `1.json` (outside review 251 F2: the copy passed, and the
/// altered one was blamed on `1.json`, whose republishing by `recover` changed nothing).
#[test]
fn a_receipt_name_with_a_leading_zero_is_not_the_revisions_receipt() {
    use std::os::unix::fs::PermissionsExt;
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let receipt = std::fs::read(root.join("receipts/1.json")).unwrap();
    for (name, bytes) in
        [("01.json", receipt.clone()), ("01.json", [&receipt[..], b" "].concat()), ("+1.json", receipt)]
    {
        let path = root.join("receipts").join(name);
        std::fs::write(&path, &bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (code, _, err) = status(&s);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(err.contains(name) && err.contains("move it out"), "{name}: {err}");
        std::fs::remove_file(&path).unwrap();
    }
    ok(status(&s));
}

/// `set --dry-run` gives the real `set`'s verdict without writing: an empty 0700 state root
/// is accepted (and left empty), and a tampered target generation is refused by both.
#[test]
fn dry_run_gives_the_same_verdict_as_set() {
    let s = Setup::scanned();
    let root = root_of(&s);
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700)).unwrap();
    let before = s.head();
    let dry = ok(set(&s, &root, &["full", "--dry-run"]));
    assert_eq!(dry["outcome"], "dry-run");
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "the dry run wrote nothing");
    assert_eq!(s.head(), before);
    let full = ok(set(&s, &root, &["full"]));
    ok(set(&s, &root, &["lean", "--expected-revision", "1"]));
    let file = Path::new(full["generationRoot"].as_str().unwrap()).join(".codex/skills/deploy/SKILL.md");
    std::fs::write(&file, "changed").unwrap();
    let (code, _, err) = set(&s, &root, &["full", "--dry-run"]);
    assert_eq!(code, 1, "the dry run refuses what set refuses: {err}");
    assert!(err.contains("was modified"), "{err}");
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("was modified"), "{err}");
}

/// A skill whose directory or file names hold characters the messages escape (NFD `é`, a
/// no-break space, a zero-width space) is materialised and verified like any other: the
/// generation's own walkers compare the names' own text, not their escaped display
/// (outside review 19: `profile set` failed with "… is not ours" and left a transaction
/// that neither `recover` nor a later `set` could clear).
#[test]
fn names_the_messages_escape_are_materialised_and_verified() {
    let s = Setup::new();
    // (An NFD directory name is refused by the scan since outside review 20 — it prints
    // like the NFC one; a resource path may still hold a combining mark.)
    for dir in ["caf\u{e9}\u{a0}nfc", "no\u{a0}break"] {
        let d = s.src.join("skills").join(dir);
        std::fs::create_dir_all(d.join("references")).unwrap();
        let skill = format!("---\nname: {}\ndescription: d\n---\nbody\n", dir.replace('\u{a0}', "-"));
        std::fs::write(d.join("SKILL.md"), skill).unwrap();
        std::fs::write(d.join("references").join("no\u{a0}break \u{301}.md"), "text\n").unwrap();
    }
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let root = root_of(&s);
    let r = ok(set(&s, &root, &["full"]));
    assert_eq!(r["revision"], 1);
    let status = ok(s.run(&["profile", "status"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert!(!status.to_string().contains("RECOVERY"), "{status}");
    assert!(!root.join("txn.json").exists(), "no transaction left behind");
}

/// The state root's own directories are never followed through a symlink, nor used when
/// another user owns them or their mode is wider than 0700 (outside review 20: with
/// `generations/` a symlink to a world-writable directory, status, set and rollback all
/// succeeded and published generations there); status checks the root as set does.
#[test]
fn state_root_directories_are_real_and_private() {
    use std::os::unix::fs::PermissionsExt;
    type Damage = fn(&Path, &Path);
    let damages: [(&str, Damage, &str); 8] = [
        (
            "generations/ a symlink",
            |root, elsewhere| {
                std::fs::rename(root.join("generations"), elsewhere.join("g")).unwrap();
                std::os::unix::fs::symlink(elsewhere.join("g"), root.join("generations")).unwrap();
            },
            "is a symlink",
        ),
        (
            "receipts/ a symlink",
            |root, elsewhere| {
                std::fs::rename(root.join("receipts"), elsewhere.join("r")).unwrap();
                std::os::unix::fs::symlink(elsewhere.join("r"), root.join("receipts")).unwrap();
            },
            "is a symlink",
        ),
        (
            "generations/ 0777",
            |root, _| {
                std::fs::set_permissions(root.join("generations"), std::fs::Permissions::from_mode(0o777))
                    .unwrap()
            },
            "wider than 0700",
        ),
        (
            "the state root 0755",
            |root, _| std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap(),
            "not 0700",
        ),
        (
            "a receipt 0666",
            |root, _| {
                std::fs::set_permissions(root.join("receipts/1.json"), std::fs::Permissions::from_mode(0o666))
                    .unwrap()
            },
            "wider than 0600",
        ),
        (
            "a receipt hard-linked outside",
            |root, elsewhere| {
                std::fs::hard_link(root.join("receipts/1.json"), elsewhere.join("receipt")).unwrap()
            },
            "one link",
        ),
        (
            "the owner mark 0666",
            |root, _| {
                let mark = root.join(".closure-ledger-owner");
                std::fs::set_permissions(mark, std::fs::Permissions::from_mode(0o666)).unwrap()
            },
            "wider than 0600",
        ),
        (
            "a generation 0750",
            |root, _| {
                let g = std::fs::read_dir(root.join("generations")).unwrap().next().unwrap().unwrap().path();
                std::fs::set_permissions(g, std::fs::Permissions::from_mode(0o750)).unwrap()
            },
            "wider than 0700",
        ),
    ];
    for (name, damage, expect) in damages {
        let s = Setup::scanned();
        let root = root_of(&s);
        ok(set(&s, &root, &["full"]));
        ok(set(&s, &root, &["lean"]));
        let elsewhere = s.tmp.path().join("elsewhere");
        std::fs::create_dir_all(&elsewhere).unwrap();
        damage(&root, &elsewhere);
        blocks_status_set_and_rollback(&s, &root, name, expect);
        assert_eq!(
            std::fs::read_dir(&elsewhere).unwrap().count(),
            usize::from(name.contains("symlink") || name.contains("outside")),
            "{name}: nothing published elsewhere"
        );
    }
}

/// A `set` without `--selection` keeps the configured mode (outside review 20: it turned
/// Auto back to manual silently); asked, it changes it.
#[test]
fn set_keeps_the_selection_mode_unless_asked() {
    let s = Setup::scanned();
    let root = root_of(&s);
    assert_eq!(ok(set(&s, &root, &["lean"]))["selectionMode"], "manual", "none configured: manual");
    assert_eq!(ok(set(&s, &root, &["lean", "--selection", "auto"]))["selectionMode"], "auto");
    assert_eq!(ok(set(&s, &root, &["full"]))["selectionMode"], "auto", "kept");
    assert_eq!(ok(set(&s, &root, &["lean", "--selection", "manual"]))["selectionMode"], "manual");
    // The target and the include/exclude lists too (the second pass: a set dropped a
    // deliberate exclusion and the claude target); --clear-filters drops the lists.
    let r = ok(set(&s, &root, &["full", "--target", "claude", "--exclude", "skill:security-review"]));
    assert_eq!(
        (r["target"].as_str(), r["exclude"].clone()),
        (Some("claude"), serde_json::json!(["skill:security-review"]))
    );
    let kept = ok(set(&s, &root, &["lean"]));
    assert_eq!(
        (kept["target"].as_str(), kept["exclude"].clone()),
        (Some("claude"), serde_json::json!(["skill:security-review"]))
    );
    let cleared = ok(set(&s, &root, &["full", "--clear-filters"]));
    assert_eq!(
        (cleared["target"].as_str(), cleared["exclude"].clone()),
        (Some("claude"), serde_json::json!([]))
    );
}

/// `profile status` of a ledger with no profile claims no source drift (outside review 22:
/// it said "a newer registry was recorded since" with no registry at all); `--json` says
/// `registryDigest: null`.
#[test]
fn status_of_an_unconfigured_ledger_claims_no_drift() {
    let s = Setup::new();
    let (code, out, err) = s.run(&["profile", "status"], &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("drift"), "{out}");
    let st = ok(status(&s));
    assert!(st["registryDigest"].is_null(), "{st}");
}

/// A stage directory no transaction names (a crash between creating it and recording the
/// transaction, or a stray copy) is named as what it is — not "run `profile recover`",
/// which finds nothing to recover (outside review 52: the advice went round in a circle);
/// moved out, `set` goes on.
#[test]
fn a_stray_stage_is_named_not_sent_to_recover() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let dry = ok(set(&s, &root, &["full", "--dry-run"]));
    let digest = dry["generationDigest"].as_str().unwrap().trim_start_matches("b3:").to_owned();
    let stray = root.join("stage").join(&digest);
    std::fs::create_dir_all(&stray).unwrap();
    for dir in [root.join("stage"), stray.clone()] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let (code, _, err) = set(&s, &root, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("left-over stage") && !err.contains("profile recover"), "{err}");
    std::fs::rename(&stray, s.tmp.path().join("stray")).unwrap();
    ok(set(&s, &root, &["full"]));
}

/// A transaction a live writer holds is in flight, not interrupted (outside review 56, P3:
/// `status` said `recoveryRequired` and `mode` sent the operator to `recover`, which the
/// running writer then refused): `status` does not ask for recovery and `mode` is refused as
/// busy (exit 2); once the writer is dead, the same transaction is interrupted.
#[test]
fn a_transaction_in_flight_is_not_interrupted() {
    if let Ok(args) = std::env::var(CHILD) {
        let a: Vec<&str> = args.split('\u{1f}').collect();
        let (code, out, err) = cli(&["profile", "set", a[0], a[2], "--state-root", a[1]]);
        panic!("the child was not killed: {code} {out} {err}");
    }
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let mut child = paused_at(&s, &root, "a_transaction_in_flight_is_not_interrupted", "files", "full");
    let st = ok(status(&s));
    assert_eq!(st["recoveryRequired"], false, "in flight");
    let (code, _, err) = s.run(&["profile", "mode"], &["suggest", "--expected-revision", "1"]);
    assert_eq!(code, 2, "busy, not interrupted: {err}");
    assert!(!err.contains("interrupted"), "{err}");
    child.kill().unwrap();
    child.wait().unwrap();
    let st = ok(status(&s));
    assert_eq!(st["recoveryRequired"], true, "the writer died");
}

/// A manual-only skill is installed only into a carrier whose native loader is told so
/// (outside review 56, P2: Full put a skill manual-only by `disable-model-invocation` into
/// the Codex carrier unchanged, where nothing stops Codex invoking it implicitly): Codex
/// needs `agents/openai.yaml` with `allow_implicit_invocation: false`, Claude SKILL.md's
/// `disable-model-invocation: true`; otherwise `set` (and its dry run) refuses, naming the
/// skill, and writes nothing.
#[test]
fn a_manual_only_skill_needs_its_targets_own_flag() {
    let s = Setup::new();
    let deploy = s.src.join("skills/deploy");
    std::fs::remove_dir_all(deploy.join("agents")).unwrap();
    assert_eq!(s.scan().0, 0);
    let root = root_of(&s);
    for dry in [true, false] {
        let rest: &[&str] = if dry { &["full", "--dry-run"] } else { &["full"] };
        let (code, _, err) = set(&s, &root, rest);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("skill:deploy is manual-only") && err.contains("openai.yaml"), "{err}");
    }
    assert!(!root.join("generations").exists(), "nothing written");
    // So does `preview` (outside review 87: it showed the plan and a generation digest).
    let (code, _, err) = s.run(&["profile", "preview"], &["full", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("skill:deploy is manual-only"), "{err}");
    // `profile resolve` over the same plan refuses it too (outside review 59).
    let task = s.tmp.path().join("task.json");
    std::fs::write(&task, r#"{"sessionId":"s","taskId":"t","revision":1,"phase":"implement"}"#).unwrap();
    let (code, _, err) = s.run(&["profile", "resolve"], &["full", "--task-input", task.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("manual-only"), "{err}");
    ok(set(&s, &root, &["full", "--target", "claude"]));
    ok(set(&s, &root, &["full", "--exclude", "skill:deploy"]));
    // Manual-only by Codex's flag alone: Claude's carrier would not say so (a fresh ledger:
    // `set` keeps the exclusion above).
    let s = Setup::new();
    let deploy = s.src.join("skills/deploy");
    let root = root_of(&s);
    std::fs::remove_dir_all(deploy.join("agents")).unwrap();
    std::fs::write(
        deploy.join("SKILL.md"),
        "---\nname: deploy\ndescription: Deploy the service to staging.\n---\n\n# Deploy\n",
    )
    .unwrap();
    std::fs::create_dir(deploy.join("agents")).unwrap();
    std::fs::write(deploy.join("agents/openai.yaml"), "policy:\n  allow_implicit_invocation: false\n")
        .unwrap();
    assert_eq!(s.scan().0, 0);
    ok(set(&s, &root, &["full"]));
    let (code, _, err) = set(&s, &root, &["full", "--target", "claude"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("disable-model-invocation"), "{err}");
    // Claude's flag quoted is a string, not the boolean: it does not count for the carrier.
    std::fs::write(
        deploy.join("SKILL.md"),
        "---\nname: deploy\ndescription: Deploy the service to staging.\ndisable-model-invocation: \"true\"\n---\n\n# Deploy\n",
    )
    .unwrap();
    assert_eq!(s.scan().0, 0);
    let (code, _, err) = set(&s, &root, &["full", "--target", "claude"]);
    assert_eq!(code, 1, "a quoted flag: {err}");
}

/// A skill's executable file stays executable in its generation (outside review 56, P2: a
/// script the skill runs was written 0600, so the skill failed in the carrier): the scan
/// records the execute bit, the generation writes the file 0700, and a copy that lost the
/// bit — or gained group or other bits — does not verify. Files that were not executable
/// are written and verified 0600 as before.
#[test]
fn an_executable_file_stays_executable_in_its_generation() {
    let s = Setup::new();
    let script = s.src.join("skills/api-design/scripts/lint_openapi.py");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let root = root_of(&s);
    let r = ok(set(&s, &root, &["full"]));
    let generation = Path::new(r["generationRoot"].as_str().unwrap());
    let copy = generation.join(".codex/skills/api-design/scripts/lint_openapi.py");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&copy), 0o700);
    assert_eq!(mode(&generation.join(".codex/skills/api-design/SKILL.md")), 0o600);
    ok(status(&s));
    for (bits, expect) in [(0o600, "lost its execute permission"), (0o755, "wider than 0700")] {
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(bits)).unwrap();
        let (code, _, err) = status(&s);
        assert_eq!(code, 1, "{bits:o}: {err}");
        assert!(err.contains(expect), "{bits:o}: {err}");
    }
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o700)).unwrap();
    ok(status(&s));
    // The bit is part of the source's content: dropping it is drift, a new registry.
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, out, _) = s.scan();
    assert_eq!(code, 0);
    let scanned: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(scanned["recorded"], true, "a new snapshot: {out}");
    let (_, again, _) = s.scan();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&again).unwrap()["recorded"], false);
    let (code, out, _) = cli(&["replay", s.dir(), "--json"]);
    assert_eq!(code, 0, "{out}");
}

/// A state root with a setuid, setgid or sticky bit is not 0700 (outside review 59, P3: a
/// setgid root passed the dry run, then the real `set` failed on the setgid directories it
/// created and left them behind, refusing every later `set` and `recover`): refused by both,
/// nothing written.
#[test]
fn a_setgid_state_root_is_refused_before_anything_is_written() {
    let s = Setup::scanned();
    let root = root_of(&s);
    std::fs::create_dir(&root).unwrap();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o2700)).unwrap();
    for rest in [&["lean", "--dry-run"][..], &["lean"]] {
        let (code, _, err) = set(&s, &root, rest);
        assert_eq!(code, 1, "{rest:?}: {err}");
        assert!(err.contains("2700"), "{rest:?}: {err}");
    }
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "nothing written");
}

/// Drift that leaves the saved selection no plan — an excluded skill gone from the tree —
/// while the generation it installs is unchanged: `status` says the selection has no plan and
/// why (`noPlan`), not that the sources changed the generation (outside review 251 F3).
#[test]
fn status_names_a_selection_left_without_a_plan() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let r1 = ok(set(&s, &root, &["lean", "--exclude", "skill:shell-tools"]));
    assert!(r1.get("noPlan").is_none(), "{r1}");
    std::fs::remove_dir_all(s.src.join("skills/shell-tools")).unwrap();
    let (code, out, err) = s.scan();
    assert_eq!(code, 0, "{out}{err}");
    let st = ok(status(&s));
    assert_eq!(st["generationStale"], true, "every select is refused: {st}");
    assert_eq!(st["generationDigest"], r1["generationDigest"]);
    assert!(st["noPlan"].as_str().is_some_and(|why| why.contains("skill:shell-tools")), "{st}");
    let (_, text, _) = s.run(&["profile", "status"], &[]);
    assert!(
        text.contains("has no plan over the current sources") && !text.contains("the sources changed since"),
        "{text}"
    );
    assert!(text.contains("the configured revision's plan"), "whose estimate: {text}");
    // A mode change is refused for the same reason, said so (outside review 254 F2: it
    // blamed a generation that had not changed).
    let (code, _, err) = s.run(&["profile", "mode"], &["suggest"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("has no plan over the sources recorded since") && err.contains("skill:shell-tools"),
        "{err}"
    );
}

/// Source drift as `status` reports it (outside review 68): `generationStale` says whether
/// the drift changes the configured generation (every `select` is then refused) or touched
/// only routed sources (selections route over the newest registry); `set` with the same
/// flags after routed-only drift records a revision over the newest registry (it was a
/// no-op, and the drift stayed reported for good); a rollback to a revision whose
/// generation is stale against the sources recorded since is refused, changing nothing.
#[test]
fn status_says_whether_drift_makes_the_generation_stale() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let r1 = ok(set(&s, &root, &["lean"]));
    assert_eq!((r1["registryCurrent"].clone(), r1["generationStale"].clone()), (true.into(), false.into()));
    // The configured plan's estimate against its budget (outside review 72: `preview` alone
    // said whether a plan was over its budget).
    assert_eq!(r1["estimate"]["budgetMode"], "blocking");
    assert_eq!(r1["estimate"]["overBudget"], false);
    assert!(r1["estimate"]["tokens"].as_u64().is_some_and(|t| t > 0), "{r1}");
    let (_, text, _) = s.run(&["profile", "status"], &[]);
    assert!(text.contains("metadata tokens (estimated"), "{text}");
    // A routed source changes: drift, not stale.
    super::profiles_util::write(
        &s.src.join("skills/api-design/SKILL.md"),
        "---\nname: api-design\ndescription: Design HTTP APIs, v2.\n---\nVersion the routes.\n",
    );
    assert_eq!(s.scan().0, 0);
    let st = ok(status(&s));
    assert_eq!((st["registryCurrent"].clone(), st["generationStale"].clone()), (false.into(), false.into()));
    let (_, text, _) = s.run(&["profile", "status"], &[]);
    assert!(text.contains("drift in routed sources only") && !text.contains("STALE"), "{text}");
    // The same flags move the profile to the newest registry: a revision, the same generation.
    let r2 = ok(set(&s, &root, &["lean"]));
    assert_eq!(r2["outcome"], "set");
    assert_eq!(r2["revision"], 2);
    assert_eq!(r2["generationDigest"], r1["generationDigest"]);
    assert_eq!(r2["registryCurrent"], true);
    assert_eq!(ok(set(&s, &root, &["lean"]))["outcome"], "no-op", "now it is one");
    // A source the generation installs changes: stale.
    super::profiles_util::write(
        &s.src.join("skills/testing/SKILL.md"),
        "---\nname: testing\ndescription: Write and run tests, v2.\n---\nRun them twice.\n",
    );
    assert_eq!(s.scan().0, 0);
    let st = ok(status(&s));
    assert_eq!((st["registryCurrent"].clone(), st["generationStale"].clone()), (false.into(), true.into()));
    let (_, text, _) = s.run(&["profile", "status"], &[]);
    assert!(text.contains("STALE") && text.contains("every select is refused"), "{text}");
    // A mode change keeps the stale generation as a new revision, which `rollback` would
    // then return to instead of the revision before: refused (outside review 101).
    let before = s.head();
    let (code, _, err) = s.run(&["profile", "mode"], &["suggest", "--json"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("stale") && err.contains("before changing its mode"), "{err}");
    assert_eq!(s.head(), before, "nothing recorded");
    // Set over the new sources, then a rollback to revision 2 — stale against them — is refused.
    let r3 = ok(set(&s, &root, &["lean"]));
    assert_eq!((r3["revision"].clone(), r3["generationStale"].clone()), (3.into(), false.into()));
    let before = s.head();
    let (code, _, err) = s.run(
        &["profile", "rollback"],
        &["--state-root", root.to_str().unwrap(), "--expected-revision", "3", "--json"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("stale against registry"), "{err}");
    assert_eq!(s.head(), before, "nothing recorded");
    assert_eq!(ok(status(&s))["revision"], 3);
}

/// A relative state root is refused by its form, as `..` is — one line, no rule name, exit
/// 1 — before the ledger is read (outside review 68: the revision rule refused it, its
/// message prefixed `ProfileRevision:`).
#[test]
fn a_relative_state_root_is_refused_by_its_form() {
    let s = Setup::scanned();
    for (words, profile) in [(&["profile", "set"][..], &["lean"][..]), (&["profile", "rollback"], &[])] {
        let mut rest = profile.to_vec();
        rest.extend(["--state-root", "relative/store", "--expected-revision", "1"]);
        let (code, _, err) = s.run(words, &rest);
        assert_eq!(code, 1, "{words:?}: {err}");
        assert!(err.contains("state root relative/store: is not absolute"), "{words:?}: {err}");
        assert!(!err.contains("ProfileRevision"), "{words:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// A state root inside a source tree's `skills/` or `manifests/` is refused before anything
/// is written (outside review 101: `set` wrote generations there; the next scan refused the
/// tree, and `status` stayed current); beside them in the tree's root it is not read as
/// sources.
#[test]
fn a_state_root_inside_the_sources_is_refused() {
    let s = Setup::scanned();
    for inside in ["skills/zz-store", "skills/testing/store", "manifests/store"] {
        let root = s.src.join(inside);
        let (code, _, err) = set(&s, &root, &["lean"]);
        assert_eq!(code, 1, "{inside}: {err}");
        assert!(err.contains("a source tree's"), "{inside}: {err}");
        assert!(!root.exists(), "{inside}: nothing written");
    }
    ok(set(&s, &s.src.join("store"), &["lean"]));
    assert_eq!(s.scan().0, 0, "the tree still scans");
}

/// A `set` killed after its generation was published, then a source edited and scanned:
/// the prepared revision plans over a registry that is no longer the newest, so `recover`
/// rolls it back and says why (outside review 79: it refused for good, and every profile
/// command sent the operator back to `recover`). The change can then be made again.
#[test]
fn recover_rolls_back_a_transaction_the_sources_moved_past() {
    // Killed with the generation published, and with its receipt published too: the
    // rollback removes the receipt of the revision never committed (outside review 80: a
    // receipt left behind refused every later profile command).
    for boundary in ["generation", "receipt"] {
        rolled_back_after_drift(boundary);
    }
}

fn rolled_back_after_drift(boundary: &str) {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    killed_at(&s, &root, boundary, "full");
    assert_eq!(root.join("receipts/2.json").is_file(), boundary == "receipt");
    let skill = s.src.join("skills/testing/SKILL.md");
    let text = std::fs::read_to_string(&skill).unwrap();
    std::fs::write(&skill, format!("{text}\nEdited after the crash.\n")).unwrap();
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let r = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!(r["outcome"], "rolled-back");
    assert_eq!(r["revision"], 1);
    assert_eq!(r["recoveryRequired"], false);
    assert!(r["note"].as_str().unwrap().contains("can no longer be recorded"), "{r}");
    assert!(!root.join("receipts/2.json").exists() && !root.join("receipts/2.tmp").exists());
    ok(status(&s));
    let (code, out, _) = s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(out.starts_with("nothing-to-recover"), "{out}");
    let redo = ok(set(&s, &root, &["full"]));
    assert_eq!((redo["outcome"].as_str(), redo["revision"].as_u64()), (Some("set"), Some(2)));
    let (code, out, _) = cli(&["replay", s.dir(), "--json"]);
    assert_eq!(code, 0, "{out}");
}

/// While the configured state root holds an interrupted transaction, a `set` into another
/// root is refused until it is recovered (outside review 79: it committed the revision the
/// interrupted one had prepared, and `recover` then reported the other root's revision as
/// its own, publishing a receipt for it).
#[test]
fn set_elsewhere_waits_for_the_configured_roots_recovery() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    killed_at(&s, &root, "generation", "full");
    let other = s.tmp.path().join("other");
    let head = s.head();
    let (code, _, err) = set(&s, &other, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("interrupted transaction") && err.contains(root.to_str().unwrap()), "{err}");
    assert_eq!(s.head(), head, "nothing written");
    let r = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!((r["outcome"].as_str(), r["revision"].as_u64()), (Some("rolled-forward"), Some(2)));
    let moved = ok(set(&s, &other, &["lean"]));
    assert_eq!(moved["revision"], 3);
    assert!(moved["generationRoot"].as_str().unwrap().starts_with(other.to_str().unwrap()), "{moved}");
    // Asked about the old root, status names the configured generation where it lives.
    let st = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert!(st["generationRoot"].as_str().unwrap().starts_with(other.to_str().unwrap()), "{st}");
}

/// The configured state root lost or emptied is restored in place by `profile recover` —
/// made again (0700) or marked, its current generation and receipts rebuilt from the ledger
/// — and a refused `set` into it writes nothing, not even the ownership mark (outside review
/// 91: every command refused it as "not marked as owned", naming no way out, and a refused
/// `set` left the mark behind). Another, unconfigured empty root is not taken over by
/// `recover`.
#[test]
fn a_lost_configured_root_is_restored_in_place() {
    use std::os::unix::fs::DirBuilderExt;
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    ok(set(&s, &root, &["full"]));
    for emptied in [true, false] {
        std::fs::remove_dir_all(&root).unwrap();
        if emptied {
            std::fs::DirBuilder::new().mode(0o700).create(&root).unwrap();
        }
        let (code, _, err) = status(&s);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("ledger profile recover"), "the way out is named: {err}");
        if emptied {
            let head = s.head();
            let (code, _, err) = set(&s, &root, &["lean"]);
            assert_eq!(code, 1, "{err}");
            assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "a refused set writes nothing");
            assert_eq!(s.head(), head);
        }
        let r = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
        assert_eq!((r["outcome"].as_str(), r["revision"].as_u64()), (Some("repaired"), Some(2)), "{r}");
        let st = ok(status(&s));
        assert_eq!(st["revision"].as_u64(), Some(2), "{st}");
    }
    let other = s.tmp.path().join("other");
    std::fs::DirBuilder::new().mode(0o700).create(&other).unwrap();
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", other.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(std::fs::read_dir(&other).unwrap().count(), 0, "not marked");
    // Named against the configured root, not sent back to `recover` (outside review 96 F6),
    // empty or missing.
    let missing = s.tmp.path().join("missing");
    for given in [&other, &missing] {
        let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", given.to_str().unwrap()]);
        assert_eq!(code, 1, "{err}");
        let configured = format!("the configured state root is {}, and {}", root.display(), given.display());
        assert!(err.contains(&configured) && !err.contains("ledger profile recover"), "{err}");
    }
    assert!(!missing.exists());
    // A root whose parent is gone is named as such, exit 1 (outside review 93: a bare OS
    // error, exit 2); made again, `recover` rebuilds the root.
    let nested = s.tmp.path().join("roots").join("store");
    std::fs::DirBuilder::new().mode(0o700).recursive(true).create(&nested).unwrap();
    ok(set(&s, &nested, &["lean"]));
    std::fs::remove_dir_all(s.tmp.path().join("roots")).unwrap();
    for command in ["status", "recover"] {
        let (code, _, err) = s.run(&["profile", command], &["--state-root", nested.to_str().unwrap()]);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(err.contains("its parent directory") && err.contains("is missing"), "{command}: {err}");
    }
    std::fs::DirBuilder::new().mode(0o700).create(s.tmp.path().join("roots")).unwrap();
    ok(s.run(&["profile", "recover"], &["--state-root", nested.to_str().unwrap(), "--json"]));
    ok(status(&s));
}

/// A kill while the first `set` wrote the ownership marker leaves a prefix of this ledger's
/// marker alone in the root: commands say so and name the way out, the dry run writes
/// nothing, and the `set` again writes it whole (outside review 91: every command said
/// "unreadable ownership marker", naming no way out) — but only a prefix that holds this
/// ledger's whole id is this ledger's: a shorter one names no ledger, and no ledger's `set`
/// claims it (outside review 101: another ledger completed `{"ledgerId":"` with its own id).
#[test]
fn an_ownership_marker_cut_short_is_completed_by_the_next_set() {
    use std::os::unix::fs::DirBuilderExt;
    let s = Setup::scanned();
    let root = root_of(&s);
    std::fs::DirBuilder::new().mode(0o700).create(&root).unwrap();
    let marker = root.join(".closure-ledger-owner");
    let write_mark = |bytes: &[u8]| {
        std::fs::write(&marker, bytes).unwrap();
        std::fs::set_permissions(&marker, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    };
    let id = s.json(&["checkpoint"], &[])["ledgerId"].as_str().unwrap().to_owned();
    let whole = format!("{{\"ledgerId\":\"{id}\"}}");
    for short in ["{\"ledg", "{\"ledgerId\":\""] {
        write_mark(short.as_bytes());
        for (words, rest) in [
            (&["profile", "recover"][..], &["--state-root", root.to_str().unwrap()][..]),
            (&["profile", "set"], &["lean", "--state-root", root.to_str().unwrap()]),
            (&["profile", "set"], &["lean", "--dry-run", "--state-root", root.to_str().unwrap()]),
        ] {
            let (code, _, err) = s.run(words, rest);
            assert_eq!(code, 1, "{short}: {words:?} {err}");
            assert!(err.contains("cut short before it names its ledger"), "{short}: {err}");
        }
        assert_eq!(std::fs::read(&marker).unwrap(), short.as_bytes(), "left for inspection");
    }
    // Cut after the id: this ledger's.
    let prefix = &whole[..whole.len() - 1];
    write_mark(prefix.as_bytes());
    let (code, _, err) = s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cut short") && err.contains("run that command again"), "{err}");
    let st = s.json(&["profile", "status"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert!(st["note"].as_str().is_some_and(|n| n.contains("cut short")), "{st}");
    ok(set(&s, &root, &["lean", "--dry-run"]));
    assert_eq!(std::fs::read(&marker).unwrap(), prefix.as_bytes(), "the dry run wrote nothing");
    ok(set(&s, &root, &["lean"]));
    assert_eq!(std::fs::read(&marker).unwrap(), whole.as_bytes());
    ok(status(&s));
    // Anything else in the marker stays refused.
    let other = s.tmp.path().join("other");
    std::fs::DirBuilder::new().mode(0o700).create(&other).unwrap();
    std::fs::write(other.join(".closure-ledger-owner"), b"{\"nope").unwrap();
    std::fs::set_permissions(
        other.join(".closure-ledger-owner"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let (code, _, err) = set(&s, &other, &["full"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unreadable ownership marker"), "{err}");
}

/// A state root moved to a new path takes its receipts along; `set` (and its dry run) into
/// the new path refuses those receipts — revisions this ledger committed in the old path,
/// named so — before writing anything (outside review 127, P2: `set` committed into it, and then
/// `status`, `select`, `mode`, `rollback` and `recover` all refused the root).
#[test]
fn set_into_a_moved_state_root_is_refused_before_it_commits() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let moved = s.tmp.path().join("store-moved");
    std::fs::rename(&root, &moved).unwrap();
    let before = s.head();
    for dry in [true, false] {
        let mut rest = vec!["full"];
        if dry {
            rest.push("--dry-run");
        }
        let (code, out, err) = set(&s, &moved, &rest);
        assert_eq!(code, 1, "dry run {dry}: {out}{err}");
        // Named as what it is (outside review 132 F8: "(move it out)").
        assert!(err.contains("committed in another state root") && err.contains("moved or copied"), "{err}");
    }
    assert_eq!(s.head(), before, "nothing written");
    // Moved back, the configured root verifies again.
    std::fs::rename(&moved, &root).unwrap();
    ok(status(&s));
}

/// A copy of the ledger directory (`cp -a`) shares its ledger id and configured state root;
/// the first of the two to `set` again manages the root, and the other is refused with a
/// message that names the copy and the way out — a state root of its own — rather than
/// "move it out", which only moved the lockout to the copy (outside review 129 F4). Nothing
/// tells two byte-identical directories apart before one of them writes (a known limit).
#[test]
fn a_copied_ledger_that_took_over_the_state_root_is_named() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let copy_of = |name: &str| {
        let copy = s.tmp.path().join(name);
        let cp =
            std::process::Command::new("cp").args(["-a", s.dir(), copy.to_str().unwrap()]).status().unwrap();
        assert!(cp.success());
        copy
    };
    // A copy made before the first `set` is named too (outside review 132 F4).
    let early = copy_of("early");
    ok(set(&s, &root, &["lean"]));
    // `profile set COPY --state-root ROOT full [rest]`.
    let set_from = |copy: &Path, rest: &[&str]| {
        let mut args =
            vec!["profile", "set", copy.to_str().unwrap(), "--state-root", root.to_str().unwrap(), "full"];
        args.extend_from_slice(rest);
        super::profiles_util::cli(&args)
    };
    let (code, _, err) = set_from(&early, &[]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("another copy of the ledger directory"), "{err}");
    let copy = copy_of("copy");
    let (code, out, err) = set_from(&copy, &["--expected-revision", "1"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = status(&s);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("another copy of the ledger directory") && err.contains("state root of its own"),
        "{err}"
    );
    let own = s.tmp.path().join("own-store");
    let r = ok(set(&s, &own, &["lean", "--expected-revision", "1"]));
    assert_eq!(r["revision"], 2, "{r}");
    assert_eq!(ok(status(&s))["stateRoot"], own.to_str().unwrap());
    // The copy still manages the shared root.
    let (code, _, err) = super::profiles_util::cli(&["profile", "status", copy.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

/// A trailing slash on `--state-root` (as shell completion writes a directory) is dropped:
/// the root is recorded without it, and either spelling names the same root after (outside
/// review 129 F6: it was refused as not normalised).
#[test]
fn a_trailing_slash_on_the_state_root_is_dropped() {
    let s = Setup::scanned();
    let root = root_of(&s);
    let slashed = format!("{}//", root.display());
    let r = ok(set(&s, Path::new(&slashed), &["lean"]));
    assert_eq!(r["stateRoot"], root.to_str().unwrap(), "{r}");
    let (code, _, err) = s.run(&["profile", "status"], &["--state-root", &slashed]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(ok(set(&s, &root, &["lean"]))["outcome"], "no-op");
    let (code, _, err) = s.run(&["profile", "status"], &["--state-root", "/"]);
    assert_eq!(code, 1, "the filesystem root stays refused: {err}");
}

/// `profile status` beside a live `profile set` (no crash): the revision a transaction
/// publishes before its entry commits, or commits between the status's two reads, is not
/// reported as another ledger copy's (outside review 199 F2: 41–52 of some 600 reads
/// exited 1, naming the in-flight receipt "a revision … this ledger never committed" and
/// telling the operator to give the ledger another state root).
#[test]
fn status_beside_a_live_set_is_not_refused() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let done = std::sync::atomic::AtomicBool::new(false);
    let (reads, refusals) = std::thread::scope(|scope| {
        scope.spawn(|| {
            for round in 0..20 {
                let profile = if round % 2 == 0 { "full" } else { "lean" };
                ok(set(&s, &root, &[profile]));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let (mut reads, mut refusals) = (0u32, Vec::new());
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let (code, _, err) =
                s.run(&["profile", "status"], &["--state-root", root.to_str().unwrap(), "--json"]);
            reads += 1;
            if code != 0 {
                refusals.push(err);
            }
        }
        (reads, refusals)
    });
    assert!(refusals.is_empty(), "{} of {reads} reads refused: {:?}", refusals.len(), refusals.first());
    assert!(reads >= 5, "{reads} reads");
}

/// A generation whose files' paths under the state root would pass what the system takes
/// (PATH_MAX) is refused before anything is written — the dry run gives the same verdict
/// (outside review 206 F4, P3: `set --dry-run` passed, and the real `set` failed
/// mid-transaction with "File name too long", leaving a transaction to recover).
#[test]
fn a_generation_path_over_path_max_is_refused_before_any_write() {
    let s = Setup::scanned();
    let mut deep = s.src.join("skills/python-patterns");
    for i in 0..15 {
        deep.push(format!("d{i:02}{}", "x".repeat(240)));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("f.md"), "deep\n").unwrap();
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let parent = s.tmp.path().join("s".repeat(200)).join("t".repeat(200));
    std::fs::create_dir_all(&parent).unwrap();
    let root = parent.join("sr");
    for dry in [true, false] {
        let mut rest = vec!["full"];
        if dry {
            rest.push("--dry-run");
        }
        let (code, _, err) = set(&s, &root, &rest);
        assert_eq!(code, 1, "dry run {dry}: {err}");
        assert!(err.contains("over the 4095 the system takes"), "dry run {dry}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    assert!(!root.join("txn.json").exists(), "nothing prepared");
    let (code, out, err) = status(&s);
    assert!(!out.contains("RECOVERY") && !err.contains("recover"), "{code}: {out}{err}");
    let short = s.tmp.path().join("store");
    ok(set(&s, &short, &["full"]));
}

/// A configured include whose source left the tree is named as the configured list's, with
/// the way out (outside review 206 F6, P3: a plain `set` said only `unknown source id`,
/// of an id the user had not typed).
#[test]
fn a_configured_include_gone_from_the_tree_is_named_as_such() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean", "--include", "skill:security-review"]));
    std::fs::remove_dir_all(s.src.join("skills/security-review")).unwrap();
    let (code, _, err) = s.scan();
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = set(&s, &root, &["lean"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("unknown source id \"skill:security-review\" in the include list"), "{err}");
    assert!(err.contains("--clear-filters"), "{err}");
    ok(set(&s, &root, &["lean", "--clear-filters"]));
}

/// A directory of the state root the ledger writes in, narrowed so its owner cannot write
/// (`receipts/` at 0500), is refused before anything is written — dry run alike — naming
/// the mode, not left to fail half-way (outside review 212 F3, P2: `set` died on
/// "Permission denied" after `txn.json`, and `recover` could never finish it).
#[test]
fn a_state_root_directory_its_owner_cannot_write_is_refused_before_any_write() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["full"]));
    let receipts = root.join("receipts");
    std::fs::set_permissions(&receipts, std::fs::Permissions::from_mode(0o500)).unwrap();
    for rest in [&["lean", "--dry-run"][..], &["lean"]] {
        let (code, _, err) = set(&s, &root, rest);
        assert_eq!(code, 1, "{rest:?}: {err}");
        assert!(err.contains("receipts has mode 500") && err.contains("chmod 700"), "{rest:?}: {err}");
    }
    assert!(!root.join("txn.json").exists(), "nothing prepared");
    std::fs::set_permissions(&receipts, std::fs::Permissions::from_mode(0o700)).unwrap();
    ok(set(&s, &root, &["lean"]));
}

/// A state-root path used before, deleted, and given to `set` again — missing or made again
/// empty — takes the new revision, and the receipts of the revisions the ledger committed
/// there before are republished: every later command accepts the root (outside review 212
/// F5, P2: refused for a missing receipt where it was made again empty; where it was
/// missing, committed into and then refused by every later command).
#[test]
fn a_state_root_path_used_before_and_deleted_can_be_set_again() {
    for remake in [false, true] {
        let s = Setup::scanned();
        let a = s.tmp.path().join("a");
        let b = s.tmp.path().join("b");
        ok(set(&s, &a, &["full"]));
        ok(set(&s, &b, &["lean"]));
        std::fs::remove_dir_all(&a).unwrap();
        if remake {
            std::fs::create_dir(&a).unwrap();
            std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        ok(set(&s, &a, &["full", "--dry-run"]));
        ok(set(&s, &a, &["full"]));
        assert!(a.join("receipts/1.json").exists() && a.join("receipts/3.json").exists(), "remade {remake}");
        let (code, out, err) = status(&s);
        assert_eq!(code, 0, "remade {remake}: {out}{err}");
        ok(set(&s, &a, &["lean"]));
    }
}

/// A command that committed its entry but cannot write its report says what stands — the
/// registry, the revision, the selection — in its one error line (exit 2); one that
/// committed nothing keeps the bare I/O error (outside review 217 F2: every one said only
/// "write to stdout: …", and a supervisor read exit 2 as "not done").
#[test]
fn a_committed_command_whose_report_cannot_be_written_says_it_is_committed() {
    let s = Setup::new();
    let run_full = replay_tests::cli_to_full_stdout;
    let (code, err) = run_full(&["sources", "scan", s.dir(), s.src.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("No space left") && err.contains("is recorded (seq 1)"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let root = root_of(&s);
    let (code, err) = run_full(&["profile", "set", s.dir(), "lean", "--state-root", root.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("revision 1 (set) is committed"), "{err}");
    assert_eq!(ok(status(&s))["revision"], 1, "it is");
    // Nothing committed: the I/O error alone.
    let (code, err) = run_full(&["profile", "status", s.dir()]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("committed"), "{err}");
    let task = s.tmp.path().join("task.json");
    std::fs::write(
        &task,
        br#"{"sessionId":"s","taskId":"t","revision":1,"phase":"implement","explicitIds":["skill:deploy"]}"#,
    )
    .unwrap();
    let (code, err) = run_full(&["select", s.dir(), "--task-input", task.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the selection is recorded (seq"), "{err}");
    // The same `select` again is a duplicate, as the message says — and says nothing more.
    let (code, err) = run_full(&["select", s.dir(), "--task-input", task.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains("recorded"), "{err}");
    let (code, out, err) = s.run(&["select"], &["--task-input", task.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"duplicate\": true"), "{out}");
}

/// A receipt of a revision the ledger gave up (`recover --truncate-after` cut its entry)
/// blocks every profile command, and `profile recover` — holding the root's lock itself —
/// refuses it by name too, never "nothing to recover" (outside review 219 F3: the lock it
/// held read as a live writer's transaction in flight, and the receipt was passed over).
#[test]
fn recover_refuses_a_receipt_of_a_revision_the_ledger_gave_up() {
    let s = Setup::scanned();
    let root = root_of(&s);
    ok(set(&s, &root, &["lean"]));
    let (before, _) = s.head();
    ok(set(&s, &root, &["full"]));
    let (code, _, err) = cli(&["recover", s.dir(), "--truncate-after", &before.to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(root.join("receipts/2.json").exists());
    let (code, _, err) = status(&s);
    assert_eq!(code, 1, "{err}");
    let (code, out, err) =
        s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("receipts/2.json") && err.contains("gave that revision up"), "{err}");
    // Moved out as the refusal says, every command works again.
    std::fs::rename(root.join("receipts/2.json"), s.tmp.path().join("2.json")).unwrap();
    let rec = ok(s.run(&["profile", "recover"], &["--state-root", root.to_str().unwrap(), "--json"]));
    assert_eq!(rec["revision"], 1);
    assert_eq!(ok(status(&s))["revision"], 1);
}
