//! The runtime pool's registry: one secret-free record per managed carrier
//! (runtime slot), folded from the same event log as everything else.
//!
//! A record ties a runtime slot to the worker reserved for it, the exact
//! conversation its executor observed, the MCP peer that proved it reached
//! us, and its health. Browser tab or target ids never reach the daemon: the
//! executor keeps those ephemeral handles; the durable identity is the
//! conversation UUID. No token, cookie or secret is ever recorded.
//!
//! Architecture invariant: pure (no IO); a conflicting log (two records on
//! one slot, one conversation on two slots, an event for an unknown slot)
//! fails the fold, which the control plane reports as `RECONCILE_REQUIRED`
//! without touching worker or task truth.

use std::collections::{BTreeMap, HashMap};

use protocol::executor::CommandOutcome;
use protocol::{CommandIntent, ConversationId, ErrorCode, Event, EventBody, RunId, SlotHealth, WorkerId};

/// One managed carrier.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CarrierRecord {
    /// Stable id: `mc-<run>-<slot>`.
    pub managed_carrier_id: String,
    /// The run (pool) it belongs to.
    pub run_id: RunId,
    /// The runtime slot.
    pub slot: u32,
    /// The provisioning operation that created it.
    pub operation_id: String,
    /// The worker reserved for the slot.
    pub reserved_worker: WorkerId,
    /// The admitted logical worker; absent until admission completes.
    pub logical_worker_id: Option<WorkerId>,
    /// The exact conversation (UUID, canonical URL) its executor observed.
    pub conversation: Option<(ConversationId, String)>,
    /// The executor holding the conversation.
    pub executor_id: Option<String>,
    /// Fingerprint of the admitted MCP peer.
    pub peer_fingerprint: Option<String>,
    /// Bumped on every recovery: which reopening of the conversation is current.
    pub continuation_epoch: u32,
    /// Health.
    pub health: SlotHealth,
    /// Unadmitted provisioning expires at this time.
    pub expires_at_ms: u64,
    /// Whether the bootstrap (create) command completed successfully.
    pub bootstrapped: bool,
    /// The host or setup state its last create was refused for (nothing was
    /// submitted); cleared when a retry is queued. Such a slot waits for the
    /// operator, so its provisioning expiry does not make it uncertain.
    pub awaiting_setup: Option<ErrorCode>,
    /// Compare-and-swap revision: bumped on every change.
    pub revision: u64,
}

/// The registry of every run's pool.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Registry {
    #[serde(with = "pairs")]
    records: BTreeMap<(RunId, u32), CarrierRecord>,
    by_worker: HashMap<WorkerId, (RunId, u32)>,
    by_conversation: HashMap<ConversationId, (RunId, u32)>,
    /// Commands issued for slots' workers: create/open/close, to fold outcomes.
    commands: HashMap<protocol::CommandId, (WorkerId, CommandIntent)>,
}

/// A map keyed by tuples, serialized as a list of pairs (a JSON object's
/// keys are strings).
mod pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, K: Serialize, V: Serialize>(
        map: &BTreeMap<K, V>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(map.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>, K: Deserialize<'de> + Ord, V: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<BTreeMap<K, V>, D::Error> {
        Vec::<(K, V)>::deserialize(deserializer).map(|pairs| pairs.into_iter().collect())
    }
}

/// The log contradicts the registry: fail closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("registry conflict: {0}")]
pub struct Conflict(pub String);

impl Registry {
    /// The records of a run's pool, by slot.
    pub fn pool(&self, run: &RunId) -> impl Iterator<Item = &CarrierRecord> {
        self.records.range((run.clone(), 0)..=(run.clone(), u32::MAX)).map(|(_, r)| r)
    }

    /// The record of a worker's slot, if the worker belongs to a pool.
    pub fn by_worker(&self, worker: &WorkerId) -> Option<&CarrierRecord> {
        self.by_worker.get(worker).and_then(|k| self.records.get(k))
    }

    /// The record of a slot.
    pub fn slot(&self, run: &RunId, slot: u32) -> Option<&CarrierRecord> {
        self.records.get(&(run.clone(), slot))
    }

    fn record_of(&mut self, worker: &WorkerId) -> Option<&mut CarrierRecord> {
        let key = self.by_worker.get(worker)?.clone();
        self.records.get_mut(&key)
    }

    /// Folds one event in. Events unrelated to pool slots pass through.
    pub fn apply(&mut self, event: &Event) -> Result<(), Conflict> {
        match &event.body {
            EventBody::RuntimeSlotProvisioning { operation_id, slot, worker_id, expires_at_ms } => {
                let key = (event.run_id.clone(), *slot);
                if let Some(old) = self.records.get(&key)
                    && old.health != SlotHealth::Retired
                {
                    return Err(Conflict(format!("slot {slot} provisioned while held by {}", old.reserved_worker)));
                }
                if self.by_worker.contains_key(worker_id) {
                    return Err(Conflict(format!("worker {worker_id} provisioned twice")));
                }
                let revision = self.records.get(&key).map_or(0, |r| r.revision) + 1;
                if let Some(old) = self.records.get(&key)
                    && let Some((conversation, _)) = &old.conversation
                {
                    self.by_conversation.remove(conversation);
                }
                self.by_worker.insert(worker_id.clone(), key.clone());
                self.records.insert(
                    key,
                    CarrierRecord {
                        managed_carrier_id: format!("mc-{}-{slot}", event.run_id),
                        run_id: event.run_id.clone(),
                        slot: *slot,
                        operation_id: operation_id.clone(),
                        reserved_worker: worker_id.clone(),
                        logical_worker_id: None,
                        conversation: None,
                        executor_id: None,
                        peer_fingerprint: None,
                        continuation_epoch: 0,
                        health: SlotHealth::Provisioning,
                        expires_at_ms: *expires_at_ms,
                        bootstrapped: false,
                        awaiting_setup: None,
                        revision,
                    },
                );
            }
            EventBody::CommandQueued { command_id, worker_id, intent, .. }
                if self.by_worker.contains_key(worker_id) =>
            {
                self.commands.insert(command_id.clone(), (worker_id.clone(), intent.clone()));
                if *intent == CommandIntent::Create
                    && let Some(record) = self.record_of(worker_id)
                    && record.awaiting_setup.take().is_some()
                {
                    record.revision += 1;
                }
            }
            EventBody::ConversationBound { worker_id, conversation_id, url, executor_id } => {
                let Some(key) = self.by_worker.get(worker_id).cloned() else { return Ok(()) };
                if let Some(other) = self.by_conversation.get(conversation_id).filter(|k| **k != key) {
                    return Err(Conflict(format!(
                        "conversation {conversation_id} mapped to slots {} and {}",
                        other.1, key.1
                    )));
                }
                let record = self.records.get_mut(&key).expect("indexed");
                if let Some((bound, _)) = &record.conversation {
                    if bound != conversation_id {
                        // Changed identity under one operation: fence, never overwrite.
                        record.health = SlotHealth::ReconcileRequired;
                        record.revision += 1;
                    }
                    return Ok(());
                }
                record.conversation = Some((conversation_id.clone(), url.clone()));
                record.executor_id = Some(executor_id.clone());
                record.revision += 1;
                self.by_conversation.insert(conversation_id.clone(), key);
            }
            EventBody::ConversationError { worker_id, code: ErrorCode::ConversationIdentityDrift, .. } => {
                if let Some(record) = self.record_of(worker_id) {
                    record.health = SlotHealth::ReconcileRequired;
                    record.revision += 1;
                }
            }
            EventBody::CommandCompleted { command_id, worker_id, outcome } => {
                let Some((_, intent)) = self.commands.remove(command_id) else { return Ok(()) };
                let Some(record) = self.record_of(worker_id) else { return Ok(()) };
                let uncertain = matches!(
                    outcome,
                    CommandOutcome::Error {
                        code: ErrorCode::OutcomeUnknown | ErrorCode::AmbiguousSubmission | ErrorCode::ReconcileRequired,
                        ..
                    }
                );
                match (intent, outcome) {
                    (CommandIntent::Create, CommandOutcome::Ok { .. }) => record.bootstrapped = true,
                    // A recover's reopen, or the daemon's own before a prompt
                    // (a lost tab leaves its worker parked): the tab is back.
                    (CommandIntent::Open, CommandOutcome::Ok { .. })
                        if matches!(record.health, SlotHealth::Recovering | SlotHealth::Lost) =>
                    {
                        record.health = SlotHealth::Parked;
                    }
                    (CommandIntent::Close, CommandOutcome::Ok { .. }) if record.health == SlotHealth::Retiring => {
                        record.health = SlotHealth::Retired;
                    }
                    _ if uncertain => record.health = SlotHealth::ReconcileRequired,
                    // A create refused for a host or setup state submitted
                    // nothing: the slot waits for the setup, then a recover.
                    (CommandIntent::Create, CommandOutcome::Error { code, .. }) if code.is_host_state() => {
                        record.awaiting_setup = Some(*code);
                    }
                    (CommandIntent::Create | CommandIntent::Open, CommandOutcome::Error { .. }) => {
                        record.health = SlotHealth::Lost
                    }
                    _ => {}
                }
                record.revision += 1;
            }
            EventBody::CommandCancelled { command_id, .. } => {
                self.commands.remove(command_id);
            }
            EventBody::ConversationClosed { worker_id } => {
                if let Some(record) = self.record_of(worker_id)
                    && matches!(record.health, SlotHealth::Parked | SlotHealth::Provisioning)
                {
                    record.health = SlotHealth::Lost;
                    record.revision += 1;
                }
            }
            EventBody::RuntimeSlotAdmitted { slot, worker_id, peer_fingerprint } => {
                let record = self
                    .records
                    .get_mut(&(event.run_id.clone(), *slot))
                    .filter(|r| r.reserved_worker == *worker_id)
                    .ok_or_else(|| Conflict(format!("admission for unknown slot {slot}")))?;
                record.logical_worker_id = Some(worker_id.clone());
                record.peer_fingerprint = Some(peer_fingerprint.clone());
                record.health = SlotHealth::Parked;
                record.revision += 1;
            }
            EventBody::RuntimeSlotHealth { slot, worker_id, health, .. } => {
                let record = self
                    .records
                    .get_mut(&(event.run_id.clone(), *slot))
                    .filter(|r| r.reserved_worker == *worker_id)
                    .ok_or_else(|| Conflict(format!("health for unknown slot {slot}")))?;
                if *health == SlotHealth::Recovering {
                    record.continuation_epoch += 1;
                }
                record.health = *health;
                record.revision += 1;
            }
            _ => {}
        }
        Ok(())
    }
}
