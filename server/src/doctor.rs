//! `orchestrator doctor`: checks the operator's one-time ChatGPT setup
//! against the running daemon and says, step by step, what is still to do.
//! It reads the daemon's identity (server name, version) and tool catalog
//! over MCP exactly as ChatGPT's app would, and compares the catalog with
//! this binary's own.

use control::ChatgptSetup;
use protocol::limits::{APP_LABEL_MAX, valid_app_label};

use crate::admin::Status;
use crate::tools::catalog;

/// The host setup from its two settings, or why they are not valid.
pub fn host_setup(app_label: Option<&str>, project_url: Option<&str>) -> Result<ChatgptSetup, String> {
    if let Some(label) = app_label
        && !valid_app_label(label)
    {
        return Err(format!(
            "--app-label must be 1-{APP_LABEL_MAX} characters without control characters or surrounding spaces"
        ));
    }
    if let Some(url) = project_url
        && !chatgpt_dom::is_project_page(url)
    {
        return Err("--worker-project-url must look like https://chatgpt.com/g/g-p-<32 hex>[-name]/project".into());
    }
    Ok(ChatgptSetup { app_label: app_label.map(str::to_owned), project_url: project_url.map(str::to_owned) })
}

/// One finding.
#[derive(Debug, serde::Serialize)]
struct Check {
    ok: bool,
    what: &'static str,
    says: String,
}

/// How `doctor` ends: every item ok, setup still to do, or the daemon
/// could not be asked at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing missing (exit 0).
    Ready,
    /// The daemon runs; setup is still to do (exit 1).
    Incomplete,
    /// The daemon is not reachable or refused the admin read (exit 2).
    Unreachable,
}

impl Verdict {
    /// The process exit code.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Ready => 0,
            Verdict::Incomplete => 1,
            Verdict::Unreachable => 2,
        }
    }
}

/// What the operator expects, to compare with what the daemon runs with.
#[derive(Debug, Clone, Default)]
pub struct Expected<'a> {
    /// `--app-label` given to doctor.
    pub app_label: Option<&'a str>,
    /// `--worker-project-url` given to doctor.
    pub project_url: Option<&'a str>,
}

/// Asks the running daemon (MCP for its identity and catalog, the admin
/// read for its configuration and executors), prints the findings and the
/// setup still to do (`json`: one object), and says how it went.
pub async fn run(mcp_url: &str, state_dir: &std::path::Path, expected: Expected<'_>, json: bool) -> Verdict {
    let mut checks = Vec::new();
    let mut todo: Vec<String> = Vec::new();
    let own = catalog();
    let mut reachable = true;
    // A daemon with an MCP secret answers `/mcp` only with it: ask at the
    // secret path, as ChatGPT does (the secret is never printed).
    // Only over loopback: the secret and the admin token never leave this machine.
    let loopback = authority(mcp_url).is_some_and(carrier_webext::bridge::loopback_host);
    let asked = match (loopback, mcp_url.strip_suffix("/mcp"), crate::exposure::load_secret(state_dir)) {
        (true, Some(base), Ok(Some(secret))) => format!("{base}/s/{secret}/mcp"),
        _ => mcp_url.to_owned(),
    };
    match daemon(&asked).await {
        Ok((name, version, stamp)) => {
            checks.push(Check { ok: true, what: "daemon", says: format!("{name} {version} at {mcp_url}") });
            let same = stamp.as_deref() == Some(own.stamp.as_str());
            checks.push(Check {
                ok: same,
                what: "catalog",
                says: match &stamp {
                    Some(s) if same => format!("{} tools, catalog {s} (same as this binary)", own.tools),
                    Some(s) => format!("the daemon serves catalog {s}, this binary {}: restart the daemon", own.stamp),
                    None => "the daemon's tool list has no catalog stamp: it is an older build; restart it".into(),
                },
            });
        }
        Err(e) => {
            reachable = false;
            // The error may quote the URL it was given: never show the secret path.
            let e = e.to_string().replace(&asked, mcp_url);
            checks.push(Check { ok: false, what: "daemon", says: format!("not reachable at {mcp_url}: {e}") });
            todo.push("Start the daemon: orchestrator serve (see README).".into());
        }
    }
    if let Err(e) = host_setup(expected.app_label, expected.project_url) {
        checks.push(Check { ok: false, what: "config", says: e });
    }
    let status = if reachable { admin_status(mcp_url, state_dir).await } else { Err(anyhow::anyhow!("not reachable")) };
    let label = match &status {
        Err(e) => {
            if reachable {
                reachable = false;
                checks.push(Check { ok: false, what: "admin", says: format!("the daemon's status: {e}") });
            }
            expected.app_label.unwrap_or("<app label>").to_owned()
        }
        Ok(status) => {
            setup_checks(status, &expected, &mut checks, &mut todo);
            status.app_label.clone().unwrap_or_else(|| "<app label>".into())
        }
    };
    todo.push(format!(
        "In ChatGPT, once: Settings → Apps → Advanced settings → turn on Developer mode; Create app, name it exactly \
         \"{label}\" (no other app may carry that exact name), MCP server URL = the URL `orchestrator expose --host \
         <tunnel host>` prints (https://<tunnel host>/s/<secret>/mcp), authentication: none."
    ));
    todo.push(format!(
        "After upgrading the daemon, if its catalog changed (now {}), open the app in ChatGPT's settings and press Refresh.",
        own.stamp
    ));
    if status.as_ref().is_ok_and(|s| s.worker_project_url.is_some()) {
        todo.push(format!("In the worker Project's settings, add the app \"{label}\" so its chats inherit it."));
    }
    let verdict = match (reachable, checks.iter().all(|c| c.ok)) {
        (false, _) => Verdict::Unreachable,
        (true, false) => Verdict::Incomplete,
        (true, true) => Verdict::Ready,
    };
    if json {
        println!("{}", serde_json::json!({ "ready": verdict == Verdict::Ready, "checks": checks, "todo": todo }));
        return verdict;
    }
    for c in &checks {
        println!("{:<10} {:<4} {}", c.what, if c.ok { "ok" } else { "FAIL" }, c.says);
    }
    println!("\nOne-time setup in ChatGPT (docs/setup.md); the daemon cannot see these, check them once:");
    for (n, step) in todo.iter().enumerate() {
        println!("  {}. {step}", n + 1);
    }
    verdict
}

/// The findings about what the daemon runs with, against what is expected.
fn setup_checks(status: &Status, expected: &Expected<'_>, checks: &mut Vec<Check>, todo: &mut Vec<String>) {
    let label = match (&status.app_label, expected.app_label) {
        (Some(running), Some(wanted)) if running != wanted => Check {
            ok: false,
            what: "app label",
            says: format!(
                "the daemon runs with \"{running}\", you expected \"{wanted}\": restart it with the right one"
            ),
        },
        (Some(running), _) => Check { ok: true, what: "app label", says: format!("\"{running}\"") },
        (None, _) => {
            todo.push(
                "Restart the daemon with --app-label and the exact name of the orchestrator's app in ChatGPT.".into(),
            );
            Check {
                ok: false,
                what: "app label",
                says: "not set: new worker conversations cannot be bound to the app and never attach".into(),
            }
        }
    };
    checks.push(label);
    checks.push(match (&status.worker_project_url, expected.project_url) {
        (running, Some(wanted)) if running.as_deref() != Some(wanted) => Check {
            ok: false,
            what: "project",
            says: format!("the daemon runs with {running:?}, you expected {wanted:?}"),
        },
        (Some(url), _) => Check { ok: true, what: "project", says: url.clone() },
        (None, _) => Check { ok: true, what: "project", says: "none (optional): workers start as plain chats".into() },
    });
    checks.push(match (status.executors_connected.len(), status.executors_paired) {
        (0, 0) => Check {
            ok: false,
            what: "executors",
            says: "none paired: run `orchestrator pair` and paste the credential into the extension's options page"
                .into(),
        },
        (0, paired) => Check {
            ok: false,
            what: "executors",
            says: format!("{paired} paired, none connected: start the browser with the paired extension"),
        },
        (_, paired) => {
            // An executor whose hello named no browser cannot open a chat yet
            // (the CDP agent found no authorized session): say which.
            let blind: Vec<&str> =
                status.executors.iter().filter(|e| e.browser.is_none()).map(|e| e.executor_id.as_str()).collect();
            let connected = status.executors_connected.join(", ");
            match blind.as_slice() {
                [] => Check { ok: true, what: "executors", says: format!("connected: {connected} ({paired} paired)") },
                _ => Check {
                    ok: false,
                    what: "executors",
                    says: format!(
                        "connected: {connected} ({paired} paired), but {} reached no browser: start it, or allow \
                         remote debugging for the CDP agent (its log says where it looked; docs/cdp-carrier.md)",
                        blind.join(", ")
                    ),
                },
            }
        }
    });
    // A paired executor of another protocol version cannot say so itself
    // where this person looks: its refusal names both builds and the fix.
    for refused in &status.executors_refused {
        checks.push(Check {
            ok: false,
            what: "executor version",
            says: format!("{} was refused: {}", refused.executor_id, refused.reason),
        });
    }
    // A worker call refused because attribution cannot work on this path
    // (the canary's first check, seen here from any run's workers).
    if let Some(last) = status.unattributable.last() {
        let says = format!("{}'s {} was refused: {}", last.worker_id, last.tool, last.cause);
        checks.push(Check { ok: false, what: "attribution", says });
    }
    let (exposed, says) = crate::admin::exposure(&status.exposed_hosts, status.mcp_secret);
    checks.push(Check { ok: exposed, what: "exposure", says });
}

/// The daemon's own status, over the admin read on loopback.
async fn admin_status(mcp_url: &str, state_dir: &std::path::Path) -> anyhow::Result<Status> {
    let addr = authority(mcp_url).ok_or_else(|| anyhow::anyhow!("--mcp-url must be http://HOST:PORT/…"))?;
    crate::admin::fetch(addr, state_dir).await
}

/// `host:port` of an `http://` URL.
fn authority(url: &str) -> Option<&str> {
    url.strip_prefix("http://").and_then(|rest| rest.split('/').next())
}

/// The daemon's server name, version and the catalog stamp in its tool list.
async fn daemon(mcp_url: &str) -> anyhow::Result<(String, String, Option<String>)> {
    let mut client = mcp_client::Client::connect(mcp_url).await?;
    let info = client.server_info().clone();
    let tools = client.list_tools().await?;
    Ok((
        info["name"].as_str().unwrap_or("?").to_owned(),
        info["version"].as_str().unwrap_or("?").to_owned(),
        protocol::catalog::stamp_in_tools(&tools),
    ))
}
