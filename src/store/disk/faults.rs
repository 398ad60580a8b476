//! Injected failures for fault-injection tests: where ([`FaultPoint`]) and when
//! ([`FaultPlan`]).

/// Where a fault is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// The journal write stops half-way and errors.
    JournalWrite,
    /// The journal's fdatasync errors.
    Fdatasync,
    /// The sled insert errors (after the frame is durable).
    SledInsert,
    /// The journal's fdatasync errors, and so does cutting the unsynced bytes back out.
    FdatasyncAndCutBack,
}

/// Fail the operation at `point` once `after` earlier operations there have succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    pub point: FaultPoint,
    pub after: u64,
}

#[derive(Debug, Default)]
pub(in crate::store) struct Faults {
    pub(in crate::store) plan: Option<FaultPlan>,
    pub(in crate::store) seen: [u64; 4],
}

impl Faults {
    pub(super) fn hit(&mut self, point: FaultPoint) -> bool {
        let Some(plan) = self.plan else { return false };
        let slot = match point {
            FaultPoint::JournalWrite => 0,
            FaultPoint::Fdatasync => 1,
            FaultPoint::SledInsert => 2,
            FaultPoint::FdatasyncAndCutBack => 3,
        };
        let Some(seen) = self.seen.get_mut(slot) else {
            return false;
        };
        let fire = plan.point == point && *seen == plan.after;
        *seen += 1;
        fire
    }
}
