//! docs/canary.md followed as an operator follows it (issue 45): every
//! `orchestrator` command of its `sh` blocks, in the page's order, run as
//! written but for [`SUBSTITUTIONS`] (each must still match the page, so a
//! change there shows here) and [`RIG_FLAGS`] (appended, so the run takes
//! CI's seconds, not a real site's minutes). fakechat stands in for
//! chatgpt.com behind the tunnel: it calls the URL `expose` printed, its
//! host mapped to the address `canary deploy` listens on. The carrier is
//! paired as the page and `deploy`'s printed next steps say. The rig plays
//! the person at the runner's terminal (`--faults prompt`): it reads each
//! fault the runner prints, does it in the browser, and presses Enter.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::canary::{Carrier, Fault};

/// What the page's commands are run with instead of what it says, and why.
/// `{home}`, `{port}`, `{carrier}` are the rig's.
pub const SUBSTITUTIONS: &[(&str, &str, &str)] = &[
    ("~/", "{home}/", "a fresh home for every path the page names"),
    ("127.0.0.1:7790", "127.0.0.1:{port}", "a port free now"),
    (
        "--target live",
        "--target fakechat",
        "fakechat's model plays a task only by the `scenario:` line a live prompt never carries",
    ),
    ("--carrier webext", "--carrier {carrier}", "the carrier under test"),
];

/// Flags appended to a command the page shows (its subcommand, the flags).
pub const RIG_FLAGS: &[(&str, &str)] = &[
    ("canary deploy", "--pool-pacing-ms 200 --max-launches 4"),
    ("canary run", "--pacing-ms 200 --gate-timeout-s 120"),
];

/// The page's placeholder for the head `canary run` printed.
const HEAD_PLACEHOLDER: &str = "<the head the run printed>";

/// How long the whole gate run may take before the rig gives up on it.
const RUN_LIMIT: Duration = Duration::from_secs(900);

/// How long any other command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(180);

/// What following the page ended with.
#[derive(Debug)]
pub struct Followed {
    /// `canary run`'s exit code.
    pub code: i32,
    /// `canary run`'s standard output (the claim, the head).
    pub ran: String,
    /// `canary show --json`.
    pub show: Value,
    /// `canary show`.
    pub shown: String,
    /// `canary show --html`'s page, as the page's redirect wrote it.
    pub report_html: String,
    /// `canary verify --head`, given the head `canary run` printed.
    pub verified: String,
    /// `canary stop`.
    pub stopped: String,
    /// `orchestrator status --json` once `canary stop` returned.
    pub status_after_stop: Value,
    /// `canary teardown`.
    pub torn_down: String,
    /// Whether anything still listened on the canary's port after teardown.
    pub listening_after_teardown: bool,
    /// The faults the runner printed, in order.
    pub faults: Vec<Value>,
    /// Wall time.
    pub elapsed: Duration,
}

/// The browser and the carrier in it, and the person's hands on it.
#[allow(clippy::large_enum_variant, reason = "one per rig, never moved in a loop")]
enum Browser {
    Webext { chromium: crate::browser::Chromium, dir: PathBuf },
    Cdp { chromium: crate::cdp::AuthorizedChromium, agent: tokio::process::Child },
}

impl Browser {
    async fn act(&mut self, fault: &Value, site_port: u16) -> anyhow::Result<String> {
        let Fault { kind, conversation, to } = Fault::of(fault);
        match self {
            Browser::Webext { chromium, dir } => {
                let extension = crate::chromium_dist()?;
                crate::canary::webext_act(chromium, &extension, site_port, dir, &kind, &conversation, &to).await
            }
            Browser::Cdp { chromium, .. } => crate::canary::cdp_act(chromium, &kind, &conversation, &to).await,
        }
    }

    async fn close(self) {
        match self {
            Browser::Webext { mut chromium, .. } => {
                let _ = chromium.browser.close().await;
                let _ = chromium.browser.wait().await;
            }
            Browser::Cdp { chromium, mut agent } => {
                let _ = agent.kill().await;
                drop(chromium);
            }
        }
    }
}

/// Takes the canary down if the rig stops before the page's teardown.
struct Teardown {
    orchestrator: PathBuf,
    state: PathBuf,
    done: bool,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::process::Command::new(&self.orchestrator)
                .args(["canary", "teardown", "--state-dir"])
                .arg(&self.state)
                .output();
        }
    }
}

/// The rig's substitutions applied to `command`.
fn substituted(command: &str, home: &Path, port: u16, carrier: Carrier) -> String {
    let carrier = match carrier {
        Carrier::Cdp => "cdp",
        Carrier::Webext | Carrier::Firefox => "webext",
    };
    let mut out = command.to_owned();
    for (from, to, _) in SUBSTITUTIONS {
        let to = to
            .replace("{home}", &home.display().to_string())
            .replace("{port}", &port.to_string())
            .replace("{carrier}", carrier);
        out = out.replace(from, &to);
    }
    if let Some((_, flags)) = RIG_FLAGS.iter().find(|(sub, _)| command.starts_with(&format!("orchestrator {sub} "))) {
        out = format!("{out} {flags}");
    }
    out
}

/// A command of `orchestrator`, its words after the program.
fn command(orchestrator: &Path, home: &Path, words: &[String]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(orchestrator);
    cmd.args(&words[1..])
        .env("HOME", home)
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env_remove("ORCHESTRATOR_MCP_SECRET")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs a command to its end (bounded): its standard output, or why not.
async fn run(mut cmd: tokio::process::Command, what: &str) -> anyhow::Result<String> {
    let out = tokio::time::timeout(COMMAND_LIMIT, cmd.output())
        .await
        .with_context(|| format!("`{what}` did not end in {COMMAND_LIMIT:?}"))??;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("canary docs: `{what}`\n{stdout}{stderr}");
    anyhow::ensure!(out.status.success(), "`{what}` failed ({}): {stdout}{stderr}", out.status);
    Ok(stdout.into_owned())
}

/// Follows docs/canary.md through `carrier` (the CDP agent or the
/// extension in Chromium) from `expose` to `verify`.
pub async fn follow(orchestrator: &Path, carrier: Carrier) -> anyhow::Result<Followed> {
    anyhow::ensure!(carrier != Carrier::Firefox, "the page's faults need hands the Firefox rig lacks");
    let started = Instant::now();
    let page = std::fs::read_to_string(crate::workspace().join("docs/canary.md"))?;
    let commands: Vec<String> =
        crate::docs::sh_commands(&page).into_iter().filter(|c| c.starts_with("orchestrator ")).collect();
    for (from, _, why) in SUBSTITUTIONS {
        anyhow::ensure!(commands.iter().any(|c| c.contains(from)), "docs/canary.md no longer says {from} ({why})");
    }
    anyhow::ensure!(commands.iter().any(|c| c.contains(HEAD_PLACEHOLDER)), "docs/canary.md shows no verify --head");
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();

    let mut teardown = None;
    let (mut site, mut browser, mut state) = (None, None, None);
    let (mut head, mut deployed) = (None::<String>, String::new());
    let mut followed = Followed {
        code: -1,
        ran: String::new(),
        show: Value::Null,
        shown: String::new(),
        report_html: String::new(),
        verified: String::new(),
        stopped: String::new(),
        status_after_stop: Value::Null,
        torn_down: String::new(),
        listening_after_teardown: true,
        faults: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for written in &commands {
        let mut line = substituted(written, &home, port, carrier);
        if line.contains(HEAD_PLACEHOLDER) {
            line = line.replace(HEAD_PLACEHOLDER, head.as_deref().context("verify before the run printed a head")?);
        }
        let words = crate::docs::shell_words(&line)?;
        let sub: Vec<&str> = words.iter().skip(1).take(2).map(String::as_str).collect();
        let state_of = |words: &[String]| {
            words.iter().position(|w| w == "--state-dir").and_then(|i| words.get(i + 1)).map(PathBuf::from)
        };
        match sub.as_slice() {
            ["expose", ..] => {
                let printed = run(command(orchestrator, &home, &words), written).await?;
                // The URL the person pastes into ChatGPT; the tunnel ends on our port.
                let url = printed
                    .lines()
                    .map(str::trim)
                    .find(|l| l.starts_with("https://") && l.ends_with("/mcp"))
                    .context("`expose` printed no URL to paste")?;
                let (_, path) = url["https://".len()..].split_once('/').context("a URL with a path")?;
                let tunnel = format!("http://127.0.0.1:{port}/{path}");
                let csp = fakechat::server::Csp::RealLike;
                site = Some(fakechat::start("127.0.0.1:0".parse()?, Some(tunnel), csp, None).await?);
            }
            ["canary", "deploy"] => {
                let here = state_of(&words).context("deploy names its state directory")?;
                teardown = Some(Teardown { orchestrator: orchestrator.to_owned(), state: here.clone(), done: false });
                deployed = run(command(orchestrator, &home, &words), written).await?;
                let label = words.iter().position(|w| w == "--app-label").and_then(|i| words.get(i + 1));
                let site = site.as_ref().context("deploy before expose: nothing to paste into ChatGPT")?;
                // The person creates the canary's app in ChatGPT, named as deployed.
                let label = label.context("deploy names the app")?;
                crate::install_apps(&site.hub, label, fakechat::render::AppState::Enabled);
                state = Some(here);
            }
            ["pair", ..] => {
                let site = site.as_ref().context("pair before the site")?;
                browser = Some(match carrier {
                    Carrier::Webext => {
                        let paired: Value =
                            serde_json::from_str(&run(command(orchestrator, &home, &words), written).await?)?;
                        let profile = dir.path().join("chromium");
                        let chromium =
                            crate::browser::Chromium::launch(&crate::chromium_dist()?, site.addr.port(), &profile)
                                .await?;
                        let (endpoint, credential) = (paired["endpoint"].as_str(), paired["credential"].as_str());
                        chromium.pair(endpoint.context("an endpoint")?, credential.context("a credential")?).await?;
                        Browser::Webext { chromium, dir: profile }
                    }
                    // The agent's route is the one `deploy` printed.
                    _ => cdp_as_deploy_said(orchestrator, &home, &deployed, site.addr.port(), dir.path()).await?,
                });
            }
            ["canary", "run"] => {
                let site_port = site.as_ref().context("run before the site")?.addr.port();
                let browser = browser.as_mut().context("run before a carrier was paired")?;
                let (code, ran) =
                    run_at_the_terminal(command(orchestrator, &home, &words), browser, site_port, &mut followed.faults)
                        .await?;
                head = ran
                    .lines()
                    .find_map(|l| l.strip_prefix("chain head: ")?.split_whitespace().next())
                    .map(str::to_owned);
                (followed.code, followed.ran) = (code, ran);
            }
            ["canary", "stop"] => {
                followed.stopped = run(command(orchestrator, &home, &words), written).await?;
                let here = state_of(&words).context("stop names its state directory")?;
                let status = ["orchestrator", "status", "--json", "--state-dir"].map(String::from);
                let mut status = command(orchestrator, &home, &status).arg(&here).output().await?;
                status.stdout.truncate(1 << 20);
                followed.status_after_stop = serde_json::from_slice(&status.stdout).unwrap_or(Value::Null);
            }
            ["canary", "teardown"] => {
                followed.torn_down = run(command(orchestrator, &home, &words), written).await?;
                if let Some(t) = teardown.as_mut() {
                    t.done = true;
                }
                // Down within a moment: probed until nothing answers (2 s at most).
                let mut listening = true;
                for _ in 0..10 {
                    listening = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok();
                    if !listening {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                followed.listening_after_teardown = listening;
            }
            ["canary", "show"] => {
                // `> FILE`, as the shell redirects it.
                let (words, into) = match words.iter().position(|w| w == ">") {
                    Some(i) => (words[..i].to_vec(), Some(PathBuf::from(words.get(i + 1).context("> names no file")?))),
                    None => (words, None),
                };
                let printed = run(command(orchestrator, &home, &words), written).await?;
                if let Some(file) = into {
                    std::fs::write(&file, &printed)?;
                    followed.report_html = std::fs::read_to_string(&file)?;
                } else if words.iter().any(|w| w == "--json") {
                    followed.show = serde_json::from_str(&printed)?;
                } else {
                    followed.shown = printed;
                }
            }
            ["canary", "verify"] => followed.verified = run(command(orchestrator, &home, &words), written).await?,
            other => anyhow::bail!(
                "docs/canary.md shows `orchestrator {}`, which this rig does not follow yet",
                other.join(" ")
            ),
        }
    }
    anyhow::ensure!(state.is_some(), "docs/canary.md never deploys");
    if let Some(browser) = browser {
        browser.close().await;
    }
    drop(teardown);
    followed.elapsed = started.elapsed();
    Ok(followed)
}

/// Pairs and starts the CDP agent with the two lines `canary deploy`
/// printed for it, the browser's place given as the rig's (`--channel
/// chrome` finds a desktop Chrome's default profile, which the rig has not).
async fn cdp_as_deploy_said(
    orchestrator: &Path,
    home: &Path,
    deployed: &str,
    site_port: u16,
    dir: &Path,
) -> anyhow::Result<Browser> {
    let said = |what: &str| {
        deployed
            .lines()
            .filter_map(|l| l.find("orchestrator ").map(|i| &l[i..]))
            .find(|l| l.contains(what))
            .map(str::to_owned)
            .with_context(|| format!("`canary deploy` printed no `{what}` line:\n{deployed}"))
    };
    let pair = said("--executor-id")?;
    run(command(orchestrator, home, &crate::docs::shell_words(&pair)?), &pair).await?;
    let chromium = crate::cdp::AuthorizedChromium::launch(site_port, &dir.join("chromium"))?;
    let agent_line = said("carrier-agent")?;
    anyhow::ensure!(agent_line.contains("--channel chrome"), "the agent's line names no browser channel: {agent_line}");
    let bundle = crate::chromium_dist()?.join("pkg");
    let agent_line = agent_line.replace(
        "--channel chrome",
        &format!("--user-data-dir {} --bundle {}", chromium.user_data_dir.display(), bundle.display()),
    );
    let mut agent = command(orchestrator, home, &crate::docs::shell_words(&agent_line)?);
    eprintln!("canary docs: `{agent_line}`");
    let agent = agent.stdout(Stdio::null()).stderr(Stdio::inherit()).spawn()?;
    Ok(Browser::Cdp { chromium, agent })
}

/// Runs `canary run` as a person at its terminal: each fault it prints
/// is done in `browser`, then Enter (with the address a person's own
/// chat got, when that was the fault). Its exit code and standard output.
async fn run_at_the_terminal(
    mut cmd: tokio::process::Command,
    browser: &mut Browser,
    site_port: u16,
    faults: &mut Vec<Value>,
) -> anyhow::Result<(i32, String)> {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut stdout = child.stdout.take().context("stdout")?;
    let collected = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text).await;
        text
    });
    let mut lines = tokio::io::BufReader::new(child.stderr.take().context("stderr")?).lines();
    let until = tokio::time::Instant::now() + RUN_LIMIT;
    loop {
        let line = tokio::time::timeout_at(until, lines.next_line())
            .await
            .with_context(|| format!("`canary run` still running after {RUN_LIMIT:?}"))??;
        let Some(line) = line else { break };
        eprintln!("canary run: {line}");
        if let Some(fault) = line.strip_prefix("canary: fault ") {
            let fault: Value =
                serde_json::from_str(fault).with_context(|| format!("a fault that is no JSON: {fault}"))?;
            let made = browser.act(&fault, site_port).await.with_context(|| format!("doing {fault}"))?;
            // What a person types back: the address of their own chat, else nothing.
            let answer =
                if fault["fault"] == "person_chat" { format!("https://chatgpt.com/c/{made}") } else { String::new() };
            stdin.write_all(format!("{answer}\n").as_bytes()).await?;
            stdin.flush().await?;
            faults.push(fault);
        }
    }
    let status = tokio::time::timeout_at(until, child.wait()).await??;
    Ok((status.code().unwrap_or(-1), collected.await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rig_changes_only_what_its_table_says() {
        let home = Path::new("/tmp/h");
        let line = "orchestrator canary run --state-dir ~/canary-state --receipts ~/r --target live --faults prompt --carrier webext";
        assert_eq!(
            substituted(line, home, 7801, Carrier::Cdp),
            "orchestrator canary run --state-dir /tmp/h/canary-state --receipts /tmp/h/r --target fakechat --faults prompt --carrier cdp --pacing-ms 200 --gate-timeout-s 120"
        );
        let pair = "orchestrator pair --state-dir ~/s --listen 127.0.0.1:7790 --json";
        assert_eq!(
            substituted(pair, home, 7801, Carrier::Webext),
            "orchestrator pair --state-dir /tmp/h/s --listen 127.0.0.1:7801 --json"
        );
    }
}
