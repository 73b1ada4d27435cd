//! `pageInspect` (protocol v5): a page read in a background target of the
//! agent's own (`Target.createTarget` with `background`, so nothing of a
//! person's loses focus), asked only `ToPage::Inspect` (the adapter's
//! read-only reading), and closed. No other target is attached to.

use std::sync::Arc;
use std::time::Duration;

use extension::messages::{PageCheck, PageReply, ToPage};
use protocol::ErrorCode;
use protocol::executor::{CommandOutcome, ExecutorFrame, INSPECT_WITHIN_MS, inspectable};

use super::{Shared, Unanswered, now_ms};

/// How often a page still loading is read again.
const SETTLE_EVERY: Duration = Duration::from_millis(250);

impl Shared {
    /// Reads `url` in a target of its own and answers `pageInspected`.
    pub(super) async fn inspect_page(self: &Arc<Self>, inspect_id: String, url: String, until_ms: u64) {
        // Our own clock bounds the target's life too: the daemon's may differ.
        let until_ms = until_ms.min(now_ms() + INSPECT_WITHIN_MS);
        let answer = match inspectable(&url) {
            true => self.read_page(&url, until_ms).await,
            false => Err((ErrorCode::InvalidArgument, "not a page a run touches: nothing was opened".into())),
        };
        let (inspection, error, detail) = match answer {
            Ok(check) => (Some(check.inspection()), None, String::new()),
            Err((code, detail)) => (None, Some(code), detail),
        };
        self.send(&ExecutorFrame::PageInspected { inspect_id, inspection, error, detail });
    }

    /// Opens `url` in a background target, waits until the adapter reads
    /// it as no longer loading (or `until_ms`), and closes the target
    /// whatever happened.
    async fn read_page(self: &Arc<Self>, url: &str, until_ms: u64) -> Result<PageCheck, (ErrorCode, String)> {
        let browser = self.browser().await.map_err(parts)?;
        let target = self.open_target(&browser, url).await.map_err(parts)?;
        let read = loop {
            match self.ask(&browser, &target, &ToPage::Inspect, until_ms).await {
                Ok(PageReply::Inspection(check)) if check.state != "loading" => break Ok(check),
                Err(Unanswered::NotStarted(why)) => break Err(parts(why.outcome())),
                Err(Unanswered::Gone(why)) => break Err((ErrorCode::BrowserControlUnavailable, why)),
                Err(Unanswered::Asleep) => {
                    break Err((ErrorCode::BrowserControlUnavailable, "the browser does not answer".into()));
                }
                _ if now_ms() >= until_ms => {
                    break Err((ErrorCode::DeadlineExceeded, "the page did not settle in time".into()));
                }
                _ => tokio::time::sleep(SETTLE_EVERY).await,
            }
        };
        self.close(&browser, &target).await;
        read
    }
}

fn parts(outcome: CommandOutcome) -> (ErrorCode, String) {
    match outcome {
        CommandOutcome::Error { code, detail } => (code, detail),
        CommandOutcome::Ok { .. } => (ErrorCode::Internal, "no answer".into()),
    }
}
