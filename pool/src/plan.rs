//! The reconciler's pure half: desired vs observed slots in, an action out.
//! Idempotent by construction: a plan is computed from the durable records,
//! so asking again after it was carried out yields no new action.

use protocol::SlotHealth;
use registry::CarrierRecord;

/// Why no provisioning may happen now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// More workers than the configured maximum.
    OverMax {
        /// The configured maximum.
        max: u32,
    },
    /// A slot's external effect is uncertain (first-uncertain fail-fast):
    /// nothing new is created until it is settled.
    Uncertain {
        /// The slot.
        slot: u32,
        /// Why.
        why: &'static str,
    },
}

/// What the pool should do to reach `desired`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Free slot numbers to provision, lowest first.
    pub provision: Vec<u32>,
}

/// Scale-down: how many live slots exceed `desired`, and the order to try
/// retiring them in (every live slot, highest first, so a protected tail slot
/// is passed over for the next one rather than blocking the scale-down).
pub fn retire_order(records: &[CarrierRecord], desired: u32) -> (usize, Vec<u32>) {
    let mut order: Vec<u32> = records.iter().filter(|r| live(r)).map(|r| r.slot).collect();
    order.sort_unstable_by(|a, b| b.cmp(a));
    (order.len().saturating_sub(desired as usize), order)
}

/// Whether a slot counts toward the pool's size. Lost and recovering slots do:
/// they are recovered, never replaced by a new logical worker.
pub fn live(record: &CarrierRecord) -> bool {
    match record.health {
        SlotHealth::Provisioning
        | SlotHealth::Parked
        | SlotHealth::Lost
        | SlotHealth::Recovering
        | SlotHealth::ReconcileRequired => true,
        SlotHealth::Retiring | SlotHealth::Retired => false,
    }
}

/// Plans toward `desired` slots over `records` (one pool), at `now_ms`.
pub fn plan(records: &[CarrierRecord], desired: u32, max: u32, now_ms: u64) -> Result<Plan, Hold> {
    if desired > max {
        return Err(Hold::OverMax { max });
    }
    for r in records {
        if r.health == SlotHealth::ReconcileRequired {
            return Err(Hold::Uncertain { slot: r.slot, why: "reconcile required" });
        }
        if r.health == SlotHealth::Provisioning
            && r.logical_worker_id.is_none()
            && r.awaiting_setup.is_none()
            && now_ms > r.expires_at_ms
        {
            return Err(Hold::Uncertain { slot: r.slot, why: "provisioning expired unadmitted" });
        }
    }
    let mut live_slots: Vec<u32> = records.iter().filter(|r| live(r)).map(|r| r.slot).collect();
    live_slots.sort_unstable();
    let held: Vec<u32> = records.iter().filter(|r| r.health != SlotHealth::Retired).map(|r| r.slot).collect();
    let count = live_slots.len() as u32;
    let mut plan = Plan::default();
    let mut slot = 0;
    while plan.provision.len() < desired.saturating_sub(count) as usize {
        if !held.contains(&slot) {
            plan.provision.push(slot);
        }
        slot += 1;
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::{RunId, WorkerId};

    fn rec(slot: u32, health: SlotHealth) -> CarrierRecord {
        CarrierRecord {
            managed_carrier_id: String::new(),
            run_id: RunId::from_uuid_bytes([1; 16]),
            slot,
            operation_id: String::new(),
            reserved_worker: WorkerId::from_uuid_bytes([slot as u8; 16]),
            logical_worker_id: Some(WorkerId::from_uuid_bytes([slot as u8; 16])),
            conversation: None,
            executor_id: None,
            peer_fingerprint: None,
            continuation_epoch: 0,
            health,
            expires_at_ms: 100,
            bootstrapped: true,
            awaiting_setup: None,
            revision: 1,
        }
    }

    #[test]
    fn plans_only_missing_slots_and_holds_on_uncertainty() {
        use SlotHealth::*;
        assert_eq!(plan(&[], 3, 16, 0).unwrap().provision, vec![0, 1, 2]);
        let three = [rec(0, Parked), rec(1, Parked), rec(2, Parked)];
        assert_eq!(plan(&three, 3, 16, 0).unwrap(), Plan::default(), "replay: nothing to do");
        assert_eq!(plan(&three, 5, 16, 0).unwrap().provision, vec![3, 4]);
        assert_eq!(plan(&three, 1, 16, 0).unwrap(), Plan::default(), "scale-down is not provisioning");
        assert_eq!(retire_order(&three, 1), (2, vec![2, 1, 0]));
        let lost = [rec(0, Parked), rec(1, Lost), rec(2, Retired)];
        assert_eq!(
            plan(&lost, 3, 16, 0).unwrap().provision,
            vec![2],
            "a lost slot is recovered, not replaced; a retired slot is reused"
        );
        assert_eq!(plan(&three, 17, 16, 0), Err(Hold::OverMax { max: 16 }));
        let uncertain = [rec(0, Parked), rec(1, ReconcileRequired)];
        assert!(matches!(plan(&uncertain, 5, 16, 0), Err(Hold::Uncertain { slot: 1, .. })));
        let mut expired = rec(0, Provisioning);
        expired.logical_worker_id = None;
        assert!(matches!(plan(&[expired], 2, 16, 101), Err(Hold::Uncertain { slot: 0, .. })));
    }
}
