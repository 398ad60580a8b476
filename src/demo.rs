//! `ledger demo`: a scripted run of the storage layer on a fresh ledger — group commits,
//! strict reopen, a checkpoint, and tamper detection on a copy. (The lifecycle demo of
//! DESIGN §9 replaces the event script once the runtime and compiler exist.)

use std::io::Write;
use std::path::{Path, PathBuf};

use ledger_schema::{Id, samples};

use crate::cli::Failure;
use crate::store::{self, Checkpoint, DiskStore, Frame, OpenError, Store};

fn fail(message: impl Into<String>) -> Failure {
    Failure { code: crate::cli::EXIT_USAGE_OR_IO, message: message.into() }
}

fn say(out: &mut dyn Write, line: impl std::fmt::Display) -> Result<(), Failure> {
    writeln!(out, "{line}").map_err(|e| fail(format!("write to stdout: {e}")))
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for item in std::fs::read_dir(from)? {
        let item = item?;
        let target = to.join(item.file_name());
        if item.file_type()?.is_dir() {
            copy_dir(&item.path(), &target)?;
        } else {
            std::fs::copy(item.path(), target)?;
        }
    }
    Ok(())
}

pub fn run(dir: Option<&Path>, out: &mut dyn Write) -> Result<(), Failure> {
    let dir: PathBuf = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::temp_dir().join(format!("closure-ledger-demo-{}", ulid::Ulid::new())),
    };
    let ledger = Id::from_ulid(ulid::Ulid::new());
    let t0 = 1_760_000_000_000u64;
    let mut store = store::init(&dir, "demo", ledger, t0)?;
    say(out, format!("1. initialized ledger {ledger} in {}", dir.display()))?;

    // Every sample event of catalog v1 (after genesis), committed in frames of up to 4.
    let events: Vec<_> = samples::events().into_iter().skip(1).collect();
    let mut chain = store.chain();
    let mut n_frames = 0;
    for (chunk_idx, chunk) in events.chunks(4).enumerate() {
        let mut sealed = Vec::new();
        for (i, (_, event)) in chunk.iter().enumerate() {
            let clock = t0 + 1000 * (chunk_idx * 4 + i) as u64;
            sealed.push(chain.seal(event.clone(), clock, ledger).map_err(|e| fail(e.to_string()))?);
        }
        let frame = Frame::new(sealed).map_err(|e| fail(e.to_string()))?;
        let receipt = store.commit(&frame).map_err(|e| fail(e.to_string()))?;
        n_frames += 1;
        say(
            out,
            format!(
                "   frame {n_frames}: seq {}..={} durable, head {}",
                receipt.first_seq, receipt.last_seq, receipt.hash
            ),
        )?;
    }
    let head = store.head();
    let checkpoint = Checkpoint::of(&store.read(head.seq)?);
    drop(store);
    say(
        out,
        format!(
            "2. committed {} events in {n_frames} group commits (journal append + fdatasync each)",
            events.len()
        ),
    )?;

    let (store, report) = DiskStore::open(&dir)?;
    say(
        out,
        format!(
            "3. strict reopen verified {} entries in {} frames; head seq {}",
            report.entries,
            report.frames,
            store.head().seq
        ),
    )?;
    drop(store);

    let verified = store::verify(&dir, Some(&checkpoint))?;
    say(out, format!("4. verify against checkpoint {} at seq {}: ok", checkpoint.hash, verified.head.seq))?;

    let tampered = dir.with_extension("tampered");
    copy_dir(&dir, &tampered).map_err(|e| fail(format!("copy {}: {e}", dir.display())))?;
    let segment = tampered.join("journal").join(format!("{:020}.cborseq", 0));
    let mut bytes = std::fs::read(&segment).map_err(|e| fail(format!("read {}: {e}", segment.display())))?;
    let middle = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(middle) {
        *b ^= 0x01;
    }
    std::fs::write(&segment, &bytes).map_err(|e| fail(format!("write {}: {e}", segment.display())))?;
    match store::verify(&tampered, Some(&checkpoint)) {
        Err(OpenError::Corrupt { seq, replica, reason }) => {
            say(
                out,
                format!(
                    "5. one flipped bit in a copy's journal: detected at seq {seq} in the {replica} copy: {reason}"
                ),
            )?;
        }
        Err(other) => return Err(fail(format!("tamper demo: unexpected error: {other}"))),
        Ok(_) => return Err(fail("tamper demo: a flipped bit went undetected")),
    }
    let _ = std::fs::remove_dir_all(&tampered);
    say(
        out,
        format!(
            "demo ok: {} entries, head {}, ledger kept in {}",
            verified.entries,
            verified.head.hash,
            dir.display()
        ),
    )
}
