//! `ledger sources scan`: reads a source tree in ECC's layout into one [`Registry`]
//! snapshot, failing closed — nothing is recorded — on anything it does not understand.
//!
//! Layout: `ROOT/skills/<dir>/SKILL.md` (+ every other file of the tree as a resource),
//! optional `ROOT/manifests/context-packs/skill-registry@1.json`, and
//! `ROOT/manifests/context-profiles/{lean@1,full@1}.json`. Every file is read through
//! `symlink_metadata` (a symlink, leaf or ancestor, is never followed) with its size
//! bounded before a byte is read. Nothing is executed.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use ledger_schema::codec::MAX_ENTRY_BYTES;
use ledger_schema::events::profile::{
    Blob, BudgetMode, ProfileDefinition, Registry, RegistrySource, SourceRegistryRecorded, SourceResource,
};
use ledger_schema::{Event, codec};
use serde::Deserialize;

use crate::runtime::profile::{SCANNER_VERSION, check_registry, dependency_cycle, safe_relative};
pub use crate::runtime::skill::{
    BINARY_EXTENSIONS, MAX_DEPTH, MAX_DESCRIPTION_CHARS, MAX_DIR_ENTRIES, MAX_FILE_BYTES, MAX_MANIFEST_BYTES,
    MAX_NAME_CHARS, MAX_STORED_FILE_BYTES, MAX_STORED_TOTAL_BYTES, MAX_TREE_BYTES, SkillMetadata,
    carries_manual_only, clean_text, has_dynamic_snippet, holds_secrets, parse_skill,
};
use crate::runtime::skill::{
    STATE_ROOT_IN_TREE, SkillFault, SkillFile, canonical_profile, check_dir_name, check_name, check_names,
    ignored, is_native_flags_file, read_tree,
};

/// Why a scan refused the tree. Nothing was recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScanError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{0}: is a symlink (symlinks are refused anywhere in a source tree)")]
    Symlink(String),
    #[error("{0}: not a regular file or directory")]
    NotRegular(String),
    #[error("{0}: not a directory{1}")]
    NotADirectory(String, &'static str),
    #[error("{path}: {bytes} bytes, over the per-file bound of {MAX_FILE_BYTES}")]
    FileTooLarge { path: String, bytes: u64 },
    #[error("{path}: {bytes} bytes, over the per-manifest bound of {MAX_MANIFEST_BYTES}")]
    ManifestTooLarge { path: String, bytes: u64 },
    #[error("the tree holds over {MAX_TREE_BYTES} bytes")]
    TreeTooLarge,
    #[error("the tree holds over {MAX_DIR_ENTRIES} directory entries")]
    TooManyEntries,
    #[error("{0}: nested deeper than {MAX_DEPTH} directories")]
    TooDeep(String),
    #[error("{0}: not valid UTF-8")]
    NotUtf8(String),
    #[error("{path}: {reason}")]
    Metadata { path: String, reason: String },
    #[error("{0}: missing")]
    Missing(String),
    #[error("duplicate id {0}")]
    DuplicateId(String),
    #[error("unknown id {0}")]
    UnknownId(String),
    #[error("{path}: {reason}")]
    PathEscapes { path: String, reason: String },
    #[error("dependency cycle through {0}")]
    Cycle(String),
    #[error("the registry's ledger entry would be {0} bytes, over the entry bound of {MAX_ENTRY_BYTES}")]
    EntryTooLarge(usize),
    #[error("the registry breaks a rule: {0}")]
    Rule(String),
}

impl ScanError {
    /// An I/O failure (exit 2) rather than a refusal of the tree's content (exit 1).
    pub fn is_io(&self) -> bool {
        matches!(self, ScanError::Io { .. })
    }
}

/// `text` with every character that would split a line or read differently escaped, as
/// every message escapes it ([`crate::runtime::escaped`]: `\n`, `\u{001B}`, ...): an
/// untrusted name, id or path quoted in a message keeps the message on one line and sends
/// no raw escape to a terminal. Idempotent.
pub fn shown(text: &str) -> String {
    crate::runtime::escaped(text)
}

/// A path for a message, escaped by [`shown`], each byte that is not UTF-8 as `\xHH`
/// (outside review 68: they showed as U+FFFD, so two different bad names printed alike).
pub fn disp(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(&shown(chunk.valid()));
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ScanError + '_ {
    move |source| ScanError::Io { path: disp(path), source }
}

fn meta(path: &Path, reason: impl Into<String>) -> ScanError {
    ScanError::Metadata { path: disp(path), reason: shown(&reason.into()) }
}

/// Counts what the scan visits against its bounds.
struct Budget {
    entries: usize,
    bytes: u64,
}

impl Budget {
    fn entry(&mut self) -> Result<(), ScanError> {
        self.entries += 1;
        if self.entries > MAX_DIR_ENTRIES { Err(ScanError::TooManyEntries) } else { Ok(()) }
    }
}

/// `path` must exist as a directory that is no symlink.
fn real_dir(path: &Path) -> Result<(), ScanError> {
    let m = fs::symlink_metadata(path).map_err(io(path))?;
    if m.file_type().is_symlink() {
        return Err(ScanError::Symlink(disp(path)));
    }
    if !m.is_dir() {
        return Err(ScanError::NotADirectory(disp(path), ""));
    }
    Ok(())
}

/// Opens `path` (absolute, normalised) one component at a time from `/`, following no
/// symlink in any of them (`O_NOFOLLOW`; every ancestor opened as a directory), the last
/// with `last` too. What a path check (`symlink_metadata`) saw can be swapped for a symlink
/// before the open: a walk of descriptors cannot be led outside the tree that way (outside
/// review 217 F1: a directory or file swapped for a symlink between the scan's check and
/// its open was followed, and bytes from outside the tree were recorded).
fn open_unfollowed(path: &Path, last: OFlags) -> std::io::Result<OwnedFd> {
    let base = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let mut fd = rustix::fs::open("/", base | OFlags::DIRECTORY, Mode::empty())?;
    let mut parts = path.components().peekable();
    while let Some(part) = parts.next() {
        let name = match part {
            Component::RootDir | Component::CurDir => continue,
            Component::Normal(name) => name,
            Component::ParentDir | Component::Prefix(_) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a normalised absolute path",
                ));
            }
        };
        let flags = if parts.peek().is_some() { base | OFlags::DIRECTORY } else { base | last };
        fd = rustix::fs::openat(&fd, name, flags, Mode::empty())?;
    }
    Ok(fd)
}

/// [`open_unfollowed`]'s failure: a symlink met on the way (`ELOOP`) is the scan's
/// symlink refusal, as when the path check sees it.
/// An ancestor met as a symlink (`ENOTDIR` with `O_DIRECTORY`) is named where it still is one;
/// one swapped back meanwhile reads as the tree changing under the scan.
fn unfollowed(path: &Path) -> impl FnOnce(std::io::Error) -> ScanError + '_ {
    move |e| {
        let code = e.raw_os_error();
        if code != Some(rustix::io::Errno::LOOP.raw_os_error())
            && code != Some(rustix::io::Errno::NOTDIR.raw_os_error())
        {
            return ScanError::Io { path: disp(path), source: e };
        }
        match path.ancestors().find(|a| fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink())) {
            Some(link) => ScanError::Symlink(disp(link)),
            None => meta(path, "changed while it was read (a symlink stood on its path)"),
        }
    }
}

/// The names in directory `dir`, read through a descriptor [`open_unfollowed`] opened
/// (each counted against the entry bound), in no particular order.
fn list_dir(dir: &Path, budget: &mut Budget) -> Result<Vec<String>, ScanError> {
    let fd = open_unfollowed(dir, OFlags::DIRECTORY).map_err(unfollowed(dir))?;
    let entries =
        rustix::fs::Dir::read_from(&fd).map_err(|e| ScanError::Io { path: disp(dir), source: e.into() })?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ScanError::Io { path: disp(dir), source: e.into() })?;
        let raw = entry.file_name().to_bytes();
        if raw == b"." || raw == b".." {
            continue;
        }
        budget.entry()?;
        let name = std::str::from_utf8(raw)
            .map_err(|_| ScanError::NotUtf8(disp(&dir.join(std::ffi::OsStr::from_bytes(raw)))))?;
        names.push(name.to_owned());
    }
    Ok(names)
}

/// Reads a regular, non-symlink file, its size bounded before reading.
fn read_file(path: &Path, budget: &mut Budget) -> Result<Vec<u8>, ScanError> {
    let m = fs::symlink_metadata(path).map_err(io(path))?;
    read_checked(path, &m, budget)
}

/// [`read_file`] of the file the path check `m` saw, and no other.
fn read_checked(path: &Path, m: &fs::Metadata, budget: &mut Budget) -> Result<Vec<u8>, ScanError> {
    if m.file_type().is_symlink() {
        return Err(ScanError::Symlink(disp(path)));
    }
    if !m.is_file() {
        return Err(ScanError::NotRegular(disp(path)));
    }
    if m.len() > MAX_FILE_BYTES {
        return Err(ScanError::FileTooLarge { path: disp(path), bytes: m.len() });
    }
    budget.bytes = budget.bytes.saturating_add(m.len());
    if budget.bytes > MAX_TREE_BYTES {
        return Err(ScanError::TreeTooLarge);
    }
    // Opened without following a symlink anywhere on its path, and never waiting (a FIFO
    // put in its place would block the scan while it holds the writer's lock: outside
    // review 217 F1); then it must be the very file the check saw.
    let file = fs::File::from(open_unfollowed(path, OFlags::NONBLOCK).map_err(unfollowed(path))?);
    let opened = file.metadata().map_err(io(path))?;
    if !opened.is_file() {
        return Err(ScanError::NotRegular(disp(path)));
    }
    if (opened.dev(), opened.ino(), opened.len()) != (m.dev(), m.ino(), m.len()) {
        return Err(meta(path, "changed while it was read"));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(m.len()).unwrap_or(0));
    // Read at most one byte past the bound: a file that grew meanwhile is refused too.
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(io(path))?;
    if bytes.len() as u64 != m.len() {
        return Err(meta(path, "changed while it was read"));
    }
    Ok(bytes)
}

/// Every ancestor of `root` (as given, made absolute) must be no symlink.
fn no_symlink_ancestors(root: &Path) -> Result<PathBuf, ScanError> {
    let abs = if root.is_absolute() {
        root.to_path_buf()
    } else {
        std::env::current_dir().map_err(io(root))?.join(root)
    };
    let mut walked = PathBuf::new();
    for part in abs.components() {
        match part {
            Component::ParentDir => return Err(meta(root, "the root path holds `..`")),
            Component::CurDir => continue,
            other => walked.push(other.as_os_str()),
        }
        let m = fs::symlink_metadata(&walked).map_err(io(&walked))?;
        if m.file_type().is_symlink() {
            return Err(ScanError::Symlink(disp(&walked)));
        }
    }
    Ok(walked)
}

/// One file of a skill's tree, read.
struct RawResource {
    path: String,
    bytes: Vec<u8>,
    executable: bool,
}

fn walk(
    dir: &Path,
    rel: &str,
    depth: usize,
    budget: &mut Budget,
    out: &mut Vec<RawResource>,
) -> Result<(), ScanError> {
    if depth > MAX_DEPTH {
        return Err(ScanError::TooDeep(disp(dir)));
    }
    let mut names = list_dir(dir, budget)?;
    names.sort();
    // Two names of one folder that differ only in case are one file on a case-insensitive
    // filesystem (macOS, Windows — both Codex platforms): a generation written there would
    // collide, or a loader read the other file (outside review 68: `notes.md` beside
    // `NOTES.md`, `skill.md` beside `SKILL.md`).
    // Compared in NFC too: macOS also holds one file for an NFC and an NFD spelling (outside
    // review 69).
    let mut folded = BTreeMap::new();
    for name in names.iter().filter(|n| !ignored(n)) {
        use unicode_normalization::UnicodeNormalization;
        let key: String = name.nfc().flat_map(char::to_lowercase).collect();
        if let Some(other) = folded.insert(key, name) {
            return Err(meta(
                &dir.join(name),
                format!(
                    "differs from {:?} in the same folder only in case or Unicode normalization: a case-insensitive filesystem (macOS, Windows) holds one file for both",
                    shown(other)
                ),
            ));
        }
    }
    for name in names {
        if ignored(&name) {
            continue;
        }
        let path = dir.join(&name);
        let child = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        if !safe_relative(&child) {
            return Err(ScanError::PathEscapes {
                path: disp(&path),
                reason: "not a plain relative name".into(),
            });
        }
        let m = fs::symlink_metadata(&path).map_err(io(&path))?;
        if m.file_type().is_symlink() {
            return Err(ScanError::Symlink(disp(&path)));
        } else if m.is_dir() {
            walk(&path, &child, depth + 1, budget, out)?;
        } else if m.is_file() {
            let bytes = read_file(&path, budget)?;
            let executable = std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0;
            out.push(RawResource { path: child, bytes, executable });
        } else {
            return Err(ScanError::NotRegular(disp(&path)));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PackManifest {
    version: u32,
    skills: Vec<PackSkill>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PackSkill {
    id: String,
    #[serde(default)]
    dependencies: Vec<String>,
    #[serde(default)]
    required_resources: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ProfileFile {
    id: String,
    #[serde(default)]
    description: String,
    eager: serde_json::Value,
    #[serde(default)]
    required: Vec<String>,
    budget_tokens: u32,
    budget_mode: BudgetMode,
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path, budget: &mut Budget) -> Result<T, ScanError> {
    let m = fs::symlink_metadata(path).map_err(io(path))?;
    if m.len() > MAX_MANIFEST_BYTES {
        return Err(ScanError::ManifestTooLarge { path: disp(path), bytes: m.len() });
    }
    let bytes = read_file(path, budget)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| ScanError::NotUtf8(disp(path)))?;
    // What a manifest says is recorded too — a profile's description, a pack's fields — so
    // it holds no secret either (outside review 160 F4: a token in `lean@1.json`'s
    // description went into the append-only journal).
    // Read as written and as decoded: JSON's escapes (`\/`, `\u0067`) spell a secret the
    // bytes do not show, and the decoded text is what is recorded (outside review 162 F5).
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| meta(path, e.to_string()))?;
    let decoded = serde_json::to_string(&value).unwrap_or_default();
    if let Some(what) =
        super::secrets::secret_in(&bytes).or_else(|| super::secrets::secret_in(decoded.as_bytes()))
    {
        return Err(meta(
            path,
            format!(
                "holds a secret: {what} (an append-only ledger could never drop it; docs/profiles.md lists the \
                 forms read): remove it"
            ),
        ));
    }
    serde_json::from_str(text).map_err(|e| meta(path, e.to_string()))
}

/// Sorted and unique, or the duplicate.
fn sorted_unique(values: Vec<String>) -> Result<Vec<String>, String> {
    let mut set = BTreeSet::new();
    for v in values {
        if !set.insert(v.clone()) {
            return Err(v);
        }
    }
    Ok(set.into_iter().collect())
}

/// Whether `root/parts...` exists, checking every component below `root` — ancestors and
/// leaf — with `symlink_metadata`: a symlink anywhere refuses the scan (never followed);
/// a missing component means the path does not exist.
fn present_inside(root: &Path, parts: &[&str]) -> Result<bool, ScanError> {
    let mut walked = root.to_path_buf();
    for part in parts {
        walked.push(part);
        match fs::symlink_metadata(&walked) {
            Ok(m) if m.file_type().is_symlink() => return Err(ScanError::Symlink(disp(&walked))),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(ScanError::Io { path: disp(&walked), source: e }),
        }
    }
    Ok(true)
}

fn exists(path: &Path) -> Result<bool, ScanError> {
    match fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(ScanError::Io { path: disp(path), source: e }),
    }
}

/// Resources a rescan stores first, as (source id, path, digest): a tier of
/// [`scan_keeping`].
pub type Kept = std::collections::BTreeSet<(String, String, ledger_schema::Digest)>;

/// Scans `root` into a registry snapshot (checked by the same rules `apply` enforces).
pub fn scan(root: &Path) -> Result<SourceRegistryRecorded, ScanError> {
    scan_keeping(root, &[], 0)
}

/// [`scan`], storing first the bytes of the resources `keep` names (source id, path), tier
/// by tier — what the task selections of open workflows' Attempts loaded, what the
/// configured generation installs, then what the revision before it installed — with every
/// native flags file after the first `flags_after` tiers, then the rest in
/// (id, path) order, within the entry's bounds: a rescan that adds sources does not push
/// out the bytes an in-flight or finished Attempt stands on (outside review 52: an Attempt
/// whose skill was unchanged was marked CONTEXT_CHANGED, its result ignored, because new
/// skills sorting before it took the stored bytes), nor those of the configuration a
/// rollback returns to (outside review 175 F4: stored by digest only, it could never be
/// set again).
pub fn scan_keeping(
    root: &Path,
    keep: &[Kept],
    flags_after: usize,
) -> Result<SourceRegistryRecorded, ScanError> {
    let root = no_symlink_ancestors(root)?;
    real_dir(&root)?;
    // Recorded, so a later command can scan the tree again for drift (outside review 114).
    let source_root = root
        .to_str()
        .filter(|r| r.len() <= crate::runtime::profile::MAX_ROOT_BYTES)
        .filter(|r| crate::runtime::profile::root_text(r).is_ok())
        .map(str::to_owned)
        .ok_or_else(|| {
            meta(
                &root,
                "the source root must be an absolute UTF-8 path of visible characters, other than `/`, at most 4096 bytes",
            )
        })?;
    let mut budget = Budget { entries: 0, bytes: 0 };
    let skills_dir = root.join("skills");
    if !exists(&skills_dir)? {
        return Err(ScanError::Missing(disp(&skills_dir)));
    }
    real_dir(&skills_dir)?;
    let mut dirs = list_dir(&skills_dir, &mut budget)?;
    dirs.sort();
    for name in &dirs {
        // A skill's folder name is its recorded id (outside review 162 F5: a token as one).
        if let Some(what) = super::secrets::secret_in(name.as_bytes()) {
            return Err(meta(&skills_dir.join(name), format!("its name holds a secret: {what}: rename it")));
        }
    }
    let mut sources: Vec<RegistrySource> = Vec::new();
    for dir in dirs {
        if ignored(&dir) {
            continue;
        }
        let path = skills_dir.join(&dir);
        let m = fs::symlink_metadata(&path).map_err(io(&path))?;
        if m.file_type().is_symlink() {
            return Err(ScanError::Symlink(disp(&path)));
        }
        // A file here (a README, say) is not a skill (outside review 91: it was called
        // "not a regular file or directory").
        if !m.is_dir() {
            return Err(ScanError::NotADirectory(disp(&path), " (skills/ holds only skill directories)"));
        }
        check_dir_name(&dir).map_err(|why| meta(&path, why))?;
        let mut raw = Vec::new();
        walk(&path, "", 0, &mut budget, &mut raw)?;
        // In the order the registry records them, path by path as text (outside review 136
        // F3: the walk lists a folder's files before a sibling such as `scripts.md` beside
        // `scripts/`, and the registry refused the scan as "not sorted").
        raw.sort_by(|a, b| a.path.cmp(&b.path));
        let files: Vec<SkillFile<'_>> = raw
            .iter()
            .map(|r| SkillFile { path: &r.path, len: r.bytes.len() as u64, bytes: Some(&r.bytes) })
            .collect();
        // The tree's rules, as `apply` holds a recorded registry to them.
        let reading = read_tree(&files).map_err(|fault| match fault {
            SkillFault::Refused { at, reason } => meta(&path.join(at), reason),
            SkillFault::Missing(at) => ScanError::Missing(disp(&path.join(at))),
            SkillFault::NotUtf8(at) => ScanError::NotUtf8(disp(&path.join(at))),
        })?;
        drop(files);
        let md = reading.metadata.ok_or_else(|| ScanError::Missing(disp(&path.join("SKILL.md"))))?;
        let id = format!("skill:{dir}");
        let name = md.name.unwrap_or_else(|| dir.clone());
        check_name(&name).map_err(|why| meta(&path.join("SKILL.md"), why))?;
        let resources = raw
            .into_iter()
            .map(|r| SourceResource {
                bytes: r.bytes.len() as u64,
                digest: SourceResource::digest_of(&r.bytes),
                path: r.path,
                content: Some(Blob(r.bytes)),
                executable: r.executable,
            })
            .collect();
        let mut source = RegistrySource {
            id,
            name,
            resources,
            manual_only: reading.manual_only,
            description: md.description,
            dependencies: Vec::new(),
            authority_keys: reading.authority_keys,
            content_digest: ledger_schema::Digest::ZERO,
            dynamic_content: md.dynamic_content,
            required_resources: Vec::new(),
        };
        source.content_digest = source.computed_content_digest();
        sources.push(source);
    }
    check_names(&sources).map_err(ScanError::DuplicateId)?;

    // The two manifest folders hold only the files this scanner reads (outside review 79: a
    // `skill-registry@2.json` was ignored without a word, and its skills scanned as if they
    // had no dependencies or required resources).
    for (folder, known) in [
        ("context-packs", &["skill-registry@1.json"][..]),
        ("context-profiles", &["full@1.json", "lean@1.json"][..]),
    ] {
        if !present_inside(&root, &["manifests", folder])? {
            continue;
        }
        let dir = root.join("manifests").join(folder);
        // Listed through a descriptor walk too (outside review 220 F4: listed by path, a
        // folder swapped for a symlink mid-scan was listed instead).
        let mut names = list_dir(&dir, &mut budget)?;
        names.sort();
        for name in names {
            if !ignored(&name) && !known.contains(&name.as_str()) {
                let path = dir.join(&name);
                if fs::symlink_metadata(path.join(super::generation::OWNER_FILE)).is_ok() {
                    return Err(meta(&path, STATE_ROOT_IN_TREE));
                }
                return Err(meta(
                    &dir.join(&name),
                    format!(
                        "not a file this scanner reads (it reads {} here): remove or rename it",
                        known.join(", ")
                    ),
                ));
            }
        }
    }

    // Dependencies and required resources.
    let pack = root.join("manifests").join("context-packs").join("skill-registry@1.json");
    if present_inside(&root, &["manifests", "context-packs", "skill-registry@1.json"])? {
        let manifest: PackManifest = read_json(&pack, &mut budget)?;
        if manifest.version != 1 {
            return Err(meta(&pack, format!("version {} (this scanner reads 1)", manifest.version)));
        }
        let mut seen = BTreeSet::new();
        for skill in manifest.skills {
            if !seen.insert(skill.id.clone()) {
                return Err(ScanError::DuplicateId(shown(&skill.id)));
            }
            let known: BTreeSet<String> = sources.iter().map(|s| s.id.clone()).collect();
            let source = sources
                .iter_mut()
                .find(|s| s.id == skill.id)
                .ok_or_else(|| ScanError::UnknownId(shown(&skill.id)))?;
            for dep in &skill.dependencies {
                if !known.contains(dep) {
                    return Err(ScanError::UnknownId(format!(
                        "{} (a dependency of {})",
                        shown(dep),
                        shown(&skill.id)
                    )));
                }
            }
            source.dependencies = sorted_unique(skill.dependencies)
                .map_err(|d| meta(&pack, format!("{} lists dependency {d} twice", skill.id)))?;
            let dir = source.id.strip_prefix("skill:").unwrap_or("");
            let prefix = format!("skills/{dir}/");
            let mut required = Vec::new();
            for path in skill.required_resources {
                // Outside review 85: a path inside the tree but not normalised (`//`, `./`)
                // was refused as lying outside it.
                let inside = path.strip_prefix(&prefix).filter(|rest| safe_relative(rest)).ok_or_else(|| {
                    let escapes = path.split(['/', '\\']).any(|part| part == "..");
                    let why = match path.strip_prefix(&prefix) {
                        Some(_) if !escapes => format!(
                            "a required resource of {} must be a normalised path (no empty or `.` part, no backslash)",
                            shown(&skill.id)
                        ),
                        _ => format!(
                            "a required resource of {} must lie inside {}",
                            shown(&skill.id),
                            shown(&prefix)
                        ),
                    };
                    ScanError::PathEscapes { path: shown(&path), reason: why }
                })?;
                if !source.resources.iter().any(|r| r.path == inside) {
                    // A file the scanner never records (outside review 68: it was "missing").
                    if inside.split('/').any(ignored) {
                        return Err(meta(
                            &pack,
                            format!(
                                "{} lists required resource {}, a file the scanner ignores ({}): it is never delivered",
                                shown(&skill.id),
                                shown(&path),
                                "__pycache__, .gitignore, .DS_Store, .git, Thumbs.db, *.pyc, *.pyo"
                            ),
                        ));
                    }
                    return Err(ScanError::Missing(format!(
                        "{} (a required resource of {})",
                        shown(&path),
                        shown(&skill.id)
                    )));
                }
                required.push(inside.to_owned());
            }
            source.required_resources = sorted_unique(required)
                .map_err(|p| meta(&pack, format!("{} lists required resource {p} twice", skill.id)))?;
        }
        if let Some(cycle) = dependency_cycle(&sources) {
            return Err(ScanError::Cycle(shown(&cycle)));
        }
    }

    // Profiles.
    let profiles_dir = root.join("manifests").join("context-profiles");
    let mut profiles = Vec::new();
    for id in ["full@1", "lean@1"] {
        let file_name = format!("{id}.json");
        let path = profiles_dir.join(&file_name);
        if !present_inside(&root, &["manifests", "context-profiles", &file_name])? {
            return Err(ScanError::Missing(disp(&path)));
        }
        let file: ProfileFile = read_json(&path, &mut budget)?;
        if file.id != id {
            return Err(meta(&path, format!("id {:?} in {id}.json", file.id)));
        }
        let description = clean_text("description", &file.description).map_err(|r| meta(&path, r))?;
        let (eager, eager_all) = match file.eager {
            serde_json::Value::String(s) if s == "all" => (Vec::new(), true),
            serde_json::Value::Array(items) => {
                let mut ids = Vec::with_capacity(items.len());
                for item in items {
                    match item {
                        serde_json::Value::String(s) => ids.push(s),
                        _ => return Err(meta(&path, "eager lists source ids")),
                    }
                }
                (ids, false)
            }
            _ => return Err(meta(&path, "eager is \"all\" or a list of source ids")),
        };
        canonical_profile(id, eager_all, file.budget_mode, file.budget_tokens)
            .map_err(|why| meta(&path, why))?;
        for sid in eager.iter().chain(&file.required) {
            if !sources.iter().any(|s| &s.id == sid) {
                return Err(ScanError::UnknownId(format!("{} (in {id})", shown(sid))));
            }
        }
        let eager = sorted_unique(eager)
            .map_err(|d| ScanError::DuplicateId(format!("{} (eager in {id})", shown(&d))))?;
        let required = sorted_unique(file.required)
            .map_err(|d| ScanError::DuplicateId(format!("{} (required in {id})", shown(&d))))?;
        profiles.push(ProfileDefinition {
            id: file.id,
            eager,
            eager_all,
            required,
            budget_mode: file.budget_mode,
            description,
            budget_tokens: file.budget_tokens,
        });
    }

    // Store bytes within the entry's bounds, in passes, each in (id, path) order: those
    // `keep` names, every native flags file among them (below); then every resource of a source a profile names eager or required (a
    // base); then every SKILL.md; then the rest — so a large routed-only skill sorting first
    // cannot push a base's bytes, or any skill's instructions, out of the entry (outside
    // review 61: `aaa-bigdocs` made the Lean base not loadable, and `set` and every
    // `select` were refused).
    let base: BTreeSet<&str> =
        profiles.iter().flat_map(|p| p.eager.iter().chain(&p.required)).map(String::as_str).collect();
    // Each skill's native flags file after the first `flags_after` tiers of `keep`, before
    // anything else: always stored (refused below where it cannot be), so replay reads the
    // flags it sets (outside review 197 F1) — after what open Attempts loaded, which an
    // unrelated skill's large flags file must not push out (outside review 206 F1: a
    // dispatched Attempt was marked CONTEXT_CHANGED over unchanged bytes), and before what
    // the configured and previous generations install, which a plan re-derived over the new
    // snapshot can then leave (outside reviews 207 F1, 210 F2: stored first, they refused an
    // honest tree, and no command led out).
    let flags_pass = flags_after.min(keep.len());
    let tiers = keep.len() + 1;
    // A tier keeps a resource only with the bytes it was kept for: changed bytes are stood on
    // by no one (outside review 210 F1, P1: the changed files an earlier Attempt had loaded
    // went first and pushed an open Attempt's unchanged bytes out).
    let pass_of = |id: &str, path: &str, digest: ledger_schema::Digest| {
        let named = (id.to_owned(), path.to_owned(), digest);
        if let Some(tier) = keep.iter().position(|k| k.contains(&named)) {
            if tier < flags_pass { tier } else { tier + 1 }
        } else if is_native_flags_file(path) {
            flags_pass
        } else if base.contains(id) {
            tiers
        } else if path == "SKILL.md" {
            tiers + 1
        } else {
            tiers + 2
        }
    };
    let mut stored: u64 = 0;
    for pass in 0..tiers + 3 {
        for source in &mut sources {
            for r in &mut source.resources {
                if pass_of(&source.id, &r.path, r.digest) != pass {
                    continue;
                }
                if r.bytes > MAX_STORED_FILE_BYTES || stored.saturating_add(r.bytes) > MAX_STORED_TOTAL_BYTES
                {
                    r.content = None;
                } else {
                    stored += r.bytes;
                }
            }
        }
    }

    // What the first `flags_after` tiers keep — the bytes open Attempts loaded — is stored
    // whole, or the tree is refused: pushing any of it out would mark an Attempt whose bytes
    // did not change CONTEXT_CHANGED (outside review 214 F1: files that changed and came
    // back took the room of a file another Attempt loaded, unchanged).
    let must_keep = |id: &str, r: &ledger_schema::events::profile::SourceResource| {
        let named = (id.to_owned(), r.path.clone(), r.digest);
        keep.iter().take(flags_pass).any(|k| k.contains(&named))
    };
    if let Some((source, r)) = sources
        .iter()
        .find_map(|s| s.resources.iter().find(|r| r.content.is_none() && must_keep(&s.id, r)).map(|r| (s, r)))
    {
        let dir = source.id.strip_prefix("skill:").unwrap_or("");
        return Err(meta(
            &skills_dir.join(dir).join(&r.path),
            format!(
                "{} bytes an open workflow's Attempt loaded do not fit in the registry's stored bytes ({MAX_STORED_TOTAL_BYTES} \
                 in all) beside the other bytes open Attempts loaded: finish or close some of those workflows, or \
                 make the tree smaller",
                r.bytes
            ),
        ));
    }
    if let Some((source, r)) = sources.iter().find_map(|s| {
        s.resources.iter().find(|r| is_native_flags_file(&r.path) && r.content.is_none()).map(|r| (s, r))
    }) {
        let dir = source.id.strip_prefix("skill:").unwrap_or("");
        return Err(meta(
            &skills_dir.join(dir).join(&r.path),
            format!(
                "{} bytes: a native flags file is always stored in the registry (at most {MAX_STORED_FILE_BYTES} bytes, \
                 {MAX_STORED_TOTAL_BYTES} stored in all, after the bytes open workflows' Attempts loaded), so its \
                 flags can be read again: make it smaller, or close those workflows",
                r.bytes
            ),
        ));
    }
    let registry = Registry { scanner: SCANNER_VERSION.to_owned(), sources, profiles };
    check_registry(&registry).map_err(|v| ScanError::Rule(shown(&v.to_string())))?;
    let recorded = SourceRegistryRecorded {
        registry_digest: registry.digest(),
        registry,
        source_root: Some(source_root),
    };
    // The entry it is sealed in, at its largest (the widest seq and time): within the bound
    // (outside review 208 F2: a 4 KiB margin refused entries that fit, in a message that
    // named a size under the bound).
    let entry = ledger_schema::Entry {
        v: ledger_schema::FORMAT_VERSION,
        seq: u64::MAX,
        prev: ledger_schema::Digest::ZERO,
        event: Event::SourceRegistryRecorded(Box::new(recorded)),
        ledger: ledger_schema::Id::default(),
        time_ms: u64::MAX,
    };
    let size = codec::encode(&entry).len();
    if size > MAX_ENTRY_BYTES {
        return Err(ScanError::EntryTooLarge(size));
    }
    match entry.event {
        Event::SourceRegistryRecorded(r) => Ok(*r),
        _ => Err(ScanError::Rule("internal: not a registry event".into())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic

    use super::{Budget, ScanError, list_dir, read_checked};

    /// The scan reads the file its path check saw, or refuses: swapped after the check for a
    /// symlink to a same-size file outside the tree, for another same-size file, for
    /// a FIFO (which must not block), or with an ancestor directory swapped for a symlink —
    /// never the outside bytes (outside review 217 F1: the open followed a symlink put
    /// there after the check, and recorded bytes from outside the tree).
    #[test]
    fn a_file_swapped_after_its_check_is_never_read_through_a_symlink() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let tree = root.join("tree");
        let dir = tree.join("skill");
        std::fs::create_dir_all(&dir).unwrap();
        let outside = root.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("SKILL.md"), b"OUTSIDE!").unwrap();
        let file = dir.join("SKILL.md");
        let budget = || Budget { entries: 0, bytes: 0 };
        let fresh = || {
            let _ = std::fs::remove_file(&file);
            std::fs::write(&file, b"inside!!").unwrap();
            std::fs::symlink_metadata(&file).unwrap()
        };
        // Unchanged: read.
        let m = fresh();
        assert_eq!(read_checked(&file, &m, &mut budget()).unwrap(), b"inside!!");
        // The leaf swapped for a symlink.
        let m = fresh();
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(outside.join("SKILL.md"), &file).unwrap();
        assert!(matches!(read_checked(&file, &m, &mut budget()), Err(ScanError::Symlink(_))));
        // The leaf replaced by another file of the same size (renamed over it: another inode).
        let m = fresh();
        std::fs::write(outside.join("copy"), b"OUTSIDE!").unwrap();
        std::fs::rename(outside.join("copy"), &file).unwrap();
        let err = read_checked(&file, &m, &mut budget()).unwrap_err().to_string();
        assert!(err.contains("changed while it was read"), "{err}");
        // A FIFO: refused at once, never waited on.
        let m = fresh();
        std::fs::remove_file(&file).unwrap();
        assert!(std::process::Command::new("mkfifo").arg(&file).status().unwrap().success());
        assert!(matches!(read_checked(&file, &m, &mut budget()), Err(ScanError::NotRegular(_))));
        // The ancestor directory swapped for a symlink to a directory outside the tree.
        let m = fresh();
        std::fs::rename(&dir, tree.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, &dir).unwrap();
        let err = read_checked(&file, &m, &mut budget()).unwrap_err();
        assert!(matches!(&err, ScanError::Symlink(at) if at.ends_with("tree/skill")), "{err}");
        // … and its listing is refused the same way.
        assert!(matches!(list_dir(&dir, &mut budget()), Err(ScanError::Symlink(_))));
        std::fs::remove_file(&dir).unwrap();
        std::fs::rename(tree.join("moved"), &dir).unwrap();
        let mut names = list_dir(&dir, &mut budget()).unwrap();
        names.sort();
        assert_eq!(names, ["SKILL.md"]);
    }
}
