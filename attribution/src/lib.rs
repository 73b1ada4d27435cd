//! Caller attribution, sans IO. A capability says who a caller *claims*
//! to be; attribution proves which conversation made the call. ChatGPT
//! sends each connector call with an `x-request-id` header (`wfr_…/suffix`)
//! and keeps the same id (the part before `/`) as the request message's
//! `metadata.request_id` in the calling conversation's page data. An
//! executor hosting the conversation sees it there and says so
//! (`callerSeen`); the daemon accepts the call only when that sighting
//! names the conversation bound to the worker the capability belongs to.
//!
//! - [`request_id`]: the call's id from its header values, refusing to guess.
//! - [`Sightings`]: what executors saw, bounded in size and age.
//! - [`judge`]: whether a sighting proves the call came from the worker's
//!   own conversation, or why not ([`Unidentified`], each with what to do).
//!
//! The async wait and the durable "used once" record live with the caller
//! (the daemon's edge and control plane); nothing here reads a clock.

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
    /// The id was seen for another tool.
    #[error("the page shows this request id for another tool; nothing is guessed")]
    OtherTool,
    /// The id belongs to a call through another app (connector).
    #[error("the page shows this request id for a call through another app, not the orchestrator's")]
    OtherApp,
    /// The executor holding the conversation speaks executor protocol v1,
    /// which has no way to report calls: waiting would only time out.
    #[error(
        "the browser carrier holding this conversation speaks executor protocol v1 and cannot report tool calls: update it, or use a run created with attribution capability_only"
    )]
    HolderCannotReport,
    /// Too many calls of this worker wait on attribution at once.
    #[error("too many calls made as this worker wait to be attributed at once; call again shortly")]
    TooManyWaiting,
    /// The id attributed a call before.
    #[error("this request id already attributed a call: a replayed call is refused")]
    Replayed,
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
    /// The tool the request message names.
    pub tool: String,
    /// The app the request went through (its path's first segment).
    pub app: String,
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
    /// The tool being called.
    pub tool: &'a str,
    /// The orchestrator's app name in ChatGPT (`--app-label`), when known:
    /// a call through any other app is someone else's.
    pub app: Option<&'a str>,
}

/// Whether `seen` proves the call came from `expected`'s own conversation.
pub fn judge(expected: &Expected<'_>, seen: &Sighting) -> Result<(), Unidentified> {
    if seen.conversation_id != *expected.conversation_id
        || seen.worker_id != *expected.worker_id
        || seen.executor_id != expected.executor_id
    {
        return Err(Unidentified::OtherConversation);
    }
    if expected.app.is_some_and(|app| seen.app != app) {
        return Err(Unidentified::OtherApp);
    }
    if seen.tool != expected.tool {
        return Err(Unidentified::OtherTool);
    }
    Ok(())
}

/// What executors saw, by request id: at most `capacity` entries, none
/// older than `max_age_ms` (a call is judged within seconds of its
/// sighting; older ones only cost memory). The first sighting of an id
/// stands: a second one (another page claiming the same id) never
/// replaces it, so a later forgery cannot move a call to another
/// conversation, and a conflict is kept for the judge to refuse.
#[derive(Debug)]
pub struct Sightings {
    by_id: HashMap<String, Sighting>,
    /// Conflicting sightings: the id was seen in two conversations.
    conflicted: HashMap<String, u64>,
    order: VecDeque<(u64, String)>,
    capacity: usize,
    max_age_ms: u64,
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

    /// Records a sighting; true when it was news (a waiter may look).
    pub fn record(&mut self, request_id: &str, seen: Sighting) -> bool {
        self.expire(seen.at_ms);
        if let Some(first) = self.by_id.get(request_id) {
            let same = first.conversation_id == seen.conversation_id && first.worker_id == seen.worker_id;
            if !same && !self.conflicted.contains_key(request_id) {
                self.conflicted.insert(request_id.to_owned(), seen.at_ms);
                return true;
            }
            return false;
        }
        while self.by_id.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_front() else { break };
            self.by_id.remove(&oldest);
            self.conflicted.remove(&oldest);
        }
        self.order.push_back((seen.at_ms, request_id.to_owned()));
        self.by_id.insert(request_id.to_owned(), seen);
        true
    }

    /// The sighting of `request_id`, as of `now_ms`: `Err` if two pages
    /// claimed it (nothing is guessed), `Ok(None)` if none has yet.
    pub fn get(&self, request_id: &str, now_ms: u64) -> Result<Option<&Sighting>, Unidentified> {
        if self.conflicted.contains_key(request_id) {
            return Err(Unidentified::OtherConversation);
        }
        Ok(self.by_id.get(request_id).filter(|s| now_ms.saturating_sub(s.at_ms) <= self.max_age_ms))
    }

    /// How many sightings are kept.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    fn expire(&mut self, now_ms: u64) {
        while let Some((at, _)) = self.order.front() {
            if now_ms.saturating_sub(*at) <= self.max_age_ms {
                break;
            }
            let (_, id) = self.order.pop_front().expect("a front exists");
            self.by_id.remove(&id);
            self.conflicted.remove(&id);
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

    fn seen(w: u8, c: u8, tool: &str, at_ms: u64) -> Sighting {
        Sighting {
            executor_id: "ext-1".into(),
            worker_id: worker(w),
            conversation_id: conversation(c),
            tool: tool.into(),
            app: "Orchestrator".into(),
            at_ms,
        }
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
    fn only_the_workers_own_conversation_on_its_executor_for_the_same_tool_attributes() {
        let (w, c) = (worker(1), conversation(1));
        let expected = Expected {
            worker_id: &w,
            executor_id: "ext-1",
            conversation_id: &c,
            tool: "worker_progress",
            app: Some("Orchestrator"),
        };
        assert_eq!(judge(&expected, &seen(1, 1, "worker_progress", 0)), Ok(()));
        let mut other_app = seen(1, 1, "worker_progress", 0);
        other_app.app = "Some Other Connector".into();
        assert_eq!(judge(&expected, &other_app), Err(Unidentified::OtherApp), "another connector's call");
        assert_eq!(judge(&expected, &seen(2, 2, "worker_progress", 0)), Err(Unidentified::OtherConversation));
        assert_eq!(judge(&expected, &seen(1, 1, "worker_complete", 0)), Err(Unidentified::OtherTool));
        let mut elsewhere = seen(1, 1, "worker_progress", 0);
        elsewhere.executor_id = "cdp-2".into();
        assert_eq!(judge(&expected, &elsewhere), Err(Unidentified::OtherConversation));
    }

    #[test]
    fn the_first_sighting_stands_a_conflict_refuses_and_old_ones_go() {
        let mut s = Sightings::new(2, 1_000);
        assert!(s.record("wfr_a", seen(1, 1, "worker_progress", 0)));
        assert!(!s.record("wfr_a", seen(1, 1, "worker_progress", 10)), "the same again is no news");
        assert_eq!(s.get("wfr_a", 10).unwrap().unwrap().conversation_id, conversation(1));
        // Another page claiming the same id: nothing is guessed.
        assert!(s.record("wfr_a", seen(2, 2, "worker_progress", 20)));
        assert_eq!(s.get("wfr_a", 20), Err(Unidentified::OtherConversation));
        // Bounded in number (oldest out) and in age.
        s.record("wfr_b", seen(1, 1, "worker_progress", 30));
        s.record("wfr_c", seen(1, 1, "worker_progress", 40));
        assert_eq!(s.len(), 2);
        assert_eq!(s.get("wfr_a", 40), Ok(None));
        assert_eq!(s.get("wfr_c", 2_000), Ok(None), "too old to attribute");
        s.record("wfr_d", seen(1, 1, "worker_progress", 5_000));
        assert_eq!(s.len(), 1, "expired entries are dropped");
    }
}
