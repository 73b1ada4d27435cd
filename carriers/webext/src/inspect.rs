//! Read-only page inspection (protocol v5): the daemon asks every live
//! executor that declared `page_inspect` to read one page in a background
//! tab of its own and gathers their answers, each bounded in time. Nothing
//! is journaled: an inspection changes nothing the daemon keeps, and one
//! not answered in time is said so (`DEADLINE_EXCEEDED`) to whoever asked.

use std::collections::HashMap;
use std::time::Duration;

use protocol::ErrorCode;
use protocol::executor::{DaemonFrame, ExecutorFrame, PAGE_INSPECT, PageInspection, inspectable};
use tokio::sync::oneshot;

use crate::bridge::{Bridge, Outgoing};

/// Most inspections waiting at once, daemon-wide: each holds a tab open in
/// a person's browser until it is answered.
pub const INSPECTIONS_MAX: usize = 8;

/// Inspections waiting on their answer: by inspect id, the executor asked
/// (only it may answer) and where its answer goes.
pub(crate) type Pending = std::sync::Mutex<HashMap<String, (String, oneshot::Sender<Reading>)>>;

/// One executor's answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reading {
    /// The executor that read it.
    pub executor_id: String,
    /// How the page read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inspection: Option<PageInspection>,
    /// Why it was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorCode>,
    /// The refusal in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Reading {
    fn failed(executor_id: &str, error: ErrorCode, detail: &str) -> Reading {
        Reading { executor_id: executor_id.to_owned(), inspection: None, error: Some(error), detail: detail.to_owned() }
    }
}

/// Why no executor was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The URL is not one of the pages a run touches.
    #[error(
        "INVALID_ARGUMENT: only chatgpt.com's new chat (https://chatgpt.com/), a conversation (/c/<uuid>) or a \
         Project's page (/g/g-p-…/project) is inspected"
    )]
    NotInspectable,
    /// [`INSPECTIONS_MAX`] are waiting already.
    #[error("LIMIT_REACHED: {INSPECTIONS_MAX} page inspections are waiting already")]
    Busy,
}

impl Bridge {
    /// Asks every live executor that declared [`PAGE_INSPECT`] to read
    /// `url`, and waits at most `within` for each answer (one that does
    /// not answer in time is reported `DEADLINE_EXCEEDED`). An empty list:
    /// no executor that can inspect is connected.
    pub async fn inspect_page(&self, url: &str, within: Duration) -> Result<Vec<Reading>, Refused> {
        if !inspectable(url) {
            return Err(Refused::NotInspectable);
        }
        let until_ms = self.plane.now_ms() + within.as_millis() as u64;
        let mut asked = Vec::new();
        // Forgotten however this ends, the caller gone mid-wait included.
        let mut forget = Forget { bridge: self, ids: Vec::new() };
        {
            let sessions = self.sessions.lock().await;
            let able: Vec<_> = sessions
                .iter()
                .filter(|(_, live)| live.version >= 5 && live.capabilities.iter().any(|c| c == PAGE_INSPECT))
                .collect();
            let mut pending = self.inspections.lock().expect("inspections lock");
            if pending.len() + able.len() > INSPECTIONS_MAX {
                return Err(Refused::Busy);
            }
            for (executor_id, live) in able {
                let inspect_id = random_id();
                let (tx, rx) = oneshot::channel();
                pending.insert(inspect_id.clone(), (executor_id.clone(), tx));
                forget.ids.push(inspect_id.clone());
                let frame = DaemonFrame::PageInspect { inspect_id: inspect_id.clone(), url: url.to_owned(), until_ms };
                let _ = live.outbox.send(Outgoing::Frame(frame));
                asked.push((executor_id.clone(), rx));
            }
        }
        let deadline = tokio::time::Instant::now() + within;
        let mut readings = Vec::new();
        for (executor_id, rx) in asked {
            let reading = match tokio::time::timeout_at(deadline, rx).await {
                Ok(Ok(reading)) => reading,
                _ => Reading::failed(&executor_id, ErrorCode::DeadlineExceeded, "the executor did not answer in time"),
            };
            readings.push(reading);
        }
        Ok(readings)
    }

    /// An executor's `pageInspected`: handed to the inspection waiting on
    /// it, if this executor was the one asked (anything else is dropped).
    pub(crate) fn page_inspected(&self, executor_id: &str, frame: ExecutorFrame) {
        let ExecutorFrame::PageInspected { inspect_id, inspection, error, detail } = frame else { return };
        let mut pending = self.inspections.lock().expect("inspections lock");
        if pending.get(&inspect_id).is_some_and(|(asked, _)| asked == executor_id)
            && let Some((_, tx)) = pending.remove(&inspect_id)
        {
            let _ = tx.send(Reading { executor_id: executor_id.to_owned(), inspection, error, detail });
        }
    }
}

/// The inspections one call asked, forgotten when it ends.
struct Forget<'a> {
    bridge: &'a Bridge,
    ids: Vec<String>,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut pending = self.bridge.inspections.lock().expect("inspections lock");
        for id in &self.ids {
            pending.remove(id);
        }
    }
}

fn random_id() -> String {
    let mut bytes = [0u8; 12];
    getrandom::fill(&mut bytes).expect("random source");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("insp-{hex}")
}
