//! Generations under a state root: the I/O half of `profile set`/`rollback`/`recover`.
//!
//! A generation is a materialisation of ledger state (`runtime::profile::generation`),
//! written through a transaction with five durable boundaries; the ledger entry is the
//! commit point:
//!
//! 1. **prepared** — `txn.json` (the revision, the expected revision, the generation digest
//!    and the exact entry event to admit) written and fsynced;
//! 2. **files written** — `stage/<hex>/`: each file created exclusively, fsynced, re-read
//!    and re-hashed, plus `manifest.json`;
//! 3. **generation published** — `stage/<hex>` renamed to `generations/<hex>` (immutable,
//!    named by its digest);
//! 4. **receipt published** — `receipts/<revision>.json`;
//! 5. **state published** — the `profileRevisionRecorded` entry committed to the ledger;
//!    then `txn.json` is removed.
//!
//! `recover` finds a left-over `txn.json` and decides from the ledger and the stage: the
//! entry is committed → finish; the generation was published → roll forward (commit the
//! entry); otherwise → roll back (remove its own verified stage). A tampered stage or
//! journal is refused, never removed.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use ledger_schema::{Digest, Id};
use serde::{Deserialize, Serialize};

use crate::profiles::scan::shown;
use crate::runtime::profile::GenerationManifest;

/// The ownership marker: a state root holding it belongs to the named ledger.
pub use crate::runtime::skill::OWNER_FILE;
/// The one-writer lock (`pid host`).
pub const LOCK_FILE: &str = "lock";
/// The prepared transaction; present = a transaction was interrupted.
pub const TXN_FILE: &str = "txn.json";
/// Longest path a file is written at (Linux's PATH_MAX, 4,096, less its NUL).
const MAX_PATH_BYTES: usize = 4095;
/// Largest `txn.json` / receipt / marker read back (bytes).
const MAX_SMALL_FILE: u64 = 2 << 20;

/// The five durable boundaries, in order.
pub const BOUNDARIES: [&str; 5] = ["prepared", "files", "generation", "receipt", "state"];

/// Why a state root or a generation was refused, or I/O failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerationError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("state root {0}")]
    UnsafeRoot(String),
    /// A file where this command writes one of its own, which it cannot prove its own: kept
    /// (the message names the directory, a state root or the ledger's: outside review 160
    /// F8 read "state root" for the ledger directory).
    #[error("{0}")]
    Foreign(String),
    #[error("state root {path} is busy: locked by {holder}")]
    Busy { path: String, holder: String },
    #[error(
        "state root {0} holds an interrupted transaction of this ledger: run `ledger profile recover DIR --state-root {0}` first"
    )]
    RecoveryRequired(String),
    /// A stage directory with no transaction that names it (outside review 52: the refusal
    /// sent the operator to `profile recover`, which found nothing to recover).
    #[error(
        "state root {root} holds a left-over stage {stage} that no transaction names: move it out of the state root \
         (nothing records it), then run the command again"
    )]
    StrayStage { root: String, stage: String },
    #[error("generation {root}: {reason}")]
    Tampered { root: String, reason: String },
    /// A `txn.json` no transaction of this build wrote (damaged, forged): kept, and the way
    /// out named (outside review 200 F1: `recover` refused it naming none, and moving it out
    /// alone left its revision's receipt read as another ledger copy's).
    #[error(
        "transaction {path}: {reason} — no transaction this build can finish: move it out of the state root (kept \
         for inspection), with the receipt of the revision it would have made if the ledger has not committed that \
         revision (`receipts/N.json`, N past the revision `ledger profile status` shows), then run `ledger profile \
         recover` again"
    )]
    BadTransaction { path: String, reason: String },
    /// A receipt the ledger does not vouch for, or one it committed that is missing
    /// (outside review 56: receipts were never compared with the ledger).
    #[error("receipt {path}: {reason}")]
    Receipt { path: String, reason: String },
}

impl GenerationError {
    /// An I/O error or a state root held by another writer (exit 2, as a ledger held by
    /// another writer is): the environment, not the request, stops it; try again.
    pub fn is_io(&self) -> bool {
        matches!(self, GenerationError::Io { .. } | GenerationError::Busy { .. })
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GenerationError + '_ {
    move |source| GenerationError::Io { path: path.display().to_string(), source }
}

fn unsafe_root(root: &Path, why: &str) -> GenerationError {
    GenerationError::UnsafeRoot(format!("{}: {}", shown(&root.display().to_string()), shown(why)))
}

/// Test hook for crash tests: with `CLOSURE_LEDGER_PROFILE_PAUSE_AT=<boundary>` the
/// process announces the boundary on stderr once it is durable and waits there to be
/// killed (SIGKILL), so a test can prove recovery from a real process death at it.
pub fn boundary(name: &str) {
    if std::env::var("CLOSURE_LEDGER_PROFILE_PAUSE_AT").is_ok_and(|v| v == name) {
        eprintln!("PAUSED AT {name}");
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}

/// The current user's uid (the owner of `/proc/self`).
fn current_uid() -> Result<u32, GenerationError> {
    current_ids().map(|(uid, _)| uid)
}

/// The current user and group (`/proc/self` is owned by the effective ids).
fn current_ids() -> Result<(u32, u32), GenerationError> {
    let p = Path::new("/proc/self");
    let m = fs::metadata(p).map_err(io(p))?;
    Ok((m.uid(), m.gid()))
}

/// Why a directory of `(mode, owner, group)` refuses a new entry by the user `(uid, gid)`, as far as
/// its mode bits tell: its owner's bits for its owner, its group's for a member of its
/// group; another user may belong to its group by a supplementary group this cannot see,
/// so both the group's and others' bits must refuse. The superuser is never refused.
fn parent_refuses((mode, owner, group): (u32, u32, u32), (uid, gid): (u32, u32)) -> Option<String> {
    let refuses = if uid == 0 {
        false
    } else if owner == uid {
        mode & 0o300 != 0o300
    } else if group == gid {
        mode & 0o030 != 0o030
    } else {
        mode & 0o030 != 0o030 && mode & 0o003 != 0o003
    };
    refuses.then(|| format!("is not writable by this user (mode {:o})", mode & 0o7777))
}

fn fsync_dir(dir: &Path) -> Result<(), GenerationError> {
    fs::File::open(dir).and_then(|f| f.sync_all()).map_err(io(dir))
}

fn read_small(path: &Path) -> Result<Vec<u8>, GenerationError> {
    let m = fs::symlink_metadata(path).map_err(io(path))?;
    if !m.is_file() || m.len() > MAX_SMALL_FILE {
        return Err(GenerationError::BadTransaction {
            path: path.display().to_string(),
            reason: "not a regular file within bounds".into(),
        });
    }
    let mut bytes = Vec::new();
    fs::File::open(path).map_err(io(path))?.take(MAX_SMALL_FILE).read_to_end(&mut bytes).map_err(io(path))?;
    Ok(bytes)
}

/// Writes `bytes` to `path` exclusively (never over an existing file) and fsyncs it.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), GenerationError> {
    write_new_mode(path, bytes, 0o600)
}

/// [`write_new`] with permission bits `mode` (0700 for an executable generation file).
fn write_new_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), GenerationError> {
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(io(path))?;
    f.write_all(bytes).map_err(io(path))?;
    f.sync_all().map_err(io(path))
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync the directory).
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), GenerationError> {
    let tmp = path.with_extension("tmp");
    // A leftover there is removed only when it is empty or a prefix of what is written now
    // (a write of this same content cut short); anything else is kept and refused (outside
    // review 157 P1/P2-3: `txn.tmp` holding other bytes was unlinked unread).
    if fs::symlink_metadata(&tmp).is_ok() && !read_small(&tmp).is_ok_and(|b| bytes.starts_with(&b)) {
        return Err(GenerationError::Foreign(format!(
            "{}: holds {}, which this command did not write: move it out (`ledger profile recover` clears a \
             leftover of this ledger's own)",
            shown(&path.parent().unwrap_or(path).display().to_string()),
            shown(&tmp.display().to_string())
        )));
    }
    let _ = fs::remove_file(&tmp);
    write_new(&tmp, bytes)?;
    fs::rename(&tmp, path).map_err(io(path))?;
    fsync_dir(path.parent().unwrap_or(Path::new("/")))
}

/// The ledger directory's note of the state root a transaction of its (`set`, `rollback`)
/// is in: written before that root's `txn.json`, removed once the transaction is committed
/// or rolled back. A transaction interrupted in a root the ledger records nowhere yet (a
/// first `set`, a `set` into a new root) is so seen from the ledger itself (outside review
/// 101: `status` said nothing of it, `select` went on, and a `recover` much later rolled it
/// forward).
pub const PENDING_FILE: &str = "profile-txn";

/// Notes, durably, that a transaction of the ledger at `ledger_dir` is in `root`.
pub fn note_pending(ledger_dir: &Path, root: &Path) -> Result<(), GenerationError> {
    write_atomic(&ledger_dir.join(PENDING_FILE), root.as_os_str().as_encoded_bytes())
}

/// The state root the ledger at `ledger_dir` noted a transaction in, if any.
pub fn pending_root(ledger_dir: &Path) -> Option<PathBuf> {
    let bytes = read_small(&ledger_dir.join(PENDING_FILE)).ok()?;
    String::from_utf8(bytes).ok().map(PathBuf::from)
}

/// The ledger id `root`'s ownership marker names, if it is whole and readable.
pub fn owner_of(root: &Path) -> Option<Id> {
    let bytes = read_small(&root.join(OWNER_FILE)).ok()?;
    serde_json::from_slice::<Owner>(&bytes).ok().map(|o| o.ledger_id)
}

/// Removes what a note write cut short left (`profile-txn.tmp`: never renamed into place,
/// so nothing refers to it).
pub fn remove_pending_leftover(ledger_dir: &Path) -> Result<(), GenerationError> {
    // Ours only as a note cut short: empty, or the start of an absolute path on one line;
    // anything else is kept and refused (outside review 158 F1: unlinked whatever it held).
    let tmp = ledger_dir.join(PENDING_FILE).with_extension("tmp");
    if fs::symlink_metadata(&tmp).is_err() {
        return Ok(());
    }
    let ours = read_small(&tmp).is_ok_and(|b| {
        b.is_empty() || (b.first() == Some(&b'/') && !b.iter().any(|c| *c == b'\n' || *c == 0))
    });
    if !ours {
        return Err(GenerationError::Foreign(format!(
            "ledger directory {}: holds {}, which is not a note of this ledger's: move it out",
            shown(&ledger_dir.display().to_string()),
            shown(&tmp.display().to_string())
        )));
    }
    remove_synced(&tmp, ledger_dir)
}

/// Removes the note if it names `root` (its transaction is finished or rolled back).
pub fn clear_pending(ledger_dir: &Path, root: &Path) -> Result<(), GenerationError> {
    if pending_root(ledger_dir).as_deref() != Some(root) {
        return Ok(());
    }
    remove_synced(&ledger_dir.join(PENDING_FILE), ledger_dir)
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Owner {
    ledger_id: Id,
}

/// Whether `root` holds an ownership marker that is not whole (what a `set` killed while
/// marking the root leaves; [`check_root`] judges whose it is).
pub fn mark_cut_short(root: &Path) -> bool {
    read_small(&root.join(OWNER_FILE)).is_ok_and(|bytes| serde_json::from_slice::<Owner>(&bytes).is_err())
}

/// How [`check_root`] treats a missing or empty, unmarked root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootUse {
    /// The root must exist and be marked (status-like commands, rollback, recover).
    Existing,
    /// A missing root is created (0700) and an empty one marked (`set`).
    Create,
    /// The verdict `Create` would give, writing nothing (`set --dry-run`).
    Preview,
}

/// A state root's path as given, checked before anything touches it: UTF-8 and one line
/// (no control, bidi or invisible character: it is shown in messages and receipts),
/// absolute, normalised, not `/` (`runtime::profile::root_text`, the rule replay applies
/// too), nor the home directory, nor a provider's home or inside one (`~/.codex`,
/// `~/.claude`, `$CODEX_HOME`, `$CLAUDE_CONFIG_DIR`, and any `.codex`, `.claude` or
/// `.agents` directory). Returns it.
pub fn root_path(root: &Path) -> Result<PathBuf, GenerationError> {
    let text = root.to_str().ok_or_else(|| unsafe_root(root, "is not UTF-8"))?;
    crate::runtime::profile::root_text(text).map_err(|why| unsafe_root(root, why))?;
    let normal = PathBuf::from(text);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if home.as_deref().is_some_and(|h| h == normal) {
        return Err(unsafe_root(root, "is the home directory"));
    }
    let named: Vec<PathBuf> = ["CODEX_HOME", "CLAUDE_CONFIG_DIR"]
        .into_iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    if let Some(provider) = provider_home(&normal, home.as_deref(), &named) {
        return Err(unsafe_root(
            root,
            &format!(
                "is (or lies inside) {}, a provider's own home: a state root is a dedicated directory",
                provider.display()
            ),
        ));
    }
    Ok(normal)
}

/// The provider home `root` is or lies inside, if any — `~/.codex`, `~/.claude`, or one an
/// environment variable names (`named`, absolute ones only): seed 003's store "never
/// rewrites the user's provider home" (outside review 96: a missing `~/.codex` was made,
/// marked and written as a state root).
fn provider_home(root: &Path, home: Option<&Path>, named: &[PathBuf]) -> Option<PathBuf> {
    let defaults = home.into_iter().flat_map(|h| [h.join(".codex"), h.join(".claude")]);
    // As given, and where it resolves to when it exists (a `~/.codex` symlinked elsewhere,
    // a relative or `..`-spelled `CODEX_HOME`: the provider resolves them; outside review 97).
    let spellings = |p: PathBuf| {
        let resolved = fs::canonicalize(&p).ok();
        [Some(p).filter(|p| p.is_absolute()), resolved].into_iter().flatten()
    };
    defaults
        .chain(named.iter().cloned())
        .find(|p| spellings(p.clone()).any(|s| root.starts_with(&s)))
        .or_else(|| {
            // A provider's configuration or skill-discovery directory at any scope — a
            // project's `.claude/` or `.codex/`, `~/.agents/skills` or a repository's
            // `.agents/` (Codex discovers skills there) — is the provider's too: a store
            // there puts generations' SKILL.md copies where a provider looks for skills
            // (outside review 101).
            let mut prefix = PathBuf::new();
            root.components().find_map(|part| {
                prefix.push(part.as_os_str());
                // In any case: a case-insensitive filesystem (macOS, Windows) opens `.Codex`
                // as `.codex` (outside review 103).
                let name = part.as_os_str().to_str()?;
                PROVIDER_DIRS.iter().any(|d| d.eq_ignore_ascii_case(name)).then(|| prefix.clone())
            })
        })
}

/// Directory names a provider owns wherever they appear (configuration, skill discovery).
const PROVIDER_DIRS: [&str; 3] = [".agents", ".claude", ".codex"];

/// The nearest ancestor of `path` (not `path` itself) that is a state root — holds an
/// ownership marker — if any. A ledger or a demo made there would write into a managed
/// store (outside review 97: `ledger init` and `ledger demo` wrote into one).
pub fn inside_state_root(path: &Path) -> Option<PathBuf> {
    path.ancestors().skip(1).find(|a| fs::symlink_metadata(a.join(OWNER_FILE)).is_ok()).map(Path::to_path_buf)
}

/// Whether `path` exists, not following a symlink.
fn exists_unfollowed(path: &Path) -> Result<bool, GenerationError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(GenerationError::Io { path: path.display().to_string(), source: e }),
    }
}

/// The checks every state root passes, before anything is written in it: absolute,
/// normalised, not `/` nor the home directory, no symlink in it or any ancestor, no ancestor
/// a state root (holding an ownership marker) or a ledger's directory; if it
/// exists: a directory owned by the current user, mode 0700, and either empty or marked as
/// owned by this ledger. [`RootUse::Create`] makes a missing root (0700) and marks it;
/// [`RootUse::Preview`] accepts exactly what `Create` accepts and writes nothing.
pub fn check_root(root: &Path, ledger: Id, usage: RootUse) -> Result<(), GenerationError> {
    let normal = root_path(root)?;
    // No symlink in any ancestor (nor the root itself), checked without following.
    let mut walked = PathBuf::from("/");
    let parts: Vec<_> = normal.components().skip(1).collect();
    for (i, part) in parts.iter().enumerate() {
        // Inside a source tree's `skills/` or `manifests/` (ECC's layout: both beside each
        // other), where the next scan would read the store as sources and refuse the tree
        // (outside review 101: `set` wrote generations there, and `status` stayed current).
        if matches!(part.as_os_str().to_str(), Some("skills" | "manifests"))
            && walked.join("skills").is_dir()
            && walked.join("manifests").join("context-profiles").is_dir()
        {
            return Err(unsafe_root(
                root,
                &format!(
                    "lies inside {}, a source tree's `{}/` (the next `sources scan` of it would refuse the store): \
                     a state root is a dedicated directory outside the sources",
                    walked.display(),
                    part.as_os_str().to_string_lossy()
                ),
            ));
        }
        walked.push(part.as_os_str());
        match fs::symlink_metadata(&walked) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(unsafe_root(root, &format!("{} is a symlink", walked.display())));
            }
            // A state root is a dedicated directory: never inside another state root (a
            // generation, `receipts/`: outside review 96, P1 — another ledger's `set` wrote
            // its store into a generation and blocked that ledger's every command), nor
            // inside a ledger's directory (its `journal/` then holds a file no open accepts).
            Ok(_) if i + 1 < parts.len() => {
                if exists_unfollowed(&walked.join(OWNER_FILE))? {
                    return Err(unsafe_root(
                        root,
                        &format!(
                            "lies inside {}, a state root (it holds {OWNER_FILE}): a state root is a dedicated directory of its own",
                            walked.display()
                        ),
                    ));
                }
                if crate::store::holds_ledger(&walked) {
                    return Err(unsafe_root(
                        root,
                        &format!(
                            "lies inside {}, a ledger's directory: a state root is a dedicated directory outside every ledger",
                            walked.display()
                        ),
                    ));
                }
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && i + 1 == parts.len() => {
                match usage {
                    RootUse::Existing => {
                        return Err(unsafe_root(
                            root,
                            "does not exist (the configured root, lost? `ledger profile recover` makes it again \
                             and rebuilds it from the ledger)",
                        ));
                    }
                    RootUse::Preview => {}
                    RootUse::Create => {}
                }
                // A parent this user cannot write refuses the root, in a dry run as in the
                // real command (outside review 213 F3: the dry run said OK, the `set` a bare
                // "Permission denied").
                let parent = walked.parent().unwrap_or(Path::new("/"));
                let cannot_make = |why: &str| {
                    unsafe_root(
                        root,
                        &format!(
                            "does not exist and cannot be made: its parent directory {} {why} (make the root yourself — an empty directory of mode 0700 — or choose one in a directory you can write)",
                            parent.display()
                        ),
                    )
                };
                if usage == RootUse::Preview {
                    let m = fs::metadata(parent).map_err(io(parent))?;
                    return match parent_refuses((m.mode(), m.uid(), m.gid()), current_ids()?) {
                        Some(why) => Err(cannot_make(&why)),
                        None => Ok(()),
                    };
                }
                fs::DirBuilder::new().mode(0o700).create(&normal).map_err(|e| match e.kind() {
                    std::io::ErrorKind::PermissionDenied => cannot_make("refuses it (permission denied)"),
                    std::io::ErrorKind::ReadOnlyFilesystem => cannot_make("is on a read-only file system"),
                    _ => GenerationError::Io { path: normal.display().to_string(), source: e },
                })?;
                fs::set_permissions(&normal, fs::Permissions::from_mode(0o700)).map_err(io(&normal))?;
                let owner = serde_json::to_vec(&Owner { ledger_id: ledger }).unwrap_or_default();
                write_new(&normal.join(OWNER_FILE), &owner)?;
                fsync_dir(&normal)?;
                if let Some(parent) = normal.parent() {
                    fsync_dir(parent)?;
                }
                return Ok(());
            }
            // A missing ancestor: the root cannot exist, and no command makes its parents
            // (outside review 93: a bare "No such file or directory", exit 2).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(unsafe_root(
                    root,
                    &format!(
                        "does not exist: its parent directory {} is missing (make it, then run the command again: \
                         for the configured root, `ledger profile recover` rebuilds it)",
                        walked.display()
                    ),
                ));
            }
            Err(e) => return Err(GenerationError::Io { path: walked.display().to_string(), source: e }),
        }
    }
    let m = fs::symlink_metadata(&normal).map_err(io(&normal))?;
    if !m.is_dir() {
        return Err(unsafe_root(root, "is not a directory"));
    }
    let marker = normal.join(OWNER_FILE);
    let ours = serde_json::to_vec(&Owner { ledger_id: ledger }).unwrap_or_default();
    let marked = match fs::symlink_metadata(&marker) {
        Ok(_) => {
            let bytes = read_small(&marker)
                .map_err(|_| unsafe_root(root, "has an ownership marker that is not a small regular file"))?;
            // A kill while the first `set` wrote the marker leaves a prefix of this ledger's
            // own marker, alone in the root: the next `set` writes it whole (outside review
            // 91: every command then said "unreadable ownership marker", naming no way out).
            let alone = || fs::read_dir(&normal).map(|d| d.count() == 1).unwrap_or(false);
            let prefix = bytes.len() < ours.len() && ours.starts_with(&bytes);
            // Only a prefix that holds this ledger's whole id is this ledger's: a shorter one
            // (`{"ledgerId":"`, common to every ledger) names no ledger, so none may claim it
            // (outside review 101: another ledger's `set` completed it with its own id). It
            // is left for inspection (seed 003: an interruption before the ownership marker
            // is published gets no automatic recovery claim).
            if prefix && bytes.len() < ours.len().saturating_sub(2) {
                return Err(unsafe_root(
                    root,
                    "has an ownership marker cut short before it names its ledger (a `profile set` or `profile \
                     recover` killed while marking it): no ledger can claim it — inspect it, remove the marker, then \
                     run the command again (`ledger profile recover` marks the configured root again; a `set` a new \
                     one)",
                ));
            }
            let cut_short = prefix && alone();
            let bytes = match usage {
                _ if !cut_short => bytes,
                RootUse::Existing => {
                    return Err(unsafe_root(
                        root,
                        "has an ownership marker cut short (a `profile set` or `profile recover` killed while marking \
                         it): run that command again",
                    ));
                }
                // What `Create` would write.
                RootUse::Preview => ours.clone(),
                RootUse::Create => {
                    let mut f = fs::OpenOptions::new()
                        .write(true)
                        .truncate(true)
                        .open(&marker)
                        .map_err(io(&marker))?;
                    f.write_all(&ours).map_err(io(&marker))?;
                    f.sync_all().map_err(io(&marker))?;
                    fsync_dir(&normal)?;
                    read_small(&marker)?
                }
            };
            let owner: Owner = serde_json::from_slice(&bytes)
                .map_err(|_| unsafe_root(root, "has an unreadable ownership marker"))?;
            if owner.ledger_id != ledger {
                return Err(unsafe_root(
                    root,
                    &format!(
                        "is owned by another ledger ({}): use a state root of this ledger's own (`ledger profile \
                         status` names the configured one)",
                        owner.ledger_id
                    ),
                ));
            }
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(GenerationError::Io { path: marker.display().to_string(), source: e }),
    };
    if !marked && fs::read_dir(&normal).map_err(io(&normal))?.next().is_some() {
        return Err(unsafe_root(
            root,
            "is a non-empty directory this ledger does not own (left untouched; where it is the configured root \
             whose ownership marker was removed, move it aside: `ledger profile recover` makes the configured root \
             again)",
        ));
    }
    if m.uid() != current_uid()? {
        return Err(unsafe_root(root, "is not owned by the current user"));
    }
    // The setuid, setgid and sticky bits count too: a setgid root makes every directory
    // created in it setgid, which the generation check then refuses (outside review 59).
    if m.mode() & 0o7777 != 0o700 {
        return Err(unsafe_root(root, &format!("has mode {:o}, not 0700", m.mode() & 0o7777)));
    }
    if !marked {
        match usage {
            RootUse::Existing => {
                return Err(unsafe_root(
                    root,
                    "is not marked as owned by this ledger (the configured root, emptied? `ledger profile recover` \
                     marks it and rebuilds its generation and receipts from the ledger)",
                ));
            }
            RootUse::Preview => return Ok(()),
            RootUse::Create => {}
        }
        let owner = serde_json::to_vec(&Owner { ledger_id: ledger }).unwrap_or_default();
        write_new(&marker, &owner)?;
        fsync_dir(&normal)?;
    }
    check_tree(&normal)
}

/// The state root's own directories — `generations/` and each generation in it,
/// `receipts/`, `stage/` and each staged generation — are real directories, and its own
/// files — the owner mark, each receipt — regular files with one link, never a
/// symlink (a write or a check through one lands outside the root: outside review 20
/// replaced `generations/` by a symlink to a world-writable directory and every command
/// followed it), owned by the current user, with no permission beyond 0700.
fn check_tree(root: &Path) -> Result<(), GenerationError> {
    let uid = current_uid()?;
    // One entry of the root's own, if present: a real directory (`dir`) or a regular file
    // with one link, the user's, no wider than the ledger wrote it (0700 / 0600).
    let check = |path: &Path, dir: bool| -> Result<bool, GenerationError> {
        let m = match fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(GenerationError::Io { path: path.display().to_string(), source: e }),
        };
        let what = shown(&path.display().to_string());
        if m.file_type().is_symlink() {
            return Err(unsafe_root(root, &format!("{what} is a symlink")));
        }
        let (kind_ok, kind, written) = if dir {
            (m.is_dir(), "a directory", 0o700)
        } else {
            (m.is_file() && m.nlink() == 1, "a regular file with one link", 0o600)
        };
        if !kind_ok {
            return Err(unsafe_root(root, &format!("{what} is not {kind}")));
        }
        if m.uid() != uid {
            return Err(unsafe_root(root, &format!("{what} is not owned by the current user")));
        }
        if m.mode() & 0o7777 & !written != 0 {
            return Err(unsafe_root(
                root,
                &format!("{what} has mode {:o}, wider than {written:04o}", m.mode() & 0o7777),
            ));
        }
        Ok(true)
    };
    check(&root.join(OWNER_FILE), false)?;
    // The directories the ledger writes in: the user's to write (outside review 212 F3: a
    // `receipts/` at 0500 passed every check, and `set` then died half-way on "Permission
    // denied", leaving a transaction `recover` could never finish).
    let writable = |dir: &Path| -> Result<(), GenerationError> {
        match fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() && m.mode() & 0o700 != 0o700 => Err(unsafe_root(
                root,
                &format!(
                    "{} has mode {:o}: the ledger writes in it — give it back its mode (chmod 700)",
                    shown(&dir.display().to_string()),
                    m.mode() & 0o7777
                ),
            )),
            _ => Ok(()),
        }
    };
    for name in ["receipts", "generations", "stage"] {
        let dir = root.join(name);
        writable(&dir)?;
        if check(&dir, true)? {
            for item in fs::read_dir(&dir).map_err(io(&dir))? {
                check(&item.map_err(io(&dir))?.path(), name != "receipts")?;
            }
        }
    }
    Ok(())
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_owned()).unwrap_or_default()
}

/// Whether a lock's owner (`pid host`) may still be writing: a live process on this host,
/// or any process on another host (never judged from here). An empty owner is not.
fn held(holder: &str) -> bool {
    let (pid, host) = holder.split_once(' ').unwrap_or((holder, ""));
    let alive = pid.parse::<u32>().map_or(true, |p| Path::new(&format!("/proc/{p}")).exists());
    !holder.is_empty() && (host != hostname() || alive)
}

/// What this process writes in a state root's lock: its pid and host.
fn this_holder() -> String {
    format!("{} {}", std::process::id(), hostname())
}

/// The owner of the state root's lock while a writer may hold it (a transaction in
/// `txn.json` is then in flight, not interrupted: outside review 56), else `None`.
pub fn live_holder(root: &Path) -> Option<String> {
    let bytes = read_small(&root.join(LOCK_FILE)).ok()?;
    let holder = String::from_utf8_lossy(&bytes).trim().to_owned();
    held(&holder).then_some(holder)
}

/// A live lock's owner as a refusal names it: a live pid is never reclaimed, and one reused
/// since a crash looks the same, so the text says how to tell (outside review 147 F4) —
/// every command that finds the lock held says it alike (outside review 199 F4: only
/// `recover` did; `select` named the pid alone).
pub fn holder_explained(root: &Path, holder: &str) -> String {
    let path = root.join(LOCK_FILE);
    let (pid, host) = holder.split_once(' ').unwrap_or((holder, ""));
    if host == hostname() {
        format!(
            "{holder} (process {pid} runs on this host: if it is no ledger command — a pid reused since a crash — \
             remove {} once no ledger command runs)",
            path.display()
        )
    } else {
        format!("{holder} (another host: remove {} once no ledger command runs there)", path.display())
    }
}

/// The one-writer lock of a state root, released on drop.
pub struct Lock {
    path: PathBuf,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Takes the state root's lock. A lock held by a live process, or by any process on
/// another host, is never reclaimed; a lock of a dead process on this host is, and so is an
/// empty one.
///
/// The lock appears whole or not at all: the owner (`pid host`) is written and synced to
/// `lock.<pid>` first, then hard-linked to `lock` (which fails if `lock` exists). A crash
/// can leave only that pid-named file, which nothing reads and the next writer to take the
/// lock removes (`sweep_staged_locks`). An empty `lock` is therefore not a live writer's: it was left
/// by a crash of a writer older than this rule between creating the file and writing its
/// owner (outside review 20: such a lock refused every later `set`, `rollback` and
/// `recover`), and is reclaimed.
pub fn lock(root: &Path) -> Result<Lock, GenerationError> {
    let path = root.join(LOCK_FILE);
    let me = this_holder();
    let staged = root.join(format!("{LOCK_FILE}.{}", std::process::id()));
    let _ = fs::remove_file(&staged);
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&staged).map_err(io(&staged))?;
    f.write_all(me.as_bytes()).and_then(|()| f.sync_all()).map_err(io(&staged))?;
    drop(f);
    let taken = (|| {
        for _ in 0..2 {
            match fs::hard_link(&staged, &path) {
                Ok(()) => return Ok(Lock { path: path.clone() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    // Only a regular file is a lock this rule can judge: anything else (a
                    // symlink, outside review 20) is never reclaimed.
                    let holder = match read_small(&path) {
                        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_owned(),
                        Err(GenerationError::Io { source, .. })
                            if source.kind() == std::io::ErrorKind::NotFound =>
                        {
                            continue;
                        }
                        Err(_) => {
                            return Err(GenerationError::Busy {
                                path: root.display().to_string(),
                                holder:
                                    "a lock that is not a small regular file (remove it if no writer runs)"
                                        .into(),
                            });
                        }
                    };
                    if held(&holder) {
                        return Err(GenerationError::Busy {
                            path: root.display().to_string(),
                            holder: holder_explained(root, &holder),
                        });
                    }
                    fs::remove_file(&path).map_err(io(&path))?;
                }
                Err(e) => return Err(GenerationError::Io { path: path.display().to_string(), source: e }),
            }
        }
        Err(GenerationError::Busy { path: root.display().to_string(), holder: "a racing writer".into() })
    })();
    let _ = fs::remove_file(&staged);
    if taken.is_ok() {
        sweep_staged_locks(root);
    }
    taken
}

/// Removes the `lock.<pid>` files writers killed while taking the lock left (outside review
/// 85: nothing ever did): one whose pid runs on this host may be a writer taking the lock
/// right now and is left, as is one naming another host; the rest are no writer's. Called
/// with the lock held; best effort (litter, never a lock).
fn sweep_staged_locks(root: &Path) {
    let Ok(items) = fs::read_dir(root) else { return };
    let mine = std::process::id();
    for item in items.flatten() {
        let name = item.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(LOCK_FILE))
            .and_then(|n| n.strip_prefix('.'))
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == mine || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = item.path();
        let Ok(bytes) = read_small(&path) else { continue };
        let holder = String::from_utf8_lossy(&bytes).trim().to_owned();
        let host = holder.split_once(' ').map_or("", |(_, host)| host);
        if holder.is_empty() || host == hostname() {
            let _ = fs::remove_file(&path);
        }
    }
}

/// `generations/<hex>` for a digest.
pub fn generation_dir(root: &Path, digest: Digest) -> PathBuf {
    root.join("generations").join(hex(digest))
}

pub fn hex(digest: Digest) -> String {
    digest.to_string().trim_start_matches("b3:").to_owned()
}

/// The manifest file written into each generation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ManifestFile<'a> {
    generation_digest: Digest,
    #[serde(flatten)]
    manifest: &'a GenerationManifest,
}

pub const MANIFEST_FILE: &str = "manifest.json";

fn manifest_bytes(manifest: &GenerationManifest) -> Vec<u8> {
    serde_json::to_vec_pretty(&ManifestFile { generation_digest: manifest.digest(), manifest })
        .unwrap_or_default()
}

/// Verifies a generation directory against its manifest: exactly the manifest's files
/// (plus `manifest.json`) and the directories they need, each file a regular file with one
/// link, its size and digest, no permission wider than written (0600 files, 0700
/// directories: a `chmod 0777` or a setuid bit is tampering too).
pub fn verify(dir: &Path, manifest: &GenerationManifest) -> Result<(), GenerationError> {
    let tampered = |reason: String| GenerationError::Tampered { root: dir.display().to_string(), reason };
    // A missing generation is tampering, as a missing file in it is (exit 1, not an I/O
    // error: outside review 56 saw exit 2 with a bare OS error for one and 1 for the other).
    let m = match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(tampered("is missing (`ledger profile recover` rebuilds it from the ledger)".into()));
        }
        other => other.map_err(io(dir))?,
    };
    if !m.is_dir() {
        return Err(tampered("is not a directory".into()));
    }
    let mut expected: std::collections::BTreeMap<String, (u64, Digest, bool)> =
        manifest.files.iter().map(|f| (f.path.clone(), (f.bytes, f.digest, f.executable))).collect();
    let mbytes = manifest_bytes(manifest);
    expected.insert(
        MANIFEST_FILE.to_owned(),
        (mbytes.len() as u64, ledger_schema::events::profile::SourceResource::digest_of(&mbytes), false),
    );
    // Every directory the manifest's files need (an empty or extra one was added).
    let dirs: std::collections::BTreeSet<&str> = expected
        .keys()
        .flat_map(|p| p.match_indices('/').map(move |(i, _)| p.get(..i).unwrap_or_default()))
        .collect();
    // Files are written 0600 and directories 0700 (less under a stricter umask): any other
    // permission bit — group, other, setuid, setgid, sticky — was added since.
    // Every generation file and directory is the current user's, with no permission wider
    // than it was written with (`what` names it in the refusal).
    let uid = current_uid()?;
    let private = |m: &fs::Metadata, written: u32, what: &str| {
        if m.uid() != uid {
            return Err(tampered(format!("{what} is not owned by the current user")));
        }
        if m.mode() & 0o7777 & !written != 0 {
            return Err(tampered(format!(
                "{what} has mode {:o}, wider than {written:04o}",
                m.mode() & 0o7777
            )));
        }
        // And still readable by its owner, the provider that loads it (a directory also
        // searchable): a narrower umask keeps these bits; a chmod that took them away made
        // a carrier that verifies but delivers nothing (outside review 85).
        let needed = if m.is_dir() { 0o500 } else { 0o400 };
        if m.mode() & needed != needed {
            return Err(tampered(format!(
                "{what} has mode {:o}: its owner can no longer {}",
                m.mode() & 0o7777,
                if m.is_dir() { "list and enter it" } else { "read it" }
            )));
        }
        Ok(())
    };
    private(&m, 0o700, "the generation")?;
    let mut seen = 0usize;
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for item in fs::read_dir(&d).map_err(io(&d))? {
            let item = item.map_err(io(&d))?;
            // The key is the name's own text (the manifest's paths are exact); `shown` is for
            // messages only (escaping a name before the lookup failed every name with a
            // character it escapes: outside review 19).
            let name = item.file_name().to_string_lossy().into_owned();
            let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
            let path = item.path();
            let m = fs::symlink_metadata(&path).map_err(io(&path))?;
            if m.file_type().is_symlink() {
                return Err(tampered(format!("{} was replaced by a symlink", shown(&child))));
            } else if m.is_dir() {
                if !dirs.contains(child.as_str()) {
                    return Err(tampered(format!("directory {} was added", shown(&child))));
                }
                private(&m, 0o700, &shown(&child))?;
                stack.push((path, child));
            } else if !m.is_file() {
                return Err(tampered(format!("{} is not a regular file", shown(&child))));
            } else {
                let (bytes, digest, executable) =
                    expected.get(&child).ok_or_else(|| tampered(format!("{} was added", shown(&child))))?;
                if m.nlink() != 1 {
                    return Err(tampered(format!("{} is hard-linked ({} links)", shown(&child), m.nlink())));
                }
                if m.len() != *bytes {
                    return Err(tampered(format!("{} was modified (size)", shown(&child))));
                }
                // An executable file is written 0700 and must still run (outside review 56).
                private(&m, if *executable { 0o700 } else { 0o600 }, &shown(&child))?;
                if *executable && m.mode() & 0o100 == 0 {
                    return Err(tampered(format!("{} lost its execute permission", shown(&child))));
                }
                let mut content = Vec::new();
                fs::File::open(&path)
                    .map_err(io(&path))?
                    .take(*bytes + 1)
                    .read_to_end(&mut content)
                    .map_err(io(&path))?;
                if ledger_schema::events::profile::SourceResource::digest_of(&content) != *digest {
                    return Err(tampered(format!("{} was modified", shown(&child))));
                }
                seen += 1;
            }
        }
    }
    if seen != expected.len() {
        return Err(tampered(format!("{} of {} files are missing", expected.len() - seen, expected.len())));
    }
    Ok(())
}

/// The prepared transaction, as `txn.json` records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Transaction {
    pub ledger_id: Id,
    pub revision: u32,
    pub expected_revision: u32,
    pub generation_digest: Digest,
    /// The canonical CBOR of the `profileRevisionRecorded` event to commit, in hex.
    pub event_hex: String,
}

pub fn read_txn(root: &Path) -> Result<Option<Transaction>, GenerationError> {
    let path = root.join(TXN_FILE);
    match fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(GenerationError::Io { path: path.display().to_string(), source: e }),
        Ok(_) => serde_json::from_slice(&read_small(&path)?).map(Some).map_err(|e| {
            GenerationError::BadTransaction { path: path.display().to_string(), reason: e.to_string() }
        }),
    }
}

/// Receipt of a committed revision (`receipts/<revision>.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Receipt {
    pub ledger_id: Id,
    pub revision: u32,
    pub generation_digest: Digest,
    pub plan_digest: Digest,
    pub registry_digest: Digest,
}

/// Every check the transaction makes before it prepares anything, writing nothing (also
/// what `set --dry-run` runs): no interrupted transaction, an existing target generation
/// verifies, no left-over stage for it. True when the target generation already exists.
pub fn preflight(
    root: &Path,
    digest: Digest,
    manifest: &GenerationManifest,
) -> Result<bool, GenerationError> {
    if read_txn(root)?.is_some() {
        return Err(GenerationError::RecoveryRequired(shown(&root.display().to_string())));
    }
    let target = generation_dir(root, digest);
    // Every file's path under the generation within what the system takes (PATH_MAX, 4,096
    // with its NUL), checked before anything is written (outside review 206 F4: the dry run
    // passed, and the real `set` failed mid-transaction with "File name too long").
    let base = target.as_os_str().len();
    if let Some(file) = manifest.files.iter().max_by_key(|f| f.path.len()) {
        let len = base + 1 + file.path.len();
        if len > MAX_PATH_BYTES {
            return Err(GenerationError::UnsafeRoot(format!(
                "{}: a generation file's path under it would be {len} bytes ({}), over the {MAX_PATH_BYTES} the \
                 system takes: choose a shorter state root (`ledger profile set` with another `--state-root`; \
                 `rollback` and `mode` work in the configured one)",
                shown(&root.display().to_string()),
                shown(&file.path)
            )));
        }
    }
    if fs::symlink_metadata(&target).is_ok() {
        // An earlier generation this command would reuse, tampered: never overwritten; the
        // remedy is named (outside review 87: a bare "was modified").
        verify(&target, manifest).map_err(|e| match e {
            GenerationError::Tampered { root, reason } => GenerationError::Tampered {
                root,
                reason: format!(
                    "{reason} (move it out of the state root; the command then rebuilds it from the ledger)"
                ),
            },
            other => other,
        })?;
        return Ok(true);
    }
    let stage = root.join("stage").join(hex(digest));
    if fs::symlink_metadata(&stage).is_ok() {
        return Err(GenerationError::StrayStage {
            root: shown(&root.display().to_string()),
            stage: shown(&stage.display().to_string()),
        });
    }
    Ok(false)
}

/// A stage directory left in `root/stage/` while no transaction is open: no command will
/// reuse its generation until it is moved out (outside review 147 F2: `profile recover`
/// said "nothing to recover" while `rollback` refused it).
pub fn stray_stage(root: &Path) -> Result<(), GenerationError> {
    let Ok(items) = fs::read_dir(root.join("stage")) else { return Ok(()) };
    let mut names: Vec<PathBuf> = items.flatten().map(|i| i.path()).collect();
    names.sort();
    match names.first() {
        Some(stage) => Err(GenerationError::StrayStage {
            root: shown(&root.display().to_string()),
            stage: shown(&stage.display().to_string()),
        }),
        None => Ok(()),
    }
}

/// Boundaries 1–4 of the transaction: prepared, files written, generation published,
/// receipt published. The caller commits the entry (boundary 5) and then calls [`finish`].
///
/// A refusal leaves nothing behind: the checks of [`preflight`] run before `txn.json` is
/// written, and a refusal after it (a generation tampered meanwhile) rolls the prepared
/// transaction back, so `recover` can never commit a refused operation. An I/O failure
/// leaves the transaction for `recover`, like a crash.
pub fn prepare_and_publish(
    root: &Path,
    txn: &Transaction,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
    receipt: &Receipt,
) -> Result<(), GenerationError> {
    preflight(root, txn.generation_digest, manifest)?;
    let txn_bytes = serde_json::to_vec_pretty(txn).unwrap_or_default();
    write_atomic(&root.join(TXN_FILE), &txn_bytes)?;
    boundary("prepared");
    match publish_prepared(root, txn, manifest, contents, receipt) {
        Err(refused) if !refused.is_io() => {
            roll_back(root, txn, manifest, contents, receipt)?;
            Err(refused)
        }
        other => other,
    }
}

/// Boundaries 2–4, after `txn.json` is durable.
fn publish_prepared(
    root: &Path,
    txn: &Transaction,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
    receipt: &Receipt,
) -> Result<(), GenerationError> {
    let target = generation_dir(root, txn.generation_digest);
    if fs::symlink_metadata(&target).is_ok() {
        // Immutable and content-addressed: an existing one is verified, never rewritten.
        verify(&target, manifest)?;
        boundary("files");
        boundary("generation");
    } else {
        if fs::symlink_metadata(root.join("stage").join(hex(txn.generation_digest))).is_ok() {
            return Err(GenerationError::RecoveryRequired(root.display().to_string()));
        }
        write_generation(root, txn.generation_digest, manifest, contents)?;
    }
    publish_receipt(root, receipt)?;
    boundary("receipt");
    Ok(())
}

/// Boundaries 2 and 3: the generation written into its stage, verified, synced, and
/// renamed into `generations/`.
fn write_generation(
    root: &Path,
    digest: Digest,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
) -> Result<(), GenerationError> {
    let target = generation_dir(root, digest);
    let stage_parent = root.join("stage");
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&stage_parent).map_err(io(&stage_parent))?;
    let stage = stage_parent.join(hex(digest));
    fs::DirBuilder::new().mode(0o700).create(&stage).map_err(io(&stage))?;
    for (file, bytes) in manifest.files.iter().zip(contents) {
        let path = stage.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).map_err(io(parent))?;
        }
        write_new_mode(&path, bytes, if file.executable { 0o700 } else { 0o600 })?;
        let again = fs::read(&path).map_err(io(&path))?;
        if ledger_schema::events::profile::SourceResource::digest_of(&again) != file.digest {
            return Err(GenerationError::Tampered {
                root: stage.display().to_string(),
                reason: format!("{} does not re-hash to its digest after writing", file.path),
            });
        }
    }
    write_new(&stage.join(MANIFEST_FILE), &manifest_bytes(manifest))?;
    verify(&stage, manifest)?;
    sync_tree(&stage)?;
    fsync_dir(&stage_parent)?;
    boundary("files");
    let generations = root.join("generations");
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&generations).map_err(io(&generations))?;
    fs::rename(&stage, &target).map_err(io(&target))?;
    fsync_dir(&generations)?;
    fsync_dir(&stage_parent)?;
    boundary("generation");
    Ok(())
}

fn sync_tree(dir: &Path) -> Result<(), GenerationError> {
    for item in fs::read_dir(dir).map_err(io(dir))? {
        let item = item.map_err(io(dir))?;
        if item.file_type().map_err(io(dir))?.is_dir() {
            sync_tree(&item.path())?;
        }
    }
    fsync_dir(dir)
}

/// Verifies `receipts/` against `expected`, the receipts of every revision the ledger
/// committed through a transaction in this state root: each file is one of them, byte for
/// byte as written, and none is missing (`ours`: this ledger's id and current revision, to
/// name a receipt another copy of the ledger wrote). Returns the revisions whose receipt is missing or
/// differs (`Ok` only when none is: `repair` takes the list instead).
pub fn check_receipts(
    root: &Path,
    expected: &[Receipt],
    ours: (Id, u32),
) -> Result<Vec<u32>, GenerationError> {
    let dir = root.join("receipts");
    let mut wrong = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let entries = match fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        other => other.map_err(io(&dir))?.collect::<Result<Vec<_>, _>>().map_err(io(&dir))?,
    };
    for item in entries {
        let name = item.file_name().to_string_lossy().into_owned();
        let path = item.path();
        let not_ours = |reason: &str| GenerationError::Receipt {
            path: shown(&path.display().to_string()),
            reason: reason.to_owned(),
        };
        // A `N.tmp` of a revision the ledger committed: a write of its receipt cut short
        // (`recover` clears it) or someone else's file (outside review 158 F3: both were
        // "a revision the ledger never committed").
        if let Some(r) = name
            .strip_suffix(".tmp")
            .and_then(revision_named)
            .and_then(|n| expected.iter().find(|r| r.revision == n))
        {
            let cut_short = read_small(&path).is_ok_and(|b| receipt_bytes(r).starts_with(&b));
            return Err(not_ours(if cut_short {
                "a write of the ledger's receipt of that revision cut short: `ledger profile recover` clears it"
            } else {
                "not the ledger's receipt of that revision: move it out of the state root"
            }));
        }
        let number = name.strip_suffix(".json").and_then(revision_named);
        // The next revision's receipt while a live writer holds the state root: a transaction
        // in flight publishes it just before its entry commits (outside review 199 F2: a
        // `status` beside a live `set` called it another ledger copy's).
        // (Another writer: a `recover` holding the lock itself has no transaction in flight
        // — outside review 219 F3: it passed over such a receipt as "nothing to recover".)
        let me = this_holder();
        if number == Some(ours.1.saturating_add(1))
            && !expected.iter().any(|r| Some(r.revision) == number)
            && live_holder(root).is_some_and(|holder| holder != me)
        {
            continue;
        }
        let receipt = number.and_then(|n| expected.iter().find(|r| r.revision == n)).ok_or_else(|| {
            // A receipt of this ledger's id that this ledger never committed: another copy
            // of the ledger directory wrote it (outside review 129 F4: "move it out" only
            // moved the lockout to the copy).
            // (Past this ledger's current revision: a receipt of an older one is a moved or
            // restored state root's, not a copy's.)
            let (id, current) = ours;
            let theirs = fs::symlink_metadata(&path)
                .is_ok_and(|m| m.is_file() && m.len() <= 64 * 1024)
                .then(|| fs::read(&path).ok())
                .flatten()
                .and_then(|b| serde_json::from_slice::<Receipt>(&b).ok())
                .filter(|r| Some(r.revision) == number && r.ledger_id == id);
            let forked = theirs.as_ref().is_some_and(|r| r.revision > current);
            if theirs.is_some() && !forked {
                // This ledger's own revision, committed in another state root: this one was
                // moved or copied from there (outside review 132 F8).
                return not_ours(
                    "a revision this ledger committed in another state root (this one was moved or copied from \
                     there): use the state root it was committed in (`ledger profile status` names the configured \
                     one), or a new one",
                );
            }
            if forked {
                not_ours(
                    "a revision of this ledger's id that this ledger does not hold: the ledger gave that revision up \
                     (`ledger recover DIR --truncate-after`, a torn tail cut) or a transaction of its own that never \
                     committed left it (its `txn.json` moved out) — move the receipt out of the state root; or \
                     another copy of the ledger directory (copied or restored) manages this state root now — give \
                     this ledger a state root of its own (`ledger profile set DIR … --state-root NEW`), or keep using \
                     the copy",
                )
            } else {
                not_ours("the ledger committed no such revision in this state root (move it out)")
            }
        })?;
        seen.insert(receipt.revision);
        let m = fs::symlink_metadata(&path).map_err(io(&path))?;
        if !m.is_file() || fs::read(&path).map_err(io(&path))? != receipt_bytes(receipt) {
            wrong.push(receipt.revision);
        }
    }
    wrong.extend(expected.iter().map(|r| r.revision).filter(|r| !seen.contains(r)));
    wrong.sort_unstable();
    Ok(wrong)
}

/// The revision a receipt's file name gives, written as the ledger writes it: decimal digits,
/// no sign, no leading zero (outside review 251 F2: `01.json` was read as revision 1's second
/// receipt — passing as an exact copy, and, altered, blamed on the intact `1.json`).
fn revision_named(stem: &str) -> Option<u32> {
    let n = stem.parse::<u32>().ok()?;
    (n.to_string() == stem).then_some(n)
}

/// [`check_receipts`], refusing the first receipt missing or differing from the ledger's.
pub fn verify_receipts(root: &Path, expected: &[Receipt], ours: (Id, u32)) -> Result<(), GenerationError> {
    match check_receipts(root, expected, ours)?.first() {
        None => Ok(()),
        Some(revision) => Err(GenerationError::Receipt {
            path: shown(&root.join("receipts").join(format!("{revision}.json")).display().to_string()),
            reason: "missing, or not the ledger's receipt of that revision (a missing one: `ledger profile recover` republishes it; one that differs: move it out of the state root first)".into(),
        }),
    }
}

/// Rebuilds a missing generation from `contents` (the ledger's bytes): staged, verified,
/// synced and renamed into place, as a transaction publishes one. A stage left for it — a
/// rebuild cut short (outside review 57: a `recover` killed mid-rebuild left one, which
/// every later `recover` refused) — is cleared first when every file in it is one the
/// generation holds; anything else in it is refused and left. The caller holds the lock.
pub fn rebuild(
    root: &Path,
    digest: Digest,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
) -> Result<(), GenerationError> {
    clear_stage(root, digest, manifest, contents)?;
    write_generation(root, digest, manifest, contents)
}

/// Removes what an atomic write of ours cut short left behind, never renamed into place so
/// nothing refers to it: `txn.tmp` (a transaction never prepared), and `receipts/N.tmp`
/// whose bytes are a prefix of the ledger's receipt of revision N (any other file there is
/// not ours and is left: outside review 58). The caller holds the lock. True when anything
/// was removed (outside review 56: a `txn.tmp` stayed, unreported).
pub fn remove_leftovers(root: &Path, ledger: Id, expected: &[Receipt]) -> Result<bool, GenerationError> {
    let mut removed = false;
    let mut tmps = Vec::new();
    // `txn.tmp` is this ledger's when it is a prefix of one of this ledger's transactions as
    // they are written (outside review 157 P1/P2-3: any content was unlinked; 158 F4: any
    // content after this ledger's first line was).
    // Another is kept, and refused: never "nothing to recover" over a file the next `set`
    // refuses (outside review 158 F2).
    if foreign_txn_tmp(root, ledger)? {
        tmps.push(root.join(TXN_FILE).with_extension("tmp"));
    }
    for r in expected {
        let tmp = root.join("receipts").join(format!("{}.tmp", r.revision));
        if fs::read(&tmp).is_ok_and(|bytes| receipt_bytes(r).starts_with(&bytes)) {
            tmps.push(tmp);
        }
    }
    for tmp in tmps {
        match fs::symlink_metadata(&tmp) {
            Ok(m) if m.is_file() => {
                fs::remove_file(&tmp).map_err(io(&tmp))?;
                fsync_dir(tmp.parent().unwrap_or(root))?;
                removed = true;
            }
            _ => {}
        }
    }
    Ok(removed)
}

/// Refuses a `txn.tmp` in `root` that is not a transaction of the ledger `ledger` cut short;
/// true when one of its own is there (a leftover [`remove_leftovers`] removes). Read-only:
/// `set`, its dry run and `recover` give one verdict on it, and `status` names it (outside
/// review 212 F2: the dry run and `status` passed a file `set` then refused).
pub fn foreign_txn_tmp(root: &Path, ledger: Id) -> Result<bool, GenerationError> {
    let txn_tmp = root.join(TXN_FILE).with_extension("tmp");
    if fs::symlink_metadata(&txn_tmp).is_err() {
        return Ok(false);
    }
    if read_small(&txn_tmp).is_ok_and(|b| txn_prefix(&b, ledger)) {
        return Ok(true);
    }
    Err(GenerationError::UnsafeRoot(format!(
        "{}: holds {}, which is not a transaction of this ledger's: move it out",
        shown(&root.display().to_string()),
        shown(&txn_tmp.display().to_string())
    )))
}

/// Whether `bytes` are a prefix of — or whole — a [`Transaction`] of the ledger `ledger` as
/// [`prepare_and_publish`] writes it (`serde_json::to_vec_pretty`: its fields in order,
/// each value of its own form), which is what a write of ours cut short leaves.
fn txn_prefix(bytes: &[u8], ledger: Id) -> bool {
    /// A piece of the written form: literal text, or a run of `min..=max` characters of a class.
    enum Part {
        Text(String),
        Run { class: fn(u8) -> bool, min: usize, max: usize },
    }
    let digits = |max| Part::Run { class: |c: u8| c.is_ascii_digit(), min: 1, max };
    let hex = |min, max| Part::Run { class: |c: u8| matches!(c, b'0'..=b'9' | b'a'..=b'f'), min, max };
    let text = |t: &str| Part::Text(t.to_owned());
    let parts = [
        Part::Text(format!("{{\n  \"ledgerId\": \"{ledger}\",\n  \"revision\": ")),
        digits(10),
        text(",\n  \"expectedRevision\": "),
        digits(10),
        text(",\n  \"generationDigest\": \"b3:"),
        hex(64, 64),
        text("\",\n  \"eventHex\": \""),
        hex(2, usize::MAX),
        text("\"\n}"),
    ];
    let mut rest = bytes;
    for part in &parts {
        match part {
            Part::Text(t) => {
                let n = rest.len().min(t.len());
                if rest.get(..n) != t.as_bytes().get(..n) {
                    return false;
                }
                rest = rest.get(n..).unwrap_or_default();
                if n < t.len() {
                    return true; // cut short inside this text
                }
            }
            Part::Run { class, min, max } => {
                let n = rest.iter().take_while(|c| class(**c)).count();
                if n > *max {
                    return false;
                }
                rest = rest.get(n..).unwrap_or_default();
                if rest.is_empty() {
                    return true; // cut short inside (or at the end of) this run
                }
                if n < *min {
                    return false;
                }
            }
        }
    }
    rest.is_empty()
}

fn receipt_bytes(receipt: &Receipt) -> Vec<u8> {
    serde_json::to_vec_pretty(receipt).unwrap_or_default()
}

pub fn publish_receipt(root: &Path, receipt: &Receipt) -> Result<(), GenerationError> {
    let dir = root.join("receipts");
    fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(io(&dir))?;
    let bytes = receipt_bytes(receipt);
    // (A `N.tmp` there that is not a prefix of these bytes is kept and refused by
    // `write_atomic`: outside review 154 P1-3, a roll-forward unlinked a foreign one.) Nor
    // is a receipt there that differs from the ledger's written over (outside review 157
    // P1-2: the completion of a committed transaction renamed its receipt over an altered one).
    let path = dir.join(format!("{}.json", receipt.revision));
    if fs::symlink_metadata(&path).is_ok() && !read_small(&path).is_ok_and(|b| b == bytes) {
        return Err(GenerationError::Receipt {
            path: shown(&path.display().to_string()),
            reason: "differs from the ledger's receipt of that revision: move it out of the state root"
                .into(),
        });
    }
    write_atomic(&path, &bytes)
}

/// After the commit point: the transaction is over.
pub fn finish(root: &Path) -> Result<(), GenerationError> {
    remove_synced(&root.join(TXN_FILE), root)
}

/// Removes `path` (gone already is fine) and syncs its directory `dir`.
fn remove_synced(path: &Path, dir: &Path) -> Result<(), GenerationError> {
    match fs::remove_file(path) {
        Ok(()) => fsync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(GenerationError::Io { path: path.display().to_string(), source: e }),
    }
}

/// Rolls a transaction the ledger did not commit back: removes its stage after verifying
/// that every file in it is one the manifest names, with the bytes it names (a partial stage
/// is its own; anything else is refused and left in place), and the receipt it may have
/// written for its revision — `receipts/N.tmp` whose bytes are a prefix of `receipt`'s, or
/// `receipts/N.json` with exactly them (outside review 80: a rolled-back `set` left its
/// `N.tmp`, and every later profile command refused the state root over it). A published
/// generation stays: content-addressed, unreferenced, harmless.
pub fn roll_back(
    root: &Path,
    txn: &Transaction,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
    receipt: &Receipt,
) -> Result<(), GenerationError> {
    clear_stage(root, txn.generation_digest, manifest, contents)?;
    let ours = receipt_bytes(receipt);
    let dir = root.join("receipts");
    for (name, whole) in
        [(format!("{}.tmp", receipt.revision), false), (format!("{}.json", receipt.revision), true)]
    {
        let path = dir.join(name);
        let is_ours = fs::symlink_metadata(&path).is_ok_and(|m| m.is_file())
            && fs::read(&path).is_ok_and(|b| if whole { b == ours } else { ours.starts_with(&b) });
        if is_ours {
            fs::remove_file(&path).map_err(io(&path))?;
            fsync_dir(&dir)?;
        }
    }
    finish(root)
}

/// Removes the stage of generation `digest`, if any, after verifying that every file in it
/// is one `manifest` names, holding its bytes (`contents`, in the manifest's order) or a
/// prefix of them (cut short by a crash: outside review 87, a kill between two chunks of
/// one file left a stage every `recover` refused) — anything else is refused and left.
/// Removes the stage of generation `digest` when every file in it is the generation's (a
/// prefix of its bytes: a write cut short); `Ok(true)` when there was one. Anything else in
/// it is refused, never removed.
pub fn clear_stage(
    root: &Path,
    digest: Digest,
    manifest: &GenerationManifest,
    contents: &[&[u8]],
) -> Result<bool, GenerationError> {
    let stage = root.join("stage").join(hex(digest));
    let found = fs::symlink_metadata(&stage).is_ok();
    if found {
        // The way out is named (outside review 157 P1-1: "is not ours", and no remedy — a
        // dead end): the stage moved out of the state root, `recover` goes on without it.
        let tampered = |reason: String| GenerationError::Tampered {
            root: stage.display().to_string(),
            reason: format!(
                "{reason} (a stage this ledger was writing holds only its own bytes: move the stage out of the \
                 state root, then run `ledger profile recover` again)"
            ),
        };
        let mbytes = manifest_bytes(manifest);
        let mut known: std::collections::BTreeMap<String, (Digest, Option<&[u8]>)> = manifest
            .files
            .iter()
            .enumerate()
            .map(|(i, f)| (f.path.clone(), (f.digest, contents.get(i).copied())))
            .collect();
        known.insert(
            MANIFEST_FILE.into(),
            (ledger_schema::events::profile::SourceResource::digest_of(&mbytes), Some(mbytes.as_slice())),
        );
        let mut stack = vec![(stage.clone(), String::new())];
        while let Some((d, rel)) = stack.pop() {
            for item in fs::read_dir(&d).map_err(io(&d))? {
                let item = item.map_err(io(&d))?;
                // The key is the name's own text (the manifest's paths are exact); `shown` is for
                // messages only (escaping a name before the lookup failed every name with a
                // character it escapes: outside review 19).
                let name = item.file_name().to_string_lossy().into_owned();
                let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
                let m = fs::symlink_metadata(item.path()).map_err(io(&d))?;
                if m.file_type().is_symlink() {
                    return Err(tampered(format!("{} is a symlink", shown(&child))));
                } else if m.is_dir() {
                    stack.push((item.path(), child));
                } else {
                    let (digest, ours) = known
                        .get(&child)
                        .ok_or_else(|| tampered(format!("{} is not ours", shown(&child))))?;
                    let bytes = fs::read(item.path()).map_err(io(&d))?;
                    // A file cut short by the crash is ours if it is a prefix of our bytes.
                    let cut_short = ours.is_some_and(|ours| ours.starts_with(&bytes));
                    if !cut_short
                        && ledger_schema::events::profile::SourceResource::digest_of(&bytes) != *digest
                    {
                        return Err(tampered(format!(
                            "{} does not hold the bytes the transaction wrote",
                            shown(&child)
                        )));
                    }
                }
            }
        }
        fs::remove_dir_all(&stage).map_err(io(&stage))?;
        fsync_dir(&root.join("stage"))?;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

    use std::path::{Path, PathBuf};

    use super::provider_home;

    /// A parent directory refuses a new root by its mode bits as the kernel would for a
    /// user who is not the superuser: the owner's bits for its owner, the group's for its
    /// group, and for anyone else the group's and others' both (a supplementary group is
    /// not seen); the superuser is never refused (outside review 213 F3).
    #[test]
    fn a_parent_refuses_a_new_root_by_its_mode_bits() {
        // The parent is owned by user 1000, group 100.
        let refuses = |mode: u32, ids: (u32, u32)| super::parent_refuses((mode, 1000, 100), ids).is_some();
        let (owner, member, other, superuser) = ((1000, 5), (1001, 100), (1001, 5), (0, 0));
        let seen = [
            refuses(0o40555, owner),
            refuses(0o40700, owner),
            refuses(0o40500, owner),
            refuses(0o40755, member),
            refuses(0o40775, member),
            refuses(0o40775, other),
            refuses(0o40757, other),
            refuses(0o40755, other),
            refuses(0o40555, superuser),
        ];
        assert_eq!(seen, [true, false, true, true, false, false, false, true, false]);
        assert_eq!(
            super::parent_refuses((0o40555, 1000, 100), owner).as_deref(),
            Some("is not writable by this user (mode 555)")
        );
    }

    /// What a `txn.json` write of ours cut short leaves — any prefix of a transaction this
    /// ledger writes — is recognised as ours; this ledger's first line followed by other
    /// text, another ledger's transaction, or a whole one with more after it is not
    /// (outside review 158 F4: removed as a leftover of ours).
    #[test]
    fn only_a_prefix_of_this_ledgers_transaction_is_a_leftover_of_ours() {
        use super::{Transaction, txn_prefix};
        let ours = ledger_schema::Id(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
        let txn = Transaction {
            ledger_id: ours,
            revision: 12,
            expected_revision: 11,
            generation_digest: ledger_schema::Digest([0xab; 32]),
            event_hex: "a1b2c3d4e5f6".to_owned(),
        };
        let bytes = serde_json::to_vec_pretty(&txn).unwrap();
        for n in 0..=bytes.len() {
            assert!(
                txn_prefix(&bytes[..n], ours),
                "prefix of {n} bytes: {:?}",
                String::from_utf8_lossy(&bytes[..n])
            );
        }
        let other = ledger_schema::Id(7);
        assert!(!txn_prefix(
            &serde_json::to_vec_pretty(&Transaction { ledger_id: other, ..txn.clone() }).unwrap(),
            ours
        ));
        let head = bytes.iter().position(|c| *c == b',').unwrap() + 1;
        let mut foreign = bytes[..head].to_vec();
        foreign.extend_from_slice(b"\noperator notes\n");
        assert!(!txn_prefix(&foreign, ours), "our first line, then other text");
        let mut longer = bytes.clone();
        longer.extend_from_slice(b"\n");
        assert!(!txn_prefix(&longer, ours), "a whole transaction and more");
        let upper = String::from_utf8(bytes.clone()).unwrap().replace("abab", "ABAB");
        assert!(!txn_prefix(upper.as_bytes(), ours), "not as we write it");
    }

    /// A provider's home and everything in it is refused as a state root; a sibling whose
    /// name only begins like one is not (outside review 96 F5).
    #[test]
    fn a_provider_home_is_never_a_state_root() {
        let home = Some(Path::new("/home/u"));
        let named = [PathBuf::from("/opt/codex-home"), PathBuf::from("relative/claude")];
        for (root, provider) in [
            ("/home/u/.codex", Some("/home/u/.codex")),
            ("/home/u/.codex/store", Some("/home/u/.codex")),
            ("/home/u/.claude/x/y", Some("/home/u/.claude")),
            ("/opt/codex-home/store", Some("/opt/codex-home")),
            ("/home/u/.codex-store", None),
            ("/home/u/.agents/skills/store", Some("/home/u/.agents")),
            ("/srv/project/.claude/store", Some("/srv/project/.claude")),
            ("/srv/project/.codex", Some("/srv/project/.codex")),
            ("/srv/project/.agents", Some("/srv/project/.agents")),
            ("/srv/.agentsx/store", None),
            ("/home/u/.Codex/r", Some("/home/u/.Codex")),
            ("/home/u/.CLAUDE/r", Some("/home/u/.CLAUDE")),
            ("/srv/p/.Agents", Some("/srv/p/.Agents")),
            ("/home/u/store", None),
            ("/home/u/relative/claude", None),
            ("/srv/ledger/store", None),
        ] {
            assert_eq!(provider_home(Path::new(root), home, &named), provider.map(PathBuf::from), "{root}");
        }
        assert_eq!(
            provider_home(Path::new("/home/u/.codex/s"), None, &[]),
            Some(PathBuf::from("/home/u/.codex")),
            "no HOME, nothing named: the directory's name alone"
        );
        assert_eq!(provider_home(Path::new("/home/u/codex/s"), None, &[]), None);
    }
}
