//! closure-ledger: an append-only, hash-chained, canonically encoded ledger of what an AI
//! coding agent was asked, given, did and was judged on.
//!
//! Layers, in dependency order (nothing points back up): `ledger_schema` (types, codec,
//! digests) → [`store`] (journal + sled, chain, strict reopen, checkpoints) → … → `cli` (feature `cli`).
//!
//! Embedding: create or open an [`Engine`] on a ledger directory, submit [`Command`]s (a
//! receipt comes back only once the entry is durable; a refused command is a [`Refusal`]
//! and writes nothing), read immutable [`State`] snapshots, subscribe to the committed
//! entries, and audit both copies beside the running writer.
//!
//! ```
//! use closure_ledger::{Command, Copies, Engine, EngineError, Options, Refusal, Rule};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let tmp = tempfile::tempdir()?;
//! # let dir = tmp.path().join("ledger");
//! let engine = Engine::create(&dir, "my supervisor", Options::default()).await?;
//!
//! // Commands are what a supervisor receives, e.g. as JSON (docs/commands.md).
//! let profile: Command = serde_json::from_str(
//!     r#"{"installProfile":{"profileId":"01JC000000000000000000000H","profile":{"name":"bounded",
//!        "protected":false,"compaction":"MANUAL","repairThread":"FRESH","attemptThread":"FRESH"}}}"#,
//! )?;
//! let receipt = engine.submit(profile).await?; // durable (journal fdatasync) when it returns
//! assert_eq!(receipt.seq, 1);
//!
//! // A workflow under a goal that does not exist is refused by a named rule; nothing is written.
//! let orphan: Command = serde_json::from_str(
//!     r#"{"startWorkflow":{"workflowId":"01JC000000000000000000001G","goalId":"01JC0000000000000000000010",
//!        "goalRevision":1,"policyId":"01JC000000000000000000000G","profileId":"01JC000000000000000000000H"}}"#,
//! )?;
//! match engine.submit(orphan).await {
//!     Err(EngineError::Refused(Refusal::Rule(violation))) => assert_eq!(violation.rule, Rule::Unknown),
//!     other => panic!("expected a refusal, got {other:?}"),
//! }
//! assert_eq!(engine.head(), 1);
//!
//! let state = engine.state(); // an immutable snapshot; never blocks the writer
//! assert_eq!(state.goals.len(), 0);
//! let audit = engine.audit().await?; // every journal record compared with sled's copy
//! assert_eq!(audit.copies, Copies::Both);
//! engine.shutdown().await?;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

pub mod admission;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod cli_profiles;
#[cfg(feature = "cli")]
pub mod cli_select;
pub mod compiler;
pub mod engine;
pub mod ledger;
/// The reference lifecycle script (the demo's ledger, tests, benchmarks, fuzzing).
#[cfg(any(feature = "cli", feature = "testkit"))]
#[doc(hidden)]
pub mod lifecycle;
pub mod profiles;
pub mod replay;
pub mod runtime;
pub mod store;

#[doc(inline)]
pub use ledger_schema as schema;

// The embedding surface: what a supervisor needs to run, feed, watch and audit a ledger.
pub use admission::{ManifestMismatch, Refusal};
pub use compiler::{CompileError, Compiled};
pub use engine::{CommittedEntry, Engine, EngineError, Observer, Options, SubscribeError};
pub use ledger::{Receipt, StorageError, SubmitError};
pub use runtime::command as commands;
/// The projection's record types (the fields of [`State`]).
pub use runtime::state;
pub use runtime::{Command, Rule, RuleViolation, State};
pub use store::{
    Checkpoint, CommitError, Copies, Corruption, FrameError, Head, OpenError, ReadError, Replica,
    VerifyReport,
};
