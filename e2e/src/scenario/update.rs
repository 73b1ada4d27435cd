//! The extension updated by the browser in the middle of a command (issue
//! 46): the browser installs a higher version over the running one (its
//! background restarts, its content scripts in open tabs are orphaned, its
//! storage and so its journal stay), as the command is dispatched and as
//! it is acknowledged. Each follow-up goes in exactly once, counted in
//! fakechat's oracle.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{all_idle, completed, exactly, settled_worker};
use crate::Chromium;

/// One update: at which moment of the command, the version installed, and
/// from the update to the worker's completion.
pub type Updated = (&'static str, String, Duration);

/// Updates the extension at each moment of a follow-up's command; each
/// follow-up completes once, the worker's page turn count says so.
pub async fn extension_updated(
    mcp_url: &str,
    hub: &fakechat::hub::Hub,
    chromium: &mut Chromium,
    scratch: &std::path::Path,
    budget: Duration,
) -> anyhow::Result<Vec<Updated>> {
    let (mut root, mut out, worker, conversation) =
        settled_worker(mcp_url, hub, "extension updated", "steady", budget).await?;
    let conv = std::slice::from_ref(&conversation);
    let mut updated = Vec::new();
    let moments =
        [("executor.command_dispatched", "updated at dispatch", 1), ("executor.command_acked", "updated at ack", 2)];
    for (moment, summary, step) in moments {
        root.catch_up(&mut out).await?;
        root.call("worker_followup", super::everyday::followup(&worker, summary)).await?;
        let of_worker = worker.clone();
        root.wait(&mut out, budget, move |e| e["type"] == moment && e["data"]["worker_id"] == of_worker.as_str())
            .await?;
        let version = format!("{}.{step}", env!("CARGO_PKG_VERSION"));
        let at = Instant::now();
        chromium.update_extension(&version, scratch).await?;
        let of_worker = worker.clone();
        let finished =
            move |e: &Value| e["type"] == "executor.command_completed" && e["data"]["worker_id"] == of_worker.as_str();
        // The command's result and the worker's completion come in either order.
        let cursor = root.cursor;
        root.wait(&mut out, budget, finished).await?;
        root.cursor = cursor;
        root.wait(&mut out, budget, completed(&worker, summary)).await?;
        updated.push((moment, version, at.elapsed()));
        all_idle(hub, conv, budget).await?;
    }
    exactly(hub, &conversation, 3, &out)?;
    Ok(updated)
}
