//! closure-ledger: an append-only, hash-chained, canonically encoded ledger of what an AI
//! coding agent was asked, given, did and was judged on.
//!
//! Layers, in dependency order (nothing points back up): `ledger_schema` (types, codec,
//! digests) → [`store`] (journal + sled, chain, strict reopen, checkpoints) → … → [`cli`].

#![forbid(unsafe_code)]

pub mod admission;
pub mod cli;
pub mod compiler;
mod demo;
pub mod engine;
pub mod ledger;
#[doc(hidden)]
pub mod lifecycle;
pub mod replay;
pub mod runtime;
pub mod store;

pub use ledger_schema as schema;
