//! The embedded engine for a supervisor process: a cloneable `Send + Sync` handle over
//! one writer that owns the ledger.
//!
//! - **One writer.** A dedicated thread owns the [`Ledger`] (its store does blocking
//!   fdatasyncs, so it is not a tokio task). It drains the bounded command queue into one
//!   group commit — up to `max_batch` commands, optionally waiting `max_wait` for more —
//!   decides and admits each against the state as the earlier ones left it (a refused
//!   command never enters the frame and never disturbs the others), appends the frame to
//!   the journal, makes it durable with **one fdatasync**, inserts it into sled, and only
//!   then completes the receipts. Backpressure is the bounded queue.
//! - **Snapshots.** After each commit the writer publishes an immutable `Arc<State>`;
//!   [`Engine::state`] clones the `Arc` and never waits for the writer's I/O.
//! - **Subscriptions.** [`Engine::subscribe`] catches up from the store, then follows live
//!   commits, with no gap and no duplicate at the boundary. A slow subscriber never blocks
//!   the writer: the live channel is bounded and drops what a subscriber did not take; the
//!   subscriber notices the gap (`Lagged`) and transparently catches up from the store.
//! - **Stopping.** [`Engine::shutdown`] drains the queue, flushes sled and joins the writer.
//!   Dropping every handle closes the queue, and the writer stops after the commits in
//!   flight. Killing the process loses nothing acknowledged: receipts follow fdatasync.

use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use futures::Stream;
use ledger_schema::{Digest, Entry};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use crate::admission::Refusal;
use crate::compiler::Compiled;
use crate::ledger::{Ledger, Receipt, StorageError, SubmitError};
use crate::runtime::command::StartAttempt;
use crate::runtime::{Command, Ctx, State};
use crate::store::{DiskStore, OpenError, ReadError, Store, StoreReader};

/// Engine options. The defaults: a queue of 4,096 commands, at most 1,024 commands per
/// group commit, no wait for more (`max_wait: None`), 1,024 frames kept for subscribers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Commands waiting for the writer before `submit` waits (backpressure).
    pub queue_capacity: usize,
    /// Most commands in one group commit (each is at most 2 entries; the frame bounds
    /// `MAX_FRAME_ENTRIES` and `MAX_FRAME_BYTES` are enforced as well).
    pub max_batch: usize,
    /// How long the writer may wait for more commands after the first of a batch
    /// (`None`: commit what is queued right away — lowest latency).
    pub max_wait: Option<Duration>,
    /// Frames kept for live subscribers before a slow one must catch up from the store.
    pub subscriber_buffer: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { queue_capacity: 4096, max_batch: 1024, max_wait: None, subscriber_buffer: 1024 }
    }
}

/// Why a submission failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The command was refused; nothing was written.
    #[error("refused: {0}")]
    Refused(Refusal),
    /// The storage failed; the command was not committed and the engine stops writing.
    /// Every later request gets the same first failure.
    #[error("storage failure: {0}")]
    Storage(#[source] StorageError),
    /// The writer thread panicked (a broken invariant stops it loudly).
    #[error("the writer thread panicked")]
    WriterPanicked,
    /// The engine has shut down.
    #[error("the engine is shut down")]
    Closed,
}

impl From<SubmitError> for EngineError {
    fn from(e: SubmitError) -> EngineError {
        match e {
            SubmitError::Refused(r) => EngineError::Refused(r),
            SubmitError::Storage(s) => EngineError::Storage(s),
        }
    }
}

impl EngineError {
    /// The refusal, when the command itself was refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            EngineError::Refused(r) => Some(r),
            _ => None,
        }
    }
}

/// Why a subscription ended.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SubscribeError {
    #[error("reading committed entries failed: {0}")]
    Read(#[source] Arc<ReadError>),
}

/// One committed entry, as a subscriber sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedEntry {
    pub seq: u64,
    pub hash: Digest,
    pub entry: Entry,
}

struct Request {
    command: Command,
    reply: oneshot::Sender<Result<Receipt, EngineError>>,
}

/// What the writer's queue carries.
#[allow(clippy::large_enum_variant)] // nearly every message is a `Submit`; boxing it would allocate per command
enum Msg {
    Submit(Request),
    /// [`Engine::shutdown`]: commit what was queued before, then stop (whatever clones of
    /// the handle remain; their later requests get [`EngineError::Closed`]).
    Shutdown,
}

struct Shared {
    state: RwLock<Arc<State>>,
    /// Seq of the last durable entry.
    head: watch::Sender<u64>,
    /// The live channel, for new subscriptions; taken (and so closed) when the writer
    /// stops, which ends every subscription once it has caught up.
    live: Mutex<Option<broadcast::Sender<Arc<Vec<CommittedEntry>>>>>,
    reader: StoreReader,
    /// The ledger directory (for in-process audits).
    root: std::path::PathBuf,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The cloneable handle.
#[derive(Clone)]
pub struct Engine {
    queue: mpsc::Sender<Msg>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("root", &self.shared.root).field("head", &self.head()).finish()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl Engine {
    /// Opens a ledger strictly (a full replay) and starts the writer.
    pub async fn open(path: &Path, options: Options) -> Result<Engine, OpenError> {
        let path = path.to_path_buf();
        let opened = tokio::task::spawn_blocking(move || Ledger::open(&path)).await;
        let (ledger, _) = opened.map_err(|_| OpenError::Task("open"))??;
        Engine::start(ledger, options)
    }

    /// Creates a new ledger at `path` (absent or an empty directory) under a fresh ledger
    /// id, holding only its genesis entry, and starts the writer on it.
    pub async fn create(path: &Path, label: &str, options: Options) -> Result<Engine, OpenError> {
        let (path, label) = (path.to_path_buf(), label.to_owned());
        let created = tokio::task::spawn_blocking(move || {
            let ledger = ledger_schema::Id::from_ulid(ulid::Ulid::new());
            crate::store::init(&path, &label, ledger, now_ms())?;
            Ledger::open(&path)
        })
        .await;
        let (ledger, _) = created.map_err(|_| OpenError::Task("create"))??;
        Engine::start(ledger, options)
    }

    fn start(ledger: Ledger<DiskStore>, options: Options) -> Result<Engine, OpenError> {
        let (queue, rx) = mpsc::channel(options.queue_capacity.max(1));
        let (live, _) = broadcast::channel(options.subscriber_buffer.max(1));
        let shared = Arc::new(Shared {
            state: RwLock::new(Arc::new(ledger.state().clone())),
            head: watch::channel(ledger.store().head().seq).0,
            live: Mutex::new(Some(live.clone())),
            reader: ledger.store().reader(),
            root: ledger.store().root().to_path_buf(),
            writer: Mutex::new(None),
        });
        let writer_shared = Arc::clone(&shared);
        // Without its writer thread an engine could only queue requests forever: refuse.
        let handle = std::thread::Builder::new()
            .name("closure-ledger-writer".to_owned())
            .spawn(move || writer(ledger, rx, writer_shared, live, options))
            .map_err(|_| OpenError::Task("writer thread spawn"))?;
        match shared.writer.lock() {
            Ok(mut slot) => *slot = Some(handle),
            Err(poisoned) => *poisoned.into_inner() = Some(handle),
        }
        Ok(Engine { queue, shared })
    }

    /// Submits one command; resolves once it is durable (or refused).
    pub async fn submit(&self, command: Command) -> Result<Receipt, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.queue.send(Msg::Submit(Request { command, reply })).await.map_err(|_| EngineError::Closed)?;
        rx.await.map_err(|_| EngineError::Closed)?
    }

    /// Submits several commands; they are admitted in order (usually in one frame). Each
    /// gets its own result: a refused command writes nothing and leaves the others to be
    /// admitted.
    pub async fn submit_batch(&self, commands: Vec<Command>) -> Vec<Result<Receipt, EngineError>> {
        let mut waiting = Vec::with_capacity(commands.len());
        for command in commands {
            let (reply, rx) = oneshot::channel();
            match self.queue.send(Msg::Submit(Request { command, reply })).await {
                Ok(()) => waiting.push(Some(rx)),
                Err(_) => waiting.push(None),
            }
        }
        let mut out = Vec::with_capacity(waiting.len());
        for rx in waiting {
            out.push(match rx {
                Some(rx) => rx.await.unwrap_or(Err(EngineError::Closed)),
                None => Err(EngineError::Closed),
            });
        }
        out
    }

    /// The state after the last commit: an immutable snapshot, cheap to take.
    pub fn state(&self) -> Arc<State> {
        self.observer().state()
    }

    /// Seq of the last durable entry.
    pub fn head(&self) -> u64 {
        self.observer().head()
    }

    /// Compiles the next Attempt's context over the current snapshot (what `startAttempt`
    /// would record now).
    pub fn compile(&self, request: &StartAttempt) -> Result<Compiled, Refusal> {
        crate::admission::compile_start(&self.state(), request)
    }

    /// Every committed entry from `from_seq` on: first those already durable (from the
    /// store), then live ones, in order, each exactly once. The stream ends once the
    /// writer has stopped (shutdown, or every `Engine` handle dropped) and every entry it
    /// committed was delivered; until then it waits for entries (also for a `from_seq`
    /// beyond the head).
    pub fn subscribe(
        &self,
        from_seq: u64,
    ) -> impl Stream<Item = Result<CommittedEntry, SubscribeError>> + Send + use<> {
        self.observer().subscribe(from_seq)
    }

    /// Audits both copies beside the running writer, without disturbing it: every journal
    /// record up to where the journal ended when read, each compared with sled's copy
    /// (`ledger verify` from another process can check only the journal while this engine
    /// holds sled).
    pub async fn audit(&self) -> Result<crate::store::VerifyReport, OpenError> {
        let shared = Arc::clone(&self.shared);
        tokio::task::spawn_blocking(move || {
            crate::store::audit_live(&shared.root, &shared.reader, &mut |_| Ok(()))
        })
        .await
        .map_err(|_| OpenError::Task("audit"))?
    }

    /// A read-only handle ([`Observer`]: snapshots, head, subscriptions) that does not keep the writer
    /// alive: when every `Engine` handle is dropped the writer stops regardless.
    pub fn observer(&self) -> Observer {
        Observer { shared: Arc::clone(&self.shared) }
    }

    /// Stops the engine: commands queued before this call are committed (or refused) as
    /// usual; then the writer flushes sled and stops, and this returns once it has. Other
    /// clones of the handle get [`EngineError::Closed`] from then on, and subscriptions end
    /// once they have delivered every committed entry.
    pub async fn shutdown(self) -> Result<(), EngineError> {
        let Engine { queue, shared } = self;
        // Fails only if the writer is already gone, which is what was asked.
        let _ = queue.send(Msg::Shutdown).await;
        drop(queue);
        let handle = shared.writer.lock().ok().and_then(|mut slot| slot.take());
        if let Some(handle) = handle {
            tokio::task::spawn_blocking(move || handle.join())
                .await
                .map_err(|_| EngineError::WriterPanicked)?
                .map_err(|_| EngineError::WriterPanicked)?;
        }
        Ok(())
    }
}

/// A read-only handle: snapshots, the head and subscriptions (see [`Engine::observer`]).
#[derive(Clone)]
pub struct Observer {
    shared: Arc<Shared>,
}

impl Observer {
    /// The state after the last commit.
    pub fn state(&self) -> Arc<State> {
        match self.shared.state.read() {
            Ok(guard) => Arc::clone(&guard),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// Seq of the last durable entry.
    pub fn head(&self) -> u64 {
        *self.shared.head.borrow()
    }

    /// True once the writer has stopped (after every `Engine` handle was dropped or shut down).
    pub fn is_stopped(&self) -> bool {
        match self.shared.writer.lock() {
            Ok(slot) => slot.as_ref().is_none_or(|h| h.is_finished()),
            Err(_) => true,
        }
    }

    /// See [`Engine::subscribe`].
    pub fn subscribe(
        &self,
        from_seq: u64,
    ) -> impl Stream<Item = Result<CommittedEntry, SubscribeError>> + Send + use<> {
        let live = match self.shared.live.lock() {
            Ok(slot) => slot.as_ref().map(broadcast::Sender::subscribe),
            Err(poisoned) => poisoned.into_inner().as_ref().map(broadcast::Sender::subscribe),
        };
        // The writer has stopped: a receiver whose channel is already closed.
        let live = live.unwrap_or_else(|| broadcast::channel(1).1);
        let sub = Subscription {
            next_seq: from_seq,
            live,
            head: self.shared.head.subscribe(),
            reader: self.shared.reader.clone(),
            buffered: std::collections::VecDeque::new(),
            done: false,
            closed: false,
        };
        futures::stream::unfold(sub, |mut sub| async move { sub.next().await.map(|item| (item, sub)) })
    }
}

/// The writer thread: owns the ledger until the queue closes.
fn writer(
    mut ledger: Ledger<DiskStore>,
    mut rx: mpsc::Receiver<Msg>,
    shared: Arc<Shared>,
    live: broadcast::Sender<Arc<Vec<CommittedEntry>>>,
    options: Options,
) {
    let max_batch = options.max_batch.max(1);
    let mut failed: Option<StorageError> = None;
    let mut pending: Vec<Request> = Vec::new();
    let mut stopping = false;
    loop {
        if pending.is_empty() {
            if stopping {
                break;
            }
            match rx.blocking_recv() {
                Some(Msg::Submit(first)) => pending.push(first),
                Some(Msg::Shutdown) | None => break,
            }
        }
        let deadline = options.max_wait.map(|w| Instant::now() + w);
        while pending.len() < max_batch && !stopping {
            match rx.try_recv() {
                Ok(Msg::Submit(r)) => pending.push(r),
                Ok(Msg::Shutdown) => stopping = true,
                Err(mpsc::error::TryRecvError::Empty) => match deadline {
                    Some(d) if Instant::now() < d => std::thread::sleep(Duration::from_micros(50)),
                    _ => break,
                },
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            }
        }
        if let Some(first) = &failed {
            for r in pending.drain(..) {
                let _ = r.reply.send(Err(EngineError::Storage(first.clone())));
            }
            continue;
        }
        // Move the commands out (no copy of any payload); the replies stay in order.
        let (commands, replies): (Vec<Command>, Vec<_>) =
            pending.drain(..).map(|r| (r.command, r.reply)).unzip();
        let span = tracing::debug_span!(
            "group_commit",
            commands = commands.len(),
            entries = tracing::field::Empty,
            latency_us = tracing::field::Empty
        );
        let _entered = span.enter();
        let started = Instant::now();
        let head_before = ledger.store().head().seq;
        let (results, processed) = ledger.submit_batch(&commands, Ctx { time_ms: now_ms() });
        let head_after = ledger.store().head().seq;
        span.record("entries", head_after - head_before);
        span.record("latency_us", u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX));
        if head_after > head_before {
            publish(&ledger, &shared, &live, head_after);
        }
        let processed = processed.min(commands.len());
        let mut replies = replies.into_iter();
        for (reply, result) in replies.by_ref().take(processed).zip(results) {
            let result = result.map_err(EngineError::from);
            if let Err(EngineError::Storage(first)) = &result {
                failed.get_or_insert_with(|| first.clone());
            }
            let _ = reply.send(result);
        }
        // What did not fit the frame bounds goes first into the next group commit.
        pending = commands
            .into_iter()
            .skip(processed)
            .zip(replies)
            .map(|(command, reply)| Request { command, reply })
            .collect();
    }
    // Later requests (from clones of the handle) are refused at once: the queue is gone.
    drop(rx);
    // Close the live channel: every subscription ends once it has caught up.
    match shared.live.lock() {
        Ok(mut slot) => drop(slot.take()),
        Err(poisoned) => drop(poisoned.into_inner().take()),
    }
    drop(live);
    let _ = ledger.store().flush_index();
}

/// Publishes a commit: the new snapshot, the new head, then the entries to live subscribers.
fn publish(
    ledger: &Ledger<DiskStore>,
    shared: &Shared,
    live: &broadcast::Sender<Arc<Vec<CommittedEntry>>>,
    to: u64,
) {
    let snapshot = Arc::new(ledger.state().clone());
    match shared.state.write() {
        Ok(mut guard) => *guard = snapshot,
        Err(poisoned) => *poisoned.into_inner() = snapshot,
    }
    shared.head.send_replace(to);
    if live.receiver_count() == 0 {
        // No live subscriber: nothing to copy (a later one catches up from the store).
        return;
    }
    let entries: Vec<CommittedEntry> = ledger
        .last_committed()
        .iter()
        .map(|s| CommittedEntry { seq: s.entry.seq, hash: s.hash, entry: s.entry.clone() })
        .collect();
    let _ = live.send(Arc::new(entries));
}

struct Subscription {
    next_seq: u64,
    live: broadcast::Receiver<Arc<Vec<CommittedEntry>>>,
    head: watch::Receiver<u64>,
    reader: StoreReader,
    buffered: std::collections::VecDeque<CommittedEntry>,
    done: bool,
    /// The writer has stopped: no live commit will come.
    closed: bool,
}

/// Entries per catch-up read from the store.
const CATCH_UP_CHUNK: u64 = 1024;

impl Subscription {
    async fn next(&mut self) -> Option<Result<CommittedEntry, SubscribeError>> {
        loop {
            if self.done {
                return None;
            }
            if let Some(e) = self.buffered.pop_front() {
                if e.seq == self.next_seq {
                    self.next_seq += 1;
                    return Some(Ok(e));
                }
                continue;
            }
            // Catch up from the store while it holds what we have not seen.
            let head = *self.head.borrow();
            if self.next_seq <= head {
                let to = head.min(self.next_seq.saturating_add(CATCH_UP_CHUNK - 1));
                match self.reader.read_range(self.next_seq, to) {
                    Ok(entries) if !entries.is_empty() => {
                        self.buffered = entries
                            .into_iter()
                            .map(|s| CommittedEntry { seq: s.entry.seq, hash: s.hash, entry: s.entry })
                            .collect();
                        continue;
                    }
                    Ok(_) if self.closed => {
                        self.done = true;
                        continue;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        self.done = true;
                        return Some(Err(read_error(e)));
                    }
                }
            }
            // Then follow live commits; a gap or a lag sends us back to the store.
            match self.live.recv().await {
                Ok(frame) => {
                    let first = frame.first().map_or(self.next_seq, |e| e.seq);
                    if first <= self.next_seq {
                        self.buffered.extend(frame.iter().filter(|e| e.seq >= self.next_seq).cloned());
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => {
                    // The writer stopped: deliver what the store still holds, then end.
                    self.closed = true;
                    if self.next_seq > *self.head.borrow() {
                        self.done = true;
                    }
                }
            }
        }
    }
}

fn read_error(e: ReadError) -> SubscribeError {
    SubscribeError::Read(Arc::new(e))
}
