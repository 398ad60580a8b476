//! The `ledger sources` and `ledger profile` subcommands (issue #14): argument parsing and
//! reporting only; the work is in `crate::profiles` (I/O) and `runtime::profile` (pure).

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use ledger_schema::events::profile::{SelectionMode, Target};
use serde_json::{Value, json};

use crate::cli::{EXIT_USAGE_OR_IO, EXIT_VERIFY_FAILED, Failure};
use crate::profiles::{self, ProfileError};
use crate::runtime::profile as rp;

#[derive(Subcommand, Debug)]
pub enum SourcesCommand {
    /// Scan a source tree in ECC's layout (ROOT/skills, ROOT/manifests) and record it in
    /// the ledger as one registry snapshot (an identical rescan records nothing).
    Scan {
        dir: PathBuf,
        root: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// Plan inputs shared by `preview` and `set`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// lean or full (or lean@1, full@1).
    pub profile: String,
    /// The agent (default: the configured one, codex if none is configured).
    #[arg(long, value_enum)]
    pub target: Option<TargetArg>,
    /// The selection mode (default: the configured one, manual if none is configured —
    /// a `set` never changes the mode unasked).
    #[arg(long, value_enum)]
    pub selection: Option<ModeArg>,
    /// Routable ids to include (default: the configured ones).
    #[arg(long = "include", value_name = "ID")]
    pub include: Vec<String>,
    /// Ids to exclude (default: the configured ones).
    #[arg(long = "exclude", value_name = "ID")]
    pub exclude: Vec<String>,
    /// Start from no include and no exclude (besides any given here) instead of the
    /// configured ones.
    #[arg(long)]
    pub clear_filters: bool,
}

impl PlanArgs {
    /// The plan input: every choice not given is the configured one (`None`), so a `set`
    /// never changes what it was not asked to.
    fn input(&self) -> profiles::PlanInput {
        let list = |given: &Vec<String>| (!given.is_empty() || self.clear_filters).then(|| given.clone());
        profiles::PlanInput {
            profile: self.profile.clone(),
            target: self.target.map(Into::into),
            mode: self.selection.map(Into::into),
            include: list(&self.include),
            exclude: list(&self.exclude),
            exclusions_add: false,
        }
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum TargetArg {
    Codex,
    Claude,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum ModeArg {
    Manual,
    Suggest,
    Auto,
}

impl From<TargetArg> for Target {
    fn from(t: TargetArg) -> Target {
        match t {
            TargetArg::Codex => Target::Codex,
            TargetArg::Claude => Target::Claude,
        }
    }
}

impl From<ModeArg> for SelectionMode {
    fn from(m: ModeArg) -> SelectionMode {
        match m {
            ModeArg::Manual => SelectionMode::Manual,
            ModeArg::Suggest => SelectionMode::Suggest,
            ModeArg::Auto => SelectionMode::Auto,
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum ProfileCommand {
    /// Print the plan of a profile over the ledger's current registry. Writes nothing.
    Preview {
        dir: PathBuf,
        #[command(flatten)]
        plan: PlanArgs,
        #[arg(long)]
        json: bool,
    },
    /// Materialise the plan's generation under the state root and record it as the next
    /// store revision (the same generation and selection again: a verified no-op).
    Set {
        dir: PathBuf,
        #[command(flatten)]
        plan: PlanArgs,
        /// An absolute, dedicated directory (created 0700 and marked as this ledger's).
        #[arg(long, value_name = "ABS", value_parser = state_root_arg)]
        state_root: PathBuf,
        /// Refuse, writing nothing anywhere, unless the store is at this revision.
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::decimal_u32)]
        expected_revision: Option<u32>,
        /// Check and report what would be recorded; write nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(long)]
        json: bool,
    },
    /// The configured profile, from the ledger alone; its generation verified on disk.
    Status {
        dir: PathBuf,
        /// The configured state root, checked: another root is refused.
        #[arg(long, value_name = "ABS", value_parser = state_root_arg)]
        state_root: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Record another selection mode for the configured profile (a new revision).
    Mode {
        dir: PathBuf,
        #[arg(value_enum)]
        mode: ModeArg,
        /// The configured state root, checked (the generation stays where it is; another
        /// root is refused).
        #[arg(long, value_name = "ABS", value_parser = state_root_arg)]
        state_root: Option<PathBuf>,
        /// Refuse unless the store is at revision N (seed 003's form omits it: optional, as
        /// for `set`).
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::decimal_u32)]
        expected_revision: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Return to the previous revision's generation and selection (a new revision).
    Rollback {
        dir: PathBuf,
        #[arg(long, value_name = "ABS", value_parser = state_root_arg)]
        state_root: PathBuf,
        #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = crate::cli::decimal_u32)]
        expected_revision: u32,
        #[arg(long)]
        json: bool,
    },
    /// Finish or undo an interrupted generation transaction under the state root.
    Recover {
        dir: PathBuf,
        #[arg(long, value_name = "ABS", value_parser = state_root_arg)]
        state_root: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Resolve a task's context (seed 003's `resolve`): with `--state-root`, over the
    /// configured profile — its saved base, mode and exclusions, no override — decided and
    /// recorded exactly as `ledger select`; with a profile name, over that profile's plan of
    /// the current registry as if it were configured, recording nothing.
    Resolve {
        #[command(flatten)]
        select: crate::cli_select::SelectArgs,
        /// lean or full: resolve over this profile's plan without configuring it.
        #[arg(required_unless_present = "state_root")]
        profile: Option<String>,
        /// The configured state root (checked, as `status` checks it).
        #[arg(long, value_name = "ABS", conflicts_with = "profile", value_parser = state_root_arg)]
        state_root: Option<PathBuf>,
        /// The agent, for a named profile.
        #[arg(long, value_enum, conflicts_with = "state_root")]
        target: Option<TargetArg>,
        /// The selection mode, for a named profile.
        #[arg(long, value_enum, conflicts_with = "state_root")]
        selection: Option<ModeArg>,
        /// Routable ids to include, for a named profile.
        #[arg(long = "include", value_name = "ID", conflicts_with = "state_root")]
        include: Vec<String>,
        /// Ids to exclude, for a named profile.
        #[arg(long = "exclude", value_name = "ID", conflicts_with = "state_root")]
        exclude: Vec<String>,
    },
}

fn failure(e: ProfileError) -> Failure {
    let code = if e.is_refusal() { EXIT_VERIFY_FAILED } else { EXIT_USAGE_OR_IO };
    // Every error is one line: anything untrusted that reached the message unescaped
    // (a name from the tree, a registry key, an id) is escaped here too (idempotent).
    Failure { code, message: profiles::scan::shown(&e.to_string()) }
}

fn emit(out: &mut dyn Write, line: impl std::fmt::Display) -> Result<(), Failure> {
    writeln!(out, "{line}")
        .map_err(|e| Failure { code: EXIT_USAGE_OR_IO, message: format!("write to stdout: {e}") })
}

fn emit_json(out: &mut dyn Write, value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Failure { code: EXIT_USAGE_OR_IO, message: format!("json: {e}") })?;
    emit(out, text)
}

pub fn run_sources(command: SourcesCommand, out: &mut dyn Write) -> Result<(), Failure> {
    match command {
        SourcesCommand::Scan { dir, root, json } => {
            let o = profiles::record_registry(&dir, &root).map_err(failure)?;
            // Recorded now, whether or not the report can be written (outside review 217 F2).
            let recorded = o.recorded.then_some((o.registry_digest, o.seq));
            let said = if json {
                emit_json(out, &json!(o))
            } else {
                let what = if o.recorded { "recorded" } else { "unchanged (nothing written)" };
                emit(
                    out,
                    format!(
                        "registry {} {what} at seq {}: {} sources, {} resources ({} stored by digest only: not loadable), profiles {}",
                        o.registry_digest,
                        o.seq,
                        o.sources,
                        o.resources,
                        o.not_loadable.len(),
                        o.profiles.join(", ")
                    ),
                )
            };
            said.map_err(|f| match recorded {
                Some((digest, seq)) => Failure {
                    code: f.code,
                    message: format!(
                        "{}: registry {digest} is recorded (seq {seq}), but this report was not written; `ledger \
                         profile status` names the registry",
                        f.message
                    ),
                },
                None => f,
            })
        }
    }
}

/// The preview of `args` over the ledger at `dir`, as printed by `--json` (a pure
/// function of the ledger and the flags: byte-identical across processes).
pub fn preview_json(dir: &Path, args: &PlanArgs) -> Result<Value, ProfileError> {
    let state = profiles::read_state(dir)?;
    let cp = &state.context_profiles;
    let (registry, digest) = match (&cp.registry, cp.registry_digest) {
        (Some(r), Some(d)) => (r, d),
        _ => return Err(rp::PlanError::NoRegistry.into()),
    };
    let plan = args.input().plan(cp, registry, digest)?;
    // What `set` would refuse to install, preview refuses too (outside review 87: it showed
    // a generation digest for a carrier `set` refuses).
    profiles::installs_manual_only_natively(registry, &plan)?;
    // And a generation `set` cannot materialise (outside review 101: Full over a skill
    // with one asset past the storage bound previewed without a word, and `set` refused).
    let (manifest, _) = rp::generation(registry, &plan).map_err(|e| ProfileError::Refused(e.to_string()))?;
    Ok(plan_json(&plan, Some(manifest.digest())))
}

/// A plan as JSON: the plan's fields, `profileId`, `planDigest` and the `generationDigest`
/// it would materialise.
pub fn plan_json(plan: &rp::Plan, generation: Option<ledger_schema::Digest>) -> Value {
    let mut value = json!(plan);
    if let Value::Object(map) = &mut value {
        map.insert("profileId".into(), json!(plan.profile));
        map.insert("planDigest".into(), json!(plan.digest()));
        map.insert("generationDigest".into(), json!(generation));
    }
    value
}

pub fn run_profile(command: ProfileCommand, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    match command {
        ProfileCommand::Preview { dir, plan, json } => {
            let value = preview_json(&dir, &plan).map_err(failure)?;
            note_source_drift(&dir, err);
            if json {
                return emit_json(out, &value);
            }
            let field = |k: &str| value.get(k).cloned().unwrap_or(Value::Null);
            emit(
                out,
                format!("plan {} ({} for {})", field("planDigest"), field("profileId"), field("target")),
            )?;
            emit(out, format!("  selected: {}", field("selectedIds")))?;
            emit(out, format!("  routed:   {}", field("routedIds")))?;
            emit(out, format!("  excluded: {}", field("excludedIds")))?;
            emit(out, format!("  estimate: {}", field("estimate")))
        }
        ProfileCommand::Set { dir, plan, state_root, expected_revision, dry_run, json } => {
            let st = profiles::set(&dir, &plan.input(), &state_root, expected_revision, dry_run)
                .map_err(failure)?;
            report(out, &st, json)
        }
        ProfileCommand::Status { dir, state_root, json } => {
            let st = profiles::status(&dir, state_root.as_deref()).map_err(failure)?;
            report(out, &st, json)
        }
        ProfileCommand::Mode { dir, mode, state_root, expected_revision, json } => {
            let st = profiles::mode(&dir, mode.into(), expected_revision, state_root.as_deref())
                .map_err(failure)?;
            note_source_drift(&dir, err);
            report(out, &st, json)
        }
        ProfileCommand::Rollback { dir, state_root, expected_revision, json } => {
            let st = profiles::rollback(&dir, &state_root, expected_revision).map_err(failure)?;
            note_source_drift(&dir, err);
            report(out, &st, json)
        }
        ProfileCommand::Recover { dir, state_root, json } => {
            let st = profiles::recover(&dir, &state_root).map_err(failure)?;
            report(out, &st, json)
        }
        ProfileCommand::Resolve { select, profile, state_root, target, selection, include, exclude } => {
            match (profile, state_root) {
                (Some(profile), _) => {
                    let given = |v: Vec<String>| (!v.is_empty()).then_some(v);
                    let input = profiles::PlanInput {
                        profile,
                        target: target.map(Into::into),
                        mode: selection.map(Into::into),
                        include: given(include),
                        exclude: given(exclude),
                        exclusions_add: true,
                    };
                    crate::cli_select::run_select_over(select, Some(input), out, err)
                }
                (None, root) => {
                    // The configured state root, as `status` checks it (another is refused).
                    profiles::status(select.dir(), root.as_deref()).map_err(failure)?;
                    crate::cli_select::run_select_over(select, None, out, err)
                }
            }
        }
    }
}

/// A `--state-root` as given, but for trailing slashes (`/abs/store/`, as shell completion
/// writes a directory: outside review 129 F6): the root is recorded and compared as a path
/// without them. Every other form is checked where the root is used (absolute, normalised).
fn state_root_arg(given: &str) -> Result<PathBuf, String> {
    let trimmed = given.trim_end_matches('/');
    Ok(PathBuf::from(if trimmed.is_empty() { given } else { trimmed }))
}

/// A note on stderr when the scanned source tree changed or cannot be read, for commands
/// that succeed over it but whose result `set` and `select` would then refuse (`preview`,
/// `mode`, `rollback`; outside reviews 117, 120, 127: only `status` said so). The printed
/// or `--json` result stays a function of the ledger and the flags.
fn note_source_drift(dir: &Path, err: &mut dyn Write) {
    let Ok(state) = profiles::read_state(dir) else { return };
    let check = profiles::check_source(&state);
    if check.blocks() {
        let root = check.root.as_deref().map(profiles::scan::shown).unwrap_or_default();
        let _ = writeln!(
            err,
            "ledger: note: the source tree {root} {}: `profile set` and `select` are refused until it is scanned again{}",
            check.detail,
            if check.state == "unreadable" {
                " (a tree the scan refuses must first be changed as its refusal says)"
            } else {
                ""
            }
        );
    }
}

/// [`report`] of a command's outcome: where the command committed a revision, a report it
/// cannot write says so (outside review 217 F2: a closed pipe or a full disk read as a bare
/// I/O error, exit 2, as if nothing had been committed).
fn report(out: &mut dyn Write, st: &profiles::ProfileStatus, json: bool) -> Result<(), Failure> {
    let committed = matches!(st.outcome.as_str(), "set" | "mode" | "rollback" | "rolled-forward");
    print_report(out, st, json).map_err(|f| match committed {
        true => Failure {
            code: f.code,
            message: format!(
                "{}: revision {} ({}) is committed, but this report was not written; `ledger profile status` \
                 shows it",
                f.message, st.revision, st.outcome
            ),
        },
        false => f,
    })
}

fn print_report(out: &mut dyn Write, st: &profiles::ProfileStatus, json: bool) -> Result<(), Failure> {
    if json {
        return emit_json(out, &json!(st));
    }
    let or_none = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    // The configured include and exclude lists, where they hold anything: a later `set`
    // keeps them, so a text reader sees why a skill is in or out (outside review 224 F4: an
    // exclusion made under Full kept a skill from Lean and showed only in --json).
    let filter = |name: &str, ids: &[String]| {
        if ids.is_empty() { String::new() } else { format!(" {name} [{}]", ids.join(", ")) }
    };
    emit(
        out,
        format!(
            "{}: revision {} profile {} target {} mode {} selected [{}]{}{}",
            st.outcome,
            st.revision,
            or_none(&st.profile_id),
            st.target.map(|t| crate::runtime::wire(&t)).unwrap_or_else(|| "-".into()),
            st.selection_mode.map(|m| crate::runtime::wire(&m)).unwrap_or_else(|| "-".into()),
            st.selected_ids.join(", "),
            filter("include", &st.include),
            filter("exclude", &st.exclude)
        ),
    )?;
    emit(
        out,
        format!(
            "  generation {} at {}{}{}",
            st.generation_digest.map(|d| d.to_string()).unwrap_or_else(|| "-".into()),
            or_none(&st.generation_root),
            // Drift needs a configured generation to drift from.
            if st.registry_current || st.generation_digest.is_none() {
                String::new()
            } else if let Some(why) = &st.no_plan {
                format!(
                    "  STALE: the saved selection has no plan over the current sources ({why}): every select is \
                     refused until `ledger profile set` a selection that plans over them"
                )
            } else if st.generation_stale {
                "  STALE: the sources changed since (source drift): every select is refused until `ledger profile set` a selection that plans over them".to_owned()
            } else {
                "  (a newer registry was recorded since: drift in routed sources only; selections route over it)".to_owned()
            },
            match (st.recovery_required, &st.note) {
                (false, _) => "",
                (true, Some(_)) => "  RECOVERY REQUIRED: see the note",
                (true, None) => "  RECOVERY REQUIRED: run `ledger profile recover`",
            }
        ),
    )?;
    if let Some(note) = &st.note {
        emit(out, format!("  note: {note}"))?;
    }
    if let Some(source) = &st.source {
        let root = source.root.clone().unwrap_or_else(|| "-".into());
        let action = if source.blocks() {
            if source.state == "unreadable" {
                "  SOURCE DRIFT: `set` and `select` are refused until it is scanned again (a tree the scan refuses must first be changed as its refusal says)"
            } else {
                "  SOURCE DRIFT: `set` and `select` are refused until it is scanned again"
            }
        } else {
            ""
        };
        emit(out, format!("  source tree {root}: {}{action}", source.detail))?;
    }
    match &st.estimate {
        // An estimate, said as one (outside review 72): name and description bytes / 4.
        Some(e) => emit(
            out,
            format!(
                "  estimate {} metadata tokens (estimated: name and description bytes / 4) against a {} budget of {}{}{}",
                e.tokens,
                crate::runtime::wire(&e.budget_mode),
                e.budget_tokens,
                if e.over_budget { ": OVER BUDGET" } else { "" },
                // The configured revision's plan, which drift does not rewrite (outside review
                // 254 F2: beside a `noPlan` over a lowered budget it read as the current one).
                if st.registry_current {
                    ""
                } else {
                    " (the configured revision's plan, over the registry it was made over)"
                }
            ),
        ),
        None => Ok(()),
    }
}
