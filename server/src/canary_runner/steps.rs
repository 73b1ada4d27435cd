//! The gates' steps that stand on their own: attribution checked at every
//! pool wait (issue 45), G0's wake of an existing conversation and G6's
//! daemon restart (the seed's G0 and G6).

use std::time::{Duration, Instant};

use canary::Verdict;
use serde_json::json;

use super::{CALL_TIMEOUT, Runner, Seen, Stop, fail, now_ms, prompt_op, uncertain};

impl Runner {
    /// Stops the run `SETUP_REQUIRED: ATTRIBUTION_UNAVAILABLE: <cause>` once
    /// a worker call of one of its runs was refused because attribution
    /// cannot work on this path (the daemon says which of three causes and
    /// the ways on): asked at every pool wait, so the first gate whose
    /// workers call finds out while its pool waits for them, not at its
    /// timeout.
    pub(super) async fn attribution_works(&mut self) -> Result<(), Stop> {
        let refused = self.admin().await?.unattributable;
        let Some(call) = refused.iter().find(|c| self.started.contains(&c.run_id)) else { return Ok(()) };
        let cause = serde_json::to_value(call.cause).ok().and_then(|v| v.as_str().map(str::to_owned));
        self.manual.insert("ATTRIBUTION_UNAVAILABLE".into());
        Err(Verdict::SetupRequired(format!(
            "ATTRIBUTION_UNAVAILABLE: {}: {} (worker {}'s {})",
            cause.unwrap_or_default(),
            call.cause,
            call.worker_id,
            call.tool
        )))
    }

    /// The seed's G6 restarts the host's runtime too: the daemon `canary
    /// deploy` started is restarted as it was started and bound afresh (a
    /// new instance of the same build), its carriers back, before the
    /// browser goes. One this runner cannot restart (not deployed) is said so.
    pub(super) async fn restart_daemon(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let identity = |s: &crate::admin::Status| {
            s.deployment.as_ref().map(|d| (d.identity.instance_id.clone(), d.build_id.clone())).unwrap_or_default()
        };
        let (was, build) = identity(&self.admin().await?);
        let started = match crate::canary_deploy::restart(&self.cfg.state_dir, CALL_TIMEOUT).await {
            Ok(Some(started)) => started,
            Ok(None) => {
                seen.note("the daemon was not started by `canary deploy`: not restarted");
                return Ok(());
            }
            Err(e) => return Err(uncertain(format!("DAEMON_RESTART_FAILED: {e:#}"))),
        };
        let (now, rebuilt) = identity(&started.status);
        if rebuilt != build {
            return Err(fail(format!("BUILD_CHANGED: build {build} came back as {rebuilt}")));
        }
        if now == was || now.is_empty() {
            return Err(fail(format!("INSTANCE_NOT_FRESH: the restarted daemon names instance {now:?}")));
        }
        let secret = crate::exposure::load_secret(&self.cfg.state_dir)
            .map_err(|e| uncertain(format!("DAEMON_UNREACHABLE: its secret: {e}")))?;
        self.root = mcp_client::Client::connect_bearing(&self.cfg.mcp_url, secret.as_deref())
            .await
            .map_err(|e| uncertain(format!("DAEMON_UNREACHABLE: {e}")))?;
        let back = self.carrier_connected().await?.executors.len();
        if back == 0 {
            self.manual.insert("BROWSER_CONTROL_UNAVAILABLE".into());
            return Err(Verdict::SetupRequired("BROWSER_CONTROL_UNAVAILABLE".into()));
        }
        seen.note(format!(
            "the daemon restarted (pid {}): instance {was} → {now}, build {build} bound afresh; {back} carrier(s) back",
            started.pid
        ));
        Ok(())
    }

    /// The seed's G0: an existing conversation whose turn has ended wakes
    /// again: one task to `slot`, completed once, in the same conversation.
    pub(super) async fn g0_wake(&mut self, slot: u32, conversation: &str, seen: &mut Seen) -> Result<(), Stop> {
        self.budget(1)?;
        let before = self.cursor().await?;
        let mark = format!("canary-G0-{:08x}-s{slot}", now_ms() & 0xffff_ffff);
        let instructions = self.task(
            format!("Canary wake for slot {slot}. Call worker_complete with the summary {mark} and do nothing else."),
            &format!("complete \"{mark}\""),
        );
        tokio::time::sleep(self.cfg.pacing).await;
        let task = self
            .call("task_dispatch", json!({"instructions": instructions, "slot": slot, "idempotency_key": mark}))
            .await?;
        let id = task["task_id"].as_str().unwrap_or_default().to_owned();
        let deadline = Instant::now() + self.cfg.gate_timeout;
        let result = loop {
            let got = self.call("task_collect", json!({"task_id": id})).await?;
            match got["status"].as_str() {
                Some("completed") => break got["result"].as_str().unwrap_or_default().to_owned(),
                Some(ended @ ("failed" | "cancelled")) => {
                    return Err(fail(format!("WAKE_{}: slot {slot}'s task", ended.to_uppercase())));
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(uncertain(format!("TIMEOUT: slot {slot}'s wake was never collected")));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        if !result.contains(&mark) {
            seen.counts.cross_attributions += 1;
            return Err(fail(format!("CROSS_ATTRIBUTION: slot {slot}'s wake returned another result")));
        }
        let events = self.effects_since(before, seen).await?;
        let sends = events.iter().filter(|e| prompt_op(e) == Some("send")).count();
        if sends != 1 {
            seen.counts.duplicates += u32::from(sends > 1);
            return Err(fail(format!("DUPLICATE_EXECUTION: {sends} prompts for one wake")));
        }
        let now = Runner::conversations_of(&self.status().await?).get(&slot).cloned();
        if now.as_deref() != Some(conversation) {
            return Err(fail(format!("ISOLATION: slot {slot}'s wake moved it to another conversation")));
        }
        seen.note(format!(
            "slot {slot}'s existing conversation {conversation} woke once for a task after its turn ended"
        ));
        Ok(())
    }
}

/// The pages a run will touch before its first prompt: a new chat, where
/// every worker starts (inside the Project when one is configured).
pub(super) fn pages_to_inspect(project_url: Option<&str>) -> Vec<String> {
    let mut pages = vec![protocol::executor::URL_PREFIX.to_owned()];
    pages.extend(project_url.map(str::to_owned));
    pages
}

/// The pre-flight's verdict on every executor's reading of one page:
/// usable (a new chat or an idle conversation, a submit the composer would
/// make) on every one, or `SETUP_REQUIRED: PAGE_NOT_READY: <state>` naming
/// the first that is not (a challenge, a signed-out page, a layout this
/// build cannot read). No executor able to inspect is a stop on a live run
/// (it would prompt into a page nobody looked at) and a note on a rehearsal.
pub(super) fn page_verdict(
    page: &str,
    readings: &[carrier_webext::inspect::Reading],
    live: bool,
    seen: &mut Seen,
) -> Result<(), Stop> {
    if readings.is_empty() {
        let why = "no connected carrier can inspect pages (page_inspect, protocol v5): update it";
        if live {
            return Err(Verdict::SetupRequired(format!("PAGE_NOT_INSPECTED: {why}")));
        }
        seen.note(format!("{page} not inspected: {why}"));
        return Ok(());
    }
    for reading in readings {
        let Some(inspection) = &reading.inspection else {
            let code = reading.error.map(|c| c.as_str()).unwrap_or("INTERNAL");
            return Err(Verdict::SetupRequired(format!(
                "PAGE_NOT_INSPECTED: {code}: {} (executor {}, {page})",
                reading.detail, reading.executor_id
            )));
        };
        seen.note(format!(
            "{page} inspected by {}: {} ({}; {} turns; submit {})",
            reading.executor_id, inspection.state, inspection.adapter, inspection.turns, inspection.submit
        ));
        if !inspection.usable() {
            let why = inspection.refusal.as_deref().unwrap_or(&inspection.submit);
            return Err(Verdict::SetupRequired(format!(
                "PAGE_NOT_READY: {}: {why} (executor {}, {page})",
                inspection.state, reading.executor_id
            )));
        }
    }
    Ok(())
}

impl Runner {
    /// The pre-flight (issue 45): every page the run will touch is read by
    /// every connected carrier that can (`page_inspect`: nothing typed,
    /// clicked or focused) before the first prompt; the receipt carries
    /// each reading.
    pub(super) async fn inspect_pages(&mut self, seen: &mut Seen) -> Result<(), Stop> {
        let addr = crate::admin::authority_of(&self.cfg.mcp_url);
        let mut carried = Vec::new();
        for page in pages_to_inspect(self.deployment.project_url.as_deref()) {
            let readings = crate::admin::inspect_page(&addr, &self.cfg.state_dir, &page)
                .await
                .map_err(|e| uncertain(format!("PAGE_INSPECTION_FAILED: {e}")))?;
            carried.push(json!({"page": page, "readings": readings}));
            seen.inputs["page_inspections"] = json!(carried);
            page_verdict(&page, &readings, self.cfg.target == canary::Target::Live, seen)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use carrier_webext::inspect::Reading;
    use protocol::executor::PageInspection;

    use super::*;

    fn read(state: &str, submit: &str) -> Reading {
        let inspection = PageInspection {
            adapter: "chatgpt-dom 0.1.0".into(),
            state: state.into(),
            refusal: None,
            turns: 0,
            stop_buttons: 0,
            submit: submit.into(),
            app_pills: Vec::new(),
        };
        Reading { executor_id: "ext".into(), inspection: Some(inspection), error: None, detail: String::new() }
    }

    #[test]
    fn only_a_usable_page_on_every_carrier_lets_the_first_prompt_go() {
        let page = "https://chatgpt.com/";
        let typed = "would type the prompt, then click the send button it brings";
        let mut seen = Seen::default();
        assert_eq!(page_verdict(page, &[read("ready", typed), read("idle", typed)], true, &mut seen), Ok(()));
        assert_eq!(seen.observations.len(), 2, "each reading is carried");
        for (state, submit) in [
            ("challenge", "nothing (CHATGPT_CHALLENGE: the site asks for a human check)"),
            ("signed_out", "nothing (CHATGPT_SIGNED_OUT: …)"),
            ("generating", typed),
            ("ready", "nothing (COMPOSER_HAS_DRAFT: the composer holds a person's attachment)"),
        ] {
            let stop = page_verdict(page, &[read("ready", typed), read(state, submit)], true, &mut Seen::default());
            let Err(Verdict::SetupRequired(why)) = stop else { panic!("{state}: {stop:?}") };
            assert!(why.starts_with(&format!("PAGE_NOT_READY: {state}: ")), "{why}");
        }
        let lost = Reading {
            executor_id: "cdp".into(),
            inspection: None,
            error: Some(protocol::ErrorCode::DeadlineExceeded),
            detail: "the page did not settle in time".into(),
        };
        let stop = page_verdict(page, &[lost], false, &mut Seen::default());
        assert!(
            matches!(stop, Err(Verdict::SetupRequired(ref why)) if why.starts_with("PAGE_NOT_INSPECTED: DEADLINE_EXCEEDED"))
        );
        // Nobody able to look: a live run stops, a rehearsal says so.
        assert!(matches!(page_verdict(page, &[], true, &mut Seen::default()), Err(Verdict::SetupRequired(_))));
        let mut seen = Seen::default();
        assert_eq!(page_verdict(page, &[], false, &mut seen), Ok(()));
        assert!(seen.observations[0].contains("not inspected"), "{:?}", seen.observations);
    }
}
