//! Helpers shared by the `profiles_*` tests: a copy of the fixture source tree, a fresh
//! ledger, the CLI in-process, and the ledger's head.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // test support may panic

use std::path::{Path, PathBuf};

pub use replay_tests::cli;

/// The fixture tree in ECC's layout.
pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/profiles/ecc")
}

/// A temp dir holding `ledger/` (a fresh ledger) and `src/` (a copy of the fixture tree).
pub struct Setup {
    pub tmp: tempfile::TempDir,
    pub ledger: PathBuf,
    pub src: PathBuf,
}

impl Setup {
    pub fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let ledger = tmp.path().join("ledger");
        let src = tmp.path().join("src");
        replay_tests::copy_dir(&fixture(), &src);
        // The fixture's manual-only skill in Codex's form too, so Full installs it into the
        // Codex carrier (`profile set` refuses a manual-only skill its carrier would not mark
        // as such: outside review 56). The fixture itself stays as it was: the golden
        // packages' registry is built from it (`selection_attempt::world` removes this file).
        write(&src.join("skills/deploy/agents/openai.yaml"), "policy:\n  allow_implicit_invocation: false\n");
        let (code, _, err) = cli(&["init", ledger.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        Setup { tmp, ledger, src }
    }

    /// `new` plus a recorded registry of the fixture.
    pub fn scanned() -> Setup {
        let s = Setup::new();
        let (code, _, err) = s.scan();
        assert_eq!(code, 0, "{err}");
        s
    }

    pub fn dir(&self) -> &str {
        self.ledger.to_str().unwrap()
    }

    pub fn scan(&self) -> (u8, String, String) {
        cli(&["sources", "scan", self.dir(), self.src.to_str().unwrap(), "--json"])
    }

    /// Runs `ledger <args...>` with DIR inserted after the subcommand words `words`.
    pub fn run(&self, words: &[&str], rest: &[&str]) -> (u8, String, String) {
        let mut args: Vec<&str> = words.to_vec();
        args.push(self.dir());
        args.extend_from_slice(rest);
        cli(&args)
    }

    /// The same, parsed as JSON (asserting exit 0).
    pub fn json(&self, words: &[&str], rest: &[&str]) -> serde_json::Value {
        let (code, out, err) = self.run(words, rest);
        assert_eq!(code, 0, "{words:?} {rest:?}: {err}");
        serde_json::from_str(&out).unwrap()
    }

    /// The ledger's head seq and the byte length of its journal.
    pub fn head(&self) -> (u64, u64) {
        let (code, out, err) = cli(&["verify", self.dir(), "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let seq =
            v["headSeq"].as_u64().or_else(|| v["head"]["seq"].as_u64()).unwrap_or_else(|| panic!("{v}"));
        (seq, journal_bytes(&self.ledger))
    }
}

pub fn journal_bytes(ledger: &Path) -> u64 {
    std::fs::read_dir(ledger.join("journal")).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}
