//! Pairing a browser without pasting (`protocol::executor::pair_offer`):
//! the `/executor/pair` route, the requests waiting on a person, and their
//! answers. Requests are taken only while an `orchestrator setup` holds a
//! window open, at most [`PENDING_MOST`] at once, each answered once; a
//! credential is issued only when the person accepts, and only the socket
//! that asked receives it (one its page closed meanwhile is revoked again).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::Message;
use axum::extract::{State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use protocol::executor::pair_offer::{
    NAME_MAX, PENDING_MOST, PairAnswer, PairRefusal, PairRequest, REQUEST_WITHIN_MS, WINDOW_MOST_MS,
};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::bridge::Bridge;

/// The requests waiting on a person, and the window they may come in.
#[derive(Default)]
pub(crate) struct Desk {
    inner: std::sync::Mutex<Waiting>,
}

#[derive(Default)]
struct Waiting {
    open_until: Option<Instant>,
    next_id: u64,
    requests: BTreeMap<u64, Asked>,
}

struct Asked {
    request: PairRequest,
    origin: String,
    since: Instant,
    answer: oneshot::Sender<Decision>,
}

enum Decision {
    Paired { executor_id: String, credential: String },
    Declined,
}

/// A request as `orchestrator setup` shows it (never a secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairWaiting {
    /// Its number, to answer it by.
    pub id: u64,
    /// The code its page shows.
    pub code: String,
    /// The browser, as the page said.
    pub browser: String,
    /// The extension's build version, as the page said.
    pub release: String,
    /// The extension's origin (`chrome-extension://<id>`, `moz-extension://<uuid>`).
    pub origin: String,
    /// How long it has waited, in ms.
    pub waited_ms: u64,
}

/// Why an answer was not given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No request by that number waits (answered, expired, or its page closed).
    #[error("NOT_FOUND: no pairing request {0} is waiting (answered, expired, or its page was closed)")]
    NotWaiting(u64),
    /// The credential store failed.
    #[error("INTERNAL: {0}")]
    Credentials(String),
}

impl Bridge {
    /// Takes pairing requests for `within` from now (at most
    /// [`WINDOW_MOST_MS`]); returns the window's length in ms.
    pub fn open_pairing(&self, within: Duration) -> u64 {
        let within = within.min(Duration::from_millis(WINDOW_MOST_MS));
        self.pairing.inner.lock().expect("pairing lock").open_until = Some(Instant::now() + within);
        within.as_millis() as u64
    }

    /// Ends the window: every waiting request is told `EXPIRED`.
    pub fn close_pairing(&self) {
        let mut waiting = self.pairing.inner.lock().expect("pairing lock");
        waiting.open_until = None;
        waiting.requests.clear();
    }

    /// The requests waiting now, oldest first.
    pub fn pair_requests(&self) -> Vec<PairWaiting> {
        let waiting = self.pairing.inner.lock().expect("pairing lock");
        waiting
            .requests
            .iter()
            .filter(|(_, asked)| !asked.answer.is_closed())
            .map(|(id, asked)| PairWaiting {
                id: *id,
                code: asked.request.code.clone(),
                browser: asked.request.browser.clone(),
                release: asked.request.release.clone(),
                origin: asked.origin.clone(),
                waited_ms: asked.since.elapsed().as_millis() as u64,
            })
            .collect()
    }

    /// Accepts request `id`: issues a credential for a fresh executor id
    /// (with a person's controls when `operator`), hands it to the page
    /// that asked, and returns that id; or declines it (`None`).
    pub fn answer_pairing(&self, id: u64, accept: bool, operator: bool) -> Result<Option<String>, AnswerError> {
        let asked = self.pairing.inner.lock().expect("pairing lock").requests.remove(&id);
        let asked = asked.filter(|a| !a.answer.is_closed()).ok_or(AnswerError::NotWaiting(id))?;
        if !accept {
            let _ = asked.answer.send(Decision::Declined);
            return Ok(None);
        }
        let executor_id = fresh_executor_id();
        let credential =
            self.credentials.issue_with(&executor_id, operator).map_err(|e| AnswerError::Credentials(e.to_string()))?;
        if asked.answer.send(Decision::Paired { executor_id: executor_id.clone(), credential }).is_err() {
            // Its page went away in between: nobody holds this credential.
            let _ = self.credentials.revoke(&executor_id);
            return Err(AnswerError::NotWaiting(id));
        }
        Ok(Some(executor_id))
    }

    /// Registers a checked request, or says why not.
    fn take_request(
        &self,
        request: PairRequest,
        origin: &str,
    ) -> Result<(oneshot::Receiver<Decision>, RequestGuard<'_>), PairRefusal> {
        let mut waiting = self.pairing.inner.lock().expect("pairing lock");
        if waiting.open_until.is_none_or(|until| until <= Instant::now()) {
            return Err(PairRefusal::NoSetupWaiting);
        }
        waiting.requests.retain(|_, asked| !asked.answer.is_closed());
        if waiting.requests.len() >= PENDING_MOST {
            return Err(PairRefusal::Busy);
        }
        let (answer, decided) = oneshot::channel();
        waiting.next_id += 1;
        let id = waiting.next_id;
        waiting.requests.insert(id, Asked { request, origin: origin.to_owned(), since: Instant::now(), answer });
        Ok((decided, RequestGuard { bridge: self, id }))
    }

    fn pairing_open_until(&self) -> Option<Instant> {
        self.pairing.inner.lock().expect("pairing lock").open_until
    }
}

/// Forgets a request however its socket ends.
struct RequestGuard<'a> {
    bridge: &'a Bridge,
    id: u64,
}

impl Drop for RequestGuard<'_> {
    fn drop(&mut self) {
        self.bridge.pairing.inner.lock().expect("pairing lock").requests.remove(&self.id);
    }
}

fn fresh_executor_id() -> String {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("the OS random source is available");
    format!("exec-{}", bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The `/executor/pair` upgrade: loopback Host, and an extension's Origin
/// (a pairing page; a native executor is paired with `orchestrator pair`).
pub(crate) async fn upgrade(ws: WebSocketUpgrade, headers: HeaderMap, State(bridge): State<Arc<Bridge>>) -> Response {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if !crate::bridge::loopback_host(host) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: Host is not allowed").into_response();
    }
    let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()).unwrap_or("").to_owned();
    if !bridge.origin_allowed(&origin) {
        return (StatusCode::FORBIDDEN, "FORBIDDEN: only the extension's pairing page asks here").into_response();
    }
    ws.max_message_size(4 * NAME_MAX + 256)
        .max_frame_size(4 * NAME_MAX + 256)
        .on_upgrade(move |socket| serve_request(socket, bridge, origin))
}

/// One pairing page's socket: its request, held until a person answers,
/// the window ends or the page goes; then one [`PairAnswer`] and a close.
pub async fn serve_request<S>(mut socket: S, bridge: Arc<Bridge>, origin: String)
where
    S: Stream<Item = Result<Message, axum::Error>> + Sink<Message> + Unpin,
{
    let first = tokio::time::timeout(Duration::from_millis(REQUEST_WITHIN_MS), socket.next()).await;
    let request = match first {
        Ok(Some(Ok(Message::Text(text)))) => serde_json::from_str::<PairRequest>(&text).ok(),
        _ => None,
    };
    let answer = match request.filter(|r| r.check().is_ok()) {
        None => refused(PairRefusal::Invalid, "send {\"type\":\"pairRequest\",\"code\",\"browser\",\"release\"} first"),
        Some(request) => match bridge.take_request(request, &origin) {
            Err(reason) => refused(reason, refusal_detail(reason)),
            Ok((mut decided, _forget)) => loop {
                let until = bridge.pairing_open_until();
                tokio::select! {
                    // A decision made is answered, even if the page spoke or closed meanwhile.
                    biased;
                    decision = &mut decided => break match decision {
                        Ok(Decision::Paired { executor_id, credential }) => PairAnswer::Paired { executor_id, credential },
                        Ok(Decision::Declined) => refused(PairRefusal::Declined, refusal_detail(PairRefusal::Declined)),
                        Err(_) => refused(PairRefusal::Expired, refusal_detail(PairRefusal::Expired)),
                    },
                    // The page closed or spoke out of turn: nobody to answer.
                    _ = socket.next() => return,
                    _ = sleep_until(until) => {
                        if bridge.pairing_open_until().is_none_or(|now| now <= Instant::now()) {
                            break refused(PairRefusal::Expired, refusal_detail(PairRefusal::Expired));
                        }
                    }
                }
            },
        },
    };
    let text = serde_json::to_string(&answer).expect("answers serialize");
    let sent = socket.send(Message::Text(text.into())).await.is_ok();
    if let (false, PairAnswer::Paired { executor_id, .. }) = (sent, &answer) {
        // Nobody received it: nobody may hold it.
        let _ = bridge.credentials.revoke(executor_id);
    }
    let _ = socket.send(Message::Close(None)).await;
}

async fn sleep_until(until: Option<Instant>) {
    if let Some(until) = until {
        tokio::time::sleep_until(until).await;
    }
}

fn refused(reason: PairRefusal, detail: &str) -> PairAnswer {
    PairAnswer::Refused { reason, detail: detail.to_owned() }
}

/// What the pairing page shows for each refusal.
fn refusal_detail(reason: PairRefusal) -> &'static str {
    match reason {
        PairRefusal::NoSetupWaiting => "no `orchestrator setup` is waiting for a browser on this computer",
        PairRefusal::Busy => "other browsers' requests are waiting: answer them at `orchestrator setup` first",
        PairRefusal::Declined => "declined at `orchestrator setup`",
        PairRefusal::Expired => "`orchestrator setup` stopped waiting before this browser was accepted",
        PairRefusal::Invalid => "not a pairing request",
    }
}
