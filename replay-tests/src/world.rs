//! A ledger in memory at a chosen stage of the reference lifecycle, with checks that a
//! command or a forged event is refused by a named rule and that nothing was written.

use closure_ledger::ledger::{Ledger, Receipt, SubmitError};
use closure_ledger::lifecycle::Script;
use closure_ledger::runtime::{Command, Ctx, Rule};
use closure_ledger::store::{MemStore, Store};
use ledger_schema::Event;

use crate::{LEDGER, T0};

pub struct World {
    pub ledger: Ledger<MemStore>,
    pub time_ms: u64,
}

/// Stages of the reference lifecycle a test can start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Genesis only.
    Empty,
    /// Policy, profile, goal, sources, workflow in DISCOVERY (version 1).
    Setup,
    /// Through PLAN; in IMPLEMENT with generation 0x80 open (MUTABLE).
    Implementing,
    /// Generation 0x80 implemented and frozen (still in IMPLEMENT).
    Frozen,
    /// Evidence 0x90 FAIL; decision 0xa0 REJECT_REPAIRABLE in FINAL_VERIFY.
    Rejected,
    /// Repaired, re-implemented, ACCEPTed: the workflow is closed.
    Accepted,
}

impl World {
    pub fn at(stage: Stage) -> World {
        let mut world =
            World { ledger: Ledger::from_store(MemStore::new(LEDGER, "t", T0)).unwrap(), time_ms: T0 };
        {
            let mut s = world.script();
            if stage >= Stage::Setup {
                s.setup().unwrap();
            }
            if stage >= Stage::Implementing {
                s.discover_and_plan().unwrap();
            }
            if stage >= Stage::Frozen {
                s.implement_first().unwrap();
            }
            if stage >= Stage::Rejected {
                s.reject_first().unwrap();
            }
            if stage >= Stage::Accepted {
                s.repair_and_accept().unwrap();
            }
            let t = s.time_ms;
            world.time_ms = t;
        }
        world
    }

    /// The lifecycle script over this world's ledger.
    pub fn script(&mut self) -> Script<'_, MemStore> {
        Script { ledger: &mut self.ledger, time_ms: self.time_ms, log: Vec::new() }
    }

    /// Runs `f` with the script, keeping the clock.
    pub fn with<R>(&mut self, f: impl FnOnce(&mut Script<'_, MemStore>) -> R) -> R {
        let mut s = Script { ledger: &mut self.ledger, time_ms: self.time_ms, log: Vec::new() };
        let r = f(&mut s);
        self.time_ms = s.time_ms;
        r
    }

    fn ctx(&mut self) -> Ctx {
        self.time_ms += 1000;
        Ctx { time_ms: self.time_ms }
    }

    pub fn ok(&mut self, command: Command) -> Receipt {
        let ctx = self.ctx();
        let kind = command.kind();
        self.ledger.submit(&command, ctx).unwrap_or_else(|e| panic!("{kind} refused: {e}"))
    }

    /// Submits `command`, expects `Err`, and checks not one stored byte and not one bit of
    /// state changed. Returns the error.
    pub fn fails(&mut self, command: Command) -> SubmitError {
        let ctx = self.ctx();
        let frames = self.ledger.store().frames().to_vec();
        let digest = self.ledger.state().digest();
        let err = match self.ledger.submit(&command, ctx) {
            Ok(r) => panic!("{} was admitted at seq {}", command.kind(), r.seq),
            Err(e) => e,
        };
        assert_eq!(self.ledger.store().frames(), frames.as_slice(), "a refused command wrote bytes");
        assert_eq!(self.ledger.state().digest(), digest, "a refused command changed the state");
        err
    }

    /// `command` is refused by `rule`, writing nothing.
    pub fn refused(&mut self, command: Command, rule: Rule) {
        let kind = command.kind();
        let err = self.fails(command);
        assert_eq!(rule_of(&err), Some(rule), "{kind}: expected {rule:?}, got {err}");
    }

    /// A forged event (bypassing `decide`) is refused by `rule` in the admission step —
    /// so replay would refuse it too — writing nothing.
    pub fn forged(&mut self, event: Event, rule: Rule) {
        let kind = event.kind();
        let err = self.forged_error(vec![event]);
        assert_eq!(rule_of(&err), Some(rule), "{kind}: expected {rule:?}, got {err}");
    }

    /// Admits forged events, expects `Err`, checks nothing changed.
    pub fn forged_error(&mut self, events: Vec<Event>) -> SubmitError {
        let ctx = self.ctx();
        let frames = self.ledger.store().frames().to_vec();
        let digest = self.ledger.state().digest();
        let err = match self.ledger.admit(events, ctx) {
            Ok(r) => panic!("a forged event was admitted at seq {}", r.seq),
            Err(e) => e,
        };
        assert_eq!(self.ledger.store().frames(), frames.as_slice(), "a refused event wrote bytes");
        assert_eq!(self.ledger.state().digest(), digest, "a refused event changed the state");
        err
    }

    /// The recorded event of kind `kind` most recently written.
    pub fn last_event(&self, kind: &str) -> Event {
        let head = self.ledger.store().head().seq;
        let entries = self.ledger.store().read_range(0, head).unwrap();
        entries.into_iter().rev().find(|e| e.entry.event.kind() == kind).map(|e| e.entry.event).unwrap()
    }
}

/// The rule behind a refusal, if it was a rule.
pub fn rule_of(err: &SubmitError) -> Option<Rule> {
    err.refusal().and_then(|r| r.rule())
}
