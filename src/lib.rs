//! closure-ledger: an append-only, hash-chained, canonically encoded ledger of what an AI
//! coding agent was asked, given, did and was judged on.
//!
//! Layers, in dependency order (nothing points back up): `ledger_schema` (types, codec,
//! digests) → [`store`] (journal + sled, chain, strict reopen, checkpoints) → … → [`cli`].
//!
//! Embedding: open an [`Engine`] on a ledger directory, submit [`Command`]s (a receipt comes
//! back only once the entry is durable), read immutable [`State`] snapshots, subscribe to
//! the committed entries, and audit both copies beside the running writer.
//!
//! ```no_run
//! # async fn run(command: closure_ledger::Command) -> Result<(), Box<dyn std::error::Error>> {
//! use closure_ledger::{Copies, Engine, Options};
//!
//! let engine = Engine::open(std::path::Path::new("/var/lib/supervisor/ledger"), Options::default()).await?;
//! let receipt = engine.submit(command).await?; // durable (journal fdatasync) when it returns
//! println!("admitted at seq {}", receipt.seq);
//! let state = engine.state(); // an immutable snapshot; never blocks the writer
//! println!("{} goals", state.goals.len());
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

pub use ledger_schema as schema;

// The embedding surface: what a supervisor needs to run, feed, watch and audit a ledger.
pub use admission::{ManifestMismatch, Refusal};
pub use engine::{CommittedEntry, Engine, EngineError, Observer, Options, SubscribeError};
pub use ledger::{Receipt, StorageError, SubmitError};
pub use runtime::command as commands;
pub use runtime::{Command, Rule, RuleViolation, State};
pub use store::{Checkpoint, Copies, OpenError, Replica, VerifyReport};
