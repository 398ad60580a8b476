//! The `ledger` command line. Every error is one line on stderr; exit codes are
//! 0 = verified / ok, 1 = verification failed, 2 = usage or I/O error.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ledger_schema::{Id, SealedEntry};
use serde_json::json;

use crate::store::{self, Checkpoint, OpenError, ReadError, Store};

/// `ledger demo`: a child of the CLI (it reports through the CLI's `Failure`).
#[path = "demo.rs"]
mod demo;

/// Exit code: success (verified, or the command did what it said).
pub const EXIT_OK: u8 = 0;
/// Exit code: the ledger (or a checkpoint) failed verification.
pub const EXIT_VERIFY_FAILED: u8 = 1;
/// Exit code: usage error or I/O error.
pub const EXIT_USAGE_OR_IO: u8 = 2;

#[derive(Parser, Debug)]
#[command(
    name = "ledger",
    version,
    about = "closure-ledger: a hash-chained, canonically encoded ledger of AI coding-agent work"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create a new ledger directory holding its genesis entry.
    Init {
        dir: PathBuf,
        /// Human label recorded in the genesis entry.
        #[arg(long, default_value = "closure-ledger")]
        label: String,
        #[arg(long)]
        json: bool,
    },
    /// Verify both copies (journal and sled) without writing the journal (sled's own open may rewrite its files); optionally against a checkpoint.
    Verify {
        dir: PathBuf,
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Make both copies whole: restore journal records that sled still holds intact, cut a
    /// torn tail, rebuild sled from the journal. Nothing is deleted: cut bytes go to cut/,
    /// the old sled/ to sled.broken-N. Refuses, changing nothing, where acknowledged records
    /// cannot be restored or the copies disagree and no evidence decides.
    Recover {
        dir: PathBuf,
        /// Cut the journal after this seq (a frame boundary), moving the rest aside: the
        /// operator's decision that the records after it were never acknowledged.
        #[arg(long, value_name = "SEQ", allow_negative_numbers = true, value_parser = decimal_u64)]
        truncate_after: Option<u64>,
        /// When the copies hold different intact newest records: which to keep.
        #[arg(long, value_enum, conflicts_with = "truncate_after")]
        prefer: Option<Copy>,
        /// A checkpoint that decides between disagreeing copies and must hold afterwards.
        #[arg(long)]
        checkpoint: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Print a checkpoint `{ledgerId, seq, hash}` of the head (or of --seq) as JSON.
    Checkpoint {
        dir: PathBuf,
        #[arg(long, allow_negative_numbers = true, value_parser = decimal_u64)]
        seq: Option<u64>,
    },
    /// Show one entry (SEQ) or a range (A..B, inclusive).
    Show {
        dir: PathBuf,
        #[arg(allow_negative_numbers = true)]
        range: String,
        #[arg(long)]
        json: bool,
    },
    /// Export every entry as JSON lines.
    Export { dir: PathBuf },
    /// Submit JSON commands (one per line) from FILE, or stdin when FILE is absent or `-`.
    Submit { dir: PathBuf, file: Option<PathBuf> },
    /// The head (seq, hash), the state digest and counts of goals, workflows and attempts
    /// by state: the journal folded by the same step as reopen and replay. Read-only;
    /// never waits for a writer.
    Status {
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Replay every entry: both copies (journal and sled, compared frame by frame), chain,
    /// rules and manifest proofs; report what was verified and which copies.
    Replay {
        dir: PathBuf,
        /// Fold the state only up to this seq (every byte is still verified).
        #[arg(long, allow_negative_numbers = true, value_parser = decimal_u64)]
        to: Option<u64>,
        /// Verify the journal alone (the report says sled was not verified).
        #[arg(long)]
        journal_only: bool,
        #[arg(long)]
        json: bool,
    },
    /// Re-render, byte for byte, what an Attempt's worker was given, and check it against
    /// the recorded manifest.
    Compile {
        dir: PathBuf,
        #[arg(long)]
        attempt: String,
        /// Worker-facing Markdown (the default).
        #[arg(long, group = "format")]
        markdown: bool,
        /// The canonical package bytes (the dispatch payload).
        #[arg(long, group = "format")]
        cbor: bool,
        #[arg(long, group = "format")]
        json: bool,
    },
    /// The scripted lifecycle on a fresh ledger (in DIR, or a temp dir), then a replay audit.
    Demo { dir: Option<PathBuf> },
    /// Source registries (seed 003): scan a source tree into the ledger.
    #[command(subcommand)]
    Sources(crate::cli_profiles::SourcesCommand),
    /// Context profiles (seed 003): preview plans; set, inspect, roll back and recover
    /// the managed profile and its generations.
    #[command(subcommand)]
    Profile(crate::cli_profiles::ProfileCommand),
    /// Task selection (seed 003): route a task over the configured profile and record the
    /// decision (explicit, reused, proposed, directive or ranked; or pending with a shortlist).
    Select(crate::cli_select::SelectArgs),
}

/// A copy of the ledger, as an operator names it.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Copy {
    Journal,
    Sled,
}

/// A failure to report: its one-line message and exit code.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Failure {
        let code = if e.is_verification_failure() { EXIT_VERIFY_FAILED } else { EXIT_USAGE_OR_IO };
        Failure { code, message: e.to_string() }
    }
}

impl From<ReadError> for Failure {
    fn from(e: ReadError) -> Failure {
        let code = match e {
            ReadError::Corrupt { .. } => EXIT_VERIFY_FAILED,
            _ => EXIT_USAGE_OR_IO,
        };
        Failure { code, message: e.to_string() }
    }
}

fn usage(message: impl Into<String>) -> Failure {
    Failure { code: EXIT_USAGE_OR_IO, message: message.into() }
}

/// Entry point of the `ledger` binary.
pub fn main() -> ExitCode {
    // A panic is a bug of ours; never show a backtrace to a user, just one line.
    // A panic inside a guarded call into sled is caught and reported as sled damage
    // (`store::inside_sled`): not ours to announce.
    std::panic::set_hook(Box::new(|info| {
        if !crate::store::inside_sled() {
            eprintln!("ledger: internal error: {info}");
        }
    }));
    let mut out = std::io::stdout().lock();
    // stderr is not held locked: a panic on a helper thread writes its line through the
    // hook above, which would otherwise wait for this thread's lock forever (outside
    // review 50: verify, replay and submit hung when sled's reader thread panicked).
    let mut err = std::io::stderr();
    ExitCode::from(run_args(std::env::args_os(), &mut out, &mut err))
}

/// Runs the CLI on `args` (the first is the program name), writing the report to `out`
/// and any error, as one line, to `err`. Returns the exit code.
pub fn run_args<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version: what was asked for, on stdout.
            let text = e.render().to_string();
            let _ = write!(out, "{text}{}", if text.ends_with('\n') { "" } else { "\n" });
            return EXIT_OK;
        }
        Err(e) => {
            let _ = writeln!(err, "ledger: {}", one_line(&usage_error_line(&e, &args)));
            return EXIT_USAGE_OR_IO;
        }
    };
    // sled's last sync at a store's close can panic inside sled (its `Log::drop`): the
    // command's entries are committed by then (the journal is the commit point), so it is an
    // I/O error of sled's copy, said as such (outside review 212 F4: exit 101, two lines).
    let ran =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(cli.command, &mut *out, &mut *err)));
    let ran = match ran {
        Ok(ran) => ran,
        Err(panic) => match crate::store::sled_close_failed() {
            Some(failed) => Err(Failure {
                code: EXIT_USAGE_OR_IO,
                // (Outside review 213 F1: a `submit` stops at its first line with no receipt;
                // 214 F3: the words are the same for every command, which may have committed
                // its entry; 219 F5: the seqs this command committed, which its store knows.)
                message: format!(
                    "the command stopped: sled's copy could not be synced (an I/O error) — whatever the journal \
                     committed stands, {}, and the next open restores sled from the journal",
                    close_committed(failed.committed)
                ),
            }),
            None => std::panic::resume_unwind(panic),
        },
    };
    // The head mark could not be written (a full disk, an I/O error): what was committed
    // stands, but the third witness trails it — said, not hidden (outside review 227 F4).
    if let Some(why) = crate::store::head_mark_write_failed() {
        let _ = out.flush();
        let _ = writeln!(
            err,
            "ledger: note: head.mark could not be written ({}): the head it names trails what is committed, so a \
             sled that will not open later cannot be checked against it until a writer writes it again",
            one_line(&why)
        );
    }
    // A head mark there but not whole was set aside as no evidence: said, since the check
    // it stands for is off until a writer writes it again (outside review 257 F2).
    if let Some(why) = crate::store::head_mark_set_aside() {
        let _ = out.flush();
        let _ = writeln!(
            err,
            "ledger: note: head.mark is not whole ({}): set aside as no evidence — a journal that lost its end \
             cannot be checked against it until a writer writes it again (docs/format.md, head.mark)",
            one_line(&why)
        );
    }
    match ran {
        Ok(()) => EXIT_OK,
        Err(f) => {
            let _ = out.flush();
            let _ = writeln!(err, "ledger: {}", one_line(&f.message));
            f.code
        }
    }
}

/// What a store whose sled failed its last sync had committed, for the one-line message.
fn close_committed(committed: Option<crate::store::Committed>) -> String {
    let Some(c) = committed else {
        return "this command's own entry included if it reached its commit (`ledger status` shows the head; the \
                same command again is answered as a duplicate if it did)"
            .to_owned();
    };
    let first = c.opened_seq.map_or(0, |o| o.saturating_add(1));
    match c.head_seq.checked_sub(first) {
        None => format!("this command committed no entry (the head is seq {})", c.head_seq),
        Some(0) => format!(
            "this command's entry included: it committed seq {} (the same command again is answered as a \
             duplicate)",
            c.head_seq
        ),
        Some(_) => format!(
            "this command's entries included: it committed seqs {first} to {} (a `submit` stopped after its last \
             printed receipt)",
            c.head_seq
        ),
    }
}

/// A path as one line a terminal shows as written (a line break or control character in a
/// ledger's path escaped, as in errors: outside review 190 F5).
/// A byte that is not UTF-8 is written `\xHH` (outside review 198 F4: shown as U+FFFD, two
/// different names printed alike, and a path printed so named no directory).
fn shown(path: impl AsRef<Path>) -> String {
    crate::profiles::scan::disp(path.as_ref())
}

/// An error message as one line a terminal shows as written ([`crate::runtime::escaped`]).
fn one_line(message: &str) -> String {
    crate::runtime::escaped(message)
}

/// Seed 003's `profile` commands this build does not have (docs/profiles.md, "Not yet").
const NOT_BUILT: [&str; 6] =
    ["run", "prepare-native", "native-status", "start", "native-rollback", "native-recover"];

/// A usage error as one line: clap's message (without its `error: ` prefix, tips and
/// help) and the usage it names, as a hint. A bare `ledger` (or `ledger profile`, …) says
/// which commands exist there (outside review 83: `ledger profile` listed the top level's).
fn usage_error_line(e: &clap::Error, args: &[std::ffi::OsString]) -> String {
    use clap::CommandFactory;
    // The deepest command the words name (`ledger profile set`), whose help a hint names.
    let mut command = Cli::command();
    let mut path = vec!["ledger".to_owned()];
    for word in args.iter().skip(1) {
        let Some(sub) = word.to_str().and_then(|w| command.find_subcommand(w)).cloned() else { break };
        path.push(sub.get_name().to_owned());
        command = sub;
    }
    let at = path.join(" ");
    // The seed's commands this build does not have say so (outside review 87: "unrecognized
    // subcommand"; seed 003 asks for explicit unsupported states).
    if e.kind() == clap::error::ErrorKind::InvalidSubcommand
        && let Some(word) = args.get(path.len()).and_then(|w| w.to_str())
        && path.len() == 2
        && path.get(1).is_some_and(|p| p == "profile")
        && NOT_BUILT.contains(&word)
    {
        return format!(
            "`{at} {word}` is not built in this release (docs/profiles.md, \"Not yet\"): launching a task, the provider proposal call and the native homes are the supervisor's; see `{at} --help`"
        );
    }
    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let names: Vec<String> = command.get_subcommands().map(|c| c.get_name().to_owned()).collect();
        return format!("no command given (one of: {}); see `{at} --help`", names.join(", "));
    }
    let text = e.render().to_string();
    // The message: everything up to the first blank line (a value holding a line break
    // stays whole — outside review 86: it was cut there — and `one_line` escapes it), or,
    // for one that introduces a list ("...not provided:"), its first line and the listed
    // arguments.
    let body = text.trim_start();
    let body = body.strip_prefix("error: ").unwrap_or(body);
    let head = body.split("\n\n").next().unwrap_or(body).trim_end();
    let mut lines = head.lines().map(str::trim);
    let first = lines.next().unwrap_or("invalid arguments");
    let message = if first.ends_with(':') {
        let listed: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
        format!("{first} {}", listed.join(", "))
    } else if head.is_empty() {
        "invalid arguments".to_owned()
    } else {
        // clap's list of accepted values, on a line of its own under the message, joins it
        // (outside review 190 F5: `… '--prefer <PREFER>'\n  [possible values: …]`).
        match head.rsplit_once('\n') {
            Some((message, list)) if list.trim_start().starts_with("[possible values:") => {
                format!("{} {}", message.trim_end(), list.trim())
            }
            _ => head.to_owned(),
        }
    };
    // Every hint names the subcommand's help (outside reviews 83, 86).
    match text.lines().find_map(|l| l.trim().strip_prefix("Usage: ")) {
        Some(u) => format!("{message} (usage: {u}; see `{at} --help`)"),
        None => format!("{message} (see `{at} --help`)"),
    }
}

/// A decimal number of `ledger`'s options: digits only (outside review 86: `+0` was read
/// as 0 where `show` refuses it).
fn decimal<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("not a decimal number (digits only)".to_owned());
    }
    text.parse::<T>().map_err(|_| "too large".to_owned())
}

/// [`decimal`] for a seq.
pub(crate) fn decimal_u64(text: &str) -> Result<u64, String> {
    decimal(text)
}

/// [`decimal`] for a revision.
pub(crate) fn decimal_u32(text: &str) -> Result<u32, String> {
    decimal(text)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// What `recover` says it left alone: `said`, or — when it moved only zeros a roll left
/// after a segment's last record — that no record was changed.
fn unchanged(cut: &[std::path::PathBuf], said: &str) -> String {
    if cut.is_empty() {
        said.to_owned()
    } else {
        "no record was changed (only zeros were moved aside, above)".to_owned()
    }
}

/// What `recover` did, as it prints it (text, or `--json`).
/// `named_cut`: the operator gave `--truncate-after`.
fn print_recover(
    report: &store::RecoverReport,
    named_cut: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    if json {
        let mut v = serde_json::to_value(report).unwrap_or_default();
        if let Some(map) = v.as_object_mut() {
            map.insert("ok".into(), json!(true));
            map.insert("headHash".into(), json!(report.head.hash));
        }
        return emit(out, v);
    }
    if let Some(named) = report.head_mark_lowered_from {
        emit(
            out,
            format!(
                "head.mark named seq {named} as a head this ledger reached; it now ends at seq {}: the records after it \
                 are gone from the ledger (the operator's choice; the mark now names the new head)",
                report.head.seq
            ),
        )?;
    }
    if let Some(named) = &report.head_mark_replaced {
        emit(
            out,
            format!(
                "head.mark named another version of seq {} ({}), which the ledger no longer holds: given up {}; \
                 what recover gives up is moved aside, not deleted (the journal's bytes under cut/, a replaced sled \
                 as sled.broken-N); the mark now names seq {} {}",
                named.seq, named.hash, named.by, report.head.seq, report.head.hash
            ),
        )?;
    }
    if let Some(from) = report.sled_history_given_up_from {
        emit(
            out,
            format!(
                "the copies held two histories from the record at seq {from} on: the journal's is kept; sled's own \
                 versions of those records are given up with its history (kept in the old sled, moved aside)"
            ),
        )?;
    }
    for aside in &report.snapshot_set_aside {
        emit(
            out,
            format!(
                "sled's snapshot failed sled's own check: set aside (kept) as {}; sled opened from its log",
                shown(aside)
            ),
        )?;
    }
    if let (Some(cut), Some(0)) = (&report.interrupted_swap_undone, report.interrupted_swap_moved) {
        emit(
            out,
            format!(
                "an interrupted recover's swap marker was found with every segment it names in place in \
                 journal/: nothing had moved ({} was not used); the marker was removed",
                shown(cut)
            ),
        )?;
    } else if let Some(cut) = &report.interrupted_swap_undone {
        emit(
            out,
            format!(
                "an interrupted recover's segment swap was undone first: the original segments are back in \
                 journal/ from {} (rewritten ones it had put there moved to its undone/)",
                shown(cut)
            ),
        )?;
    }
    if let (Some(cut), Some(after)) = (&report.interrupted_cut_undone, report.interrupted_cut_after) {
        emit(
            out,
            format!(
                "an interrupted `recover --truncate-after {after}` was undone first: what it had cut is back \
                 in journal/ from {} (give `--truncate-after {after}` again to cut)",
                shown(cut)
            ),
        )?;
    }
    if report.restored_from_sled > 0 {
        let runs: Vec<String> = report
            .restored_runs
            .iter()
            .map(|(from, to)| if from == to { format!("{from}") } else { format!("{from} to {to}") })
            .collect();
        let seqs = match report.restored_runs.as_slice() {
            [(from, to)] if from == to => "seq",
            _ => "seqs",
        };
        emit(
            out,
            format!(
                "restored {} record(s), {seqs} {}, into the journal from sled's intact copy",
                report.restored_from_sled,
                runs.join(", ")
            ),
        )?;
    }
    if let Some((from, to)) = report.truncated_seqs {
        let seqs = if from == to { format!("seq {from}") } else { format!("seqs {from} to {to}") };
        // Past a cut the operator named, or sled's records past the journal's head, given up
        // with the history `--prefer journal` or a checkpoint did not choose (outside review
        // 247 F4: "past the cut" where no cut was named).
        let why = if named_cut {
            "past the cut (moved aside, not deleted)"
        } else {
            "sled's records past the journal's head, not chosen (kept in the old sled, moved aside)"
        };
        emit(out, format!("gave up {seqs}, {why}"))?;
    }
    if let Some(at) = report.unreadable_record_given_up_at {
        emit(
            out,
            format!(
                "the damaged record at seq {at} given up with the cut has a header that cannot be read: how many seqs \
                 it held is unknown, so seqs past {} may be given up with it (its bytes are kept under cut/)",
                report.truncated_seqs.map_or(at, |(_, last)| last)
            ),
        )?;
    }
    for cut in &report.cut {
        emit(out, format!("journal bytes moved aside (not deleted): {}", shown(cut)))?;
    }
    if let Some(t) = &report.torn_tail {
        let to = t.moved_to.as_ref().map_or(String::new(), |p| format!(", moved to {}", shown(p)));
        emit(
            out,
            format!(
                "cut a torn record of {} at offset {} of {} (a write in flight at a crash, held by no copy){to}",
                t.size(),
                t.offset,
                shown(&t.segment)
            ),
        )?;
    }
    if !report.sled_rebuilt && report.sled_restored_frames > 0 {
        return emit(
            out,
            format!(
                "restored {} frame(s) sled lacked at its tail, from the journal (a lag an ordinary crash \
                 leaves); both copies now hold {} entries in {} frames, head seq {} {}; {}",
                report.sled_restored_frames,
                report.entries,
                report.frames,
                report.head.seq,
                report.head.hash,
                unchanged(&report.cut, "no journal byte was changed")
            ),
        );
    }
    if !report.sled_rebuilt {
        return emit(
            out,
            format!(
                "{}both copies verified whole, {} entries in {} frames, head seq {} {}; {}",
                if report.cut.is_empty() && report.head_mark_replaced.is_none() {
                    "nothing to recover: "
                } else {
                    ""
                },
                report.entries,
                report.frames,
                report.head.seq,
                report.head.hash,
                unchanged(&report.cut, "no record was changed")
            ),
        );
    }
    emit(
        out,
        format!(
            "rebuilt sled from the journal: {} entries in {} frames, head seq {} {}",
            report.entries, report.frames, report.head.seq, report.head.hash
        ),
    )?;
    if let Some(aside) = &report.moved_aside {
        emit(out, format!("the previous sled database was moved to {}", shown(aside)))?;
    }
    Ok(())
}

/// Whether `recover` changed anything on disk (so a report that cannot be written must say so).
fn recover_changed(r: &store::RecoverReport) -> bool {
    r.sled_rebuilt
        || r.restored_from_sled > 0
        || r.sled_restored_frames > 0
        || r.truncated_seqs.is_some()
        || r.torn_tail.is_some()
        || !r.cut.is_empty()
        || !r.snapshot_set_aside.is_empty()
        || r.interrupted_swap_undone.is_some()
        || r.interrupted_cut_undone.is_some()
        || r.head_mark_replaced.is_some()
}

fn emit(out: &mut dyn Write, line: impl std::fmt::Display) -> Result<(), Failure> {
    writeln!(out, "{line}").map_err(|e| usage(format!("write to stdout: {e}")))
}

fn run(command: Command, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    match command {
        Command::Init { dir, label, json } => {
            // The rule's detail, not its internal name (outside review 83: `OutOfBounds:`).
            crate::runtime::text("label", &label).map_err(|v| usage(format!("--label: {}", v.detail)))?;
            if let Some(root) = std::path::absolute(&dir)
                .ok()
                .and_then(|d| crate::profiles::generation::inside_state_root(&d))
            {
                return Err(Failure {
                    code: EXIT_VERIFY_FAILED,
                    message: format!(
                        "{}: lies inside {}, a state root (it holds {}): a ledger is never made in a managed store",
                        shown(dir),
                        shown(root),
                        crate::profiles::generation::OWNER_FILE
                    ),
                });
            }
            let ledger = Id::from_ulid(ulid::Ulid::new());
            // The report is written, and flushed, while the new ledger is still locked: where
            // it cannot be, the ledger is removed again (`init` makes one and says so, or
            // leaves nothing).
            store::init_then(&dir, &label, ledger, now_ms(), |store| {
                let head = store.head();
                let said = if json {
                    emit(
                        out,
                        json!({"ledgerId": ledger, "path": dir.to_str().map_or_else(|| shown(&dir), str::to_owned), "headHash": head.hash}),
                    )
                } else {
                    emit(
                        out,
                        format!("initialized ledger {ledger} at {} (genesis {})", shown(&dir), head.hash),
                    )
                };
                said.and_then(|()| out.flush().map_err(|e| usage(format!("write to stdout: {e}"))))
                    .map_err(|f| f.message)
            })?;
            Ok(())
        }
        Command::Verify { dir, checkpoint, json } => verify(&dir, checkpoint.as_deref(), json, out),
        Command::Recover { dir, truncate_after, prefer, checkpoint, json } => {
            let options = store::RecoverOptions {
                truncate_after,
                prefer: prefer.map(|c| match c {
                    Copy::Journal => store::Replica::Journal,
                    Copy::Sled => store::Replica::Sled,
                }),
                checkpoint: checkpoint.as_deref().map(read_checkpoint).transpose()?,
            };
            let report = store::recover(&dir, &options)?;
            // What `recover` changed stands whether or not its report can be written (outside
            // review 220 F2: a bare "write to stdout", read as "not done").
            print_recover(&report, truncate_after.is_some(), json, out).map_err(|f| match recover_changed(&report) {
                true => Failure {
                    code: f.code,
                    message: format!(
                        "{}: recover changed the ledger (head seq {} {}), but this report was not written; \
                         `ledger verify` shows the ledger now, and what it moved aside is kept (cut/, sled.broken-N)",
                        f.message, report.head.seq, report.head.hash
                    ),
                },
                false => f,
            })
        }
        Command::Checkpoint { dir, seq } => {
            let mut found = None;
            let report = store::replay_journal(&dir, &mut |sealed| {
                if seq.is_none_or(|s| s == sealed.entry.seq) {
                    found = Some(Checkpoint::of(sealed));
                }
                Ok(())
            })?;
            // Beside a live writer the newest record read may be written but not yet made
            // durable (its receipt waits for the fdatasync): a checkpoint of it could name a
            // record a power loss takes back, and then read as a rewritten history (outside
            // review 199 F3). Refused unless the seq is named — one a receipt gave is durable.
            if report.live_writer && seq.is_none() {
                return Err(usage(format!(
                    "a live writer holds the ledger: its newest record (seq {}) may not be durable yet (a receipt is \
                     printed only after its fdatasync); checkpoint a seq a receipt named (`--seq N`), or when no \
                     writer holds the ledger",
                    report.head.seq
                )));
            }
            // Durable before it is handed out as a proof (outside review 202 F4).
            if !report.live_writer {
                store::sync_journal(&dir)?;
            }
            live_note(&report, err);
            let cp = found.ok_or_else(|| {
                usage(format!("seq {} is beyond the head (seq {})", seq.unwrap_or_default(), report.head.seq))
            })?;
            emit(out, cp.to_json())
        }
        Command::Show { dir, range, json } => {
            let (from, to) = parse_range(&range)?;
            let verified = verified_head(&dir, err)?;
            // A range past the head is refused as a seq past it is (outside review 83: it
            // was cut off at the head without a word).
            if to > verified {
                return Err(usage(format!("seq {to} is beyond the head (seq {verified})")));
            }
            stream_entries(&dir, from, to, out, &|sealed| {
                terminal_safe(if json { entry_json(sealed).to_string() } else { entry_text(sealed) })
            })
        }
        Command::Export { dir } => {
            let verified = verified_head(&dir, err)?;
            stream_entries(&dir, 0, verified, out, &|sealed| terminal_safe(entry_json(sealed).to_string()))
        }
        Command::Submit { dir, file } => submit(&dir, file.as_deref(), out, err),
        Command::Status { dir, json } => status(&dir, json, out),
        Command::Replay { dir, to, journal_only, json } => replay(&dir, to, journal_only, json, out),
        Command::Compile { dir, attempt, markdown: _, cbor, json } => {
            compile(&dir, &attempt, cbor, json, out, err)
        }
        Command::Demo { dir } => demo::run(dir.as_deref(), out),
        Command::Sources(c) => crate::cli_profiles::run_sources(c, out),
        Command::Profile(c) => crate::cli_profiles::run_profile(c, out, err),
        Command::Select(a) => crate::cli_select::run_select(a, out, err),
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}")).collect::<Vec<_>>().join("\n")
}

/// One entry as an export object: `seq`, `kind`, `hash`, `prev`, `timeMs`, `ledgerId`, `event`.
/// JSON text with every character that would read differently on a terminal than it is
/// (a C1 control, a bidirectional or TAG character: `runtime::undeliverable`; serde_json
/// already escapes C0 controls) or shows nothing (`runtime::invisible`: zero-width
/// characters, variation selectors, …) written as a `\uXXXX` escape — the same JSON value,
/// safe to print (`show`, `export`, `submit`'s receipts). Such characters can only be inside JSON strings, where the escape is valid.
fn terminal_safe(json: String) -> String {
    let hidden = |c: char| crate::runtime::undeliverable(c) || crate::runtime::invisible(c);
    if !json.chars().any(hidden) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if hidden(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn entry_json(sealed: &SealedEntry) -> serde_json::Value {
    let e = &sealed.entry;
    json!({
        "seq": e.seq, "kind": e.event.kind(), "hash": sealed.hash, "prev": e.prev,
        "timeMs": e.time_ms, "ledgerId": e.ledger, "event": e.event,
    })
}

fn parse_range(text: &str) -> Result<(u64, u64), Failure> {
    // Decimal digits only (outside review 83: ` 1` and `+1` were read as 1).
    let num = |s: &str| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(usage(format!("not a seq or A..B range: \"{text}\" (see `ledger show --help`)")));
        }
        s.parse::<u64>().map_err(|_| usage(format!("seq {s} is too large (the largest is {})", u64::MAX)))
    };
    match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (num(a)?, num(b)?);
            if a > b {
                return Err(usage(format!("empty range \"{text}\" (see `ledger show --help`)")));
            }
            Ok((a, b))
        }
        None => {
            let n = num(text)?;
            Ok((n, n))
        }
    }
}

/// Says on stderr that a live writer held the ledger (the read stopped at its last
/// complete record), so a reader of stdout is never misled about what was read.
fn live_note(report: &store::VerifyReport, err: &mut dyn Write) {
    if report.live_writer {
        let _ = writeln!(
            err,
            "ledger: note: a live writer holds the ledger; read up to its last complete record (seq {}), which may \
             not be durable yet (its receipt waits for the fdatasync)",
            report.head.seq
        );
    } else if let Some(t) = &report.torn_tail {
        let _ = writeln!(err, "ledger: note: {}", partial_tail_text(t, report.head.seq));
    }
}

/// A journal-only read's words for a partial record after the head, which it does not
/// judge: `verify` (sled vouching for it or not) and the next writer's open decide.
fn partial_tail_text(t: &store::TornTail, head: u64) -> String {
    format!(
        "read up to the last whole record (seq {head}); a partial record of {} follows at offset {} of {} \
         (a write in flight at a crash, or damage: `ledger verify` checks it against sled)",
        t.size(),
        t.offset,
        shown(&t.segment)
    )
}

/// Says on stderr what the writer's open repaired (stdout holds only receipts): a torn tail
/// moved aside, sled's lagging frames restored, an unopenable sled moved aside and rebuilt.
fn repair_note(report: &store::OpenReport, err: &mut dyn Write) {
    if let Some(t) = &report.torn_tail {
        let to = t.moved_to.as_ref().map_or(String::new(), |p| format!(", moved to {}", shown(p)));
        let _ = writeln!(
            err,
            "ledger: note: cut a torn record of {} at offset {} of {} (held by no copy: a write in flight at a crash){to}",
            t.size(),
            t.offset,
            shown(&t.segment)
        );
    }
    if report.sled_restored_frames > 0 {
        let _ = writeln!(
            err,
            "ledger: note: restored {} frame(s) sled lacked from the journal",
            report.sled_restored_frames
        );
    }
    for aside in &report.snapshots_set_aside {
        let _ = writeln!(
            err,
            "ledger: note: sled's snapshot failed sled's own check: set aside (kept) as {}; sled opened from its log",
            shown(aside)
        );
    }
    if let Some(r) = &report.index_rebuilt {
        let aside =
            r.moved_aside.as_ref().map_or(String::new(), |p| format!("; the old one moved to {}", shown(p)));
        let _ = writeln!(err, "ledger: note: rebuilt the sled index from the journal ({}){aside}", r.reason);
    }
}

/// The first pass of a read that prints entries: verify the whole journal, so nothing is
/// printed from a ledger that then fails verification. Returns the verified head seq.
fn verified_head(dir: &Path, err: &mut dyn Write) -> Result<u64, Failure> {
    let report = store::replay_journal(dir, &mut |_| Ok(()))?;
    live_note(&report, err);
    Ok(report.head.seq)
}

/// The second pass: stream the entries `from..=to` (already verified by the first pass;
/// the bytes are verified again as they are read), one line each.
fn stream_entries(
    dir: &Path,
    from: u64,
    to: u64,
    out: &mut dyn Write,
    line: &dyn Fn(&SealedEntry) -> String,
) -> Result<(), Failure> {
    let mut failed = None;
    store::replay_journal(dir, &mut |sealed| {
        if failed.is_none() && (from..=to).contains(&sealed.entry.seq) {
            failed = emit(out, line(sealed)).err();
        }
        Ok(())
    })?;
    failed.map_or(Ok(()), Err)
}

fn read_checkpoint(path: &Path) -> Result<Checkpoint, Failure> {
    let meta = std::fs::metadata(path).map_err(|e| usage(format!("checkpoint {}: {e}", shown(path))))?;
    if meta.len() > store::MAX_CHECKPOINT_BYTES as u64 {
        return Err(usage(format!(
            "checkpoint {} is larger than {} bytes",
            shown(path),
            store::MAX_CHECKPOINT_BYTES
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| usage(format!("checkpoint {}: {e}", shown(path))))?;
    Checkpoint::parse(&bytes).map_err(|e| usage(format!("checkpoint {}: {e}", shown(path))))
}

/// What a verification found that the next open repairs (or a live writer's write in
/// flight), one line each: `verify` and `replay` say it in the same words.
fn recoverable(
    torn: Option<&store::TornTail>,
    sled_lag_frames: u64,
    live_writer: bool,
    checked: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(t) = torn {
        let what = if live_writer {
            "a write in flight by the live writer"
        } else {
            "recoverable: a torn record (a write in flight at a crash; the next open moves it to cut/ if sled opens to vouch for it)"
        };
        lines.push(format!("{what}: {} at offset {} of {}", t.size(), t.offset, shown(&t.segment)));
    }
    if sled_lag_frames > 0 {
        // (Where a checkpoint was verified, it vouched for the journal up to it: outside
        // review 149 F6, the advice to give one stood under "checkpoint verified".)
        let advice = if checked {
            ""
        } else {
            "; only `--checkpoint` tells whether the journal, the one copy left of them, is whole"
        };
        lines.push(format!(
            "recoverable: sled lags the journal by {sled_lag_frames} frame(s) (the next open restores them from the journal; a crash leaves such a lag, and so does damage in sled's log, which sled's own open drops as its torn write — docs/SAFETY.md{advice})"
        ));
    }
    lines
}

/// Which copies a report verified, in words.
fn copies_text(copies: &store::Copies) -> String {
    match copies {
        store::Copies::Both => "journal and sled".to_owned(),
        store::Copies::JournalOnly(why) => format!("journal only (sled not verified: {why})"),
    }
}

fn entry_text(sealed: &SealedEntry) -> String {
    let e = &sealed.entry;
    let event = serde_json::to_string_pretty(&e.event).unwrap_or_default();
    format!(
        "seq {} {} time {} ms\n  hash {}\n  prev {}\n{}",
        e.seq,
        e.event.kind(),
        e.time_ms,
        sealed.hash,
        e.prev,
        indent(&event)
    )
}

fn verify(dir: &Path, checkpoint: Option<&Path>, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let checkpoint = checkpoint.map(read_checkpoint).transpose()?;
    match store::verify(dir, checkpoint.as_ref()) {
        Ok(r) => {
            if json {
                return emit(
                    out,
                    json!({
                        "ok": true, "entries": r.entries, "frames": r.frames, "ledgerId": r.head.ledger,
                        "headSeq": r.head.seq, "headHash": r.head.hash, "tornTail": r.torn_tail,
                        "sledLagFrames": r.sled_lag_frames, "checkpointVerified": r.checkpoint.is_some(),
                        "copies": r.copies, "liveWriter": r.live_writer,
                    }),
                );
            }
            emit(
                out,
                format!(
                    "verified: {} entries in {} frames; head seq {} {}",
                    r.entries, r.frames, r.head.seq, r.head.hash
                ),
            )?;
            emit(out, format!("copies verified: {}", copies_text(&r.copies)))?;
            if let Some(cp) = r.checkpoint {
                emit(out, format!("checkpoint verified: seq {} {}", cp.seq, cp.hash))?;
            }
            for line in
                recoverable(r.torn_tail.as_ref(), r.sled_lag_frames, r.live_writer, r.checkpoint.is_some())
            {
                emit(out, line)?;
            }
            Ok(())
        }
        Err(e) => {
            if json {
                emit(out, failure_json(&e))?;
            }
            Err(e.into())
        }
    }
}

fn submit(dir: &Path, file: Option<&Path>, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    use std::io::BufRead;
    let source = match file {
        Some(p) if p.as_os_str() != "-" => shown(p),
        _ => "stdin".to_owned(),
    };
    let mut input: Box<dyn BufRead> = match file {
        None => Box::new(std::io::stdin().lock()),
        Some(p) if p.as_os_str() == "-" => Box::new(std::io::stdin().lock()),
        Some(p) => Box::new(std::io::BufReader::new(
            std::fs::File::open(p).map_err(|e| usage(format!("{}: {e}", shown(p))))?,
        )),
    };
    let (mut ledger, opened) = crate::ledger::Ledger::open(dir)?;
    repair_note(&opened, err);
    let (mut line_no, mut n_commands, mut n_rejected) = (0u64, 0u64, 0u64);
    let limit = crate::runtime::command::MAX_COMMAND_BYTES;
    loop {
        let mut line = Vec::new();
        let n = std::io::Read::take(&mut input, limit as u64 + 1)
            .read_until(b'\n', &mut line)
            // The source named (outside review 83: a directory given as FILE was not).
            .map_err(|e| usage(format!("read commands from {source}: {e}")))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if line.len() > limit && line.last() != Some(&b'\n') {
            // Refused as soon as it passes the bound: never read on (the input may not end,
            // e.g. /dev/zero). Nothing of this line is written; the lines before it were.
            let reason = format!("command line over {limit} bytes without a newline");
            emit(out, terminal_safe(json!({"line": line_no, "rejected": reason}).to_string()))?;
            return Err(usage(format!("line {line_no}: {reason}: stopped reading")));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        n_commands += 1;
        let parsed: Result<crate::runtime::Command, String> =
            serde_json::from_slice(&line).map_err(|e| malformed(&line, &e));
        let command = match parsed {
            Ok(c) => c,
            Err(reason) => {
                n_rejected += 1;
                emit(out, terminal_safe(json!({"line": line_no, "rejected": reason}).to_string()))?;
                continue;
            }
        };
        let ctx = crate::runtime::Ctx { time_ms: now_ms() };
        match ledger.submit(&command, ctx) {
            Ok(r) => {
                let mut receipt =
                    json!({"line": line_no, "kind": command.kind(), "seq": r.seq, "hash": r.hash});
                if let Some(map) = receipt.as_object_mut() {
                    if let Some(reason) = r.ignored {
                        map.insert("ignored".into(), json!(reason));
                    }
                    if r.duplicate {
                        map.insert("duplicate".into(), json!(true));
                    }
                }
                // Committed: a receipt that cannot be written says so, and how to get it
                // (outside review 198 F1: only the stdout error was printed).
                emit(out, terminal_safe(receipt.to_string())).map_err(|f| {
                    usage(format!(
                        "{}: line {line_no} was committed (seq {}) but its receipt was not written; submitting \
                         the same lines again gives their receipts (as duplicates)",
                        f.message, r.seq
                    ))
                })?;
            }
            Err(e) if e.is_refusal() => {
                n_rejected += 1;
                emit(
                    out,
                    terminal_safe(
                        json!({"line": line_no, "kind": command.kind(), "rejected": e.to_string()})
                            .to_string(),
                    ),
                )?;
            }
            Err(e) => return Err(usage(format!("line {line_no}: {e}"))),
        }
    }
    if n_rejected > 0 {
        return Err(Failure {
            code: EXIT_VERIFY_FAILED,
            message: format!("{n_rejected} of {n_commands} commands rejected"),
        });
    }
    Ok(())
}

/// Why a command line is not a command. A byte-order mark before it, and a lone UTF-16
/// surrogate escape (`\uD800` with no partner), are named as such: JSON text must be
/// Unicode, and the parser's own words for it ("unexpected end of hex escape") do not say so.
fn malformed(line: &[u8], e: &serde_json::Error) -> String {
    // An editor's byte-order mark before the JSON is named (outside review 95 F4: "expected
    // value at line 1 column 1" did not say what was there).
    if let Some(mark) = crate::profiles::select::byte_order_mark(line) {
        return format!(
            "malformed command: the line starts with {mark}, which JSON text does not hold: save the file as UTF-8 without it"
        );
    }
    // Bytes that are not UTF-8 are named (outside review 198 F3: "expected value at line 1
    // column 15", where `select` says "not UTF-8").
    if let Err(bad) = std::str::from_utf8(line) {
        return format!(
            "malformed command: not UTF-8 (JSON text is UTF-8): an invalid byte at offset {} of the line",
            bad.valid_up_to()
        );
    }
    // Well-formed JSON of another shape is named as such (outside review 190 F4: `[1,2]`,
    // `null`, `{}` and two command keys were all "expected value at line 1 column 1").
    let parsed = serde_json::from_slice::<serde_json::Value>(line);
    // JSON that is not well formed is named by the JSON parser's own words — trailing
    // characters, nesting past its limit (outside review 198 F3: both read as "expected
    // value"), not by what a command expected.
    if let Err(syntax) = &parsed
        && (syntax.is_syntax() || syntax.is_eof())
        && lone_surrogate(line).is_none()
    {
        return format!("malformed command: {}", in_line(syntax));
    }
    let shape = match parsed {
        // One key — unless given twice (the parsed value keeps one: outside review 192 F6).
        Ok(serde_json::Value::Object(m)) if m.len() == 1 => match serde_json::from_slice::<KeyCount>(line) {
            Ok(KeyCount(n)) if n > 1 => Some(format!("an object with {n} keys (one given twice)")),
            _ => None,
        },
        Ok(serde_json::Value::Object(m)) => Some(format!("an object with {} keys", m.len())),
        Ok(serde_json::Value::Array(_)) => Some("an array".to_owned()),
        Ok(serde_json::Value::String(_)) => Some("a string".to_owned()),
        Ok(serde_json::Value::Number(_)) => Some("a number".to_owned()),
        Ok(serde_json::Value::Bool(_)) => Some("a boolean".to_owned()),
        Ok(serde_json::Value::Null) => Some("null".to_owned()),
        Err(_) => None,
    };
    if let Some(shape) = shape {
        return format!(
            "malformed command: a command is a JSON object with exactly one key, the command's name \
             ({{\"createGoal\": {{…}}}}); this line is {shape}"
        );
    }
    match lone_surrogate(line) {
        Some(escape) => format!(
            "malformed command: a lone UTF-16 surrogate {escape} (a string must be Unicode text: a high surrogate \\uD800-\\uDBFF must be followed by a low one \\uDC00-\\uDFFF) at column {} of the line",
            e.column()
        ),
        None => format!("malformed command: {}", in_line(e)),
    }
}

/// The JSON parser's words for a command line, its position given within the line: each
/// command is one line, so the parser's "line 1" is not the receipt's `line` (outside review
/// 243 F3: `{"line":2,"rejected":"… at line 1 column 29"}`).
fn in_line(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&at) {
        // (Past the line's last character: the parser counts its end as the next line.)
        Some(said) if e.line() > 1 => format!("{said} at the end of the line"),
        Some(said) => format!("{said} at column {} of the line", e.column()),
        None => text,
    }
}

/// How many keys a JSON object has, each counted as written (a repeated key too).
struct KeyCount(usize);

impl<'de> serde::Deserialize<'de> for KeyCount {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<KeyCount, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = KeyCount;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<KeyCount, A::Error> {
                let mut n = 0;
                while map.next_key::<serde::de::IgnoredAny>()?.is_some() {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    n += 1;
                }
                Ok(KeyCount(n))
            }
        }
        d.deserialize_map(Keys)
    }
}

/// The first `\uXXXX` escape in a JSON line that is an unpaired surrogate, if any.
fn lone_surrogate(line: &[u8]) -> Option<String> {
    let hex = |at: usize| -> Option<u16> {
        let digits = line.get(at..at + 4)?;
        u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    };
    let unit_at = |at: usize| -> Option<u16> {
        (line.get(at) == Some(&b'\\') && line.get(at + 1) == Some(&b'u')).then(|| hex(at + 2)).flatten()
    };
    let mut i = 0;
    while i < line.len() {
        if line.get(i) != Some(&b'\\') {
            i += 1;
            continue;
        }
        match unit_at(i) {
            Some(unit @ 0xD800..=0xDBFF) => match unit_at(i + 6) {
                Some(0xDC00..=0xDFFF) => i += 12,
                _ => return Some(format!("\\u{unit:04X}")),
            },
            Some(unit @ 0xDC00..=0xDFFF) => return Some(format!("\\u{unit:04X}")),
            Some(_) => i += 6,
            // Any other escape (\\, \", \n, ...): skip it whole.
            None => i += 2,
        }
    }
    None
}

fn status(dir: &Path, json: bool, out: &mut dyn Write) -> Result<(), Failure> {
    let s = crate::replay::status(dir)?;
    if json {
        return emit(out, serde_json::to_string(&s).unwrap_or_default());
    }
    let counts = |map: &std::collections::BTreeMap<String, u64>| {
        let total = map.get("total").copied().unwrap_or(0);
        let rest: Vec<String> = map
            .iter()
            .filter(|(k, v)| k.as_str() != "total" && **v > 0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if rest.is_empty() { total.to_string() } else { format!("{total} ({})", rest.join(", ")) }
    };
    emit(
        out,
        format!("ledger {}: {} entries, head seq {} {}", s.ledger_id, s.entries, s.head_seq, s.head_hash),
    )?;
    emit(out, format!("  goals {}", counts(&s.counts.goals)))?;
    emit(out, format!("  workflows {}", counts(&s.counts.workflows)))?;
    emit(out, format!("  attempts {}", counts(&s.counts.attempts)))?;
    emit(out, format!("  evidence {}", counts(&s.counts.evidence)))?;
    if s.live_writer {
        emit(out, "  a live writer holds the ledger: read up to its last complete record")?;
    } else if let Some(t) = &s.torn_tail {
        emit(out, format!("  {}", partial_tail_text(t, s.head_seq)))?;
    }
    emit(out, format!("  state digest {}", s.state_digest))
}

/// A failure as `--json` shows it: `{"ok": false, "seq", "copy", "reason"}` (`seq` and
/// `copy` null where the failure names none).
fn failure_json(e: &OpenError) -> serde_json::Value {
    let (seq, copy, reason) = match e {
        OpenError::Corrupt { seq, replica, reason } => (Some(*seq), Some(*replica), reason.to_string()),
        e @ (OpenError::Sled(_) | OpenError::SledMissing(_) | OpenError::NotRegularInSled(_)) => {
            (None, Some(store::Replica::Sled), e.to_string())
        }
        other => (None, None, other.to_string()),
    };
    json!({"ok": false, "seq": seq, "copy": copy, "reason": reason})
}

fn replay(
    dir: &Path,
    to: Option<u64>,
    journal_only: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    use std::io::IsTerminal;
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_message("replaying");
        bar
    });
    let mut progress = |seq: u64| {
        if let Some(bar) = &bar
            && seq.is_multiple_of(4096)
        {
            bar.set_position(seq);
            bar.set_message(format!("replaying: seq {seq}"));
        }
    };
    let scope = if journal_only { store::AuditScope::JournalOnly } else { store::AuditScope::Both };
    let report = match crate::replay::replay(dir, to, scope, &mut progress) {
        Ok(report) => report,
        Err(e) => {
            if json {
                // `failure` as a fold's failure carries it, beside `verify`'s fields (outside
                // review 198 F6: a failure before the fold had no `failure` key).
                let mut v = failure_json(&e);
                if let Some(map) = v.as_object_mut() {
                    let failure = json!({"seq": map.get("seq"), "kind": "store check", "copy": map.get("copy"),
                        "reason": map.get("reason")});
                    map.insert("failure".into(), failure);
                }
                emit(out, v)?;
            }
            return Err(e.into());
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Some(to) = to
        && report.ok
        && to >= report.entries
    {
        return Err(usage(format!(
            "--to {to} is beyond the head (seq {})",
            report.entries.saturating_sub(1)
        )));
    }
    if let (Some(to), Some(kind), true) = (to, report.to_splits, report.ok) {
        return Err(usage(format!(
            "--to {to} stops inside one command: seq {to} and seq {} ({kind}) were written together, and the \
             state between them is none a command left; give --to {} or --to {}",
            to + 1,
            to.saturating_sub(1),
            to + 1
        )));
    }
    if json {
        emit(out, serde_json::to_string(&report).unwrap_or_default())?;
    } else if report.ok {
        emit(
            out,
            format!(
                "replay verified: {} entries in {} frames ({} folded)",
                report.entries, report.frames, report.folded
            ),
        )?;
        emit(
            out,
            format!(
                "  goals {}, workflows {}, attempts {} (manifests proved {})",
                report.goals,
                report.workflows,
                report.attempts.len(),
                report.manifests_proved
            ),
        )?;
        let w = &report.worker_events;
        emit(out, format!("  worker events: admitted {}, ignored {}", w.admitted, w.ignored))?;
        if report.registries_proved + report.plans_proved + report.selections_proved > 0 {
            emit(
                out,
                format!(
                    "  context delivery: registries {}, profile revisions (plan and generation re-derived) {}, selections re-derived {} (loaded resources {})",
                    report.registries_proved,
                    report.plans_proved,
                    report.selections_proved,
                    report.loaded_resources_proved
                ),
            )?;
        }
        let verdicts: Vec<String> = report.verdicts.iter().map(|(k, v)| format!("{k} {v}")).collect();
        emit(
            out,
            format!(
                "  verdicts: {}",
                if verdicts.is_empty() { "none".to_owned() } else { verdicts.join(", ") }
            ),
        )?;
        if report.failed_after_accept > 0 {
            emit(
                out,
                format!(
                    "  ACCEPTed bytes that failed a check since: {} decision(s) (a FAIL Evidence record after the ACCEPT; the verdict stands, the bytes are barred)",
                    report.failed_after_accept
                ),
            )?;
        }
        emit(out, format!("  head seq {} {}", report.head_seq, report.head_hash))?;
        if let Some(copies) = &report.copies {
            emit(out, format!("  copies verified: {}", copies_text(copies)))?;
        }
        if report.live_writer {
            emit(out, "  a live writer holds the ledger: read up to its last complete record")?;
        }
        for line in recoverable(report.torn_tail.as_ref(), report.sled_lag_frames, report.live_writer, false)
        {
            emit(out, format!("  {line}"))?;
        }
        emit(out, format!("  state digest {}", report.state_digest))?;
    }
    match &report.failure {
        None => Ok(()),
        Some(f) => Err(Failure {
            code: EXIT_VERIFY_FAILED,
            // The copy named as `verify` names it (outside review 198 F2).
            message: match f.copy {
                Some(copy) => {
                    format!("replay failed at seq {} in the {copy} copy ({}): {}", f.seq, f.kind, f.reason)
                }
                None => format!("replay failed at seq {} ({}): {}", f.seq, f.kind, f.reason),
            },
        }),
    }
}

fn compile(
    dir: &Path,
    attempt: &str,
    cbor: bool,
    json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let id: Id =
        attempt.parse().map_err(|e| usage(format!("--attempt: {e} (see `ledger compile --help`)")))?;
    let found = crate::replay::recompile_attempt(dir, id)?
        .ok_or_else(|| usage(format!("no attempt {id} in the ledger")))?;
    if cbor {
        out.write_all(&found.compiled.package_bytes).map_err(|e| usage(format!("write to stdout: {e}")))?;
    } else if json {
        emit(
            out,
            json!({
                "attemptId": id, "seq": found.seq, "phase": found.compiled.manifest.phase,
                // Which compiler derived (and renders) it (outside review 222: only
                // `export` showed it).
                "compilerVersion": found.compiled.manifest.compiler_version,
                "packageDigest": found.compiled.manifest.package_digest,
                "manifestDigest": found.compiled.manifest_digest(),
                "recordedManifestDigest": found.recorded_manifest_digest,
                "matchesRecorded": found.matches_recorded,
                "dispatched": found.dispatched,
                // STARTED, DISPATCHED, FINISHED, FAILED, CANCELLED or INTERRUPTED now.
                "status": crate::replay::status_key(found.status),
                "resumedThread": found.resumed,
                "contextChangedAt": found.context_changed_at.map(|(seq, kind)| json!({"seq": seq, "kind": kind})),
                "goalRevisedAt": found.goal_revised_at,
                "staleNow": found.stale_now,
                // What the compiler left out and why, as the manifest records it (outside
                // review 135 F3: an auditor found it only by decoding the entry).
                "omissionDecisions": found.compiled.manifest.omission_decisions,
            }),
        )?;
    } else {
        out.write_all(found.compiled.markdown().as_bytes())
            .map_err(|e| usage(format!("write to stdout: {e}")))?;
    }
    if !found.dispatched {
        // A package no worker received: say so, beside it (not an error: it is what was
        // compiled, and recorded) — and whether one still may (outside review 223 F1).
        let ended = if found.status.is_active() {
            String::new()
        } else {
            format!(
                ", and it has ended ({}): no claim of it can be made now",
                crate::runtime::status_name(found.status)
            )
        };
        let _ = writeln!(
            err,
            "ledger: note: attempt {id} was never dispatched: no dispatch claim is recorded, so no worker received \
             this package{ended}"
        );
    }
    if let Some((seq, kind)) = found.context_changed_at {
        // The reasons the ledger records for it (outside reviews 107, 109: a Goal revision
        // was said to give CONTEXT_CHANGED receipts; a revision after another change, which
        // takes precedence from there on, was not named).
        let reasons = |receipts: &str, refusal: &str| {
            format!(
                "its later worker events are ignored receipts ({receipts}) and its finish is refused ({refusal})"
            )
        };
        let mut text = match found.goal_revised_at {
            Some(g) if g == seq => reasons("GOAL_REVISED", "StaleGoalRevision"),
            _ => reasons("CONTEXT_CHANGED", "ManifestStale"),
        };
        if let Some(g) = found.goal_revised_at.filter(|g| *g != seq) {
            text.push_str(&format!(
                "; its Goal was revised at seq {g}: from there they are GOAL_REVISED receipts and the finish is \
                 refused as StaleGoalRevision"
            ));
        }
        let _ = writeln!(
            err,
            "ledger: note: attempt {id}'s context changed while it was dispatched, at seq {seq} ({kind}): {text}"
        );
    }
    if let Some(why) = &found.stale_now {
        let _ = writeln!(err, "ledger: note: attempt {id}'s context is no longer current: {why}");
    }
    if let Some(thread) = &found.resumed {
        let earlier: Vec<String> = thread.earlier_attempts.iter().map(Id::to_string).collect();
        let _ = writeln!(
            err,
            "ledger: note: attempt {id} resumed the Thread of worker session {}, which holds the Turns of attempt(s) {}: \
             the worker had that history too, outside this package and not authoritative (seed 000)",
            thread.worker_session_id,
            if earlier.is_empty() { "none recorded".to_owned() } else { earlier.join(", ") }
        );
    }
    if found.matches_recorded {
        Ok(())
    } else {
        Err(Failure {
            code: EXIT_VERIFY_FAILED,
            message: format!(
                "attempt {id}: the recompiled manifest {} differs from the recorded {}",
                found.compiled.manifest_digest(),
                found.recorded_manifest_digest
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic
    use super::*;

    /// A failed last sync of sled's says what the command's store committed (outside review
    /// 219 F5: every command got one sentence that did not say whether its entry stood).
    #[test]
    fn a_failed_sled_close_names_what_the_command_committed() {
        use crate::store::Committed;
        let said = |opened_seq, head_seq| close_committed(Some(Committed { opened_seq, head_seq }));
        assert!(said(Some(13), 14).contains("it committed seq 14 "), "{}", said(Some(13), 14));
        assert!(said(Some(13), 20).contains("it committed seqs 14 to 20 "), "{}", said(Some(13), 20));
        assert!(
            said(Some(13), 13).contains("committed no entry (the head is seq 13)"),
            "{}",
            said(Some(13), 13)
        );
        assert!(said(None, 0).contains("it committed seq 0 "), "a new ledger's genesis is its own");
        assert!(close_committed(None).contains("if it reached its commit"));
    }

    /// What `show` and `export` print is the same JSON value with every character that
    /// reads differently on a terminal escaped: a C1 control, a right-to-left override, a
    /// TAG character (outside review 17: a Worker payload's were printed raw). Ordinary
    /// text, tabs and newlines (escaped by serde_json itself) are unchanged.
    #[test]
    fn printed_json_escapes_what_a_terminal_would_misread() {
        let text = "ok \u{9b}31m red \u{202e}evil\u{e0049}\u{e0067} yes\u{fe00}\u{200b} naïve 修正 \t\n";
        let json = serde_json::json!({ "text": text }).to_string();
        let safe = terminal_safe(json.clone());
        assert!(!safe.chars().any(crate::runtime::undeliverable), "{safe}");
        assert!(
            safe.contains("\\u009b")
                && safe.contains("\\u202e")
                && safe.contains("\\udb40\\udc49")
                && safe.contains("\\ufe00\\u200b"),
            "{safe}"
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
            serde_json::json!({ "text": text })
        );
        let plain = serde_json::json!({ "text": "naïve 修正" }).to_string();
        assert_eq!(terminal_safe(plain.clone()), plain);
    }

    /// `init --label` is held to the rendered-text rule (outside review 17: an ESC sequence
    /// and a right-to-left override were accepted), with a usage error (exit 2).
    #[test]
    fn a_label_that_reads_differently_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l");
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv = ["ledger", "init", path.to_str().unwrap(), "--label", "a\u{1b}[2Jb"];
        assert_eq!(run_args(argv, &mut out, &mut err), 2);
        assert!(String::from_utf8(err).unwrap().contains("--label"));
        assert!(!path.exists(), "nothing was created");
    }
}
