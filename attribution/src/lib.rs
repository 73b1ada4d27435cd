//! Caller attribution, sans IO. A capability says who a caller *claims*
//! to be; attribution proves which conversation made the call. ChatGPT
//! sends each connector call with an `x-request-id` header (`wfr_…/suffix`)
//! and stamps the same id (the part before `/`) as `metadata.request_id` on
//! messages of the calling turn in the conversation's page data: one id
//! per turn, shared by every connector call the turn makes (public
//! evidence: `../shared/CHATGPT-DOM.md`; totec448-spec/chat-on-steroids
//! `src/main/session/correlation.ts`, "Live ChatGPT gives every connector
//! request in one turn the same request_id"). An executor hosting the
//! conversation sees the id there and says so (`callerSeen`, with whether
//! it is the page's newest); the daemon accepts the call only when a
//! report made after the call started names the conversation bound to the
//! worker the capability belongs to, and calls the id the page's newest
//! (an earlier turn's id is a replay).
//!
//! - [`request_id`]: the call's id from its header values, refusing to guess.
//! - [`Sightings`]: what executors saw, bounded in size and age.
//! - [`judge`]: whether a sighting proves the call came from the worker's
//!   own conversation's current turn, or why not ([`Unidentified`], each
//!   with what to do).
//!
//! The async wait and the durable record of each worker's turns live with
//! the caller (the daemon's edge and control plane); nothing here reads a
//! clock.

use std::collections::{HashMap, VecDeque};

use protocol::ConversationId;
use protocol::WorkerId;
use protocol::executor::valid_request_id;

/// Why a call is not attributed: the `UNIDENTIFIED_CALLER` detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unidentified {
    /// No `x-request-id` header (a client no browser sees, or a host that
    /// does not send one).
    #[error(
        "this call carries no x-request-id, so it cannot be tied to a conversation; call from your own managed ChatGPT conversation (a client no browser sees needs a run created with attribution capability_only)"
    )]
    NoRequestId,
    /// More than one header, or one outside the form.
    #[error("this call's x-request-id is repeated or malformed; nothing is guessed")]
    MalformedRequestId,
    /// The worker has no conversation bound yet, so nothing can name it.
    #[error("this worker has no bound conversation yet; only its own conversation may call as it")]
    NotBound,
    /// No executor saw the request id within the wait.
    #[error(
        "no managed conversation showed this call within {waited_ms} ms: a capability works only in the conversation it was given to; if this is that conversation, its browser carrier may be disconnected"
    )]
    NotSeen {
        /// How long the daemon waited.
        waited_ms: u64,
    },
    /// The id was seen in a conversation other than the worker's own.
    #[error(
        "this call came from another conversation than the one this capability belongs to: stop using it here and answer the user"
    )]
    OtherConversation,
    /// The id belongs to an earlier turn of the conversation: the page
    /// shows a newer one, or a newer one attributed a call already.
    #[error("this call's request id belongs to a turn of this conversation that has ended: a replayed call is refused")]
    EarlierTurn,
    /// The executor holding the conversation speaks executor protocol v1,
    /// which has no way to report calls: waiting would only time out.
    #[error(
        "the browser carrier holding this conversation speaks executor protocol v1 and cannot report tool calls: update it, or use a run created with attribution capability_only"
    )]
    HolderCannotReport,
    /// Too many calls of this worker wait on attribution at once.
    #[error("too many calls made as this worker wait to be attributed at once; call again shortly")]
    TooManyWaiting,
}

/// Why attribution cannot work at all on this path, told from a refused
/// call (issue 45): a setup to fix before a run that requires it, not a
/// caller to distrust. Each names what the daemon saw and the ways on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// No `x-request-id` reached the daemon.
    #[error(
        "no x-request-id header reached the daemon: a proxy or tunnel in front of it strips the header, or the host sends none; let the header through, or create the run with attribution capability_only (a host that keeps one MCP session per conversation; its claims say so)"
    )]
    NoHeader,
    /// Calls carry an id, but no managed page showed any request id.
    #[error(
        "calls carry an x-request-id, but no managed page showed any request id: the browser carrier cannot read the page's ids (the page changed, or the carrier is old or disconnected); update the carrier, or create the run with attribution capability_only (a host that keeps one MCP session per conversation; its claims say so)"
    )]
    NotShown,
    /// Calls carry an id and the pages show ids, but never the calls' (or
    /// the header's id is not in the form ChatGPT's are).
    #[error(
        "calls carry an x-request-id and the managed pages show request ids, but never the calls' (the site stamps them in another form): create the run with attribution capability_only (a host that keeps one MCP session per conversation; its claims say so) and report it"
    )]
    OtherForm,
}

impl Unidentified {
    /// Whether this refusal says attribution cannot work on this path
    /// (`pages_show_ids`: the caller's conversation showed request ids
    /// lately), rather than that this caller is not who it claims.
    pub fn unavailable(&self, pages_show_ids: bool) -> Option<Unavailable> {
        match self {
            Unidentified::NoRequestId => Some(Unavailable::NoHeader),
            Unidentified::MalformedRequestId => Some(Unavailable::OtherForm),
            Unidentified::NotSeen { .. } if pages_show_ids => Some(Unavailable::OtherForm),
            Unidentified::NotSeen { .. } => Some(Unavailable::NotShown),
            _ => None,
        }
    }
}

/// The call's request id from its `x-request-id` header values: exactly one,
/// the part before its first `/`, 1-100 of `[A-Za-z0-9_-]`.
pub fn request_id<'a>(mut values: impl Iterator<Item = &'a [u8]>) -> Result<String, Unidentified> {
    let first = values.next().ok_or(Unidentified::NoRequestId)?;
    if values.next().is_some() {
        return Err(Unidentified::MalformedRequestId);
    }
    let text = std::str::from_utf8(first).map_err(|_| Unidentified::MalformedRequestId)?;
    let id = text.split('/').next().unwrap_or_default().trim();
    if valid_request_id(id) { Ok(id.to_owned()) } else { Err(Unidentified::MalformedRequestId) }
}

/// What an executor saw in one managed page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The executor that saw it.
    pub executor_id: String,
    /// The worker whose page it is (the executor's binding).
    pub worker_id: WorkerId,
    /// The conversation the page shows.
    pub conversation_id: ConversationId,
    /// When the daemon heard of it (ms).
    pub at_ms: u64,
}

/// Who a call must come from: the worker its capability (or attach
/// identity) names, its executor and its bound conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected<'a> {
    /// The worker.
    pub worker_id: &'a WorkerId,
    /// The executor holding its conversation.
    pub executor_id: &'a str,
    /// Its bound conversation.
    pub conversation_id: &'a ConversationId,
}

/// Whether `seen` (`newest`: its id is the newest its page shows) proves
/// the call came from `expected`'s own conversation, in its current turn.
pub fn judge(expected: &Expected<'_>, seen: &Sighting, newest: bool) -> Result<(), Unidentified> {
    if seen.conversation_id != *expected.conversation_id
        || seen.worker_id != *expected.worker_id
        || seen.executor_id != expected.executor_id
    {
        return Err(Unidentified::OtherConversation);
    }
    if !newest {
        return Err(Unidentified::EarlierTurn);
    }
    Ok(())
}

/// What executors saw, by request id: at most `capacity` entries, none
/// first seen longer than `max_age_ms` ago (an id asked for again is
/// reported again), each with its latest report: when it came and whether
/// the page then called the id its newest. A call is judged on a report
/// made after it started, so a report lost or outdated never speaks for
/// the page of now. The first sighting of an id stands: a second one
/// (another page claiming the same id) never replaces it, so a later
/// forgery cannot move a call to another conversation, and a conflict is
/// kept for the judge to refuse.
#[derive(Debug)]
pub struct Sightings {
    by_id: HashMap<String, Reported>,
    /// Conflicting sightings: the id was seen in two conversations.
    conflicted: HashMap<String, u64>,
    order: VecDeque<(u64, String)>,
    capacity: usize,
    max_age_ms: u64,
}

/// A sighting and its latest report.
#[derive(Debug)]
struct Reported {
    first: Sighting,
    last_ms: u64,
    newest: bool,
}

impl Sightings {
    /// An empty store.
    pub fn new(capacity: usize, max_age_ms: u64) -> Sightings {
        Sightings {
            by_id: HashMap::new(),
            conflicted: HashMap::new(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            max_age_ms,
        }
    }

    /// Records a report (`newest`: the page showed no newer id); true when
    /// a waiter may look again.
    pub fn record(&mut self, request_id: &str, seen: Sighting, newest: bool) -> bool {
        self.expire(seen.at_ms);
        if let Some(known) = self.by_id.get_mut(request_id) {
            let same = known.first.conversation_id == seen.conversation_id
                && known.first.worker_id == seen.worker_id
                && known.first.executor_id == seen.executor_id;
            if !same {
                return self.conflicted.insert(request_id.to_owned(), seen.at_ms).is_none();
            }
            (known.last_ms, known.newest) = (seen.at_ms, newest);
            return true;
        }
        while self.by_id.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_front() else { break };
            self.forget(&oldest);
        }
        self.order.push_back((seen.at_ms, request_id.to_owned()));
        self.by_id.insert(request_id.to_owned(), Reported { last_ms: seen.at_ms, first: seen, newest });
        true
    }

    /// The sighting of `request_id` as reported at or after `since_ms`, and
    /// whether that report called it its page's newest: `Err` if two pages
    /// claimed it (nothing is guessed), `Ok(None)` if no report that recent.
    pub fn get(&self, request_id: &str, since_ms: u64) -> Result<Option<(&Sighting, bool)>, Unidentified> {
        if self.conflicted.contains_key(request_id) {
            return Err(Unidentified::OtherConversation);
        }
        Ok(self.by_id.get(request_id).filter(|r| r.last_ms >= since_ms).map(|r| (&r.first, r.newest)))
    }

    /// Whether a kept sighting (recent: old ones expire) came from a page
    /// showing `conversation`.
    pub fn shown_in(&self, conversation: &ConversationId) -> bool {
        self.by_id.values().any(|r| r.first.conversation_id == *conversation)
    }

    /// How many sightings are kept.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    fn forget(&mut self, request_id: &str) {
        self.by_id.remove(request_id);
        self.conflicted.remove(request_id);
    }

    fn expire(&mut self, now_ms: u64) {
        while let Some((at, _)) = self.order.front() {
            if now_ms.saturating_sub(*at) <= self.max_age_ms {
                break;
            }
            let (_, id) = self.order.pop_front().expect("a front exists");
            self.forget(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(n: u8) -> WorkerId {
        WorkerId::from_uuid_bytes([n; 16])
    }

    fn conversation(n: u8) -> ConversationId {
        format!("0196b2c4-8e1f-7a3b-9c2d-4e5f607182{n:02}").parse().unwrap()
    }

    fn seen(w: u8, c: u8, at_ms: u64) -> Sighting {
        Sighting { executor_id: "ext-1".into(), worker_id: worker(w), conversation_id: conversation(c), at_ms }
    }

    #[test]
    fn the_request_id_is_the_one_header_before_its_slash_and_nothing_is_guessed() {
        let one = |v: &str| request_id(std::iter::once(v.as_bytes()));
        assert_eq!(one("wfr_0197a1b2c3/yqy1"), Ok("wfr_0197a1b2c3".into()));
        assert_eq!(one("wfr_0197a1b2c3"), Ok("wfr_0197a1b2c3".into()));
        assert_eq!(request_id(std::iter::empty()), Err(Unidentified::NoRequestId));
        for bad in ["", "/x", "wfr 1", "wfr_<script>", &"a".repeat(101)] {
            assert_eq!(one(bad), Err(Unidentified::MalformedRequestId), "{bad:?}");
        }
        let two = [b"wfr_a".as_slice(), b"wfr_b".as_slice()];
        assert_eq!(request_id(two.into_iter()), Err(Unidentified::MalformedRequestId));
    }

    #[test]
    fn only_the_workers_own_conversation_on_its_executor_in_its_current_turn_attributes() {
        let (w, c) = (worker(1), conversation(1));
        let expected = Expected { worker_id: &w, executor_id: "ext-1", conversation_id: &c };
        assert_eq!(judge(&expected, &seen(1, 1, 0), true), Ok(()));
        assert_eq!(judge(&expected, &seen(1, 1, 0), false), Err(Unidentified::EarlierTurn), "an ended turn's id");
        assert_eq!(judge(&expected, &seen(2, 2, 0), true), Err(Unidentified::OtherConversation));
        let mut elsewhere = seen(1, 1, 0);
        elsewhere.executor_id = "cdp-2".into();
        assert_eq!(judge(&expected, &elsewhere, true), Err(Unidentified::OtherConversation));
    }

    #[test]
    fn the_first_sighting_stands_a_conflict_refuses_and_old_ones_go() {
        let mut s = Sightings::new(2, 1_000);
        assert!(s.record("wfr_a", seen(1, 1, 0), true));
        let (first, newest) = s.get("wfr_a", 0).unwrap().unwrap();
        assert_eq!((first.conversation_id.clone(), newest), (conversation(1), true));
        // Another page claiming the same id: nothing is guessed.
        assert!(s.record("wfr_a", seen(2, 2, 20), true));
        assert_eq!(s.get("wfr_a", 20), Err(Unidentified::OtherConversation));
        // Bounded in number (oldest out) and in age.
        s.record("wfr_b", seen(1, 1, 30), true);
        s.record("wfr_c", seen(1, 1, 40), true);
        assert_eq!(s.len(), 2);
        assert_eq!(s.get("wfr_a", 0), Ok(None));
        s.record("wfr_d", seen(1, 1, 5_000), true);
        assert_eq!(s.len(), 1, "expired entries are dropped");
    }

    #[test]
    fn a_path_without_attribution_is_told_apart_from_a_caller_that_is_not_its_worker() {
        let not_seen = Unidentified::NotSeen { waited_ms: 1 };
        assert_eq!(Unidentified::NoRequestId.unavailable(false), Some(Unavailable::NoHeader));
        assert_eq!(not_seen.unavailable(false), Some(Unavailable::NotShown));
        assert_eq!(not_seen.unavailable(true), Some(Unavailable::OtherForm));
        assert_eq!(Unidentified::MalformedRequestId.unavailable(false), Some(Unavailable::OtherForm));
        for caller in [Unidentified::OtherConversation, Unidentified::EarlierTurn, Unidentified::NotBound] {
            assert_eq!(caller.unavailable(true), None, "{caller:?}");
        }
        let mut s = Sightings::new(4, 1_000);
        assert!(!s.shown_in(&conversation(1)));
        s.record("req_1", seen(1, 1, 0), true);
        assert!(s.shown_in(&conversation(1)) && !s.shown_in(&conversation(2)));
    }

    #[test]
    fn a_call_is_judged_on_a_report_made_after_it_started() {
        let mut s = Sightings::new(16, 60_000);
        assert!(s.record("wfr_x", seen(1, 1, 100), true));
        // A call starting later waits for the page's word of now.
        assert_eq!(s.get("wfr_x", 200), Ok(None), "an older report does not speak for now");
        // The next turn began: asked again, the page calls the id old.
        assert!(s.record("wfr_x", seen(1, 1, 300), false));
        assert_eq!(s.get("wfr_x", 200).unwrap().map(|(_, newest)| newest), Some(false));
        // A forgery from another page cannot move it, and refuses it.
        assert!(s.record("wfr_x", seen(2, 2, 400), true));
        assert_eq!(s.get("wfr_x", 200), Err(Unidentified::OtherConversation));
    }
}
