//! closure-ledger's record types, canonical CBOR codec and digests. No I/O.
//!
//! - [`codec`]: the canonical codec (the only module that knows CBOR);
//! - [`Digest`] and [`DigestKind`]: BLAKE3 digests and every `derive_key` context;
//! - [`Entry`], frames, and the closed event catalog v1 in [`events`].

pub mod codec;
mod digest;
pub mod entry;
pub mod events;
mod id;
pub mod manifest;
pub mod package;
pub mod record;
pub mod record_digests;
#[doc(hidden)]
pub mod samples;
pub mod types;

pub use codec::DecodeError;
pub use digest::{Digest, DigestKind, DigestMismatch, ParseDigestError};
pub use entry::{Entry, FORMAT_VERSION, SealedEntry, decode_frame, encode_frame, entry_hash};
pub use events::Event;
pub use id::{Id, ParseIdError};
