//! Digests, ids, size bounds and frames.

use ledger_schema::codec::{self, DecodeError, MAX_ENTRY_BYTES, MAX_FRAME_ENTRIES};
use ledger_schema::{Digest, DigestKind, Entry, Id, decode_frame, encode_frame, samples};

/// Digests print as `b3:` + 64 lowercase hex and parse back; other spellings are refused.
#[test]
fn digest_text_round_trips_and_is_strict() {
    let d = Digest::of(DigestKind::Entry, b"x");
    let text = d.to_string();
    assert!(text.starts_with("b3:") && text.len() == 67);
    assert_eq!(text.parse::<Digest>(), Ok(d));
    assert!(text.to_uppercase().replace("B3:", "b3:").parse::<Digest>().is_err());
    assert!(text[..66].parse::<Digest>().is_err());
    assert!(text.replace("b3:", "b2:").parse::<Digest>().is_err());
    assert!("b3:é".parse::<Digest>().is_err());
}

/// `Digest::of` is BLAKE3's derive_key mode: checked against the official test vector
/// context (BLAKE3 test_vectors.json, input length 0).
#[test]
fn digest_uses_blake3_derive_key() {
    let ctx = "BLAKE3 2019-12-27 16:29:52 test vectors context";
    let got = blake3::derive_key(ctx, b"");
    let hex: String = got.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(&hex[..64], "2cc39783c223154fea8dfb7c1b1660f2ac2dcbd1c1de8277b0b0dd39b7e50d7d");
    let mut hasher = blake3::Hasher::new_derive_key(DigestKind::Entry.context());
    hasher.update(b"abc");
    assert_eq!(Digest::of(DigestKind::Entry, b"abc").0, *hasher.finalize().as_bytes());
}

/// Every digest kind has its own context string, so no digest of one kind can stand for
/// another.
#[test]
fn digest_contexts_are_distinct() {
    let mut contexts: Vec<&str> = DigestKind::ALL.iter().map(|k| k.context()).collect();
    contexts.sort_unstable();
    contexts.dedup();
    assert_eq!(contexts.len(), DigestKind::ALL.len());
    let a = Digest::of(DigestKind::Package, b"same");
    let b = Digest::of(DigestKind::Manifest, b"same");
    assert_ne!(a, b);
    assert!(matches!(a.check(b), Err(e) if e.expected == b && e.found == a));
}

/// Ids print as ULID text and survive JSON and CBOR.
#[test]
fn id_round_trips() {
    let id: Id = "01ARZ3NDEKTSV4RRFFQ69G5FAV".parse().unwrap();
    assert_eq!(id.to_string(), "01ARZ3NDEKTSV4RRFFQ69G5FAV");
    assert_eq!(serde_json::to_string(&id).unwrap(), "\"01ARZ3NDEKTSV4RRFFQ69G5FAV\"");
    assert_eq!(codec::decode::<Id>(&codec::encode(&id), 64), Ok(id));
    assert!("not-a-ulid".parse::<Id>().is_err());
}

/// Oversize input is refused by its length alone, before any byte is read.
#[test]
fn oversize_is_refused_before_decoding() {
    let big = vec![0xffu8; MAX_ENTRY_BYTES + 1];
    assert!(
        matches!(Entry::decode(&big), Err(DecodeError::TooLarge { len, max }) if len == MAX_ENTRY_BYTES + 1 && max == MAX_ENTRY_BYTES)
    );
}

/// A declared length larger than the input is refused without allocating it.
#[test]
fn huge_declared_lengths_are_truncation_not_allocation() {
    // array of 2^63 items; byte string of 2^32 bytes
    for bytes in [&[0x9b, 0x80, 0, 0, 0, 0, 0, 0, 0][..], &[0x5b, 0, 0, 0, 1, 0, 0, 0, 0][..]] {
        assert!(matches!(codec::check_canonical(bytes), Err(DecodeError::Truncated { .. })));
    }
}

/// Deep nesting is refused at the depth limit, not by stack overflow.
#[test]
fn deep_nesting_is_bounded() {
    let mut bytes = vec![0x81u8; 10_000];
    bytes.push(0x00);
    assert!(matches!(codec::check_canonical(&bytes), Err(DecodeError::TooDeep { .. })));
}

/// Frames carry entries' exact bytes and round-trip; empty and unknown-version frames are
/// refused.
#[test]
fn frames_round_trip_and_are_bounded() {
    let chain = samples::chain();
    let frame = encode_frame(chain.iter().map(|(_, s)| s.bytes.as_slice()));
    let entries = decode_frame(&frame).unwrap();
    assert_eq!(entries.len(), chain.len());
    for (got, (_, sealed)) in entries.iter().zip(&chain) {
        assert_eq!(*got, sealed.bytes.as_slice());
    }
    let empty = encode_frame(std::iter::empty());
    assert!(matches!(decode_frame(&empty), Err(DecodeError::FrameEntries { n: 0, .. })));
    let one = [0u8];
    let too_many = encode_frame(std::iter::repeat_n(&one[..], MAX_FRAME_ENTRIES + 1));
    assert!(matches!(decode_frame(&too_many), Err(DecodeError::FrameEntries { .. })));
    let mut v2 = frame.clone();
    v2[3] = 0x02;
    assert!(matches!(decode_frame(&v2), Err(DecodeError::UnsupportedVersion { found: 2 })));
}

/// `Id::push_to` and `Digest::push_to` append exactly their `Display` text, and
/// `encoded_len` is the encoding's length (the compiler uses them instead of `format!` and
/// of encoding into a fresh buffer).
#[test]
fn push_to_and_encoded_len_match_display_and_encode() {
    for (i, (name, sealed)) in samples::chain().into_iter().enumerate() {
        let id = Id((u128::from(sealed.hash.0[0]) << 120) | (i as u128 * 0x0123_4567_89ab_cdef));
        let mut text = String::from("x/");
        id.push_to(&mut text);
        sealed.hash.push_to(&mut text);
        assert_eq!(text, format!("x/{id}{}", sealed.hash), "{name}");
        assert_eq!(codec::encoded_len(&sealed.entry), codec::encode(&sealed.entry).len(), "{name}");
    }
    let mut max = String::new();
    Id(u128::MAX).push_to(&mut max);
    assert_eq!(max, Id(u128::MAX).to_string());
}

/// A flag absent when false (`executable` of a registry resource) is refused written out as
/// `false`, in a record and in a whole entry: one value, one encoding (outside review 62:
/// such an entry passed `verify` and `replay` with another hash).
#[test]
fn a_flag_absent_when_false_is_refused_written_out() {
    use ledger_schema::events::profile::SourceResource;
    #[derive(serde::Serialize)]
    struct Written<'a> {
        path: &'a str,
        bytes: u64,
        digest: Digest,
        executable: bool,
    }
    let digest = SourceResource::digest_of(b"x");
    for (flag, ok) in [(true, true), (false, false)] {
        let bytes = codec::encode(&Written { path: "run.sh", bytes: 1, digest, executable: flag });
        let got = codec::decode::<SourceResource>(&bytes, MAX_ENTRY_BYTES);
        assert_eq!(got.is_ok(), ok, "executable: {flag}: {got:?}");
    }
    // The whole entry: the appended sample with an executable resource, its `true` turned
    // into `false` in place (same length), decoded as an entry.
    let (_, sealed) = samples::chain()
        .into_iter()
        .find(|(name, _)| *name == "source_registry_recorded_with_an_executable")
        .unwrap();
    let key = b"jexecutable\xf5";
    let at = sealed.bytes.windows(key.len()).position(|w| w == key).expect("the flag's bytes");
    let mut forged = sealed.bytes.clone();
    forged[at + key.len() - 1] = 0xf4;
    assert!(Entry::decode(&forged).is_err(), "a written-out false is refused");
    assert!(Entry::decode(&sealed.bytes).is_ok());
}
