//! What the popup and the overlay show a person, from the daemon's
//! `operatorView` (protocol v3), in Execution Continuity's words (seed
//! §17): pure, so it is tested natively; `web::pages` and `web::overlay`
//! put it on screen and send the controls back as `operatorAct`.

use protocol::operator::{Action, Run, Status, View, Worker};

/// How long a worker waits for a person before the browser tells them.
pub const NOTICE_AFTER_MS: u64 = 30_000;

/// Escapes text for HTML (content and quoted attributes).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// "18m 24s", "2h 5m", "12s": how long since `since_ms`.
pub fn duration(now_ms: u64, since_ms: u64) -> String {
    let s = now_ms.saturating_sub(since_ms) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, s % 3600 / 60),
    }
}

/// The marker a person reads before the state (never colour alone, §17.6).
pub fn glyph(status: Status) -> &'static str {
    match status {
        Status::Starting | Status::Resuming => "~",
        Status::Working => "●",
        Status::NeedsYou => "!",
        Status::Waiting => "…",
        Status::Paused | Status::Stalled => "‖",
        Status::Complete => "✓",
        Status::Failed | Status::Stopped => "×",
    }
}

/// The overlay's collapsed line: "● Working · Attempt 4".
pub fn collapsed(w: &Worker) -> String {
    let attempt =
        if w.attempt > 0 && !w.status.is_final() { format!(" · Attempt {}", w.attempt) } else { String::new() };
    format!("{} {}{attempt}", glyph(w.status), w.status.label())
}

/// The controls a worker offers now, in order: (action, label).
/// Stop is last and marked destructive by the surfaces.
pub fn controls(w: &Worker) -> Vec<(Action, &'static str)> {
    if w.root || w.status.is_final() {
        return vec![];
    }
    let auto = if w.auto_resume {
        (Action::AutoResumeOff, "Auto Resume: on")
    } else {
        (Action::AutoResumeOn, "Auto Resume: off")
    };
    let hold = if w.held { (Action::Resume, "Resume") } else { (Action::Pause, "Pause") };
    let mut out = vec![auto, hold, (Action::Continue, "Continue now")];
    // A bound conversation can be replaced by a fresh one (it rolls over).
    if w.conversation_url.is_some() {
        out.push((Action::Rollover, "New conversation"));
    }
    out.push((Action::Stop, "Stop worker"));
    out
}

/// Counts for the popup's summary: (active, working, resuming, needs you).
pub fn counts(view: &View) -> (usize, usize, usize, usize) {
    let workers = || view.runs.iter().flat_map(|r| &r.workers).filter(|w| !w.root);
    let count = |s: Status| workers().filter(|w| w.status == s).count();
    (
        workers().filter(|w| !w.status.is_final()).count(),
        count(Status::Working),
        count(Status::Resuming),
        count(Status::NeedsYou),
    )
}

/// A browser notification to raise: a worker that has needed a person for
/// [`NOTICE_AFTER_MS`] or more.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Identifies this wait (worker and since when): one notice per wait.
    pub key: String,
    /// The worker.
    pub worker_id: String,
    /// "Needs you: /root/db".
    pub title: String,
    /// The question or what to do.
    pub message: String,
}

/// The notices due at `now_ms` that were not raised yet (`raised` holds
/// their keys), and when the next one falls due, if one will.
pub fn notices_due(view: &View, now_ms: u64, raised: &[String]) -> (Vec<Notice>, Option<u64>) {
    let mut due = Vec::new();
    let mut next: Option<u64> = None;
    for w in view.runs.iter().flat_map(|r| &r.workers).filter(|w| w.status == Status::NeedsYou) {
        let key = format!("{}:{}", w.worker_id, w.since_ms);
        if raised.contains(&key) {
            continue;
        }
        let at = w.since_ms.saturating_add(NOTICE_AFTER_MS);
        if at <= now_ms {
            due.push(Notice {
                key,
                worker_id: w.worker_id.clone(),
                title: format!("Needs you: {}", w.path),
                message: w.why.chars().take(300).collect(),
            });
        } else {
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    (due, next)
}

/// The worker with this id in the view.
pub fn find<'a>(view: &'a View, worker_id: &str) -> Option<(&'a Run, &'a Worker)> {
    view.runs.iter().find_map(|r| r.workers.iter().find(|w| w.worker_id == worker_id).map(|w| (r, w)))
}

/// The connection line in words: what is wrong and what to do.
pub fn connection_words(connection: &str) -> (bool, String) {
    match connection {
        "connected" => (true, "Live: connected to the orchestrator".into()),
        "" | "starting" | "connecting" => (false, "Connecting to the orchestrator…".into()),
        c if c.starts_with("not paired") => (false, format!("Not paired. Open Settings and pair ({c})")),
        c => (false, format!("Not connected: {c}")),
    }
}

/// One worker's block in the popup: name, state with since when and why,
/// attempts, and its controls (`data-act` buttons the page wires).
fn worker_html(w: &Worker, now_ms: u64, tab_of: &dyn Fn(&str) -> bool) -> String {
    let id = escape(&w.worker_id);
    let name = escape(&w.path);
    let mut out = format!(
        "<li class=\"worker\" data-worker-row=\"{id}\"><p><strong>{name}</strong>{}</p>\
         <p class=\"state s-{:?}\"><span aria-hidden=\"true\">{}</span> {} · {}</p>",
        if w.root { " <small>(root)</small>" } else { "" },
        w.status,
        glyph(w.status),
        w.status.label(),
        duration(now_ms, w.since_ms),
    );
    if !w.why.is_empty() {
        out.push_str(&format!("<p class=\"why\">{}</p>", escape(&w.why)));
    }
    for line in [w.attempts_label(), w.conversation_label()] {
        if !line.is_empty() {
            out.push_str(&format!("<p><small>{}</small></p>", escape(&line)));
        }
    }
    if w.answerable {
        if let Some(context) = w.ask.as_ref().and_then(|a| a.context.as_deref()) {
            out.push_str(&format!("<p class=\"context\">{}</p>", escape(context)));
        }
        out.push_str("<div class=\"answer\">");
        for choice in w.ask.iter().flat_map(|a| &a.choices) {
            let c = escape(choice);
            out.push_str(&format!(
                "<button data-worker=\"{id}\" data-act=\"answer\" data-choice=\"{c}\" aria-label=\"Answer {name}: {c}\">{c}</button>"
            ));
        }
        out.push_str(&format!(
            "<label>Answer <input type=\"text\" maxlength=\"16384\" data-answer=\"{id}\" aria-label=\"Answer {name}\"></label>\
             <button data-worker=\"{id}\" data-act=\"answer\" aria-label=\"Send the answer to {name}\">Send</button></div>"
        ));
    }
    let mut buttons = String::new();
    for (action, label) in controls(w) {
        let act = action.as_str();
        let pressed = match action {
            Action::AutoResumeOff => " aria-pressed=\"true\"",
            Action::AutoResumeOn => " aria-pressed=\"false\"",
            _ => "",
        };
        let class = if action == Action::Stop { " class=\"stop\"" } else { "" };
        buttons.push_str(&format!(
            "<button data-worker=\"{id}\" data-act=\"{act}\"{pressed}{class} aria-label=\"{label} ({name})\">{label}</button>"
        ));
    }
    if tab_of(&w.worker_id) {
        buttons.push_str(&format!(
            "<button data-worker=\"{id}\" data-open=\"1\" aria-label=\"Open tab of {name}\">Open tab</button>"
        ));
    }
    if !buttons.is_empty() {
        out.push_str(&format!("<p class=\"controls\">{buttons}</p>"));
    }
    out.push_str("</li>");
    out
}

/// The popup's live part (seed §17.2): the summary, the current tab's
/// worker, then every run's unfinished workers (a question with its
/// choices and an answer box where a person's answer releases it).
pub fn popup_html(view: &View, now_ms: u64, current: Option<&str>, tab_of: &dyn Fn(&str) -> bool) -> String {
    let (active, working, resuming, needs) = counts(view);
    let mut out = format!(
        "<section aria-labelledby=\"ec\"><h2 id=\"ec\">Execution Continuity</h2>\
         <p id=\"summary\">Active workers {active} · Working {working} · Resuming {resuming} · Needs you {needs}</p></section>"
    );
    out.push_str("<section aria-labelledby=\"cur\"><h2 id=\"cur\">Current conversation</h2>");
    match current.and_then(|id| find(view, id)) {
        Some((_, w)) => out.push_str(&format!("<ul id=\"current\">{}</ul>", worker_html(w, now_ms, &|_| false))),
        None => out.push_str("<p id=\"current\">This tab is not one of the orchestrator's conversations.</p>"),
    }
    out.push_str("</section>");
    if view.runs.is_empty() {
        out.push_str("<section><h2>Runs</h2><p>No run yet.</p></section>");
    }
    for run in &view.runs {
        let rid = escape(&run.run_id);
        let finished = run.state.is_terminal();
        out.push_str(&format!(
            "<section class=\"run\" aria-labelledby=\"run-{rid}\"><h2 id=\"run-{rid}\">{}{}</h2>",
            escape(&run.title),
            if finished { format!(" <small>({:?})</small>", run.state) } else { String::new() }
        ));
        if !finished {
            out.push_str(&format!(
                "<p class=\"controls\"><button data-run=\"{rid}\" data-act=\"pause_all\">Pause all after current turns</button>\
                 <button data-run=\"{rid}\" data-act=\"resume_all\">Resume all unfinished</button>\
                 <button class=\"stop\" data-run=\"{rid}\" data-act=\"stop_run\">Stop run</button></p>"
            ));
        }
        // Unfinished first; a finished run's workers only as a count.
        if finished {
            out.push_str(&format!("<p>{} workers, finished.</p></section>", run.workers.len()));
            continue;
        }
        out.push_str("<ul>");
        for w in run.workers.iter().filter(|w| !w.status.is_final()) {
            out.push_str(&worker_html(w, now_ms, tab_of));
        }
        out.push_str("</ul>");
        let done = run.workers.iter().filter(|w| w.status.is_final()).count();
        if done > 0 {
            out.push_str(&format!("<p><small>{done} finished</small></p>"));
        }
        out.push_str("</section>");
    }
    if view.omitted_runs > 0 {
        out.push_str(&format!(
            "<p><small>{} older runs are not shown (the dashboard has them).</small></p>",
            view.omitted_runs
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use protocol::operator::Ask;

    fn worker(path: &str, status: Status, since_ms: u64) -> Worker {
        Worker {
            worker_id: format!("wrk_{}", path.trim_start_matches('/').replace('/', "_")),
            path: path.into(),
            status,
            why: "which database?".into(),
            since_ms,
            attempt: 3,
            auto_resumes: 2,
            auto_resume: true,
            held: matches!(status, Status::NeedsYou | Status::Paused),
            answerable: status == Status::NeedsYou,
            ask: (status == Status::NeedsYou).then(|| Ask {
                choices: vec!["postgres".into(), "<b>sqlite</b>".into()],
                context: Some("two options".into()),
            }),
            root: false,
            conversation_url: None,
            executor_id: None,
            recent: vec![],
            model: None,
            epoch: 0,
            context_bytes: 0,
            parked: false,
        }
    }

    fn view(workers: Vec<Worker>) -> View {
        View {
            at_ms: 0,
            runs: vec![Run {
                run_id: "run_1".into(),
                title: "Backend migration".into(),
                state: protocol::RunState::Active,
                workers,
            }],
            omitted_runs: 0,
        }
    }

    #[test]
    fn a_notice_comes_once_per_wait_after_thirty_seconds() {
        let v = view(vec![worker("/root/db", Status::NeedsYou, 1_000), worker("/root/ui", Status::Working, 0)]);
        let (due, next) = notices_due(&v, 30_999, &[]);
        assert!(due.is_empty());
        assert_eq!(next, Some(31_000));
        let (due, next) = notices_due(&v, 31_000, &[]);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].title, "Needs you: /root/db");
        assert_eq!(next, None);
        assert!(notices_due(&v, 99_000, &[due[0].key.clone()]).0.is_empty(), "raised once");
        // Asked again later: a new wait, a new notice.
        let again = view(vec![worker("/root/db", Status::NeedsYou, 50_000)]);
        assert_eq!(notices_due(&again, 80_000, &[due[0].key.clone()]).0.len(), 1);
    }

    #[test]
    fn the_popup_speaks_continuitys_terms_and_escapes_everything() {
        let v = view(vec![worker("/root/db", Status::NeedsYou, 0), worker("/root/ui", Status::Working, 0)]);
        let html = popup_html(&v, 65_000, Some("wrk_root_ui"), &|_| true);
        assert!(html.contains("Active workers 2 · Working 1 · Resuming 0 · Needs you 1"), "{html}");
        assert!(html.contains("Needs you · 1m 5s"));
        assert!(html.contains("Attempt 3 · 2 auto resumes"));
        assert!(html.contains("&lt;b&gt;sqlite&lt;/b&gt;") && !html.contains("<b>sqlite"));
        assert!(html.contains("data-act=\"resume\"") && html.contains("data-act=\"pause\""));
        assert!(html.contains("data-act=\"stop\" class=\"stop\""));
        assert!(!html.contains("tab 1") && !html.contains(">wrk_"), "no raw ids in what a person reads");
    }

    #[test]
    fn finished_and_root_workers_offer_no_controls() {
        let mut root = worker("/root", Status::Working, 0);
        root.root = true;
        assert!(controls(&root).is_empty());
        assert!(controls(&worker("/root/a", Status::Complete, 0)).is_empty());
        let labels: Vec<_> = controls(&worker("/root/a", Status::Paused, 0)).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["Auto Resume: on", "Resume", "Continue now", "Stop worker"]);
        let mut bound = worker("/root/a", Status::Working, 0);
        bound.conversation_url = Some("https://chatgpt.com/c/0196b2c4-8e1f-7a3b-9c2d-4e5f60718293".into());
        let labels: Vec<_> = controls(&bound).into_iter().map(|(_, l)| l).collect();
        assert_eq!(labels, ["Auto Resume: on", "Pause", "Continue now", "New conversation", "Stop worker"]);
        assert_eq!(collapsed(&worker("/root/a", Status::Working, 0)), "● Working · Attempt 3");
    }

    #[test]
    fn the_popup_names_the_model_the_rollovers_the_meter_and_a_parked_tab() {
        let mut w = worker("/root/db", Status::Working, 0);
        assert_eq!(w.conversation_label(), "", "nothing set, nothing said");
        (w.model, w.epoch, w.context_bytes, w.parked) = (Some("o3".into()), 2, 12_800, true);
        assert_eq!(w.conversation_label(), "Model o3 · Conversation 3 (rolled over) · Context 12 KB · Tab parked");
        let html = popup_html(&view(vec![w]), 65_000, None, &|_| false);
        assert!(html.contains("Model o3 · Conversation 3 (rolled over)"), "{html}");
    }
}
