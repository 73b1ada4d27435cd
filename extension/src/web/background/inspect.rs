//! `pageInspect` (protocol v5): a page read in a background tab of the
//! extension's own, acting on nothing. The tab is opened inactive (nothing
//! of a person's loses focus), asked only `ToPage::Inspect` (the content
//! script's read-only reading, the popup's "Check this page"), and closed.

use protocol::ErrorCode;
use protocol::executor::{ExecutorFrame, INSPECT_WITHIN_MS, inspectable};

use super::*;

/// How often a page still loading is read again.
const SETTLE_EVERY_MS: i32 = 250;

impl Background {
    /// Reads `url` in a tab of its own and answers `pageInspected`.
    pub(super) async fn inspect_page(&self, inspect_id: String, url: String, until_ms: u64) {
        // Our own clock bounds the tab's life too: the daemon's may differ.
        let until_ms = until_ms.min(now_ms() + INSPECT_WITHIN_MS);
        let answer = match inspectable(&url) {
            true => read_page(&url, until_ms).await,
            false => Err((ErrorCode::InvalidArgument, "not a page a run touches: nothing was opened".into())),
        };
        let (inspection, error, detail) = match answer {
            Ok(check) => (Some(check.inspection()), None, String::new()),
            Err((code, detail)) => (None, Some(code), detail),
        };
        self.send(&ExecutorFrame::PageInspected { inspect_id, inspection, error, detail });
    }
}

/// Opens `url` inactive, waits until its content script reads it as no
/// longer loading (or `until_ms`), and closes the tab whatever happened.
async fn read_page(url: &str, until_ms: u64) -> Result<crate::messages::PageCheck, (ErrorCode, String)> {
    let tab = open_tab(url).await.map_err(|outcome| match outcome {
        CommandOutcome::Error { code, detail } => (code, detail),
        CommandOutcome::Ok { .. } => (ErrorCode::Internal, "no tab".into()),
    })?;
    let mut latest = None;
    while now_ms() < until_ms {
        if let Ok(PageReply::Inspection(check)) = ask(tab, &ToPage::Inspect, PAGE_ANSWERS_MS).await
            && check.state != "loading"
        {
            latest = Some(check);
            break;
        }
        sleep(SETTLE_EVERY_MS).await;
    }
    let _ = call("tabs.remove", &[tab.into()]).await;
    latest.ok_or_else(|| {
        (ErrorCode::DeadlineExceeded, "the page did not settle, or its content script never answered, in time".into())
    })
}
