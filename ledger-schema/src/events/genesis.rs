//! The genesis entry (seq 0) of every ledger.

use serde::{Deserialize, Serialize};

/// Opens a ledger. Always and only at seq 0; the entry's `ledger` field fixes the ledger id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LedgerInitialized {
    /// Free-form human label.
    pub label: String,
    /// Event catalog version the ledger was created with (1).
    pub catalog: u16,
}

/// The event catalog this build reads and writes: every genesis announces it, and a ledger
/// that announces another is refused (docs/format.md, "Versioning policy").
pub const CATALOG_VERSION: u16 = 1;
