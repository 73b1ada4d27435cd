//! What `orchestrator setup` concludes from what it saw, link by link:
//! pure functions from readings to a [`Link`] (proven, with what was
//! seen) or a [`Broken`] one (what is wrong and the one next step). The
//! shell in `setup.rs` does the reading; every message is tested here.

use crate::admin::Status;
use carrier_webext::inspect::Reading;
use carrier_webext::pair_offer::PairWaiting;

/// A link not proven: what was seen, and the one thing to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// What is wrong, in a line.
    pub what: String,
    /// The one next step.
    pub next: String,
}

/// A link's outcome: proven (what was seen) or broken.
pub type Link = Result<String, Broken>;

fn broken(what: impl Into<String>, next: impl Into<String>) -> Link {
    Err(Broken { what: what.into(), next: next.into() })
}

/// The browsers setup installs into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Browser {
    /// Chromium: the package named in the profile's `External Extensions`.
    Chromium,
    /// Firefox: a person installs the `.xpi` (it needs their click).
    Firefox,
}

impl Browser {
    /// Its name as a person reads it.
    pub fn name(self) -> &'static str {
        match self {
            Browser::Chromium => "Chromium",
            Browser::Firefox => "Firefox",
        }
    }
}

/// Which waiting request `--yes` accepts: the first whose origin is the
/// extension setup installed (Chromium's id is the package's; Firefox
/// gives each install an origin of its own, so any add-on page there).
pub fn request_for_yes<'a>(
    requests: &'a [PairWaiting],
    browser: Browser,
    chromium_id: Option<&str>,
) -> Option<&'a PairWaiting> {
    requests.iter().find(|r| match (browser, chromium_id) {
        (Browser::Chromium, Some(id)) => r.origin == format!("chrome-extension://{id}"),
        (Browser::Chromium, None) => r.origin.starts_with("chrome-extension://"),
        (Browser::Firefox, _) => r.origin.starts_with("moz-extension://"),
    })
}

/// No browser asked to pair within the wait.
pub fn no_request(browser: Browser, waited_s: u64, listen: std::net::SocketAddr) -> Broken {
    let endpoint = format!("ws://{listen}/executor");
    let page = match listen.to_string().as_str() {
        "127.0.0.1:7777" => "its pairing page opens by itself on a fresh install and asks on its own".to_owned(),
        _ => format!("in its pairing page set the endpoint to {endpoint} and press \"Pair with orchestrator setup\""),
    };
    Broken {
        what: format!("no {} asked to pair within {waited_s} s", browser.name()),
        next: format!(
            "start {} with the extension installed ({page}), then run `orchestrator setup` again",
            browser.name()
        ),
    }
}

/// The executor setup paired, as the daemon's status shows it once it
/// connected: present, and of the daemon's version.
pub fn connected(status: &Status, executor_id: &str) -> Link {
    if let Some(refused) = status.executors_refused.iter().find(|r| r.executor_id == executor_id) {
        return broken(
            format!("the daemon refused the extension: {}", refused.reason),
            "install the extension from the same release bundle as this orchestrator, then run `orchestrator setup` again",
        );
    }
    let Some(live) = status.executors.iter().find(|e| e.executor_id == executor_id) else {
        return broken(
            format!("the extension was paired as {executor_id} but did not connect within 30 s"),
            "open the extension's options page: its status says why (then run `orchestrator setup` again)",
        );
    };
    match live.release.as_deref() {
        Some(release) if release == status.version => Ok(format!(
            "{executor_id} connected, extension {release} = daemon {}{}",
            status.version,
            live.browser.as_deref().map(|b| format!(" ({})", short_browser(b))).unwrap_or_default()
        )),
        other => broken(
            format!(
                "the extension is {} and the daemon {}: they speak one protocol, but this setup proves one release",
                other.unwrap_or("of an unnamed build"),
                status.version
            ),
            "install the extension from the same release bundle as this orchestrator, then run `orchestrator setup` again",
        ),
    }
}

/// `args` as a POSIX shell reads them back: each with anything beyond
/// `[A-Za-z0-9_./:=@-]` single-quoted.
pub fn shell_words(args: &[String]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_./:=@-".contains(c);
    let quote = |a: &String| match !a.is_empty() && a.chars().all(safe) {
        true => a.clone(),
        false => format!("'{}'", a.replace('\'', "'\\''")),
    };
    args.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The product token of a user agent (`Chrome/156…`, `Firefox/153.0`), or
/// the agent itself when it has neither.
pub fn short_browser(agent: &str) -> &str {
    let product = |t: &&str| ["Firefox/", "Chrome/", "HeadlessChrome/"].iter().any(|p| t.starts_with(p));
    agent.split_whitespace().rev().find(product).unwrap_or(agent)
}

/// How the paired extension read chatgpt.com's new chat, read-only: it
/// must be a chat a worker's first prompt can go to.
pub fn page(readings: &[Reading], executor_id: &str, browser: Browser) -> Link {
    let b = browser.name();
    let Some(reading) = readings.iter().find(|r| r.executor_id == executor_id) else {
        return broken(
            "the paired extension was not asked to read chatgpt.com (it did not declare page_inspect)",
            "install the extension from the same release bundle as this orchestrator, then run `orchestrator setup` again",
        );
    };
    let Some(inspection) = &reading.inspection else {
        let code = reading.error.map(|c| c.as_str()).unwrap_or("INTERNAL");
        return broken(
            format!("{b} could not read https://chatgpt.com/: {code}: {}", reading.detail),
            format!(
                "open https://chatgpt.com/ in {b} yourself and check it loads, then run `orchestrator setup` again"
            ),
        );
    };
    if inspection.usable() {
        return Ok(format!(
            "https://chatgpt.com/ read in a background tab of its own, read-only: {} ({})",
            inspection.state, inspection.adapter
        ));
    }
    let next = match inspection.state.as_str() {
        "signed_out" => format!("sign in to ChatGPT in {b}, then run `orchestrator setup` again"),
        "challenge" => {
            format!("open https://chatgpt.com/ in {b} and pass its check, then run `orchestrator setup` again")
        }
        "ui_changed" => "this build cannot read chatgpt.com as it is now: update the orchestrator, or report it with \
                         `orchestrator inspect-page` on a saved copy of the page"
            .to_owned(),
        _ => format!("open https://chatgpt.com/ in {b} and see what it shows, then run `orchestrator setup` again"),
    };
    let why = inspection.refusal.as_deref().unwrap_or(&inspection.submit);
    broken(format!("https://chatgpt.com/ reads as {}: {why}", inspection.state), next)
}

/// The MCP endpoint's answer: the tools it lists.
pub fn mcp(url: &str, listed: Result<usize, String>) -> Link {
    match listed {
        Ok(n) if n > 0 => Ok(format!("{url} answers: {n} tools")),
        Ok(_) => broken(format!("{url} lists no tools"), "see the daemon's log in the state directory (daemon.log)"),
        Err(e) => broken(
            format!("{url} does not answer MCP: {e}"),
            "see the daemon's log in the state directory (daemon.log), then run `orchestrator setup` again",
        ),
    }
}

/// The daemon's answer for the exposed host (asked on loopback with that
/// host's name and the secret's path: what a tunnel forwards).
pub fn exposed(host: &str, listen: &str, answered: Result<String, String>) -> Link {
    match answered {
        Ok(server) => Ok(format!(
            "{} answers for {host} ({server}); the tunnel itself is not reached from here: start it \
             (`cloudflared tunnel --url http://{listen}`) and add the URL in ChatGPT",
            crate::exposure::shown_url(host)
        )),
        Err(e) => broken(
            format!("the daemon does not answer for {host}: {e}"),
            format!(
                "restart the daemon with `--allowed-host {host}` (setup does when it starts it), then run setup again"
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::{ExecutorSummary, RefusedExecutor};
    use protocol::executor::PageInspection;

    fn status(executors: Vec<ExecutorSummary>) -> Status {
        Status {
            version: "0.1.0".into(),
            catalog_stamp: String::new(),
            app_label: None,
            worker_project_url: None,
            exposed_hosts: vec![],
            mcp_secret: false,
            executors_paired: 1,
            executors_connected: vec![],
            executors,
            executors_refused: vec![],
            unattributable: vec![],
            runs: vec![],
            deployment: None,
        }
    }

    fn executor(release: Option<&str>) -> ExecutorSummary {
        ExecutorSummary {
            executor_id: "exec-1".into(),
            host: None,
            browser: Some("Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.0.0 Safari/537.36".into()),
            os: Some("linux".into()),
            load: 0,
            capacity: None,
            kind: None,
            instance: None,
            release: release.map(str::to_owned),
        }
    }

    fn waiting(id: u64, origin: &str) -> PairWaiting {
        PairWaiting {
            id,
            code: "K7QM-2XPA".into(),
            browser: "Chrome/156".into(),
            release: "0.1.0".into(),
            origin: origin.into(),
            waited_ms: 0,
        }
    }

    #[test]
    fn a_printed_command_reads_back_as_its_arguments() {
        let args = ["--app-label", "My app's", "--listen", "127.0.0.1:7777", ""].map(String::from);
        assert_eq!(shell_words(&args), r#"--app-label 'My app'\''s' --listen 127.0.0.1:7777 ''"#);
    }

    #[test]
    fn yes_accepts_only_the_installed_extension() {
        let id = "abcdefghijklmnopabcdefghijklmnop";
        let requests = [
            waiting(1, "chrome-extension://ponmlkjihgfedcbaponmlkjihgfedcba"),
            waiting(2, &format!("chrome-extension://{id}")),
        ];
        assert_eq!(request_for_yes(&requests, Browser::Chromium, Some(id)).map(|r| r.id), Some(2));
        assert_eq!(request_for_yes(&requests[..1], Browser::Chromium, Some(id)), None);
        assert_eq!(request_for_yes(&requests, Browser::Firefox, None), None);
        let firefox = [waiting(3, "moz-extension://0a1b2c3d-0000-4000-8000-000000000000")];
        assert_eq!(request_for_yes(&firefox, Browser::Firefox, None).map(|r| r.id), Some(3));
    }

    #[test]
    fn no_request_says_how_the_page_asks() {
        let default = no_request(Browser::Chromium, 600, "127.0.0.1:7777".parse().unwrap());
        assert_eq!(default.what, "no Chromium asked to pair within 600 s");
        assert!(default.next.contains("opens by itself"), "{}", default.next);
        let other = no_request(Browser::Firefox, 5, "127.0.0.1:8123".parse().unwrap());
        assert!(other.next.contains("set the endpoint to ws://127.0.0.1:8123/executor"), "{}", other.next);
        assert!(other.next.starts_with("start Firefox"), "{}", other.next);
    }

    #[test]
    fn connected_needs_the_same_release_and_names_a_refusal() {
        let ok = connected(&status(vec![executor(Some("0.1.0"))]), "exec-1").unwrap();
        assert_eq!(ok, "exec-1 connected, extension 0.1.0 = daemon 0.1.0 (Chrome/156.0.0.0)");
        assert_eq!(
            short_browser("Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0"),
            "Firefox/153.0"
        );
        assert_eq!(
            short_browser("Mozilla/5.0 (X11) HeadlessChrome/156.0.0.0 Safari/537.36"),
            "HeadlessChrome/156.0.0.0"
        );
        assert_eq!(short_browser("Lynx"), "Lynx");
        let older = connected(&status(vec![executor(Some("0.0.9"))]), "exec-1").unwrap_err();
        assert!(older.what.starts_with("the extension is 0.0.9 and the daemon 0.1.0"), "{}", older.what);
        assert!(older.next.contains("same release bundle"), "{}", older.next);
        let absent = connected(&status(vec![]), "exec-1").unwrap_err();
        assert!(absent.what.contains("did not connect within 30 s"), "{}", absent.what);
        let mut refused = status(vec![]);
        refused.executors_refused.push(RefusedExecutor {
            executor_id: "exec-1".into(),
            at_ms: 1,
            reason: "PROTOCOL_VERSION: extension 0.0.1 speaks v1, daemon 0.1.0 v5: update the extension".into(),
        });
        let refused = connected(&refused, "exec-1").unwrap_err();
        assert!(refused.what.starts_with("the daemon refused the extension: PROTOCOL_VERSION"), "{}", refused.what);
    }

    fn inspection(state: &str, submit: &str, refusal: Option<&str>) -> PageInspection {
        PageInspection {
            adapter: "chatgpt-dom 0.1.0".into(),
            state: state.into(),
            refusal: refusal.map(str::to_owned),
            turns: 0,
            stop_buttons: 0,
            submit: submit.into(),
            app_pills: vec![],
        }
    }

    fn read(inspection: PageInspection) -> Vec<Reading> {
        vec![Reading { executor_id: "exec-1".into(), inspection: Some(inspection), error: None, detail: String::new() }]
    }

    #[test]
    fn the_page_must_take_a_first_prompt_and_each_refusal_has_its_step() {
        let ready = read(inspection("ready", "click the send button", None));
        assert!(page(&ready, "exec-1", Browser::Chromium).unwrap().contains("ready (chatgpt-dom 0.1.0)"));
        let cases = [
            ("signed_out", "sign in to ChatGPT in Chromium"),
            ("challenge", "pass its check"),
            ("ui_changed", "update the orchestrator"),
            ("generating", "see what it shows"),
        ];
        for (state, step) in cases {
            let broken = page(&read(inspection(state, "nothing (NOT_READY: …)", None)), "exec-1", Browser::Chromium)
                .unwrap_err();
            assert_eq!(broken.what, format!("https://chatgpt.com/ reads as {state}: nothing (NOT_READY: …)"));
            assert!(broken.next.contains(step), "{state}: {}", broken.next);
        }
        let failed = vec![Reading {
            executor_id: "exec-1".into(),
            inspection: None,
            error: Some(protocol::ErrorCode::DeadlineExceeded),
            detail: "the page did not settle".into(),
        }];
        let failed = page(&failed, "exec-1", Browser::Firefox).unwrap_err();
        assert_eq!(
            failed.what,
            "Firefox could not read https://chatgpt.com/: DEADLINE_EXCEEDED: the page did not settle"
        );
        let unasked = page(&[], "exec-1", Browser::Firefox).unwrap_err();
        assert!(unasked.what.contains("did not declare page_inspect"), "{}", unasked.what);
    }

    #[test]
    fn mcp_and_exposure_say_what_answered() {
        assert_eq!(mcp("http://127.0.0.1:7777/mcp", Ok(31)).unwrap(), "http://127.0.0.1:7777/mcp answers: 31 tools");
        let down = mcp("http://127.0.0.1:7777/mcp", Err("connection refused".into())).unwrap_err();
        assert_eq!(down.what, "http://127.0.0.1:7777/mcp does not answer MCP: connection refused");
        assert!(mcp("u", Ok(0)).is_err());
        let ok = exposed("orch.example.com", "127.0.0.1:7777", Ok("orchestrator".into())).unwrap();
        assert!(ok.contains("cloudflared tunnel --url http://127.0.0.1:7777"), "{ok}");
        assert!(ok.starts_with("https://orch.example.com/s/<secret>/mcp answers for orch.example.com"), "{ok}");
        assert!(ok.contains("the tunnel itself is not reached from here"), "{ok}");
        let refused = exposed("orch.example.com", "127.0.0.1:7777", Err("HTTP 403".into())).unwrap_err();
        assert!(refused.next.contains("--allowed-host orch.example.com"), "{}", refused.next);
    }
}
