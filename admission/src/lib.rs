//! Admission: deciding whether the MCP peer calling `runtime_bootstrap` is the
//! exact conversation a pool slot was provisioned for.
//!
//! The claim must carry the slot's attach identity (verified upstream; it
//! names the reserved worker), the slot's executor must already have bound the
//! exact conversation and completed the bootstrap submission, the record must
//! be unexpired, and the peer must be the first peer admitted for it. Knowing
//! a label, a request id or a URL alone is never enough. Pure; no IO.

use protocol::{ErrorCode, SlotHealth, WorkerId};
use registry::CarrierRecord;

/// The fingerprint of a peer without a transport session (stateless HTTP,
/// stdio): every such peer looks the same, so a slot admitted to one is
/// never admitted again, to anyone — not even, indistinguishably, to itself.
pub const SESSIONLESS: &str = "sessionless";

/// What prefixes the fingerprint of a peer proven by caller attribution to
/// be calling from one conversation (`conversation:<uuid>`): it is
/// recognized again on every attributed call, whatever its transport.
pub const CONVERSATION_PEER: &str = "conversation:";

/// The fingerprint of a call attributed to `conversation`.
pub fn conversation_peer(conversation: &protocol::ConversationId) -> String {
    format!("{CONVERSATION_PEER}{conversation}")
}

/// A peer's claim on a slot.
#[derive(Debug, Clone)]
pub struct Claim<'a> {
    /// The worker the attach identity names.
    pub worker: &'a WorkerId,
    /// Fingerprint of the calling MCP peer (its transport session).
    pub peer_fingerprint: &'a str,
    /// Now, from the injected clock.
    pub now_ms: u64,
}

/// What admission decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// First admission: record it.
    Admit,
    /// The same peer again (a replayed bootstrap): nothing to record.
    AlreadyAdmitted,
}

/// Why a claim was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The attach identity names a worker of no pool slot.
    #[error("the attach identity names no pool slot")]
    NotPooled,
    /// The worker is not the one reserved for the slot.
    #[error("the claim does not match the slot's reserved worker")]
    WrongWorker,
    /// The executor has not observed the exact conversation, or the bootstrap
    /// submission has not completed: the caller cannot be tied to the slot.
    #[error("the slot's exact conversation is not bound and bootstrapped yet")]
    Unresolved,
    /// The provisioning record expired before admission.
    #[error("the provisioning record expired")]
    Expired,
    /// Another peer was already admitted for this slot.
    #[error("another MCP peer holds this slot")]
    OtherPeer,
    /// The slot was admitted to a sessionless peer, and no later caller can
    /// be told apart from it: refused rather than admitted twice.
    #[error("the slot's peer had no session; a second claim cannot be told apart from it")]
    Indistinct,
    /// The slot's admitted peer had a transport session that is gone (every
    /// session ends with a daemon restart): its worker's next re-attach would
    /// come from a new session, which cannot be told apart from a stranger.
    #[error("the slot's admitted MCP session is gone; its worker cannot be recognized again")]
    SessionGone,
    /// The slot is fenced (uncertain effect, retiring or retired).
    #[error("the slot is {0:?}")]
    Fenced(SlotHealth),
}

impl Refusal {
    /// The stable wire code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Refusal::NotPooled | Refusal::WrongWorker => ErrorCode::Forbidden,
            Refusal::Unresolved | Refusal::OtherPeer | Refusal::Indistinct | Refusal::SessionGone => {
                ErrorCode::PeerIdentityUnresolved
            }
            Refusal::Expired => ErrorCode::InvalidTransition,
            Refusal::Fenced(SlotHealth::ReconcileRequired) => ErrorCode::ReconcileRequired,
            Refusal::Fenced(_) => ErrorCode::InvalidTransition,
        }
    }
}

/// Decides a claim against the slot's record.
pub fn admit(record: &CarrierRecord, claim: &Claim<'_>) -> Result<Admission, Refusal> {
    if record.reserved_worker != *claim.worker {
        return Err(Refusal::WrongWorker);
    }
    match record.health {
        SlotHealth::Provisioning | SlotHealth::Parked | SlotHealth::Lost | SlotHealth::Recovering => {}
        health @ (SlotHealth::Retiring | SlotHealth::Retired | SlotHealth::ReconcileRequired) => {
            return Err(Refusal::Fenced(health));
        }
    }
    // An attributed claim must come from the slot's own conversation.
    if let Some(proven) = claim.peer_fingerprint.strip_prefix(CONVERSATION_PEER)
        && record.conversation.as_ref().is_none_or(|(c, _)| c.to_string() != proven)
    {
        return Err(if record.conversation.is_none() { Refusal::Unresolved } else { Refusal::OtherPeer });
    }
    if let Some(peer) = &record.peer_fingerprint {
        return match (peer.as_str(), peer == claim.peer_fingerprint) {
            (SESSIONLESS, _) => Err(Refusal::Indistinct),
            (_, true) => Ok(Admission::AlreadyAdmitted),
            (_, false) => Err(Refusal::OtherPeer),
        };
    }
    if claim.now_ms > record.expires_at_ms {
        return Err(Refusal::Expired);
    }
    if record.conversation.is_none() || !record.bootstrapped {
        return Err(Refusal::Unresolved);
    }
    Ok(Admission::Admit)
}

/// Whether the worker of an admitted slot can act on a wake: every wake makes
/// it re-attach, and only its admitted peer is let back in. That peer must
/// still be recognizable: a session peer while its session is `alive` in this
/// process, a sessionless peer never (see [`Refusal::Indistinct`]), a peer
/// proven by caller attribution always (each of its calls proves it again).
/// A slot that fails this is not ready and gets no task. `Ok` for a slot not admitted yet (nothing to recognize).
pub fn recognizable(record: &CarrierRecord, alive: &dyn Fn(&str) -> bool) -> Result<(), Refusal> {
    match record.peer_fingerprint.as_deref() {
        None => Ok(()),
        Some(SESSIONLESS) => Err(Refusal::Indistinct),
        // Proven anew, by attribution, on each of its calls.
        Some(peer) if peer.starts_with(CONVERSATION_PEER) => Ok(()),
        Some(peer) if alive(peer) => Ok(()),
        Some(_) => Err(Refusal::SessionGone),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::RunId;

    fn record() -> CarrierRecord {
        CarrierRecord {
            managed_carrier_id: "mc".into(),
            run_id: RunId::from_uuid_bytes([1; 16]),
            slot: 0,
            operation_id: "op".into(),
            reserved_worker: WorkerId::from_uuid_bytes([2; 16]),
            logical_worker_id: None,
            conversation: Some(("0196b2c4-8e1f-7a3b-9c2d-4e5f60718293".parse().unwrap(), "u".into())),
            executor_id: Some("ext".into()),
            peer_fingerprint: None,
            continuation_epoch: 0,
            health: SlotHealth::Provisioning,
            expires_at_ms: 1_000,
            bootstrapped: true,
            awaiting_setup: None,
            revision: 3,
        }
    }

    #[test]
    fn an_attributed_claim_is_admitted_only_for_the_records_own_conversation_and_always_recognized() {
        let r = record();
        let w = r.reserved_worker.clone();
        let own = conversation_peer(&r.conversation.as_ref().unwrap().0);
        let other = conversation_peer(&"0196b2c4-8e1f-7a3b-9c2d-4e5f60718299".parse().unwrap());
        let claim = |peer: &str| admit(&r, &Claim { worker: &w, peer_fingerprint: peer, now_ms: 1 });
        assert_eq!(claim(&own), Ok(Admission::Admit));
        assert_eq!(claim(&other), Err(Refusal::OtherPeer), "attributed to another conversation");
        let mut unbound = record();
        unbound.conversation = None;
        assert_eq!(admit(&unbound, &Claim { worker: &w, peer_fingerprint: &own, now_ms: 1 }), Err(Refusal::Unresolved));
        let mut admitted = record();
        admitted.peer_fingerprint = Some(own.clone());
        assert_eq!(
            admit(&admitted, &Claim { worker: &w, peer_fingerprint: &own, now_ms: 1 }),
            Ok(Admission::AlreadyAdmitted)
        );
        // No session to outlive: attribution proves it on every call.
        assert_eq!(recognizable(&admitted, &|_| false), Ok(()));
    }

    #[test]
    fn only_the_exact_bound_bootstrapped_unexpired_slot_admits_its_first_peer() {
        let r = record();
        let w = r.reserved_worker.clone();
        let claim = |peer, now| Claim { worker: &w, peer_fingerprint: peer, now_ms: now };
        assert_eq!(admit(&r, &claim("p1", 500)), Ok(Admission::Admit));
        assert_eq!(admit(&r, &claim("p1", 5_000)), Err(Refusal::Expired));
        let other = WorkerId::from_uuid_bytes([9; 16]);
        assert_eq!(admit(&r, &Claim { worker: &other, peer_fingerprint: "p1", now_ms: 1 }), Err(Refusal::WrongWorker));
        let unbound = CarrierRecord { conversation: None, ..r.clone() };
        assert_eq!(admit(&unbound, &claim("p1", 1)), Err(Refusal::Unresolved));
        let unsent = CarrierRecord { bootstrapped: false, ..r.clone() };
        assert_eq!(admit(&unsent, &claim("p1", 1)), Err(Refusal::Unresolved));
        let admitted = CarrierRecord { peer_fingerprint: Some("p1".into()), health: SlotHealth::Parked, ..r.clone() };
        assert_eq!(admit(&admitted, &claim("p1", 9_999)), Ok(Admission::AlreadyAdmitted));
        assert_eq!(admit(&admitted, &claim("p2", 1)), Err(Refusal::OtherPeer), "same label, different peer");
        assert_eq!(recognizable(&admitted, &|p| p == "p1"), Ok(()));
        assert_eq!(recognizable(&admitted, &|_| false), Err(Refusal::SessionGone), "its session ended (a restart)");
        let sessionless = CarrierRecord { peer_fingerprint: Some(SESSIONLESS.into()), ..admitted.clone() };
        assert_eq!(recognizable(&sessionless, &|_| true), Err(Refusal::Indistinct));
        assert_eq!(recognizable(&r, &|_| false), Ok(()), "nothing admitted, nothing to recognize");
        let fenced = CarrierRecord { health: SlotHealth::ReconcileRequired, ..r };
        assert_eq!(admit(&fenced, &claim("p1", 1)).unwrap_err().code(), ErrorCode::ReconcileRequired);
    }
}
