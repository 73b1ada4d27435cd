//! `orchestrator doctor`: checks the operator's one-time ChatGPT setup
//! against the running daemon and says, step by step, what is still to do.
//! It reads the daemon's identity (server name, version) and tool catalog
//! over MCP exactly as ChatGPT's app would, and compares the catalog with
//! this binary's own.

use control::ChatgptSetup;
use protocol::limits::{APP_LABEL_MAX, valid_app_label};

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
struct Check {
    ok: bool,
    what: &'static str,
    says: String,
}

/// Runs every check, prints them and the setup still to do; true when nothing is missing.
pub async fn run(mcp_url: &str, app_label: Option<&str>, project_url: Option<&str>) -> bool {
    let mut checks = Vec::new();
    let mut todo: Vec<String> = Vec::new();
    let own = catalog();
    match daemon(mcp_url).await {
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
            checks.push(Check { ok: false, what: "daemon", says: format!("not reachable at {mcp_url}: {e}") });
            todo.push("Start the daemon: orchestrator serve (see README).".into());
        }
    }
    match host_setup(app_label, project_url) {
        Err(e) => checks.push(Check { ok: false, what: "config", says: e }),
        Ok(setup) => {
            match &setup.app_label {
                Some(label) => checks.push(Check { ok: true, what: "app label", says: format!("\"{label}\"") }),
                None => {
                    checks.push(Check {
                        ok: false,
                        what: "app label",
                        says: "not set: new worker conversations cannot be bound to the app".into(),
                    });
                    todo.push("Pass --app-label with the exact name of the orchestrator's app in ChatGPT.".into());
                }
            }
            checks.push(Check {
                ok: true,
                what: "project",
                says: setup
                    .project_url
                    .clone()
                    .unwrap_or_else(|| "none (optional): workers start as plain chats".into()),
            });
        }
    }
    let label = app_label.unwrap_or("<app label>");
    todo.push(format!(
        "In ChatGPT, once: Settings → Apps → Advanced settings → turn on Developer mode; Create app, name it exactly \
         \"{label}\" (no other app may carry that exact name), MCP server URL = the URL `orchestrator expose --host \
         <tunnel host>` prints (https://<tunnel host>/s/<secret>/mcp), authentication: none."
    ));
    todo.push(format!(
        "After upgrading the daemon, if its catalog changed (now {}), open the app in ChatGPT's settings and press Refresh.",
        own.stamp
    ));
    if project_url.is_some() {
        todo.push(format!("In the worker Project's settings, add the app \"{label}\" so its chats inherit it."));
    }
    for c in &checks {
        println!("{:<10} {:<4} {}", c.what, if c.ok { "ok" } else { "FAIL" }, c.says);
    }
    println!("\nOne-time setup in ChatGPT (docs/setup.md); the daemon cannot see these, check them once:");
    for (n, step) in todo.iter().enumerate() {
        println!("  {}. {step}", n + 1);
    }
    checks.iter().all(|c| c.ok)
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
