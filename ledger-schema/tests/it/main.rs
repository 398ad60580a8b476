//! ledger-schema's integration tests, one binary (the CDDL check is its own, behind the
//! `cddl-check` feature: `cargo test -p ledger-schema --features cddl-check --test cddl`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)] // tests may panic

mod codec;
mod journal_vectors;
#[cfg(feature = "arbitrary")]
mod key_order;
mod vectors;
