//! The canary rehearsed on fakechat: the product's own runner (`orchestrator
//! canary run`, a separate process, as an operator runs it) through a real
//! carrier, this rig playing the person whose faults the gates need, and
//! optionally one planted fault the runner must stop on.
//!
//! The fault hook (loopback; POST JSON, 200 once done) takes:
//! - `person_chat`: a person opens a chat of their own and sends a message;
//! - `navigate {conversation_id, to?}`: a person opens another page in that
//!   tab (`to`, a chatgpt.com URL, else the home page);
//! - `lose_target {conversation_id}`: that tab is closed;
//! - `restart_browser`: the browser is killed and started on its profile.
//!
//! Firefox takes none (its rig has no person's hands): run G1D–G3 there.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

/// Which carrier the gates run through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Carrier {
    /// The CDP host agent on an authorized Chromium.
    Cdp,
    /// The extension in headless Chromium.
    Webext,
    /// The extension in headless Firefox.
    Firefox,
}

impl Carrier {
    /// `cdp`, `webext`, `firefox`.
    pub fn parse(text: &str) -> anyhow::Result<Carrier> {
        match text {
            "cdp" => Ok(Carrier::Cdp),
            "webext" | "chromium" => Ok(Carrier::Webext),
            "firefox" => Ok(Carrier::Firefox),
            other => anyhow::bail!("unknown carrier {other:?} (cdp, webext, firefox)"),
        }
    }

    /// As `orchestrator canary run --carrier` names it.
    fn runner_name(self) -> &'static str {
        match self {
            Carrier::Cdp => "cdp",
            Carrier::Webext | Carrier::Firefox => "webext",
        }
    }
}

/// A fault planted for the runner to stop on (the table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// The app needs a refresh before G2.
    StaleApp,
    /// The rate-limit dialog in a worker's tab during G3.
    RateLimitInG3,
    /// A worker's tab closed while G3's tasks run.
    LostTargetInG3,
    /// The executor killed while a G3 prompt is being submitted.
    ExecutorKilledMidSend,
    /// `orchestrator canary stop` from another terminal while G3's tasks run.
    StoppedMidG3,
    /// Ctrl-C in the runner's terminal (SIGINT) while G3's tasks run.
    InterruptedMidG3,
    /// Request ids broken on their way (a proxy stripping the header, a
    /// page that shows none, or ids in another form), from the start.
    RequestIds(fakechat::hub::RequestIds),
}

/// What a rehearsal ended with.
#[derive(Debug, Clone)]
pub struct Rehearsal {
    /// The runner's exit code (0: every gate passed).
    pub code: i32,
    /// `orchestrator canary show --json` of the chain.
    pub show: Value,
    /// Wall time.
    pub elapsed: Duration,
    /// `orchestrator status --json` of the canary daemon once the runner ended.
    pub status_after: Value,
    /// `orchestrator canary stop`'s lines, when the rig ran it.
    pub stop_said: Vec<String>,
}

/// One rehearsal's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// The daemon binary.
    pub orchestrator: PathBuf,
    /// Where the receipts go.
    pub receipts: PathBuf,
    /// The carrier.
    pub carrier: Carrier,
    /// `--gates`, if not every one.
    pub gates: Option<String>,
    /// A fault to plant.
    pub planted: Option<Planted>,
    /// More `canary run` flags (`--attribution capability_only`).
    pub run_args: Vec<String>,
    /// fakechat's connector keeps one MCP session per conversation, as a
    /// host may (admitting a pool worker without attribution needs one).
    pub sessions: bool,
}

/// The browser side and the person's hands on it.
enum Hands {
    Cdp(Box<crate::cdp::CdpWorld>),
    Webext {
        world: Box<crate::World>,
        extension: PathBuf,
    },
    /// Kept for their lifetime only: the browser, the daemon, the site, the state.
    #[allow(dead_code)]
    Firefox(Box<(crate::firefox::Firefox, crate::Daemon, fakechat::Running, tempfile::TempDir)>),
}

struct Person {
    hands: Hands,
    site_port: u16,
}

impl Person {
    /// Does `fault`; what it made (the person's conversation id for
    /// `person_chat`), for the hook's answer.
    async fn act(&mut self, fault: &Value) -> anyhow::Result<String> {
        let Fault { kind, conversation, to } = Fault::of(fault);
        match &mut self.hands {
            Hands::Cdp(world) => cdp_act(&mut world.chromium, &kind, &conversation, &to).await,
            Hands::Webext { world, extension } => {
                webext_act(
                    &mut world.chromium,
                    extension,
                    self.site_port,
                    &world.dir.path().join("chromium"),
                    &kind,
                    &conversation,
                    &to,
                )
                .await
            }
            Hands::Firefox(_) => anyhow::bail!("the Firefox rig has no hands for {kind}"),
        }
    }
}

/// A fault the runner asks for, as the hook gets it.
pub(crate) struct Fault {
    /// `person_chat`, `navigate`, `lose_target`, `restart_browser`.
    pub kind: String,
    /// The conversation whose tab it concerns, if any.
    pub conversation: String,
    /// Where a navigation goes: the page the runner names (a chat of the
    /// person's), else chatgpt.com's home. Only chatgpt.com.
    pub to: String,
}

impl Fault {
    pub fn of(fault: &Value) -> Fault {
        let to =
            fault["to"].as_str().filter(|u| u.starts_with("https://chatgpt.com/")).unwrap_or("https://chatgpt.com/");
        Fault {
            kind: fault["fault"].as_str().unwrap_or_default().to_owned(),
            conversation: fault["conversation_id"].as_str().unwrap_or_default().to_owned(),
            to: to.to_owned(),
        }
    }
}

/// Does `kind` (a fault the runner asks for) in the authorized Chromium
/// of the CDP carrier's rig, as a person would.
pub(crate) async fn cdp_act(
    chromium: &mut crate::cdp::AuthorizedChromium,
    kind: &str,
    conversation: &str,
    to: &str,
) -> anyhow::Result<String> {
    use carrier_cdp::cdp::Cdp;
    use chromiumoxide::cdp::browser_protocol::page::NavigateParams;
    use chromiumoxide::cdp::browser_protocol::target::{
        AttachToTargetParams, CloseTargetParams, CreateTargetParams, GetTargetsParams,
    };
    if kind == "restart_browser" {
        chromium.restart()?;
        return Ok("done".into());
    }
    let observer = Cdp::connect(&chromium.ws_url()?).await.map_err(anyhow::Error::msg)?;
    let shown = || async {
        let targets = observer.call(None, GetTargetsParams::default()).await?.target_infos;
        targets
            .into_iter()
            .find(|t| t.r#type == "page" && t.url.contains(conversation))
            .map(|t| t.target_id)
            .with_context(|| format!("no tab shows {conversation}"))
    };
    let attach =
        |target| AttachToTargetParams::builder().target_id(target).flatten(true).build().map_err(anyhow::Error::msg);
    match kind {
        "person_chat" => {
            let mine = observer.call(None, CreateTargetParams::new("https://chatgpt.com/")).await?.target_id;
            let session = observer.call(None, attach(mine)?).await?.session_id;
            return crate::cdp::chat_by_hand(&observer, &session, "a person's own chat, not the orchestrator's").await;
        }
        "navigate" => {
            let session = observer.call(None, attach(shown().await?)?).await?.session_id;
            observer.call(Some(&session), NavigateParams::new(to)).await?;
        }
        "lose_target" => {
            observer.call(None, CloseTargetParams::new(shown().await?)).await?;
        }
        other => anyhow::bail!("unknown fault {other:?}"),
    }
    Ok("done".into())
}

/// Does `kind` in the extension's Chromium (profile under `dir`), as a person would.
pub(crate) async fn webext_act(
    chromium: &mut crate::browser::Chromium,
    extension: &Path,
    port: u16,
    dir: &Path,
    kind: &str,
    conversation: &str,
    to: &str,
) -> anyhow::Result<String> {
    if kind == "restart_browser" {
        let _ = chromium.browser.close().await;
        let _ = chromium.browser.wait().await;
        *chromium = crate::browser::Chromium::relaunch(extension, port, dir, false).await?;
        return Ok("done".into());
    }
    if kind == "person_chat" {
        let page = chromium.browser.new_page("https://chatgpt.com/").await?;
        return crate::browser::chat_by_hand(&page, "a person's own chat, not the orchestrator's").await;
    }
    let mut shown = None;
    for page in chromium.browser.pages().await? {
        if page.url().await?.is_some_and(|u| u.contains(conversation)) {
            shown = Some(page);
        }
    }
    let page = shown.with_context(|| format!("no tab shows {conversation}"))?;
    match kind {
        "navigate" => {
            page.goto(to).await?;
        }
        "lose_target" => page.close().await?,
        other => anyhow::bail!("unknown fault {other:?}"),
    }
    Ok("done".into())
}

/// Serves the fault hook: one JSON POST per connection.
async fn serve_faults(listener: tokio::net::TcpListener, person: Arc<Mutex<Person>>) {
    loop {
        let Ok((mut tcp, _)) = listener.accept().await else { return };
        let person = person.clone();
        tokio::spawn(async move {
            let Some(body) = read_body(&mut tcp).await else { return };
            let (status, text) = match serde_json::from_str::<Value>(&body) {
                Ok(fault) => match person.lock().await.act(&fault).await {
                    Ok(made) => ("200 OK", made),
                    Err(e) => ("500 Internal Server Error", format!("{e:#}")),
                },
                Err(e) => ("400 Bad Request", e.to_string()),
            };
            eprintln!("canary rig: fault {body} -> {status} {text}");
            let reply =
                format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}", text.len());
            let _ = tcp.write_all(reply.as_bytes()).await;
        });
    }
}

/// An HTTP request's body (headers, then `Content-Length` bytes).
async fn read_body(tcp: &mut tokio::net::TcpStream) -> Option<String> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tcp.read(&mut buf).await.ok().filter(|n| *n > 0)?;
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return Some(body.to_owned());
            }
        }
    }
}

/// Plants `planted` at its moment: before the run, or once G3 begins (the
/// runner has written G2's receipt).
async fn plant(
    planted: Planted,
    receipts: PathBuf,
    person: Arc<Mutex<Person>>,
    hub: Arc<fakechat::hub::Hub>,
    (orchestrator, state_dir): (PathBuf, PathBuf),
    runner: Arc<std::sync::atomic::AtomicU32>,
) -> Vec<String> {
    // Whether the runner has written `gate`'s receipt.
    let written = |gate: &str| {
        std::fs::read_dir(&receipts)
            .map(|d| {
                d.filter_map(Result::ok).any(|e| e.file_name().to_string_lossy().ends_with(&format!("-{gate}.json")))
            })
            .unwrap_or(false)
    };
    while !written("G2") {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!("canary rig: G2 written; planting {planted:?}");
    let managed = || -> Vec<String> {
        hub.oracle()["conversations"].as_object().map(|c| c.keys().cloned().collect()).unwrap_or_default()
    };
    match planted {
        Planted::StaleApp | Planted::RequestIds(_) => {}
        Planted::RateLimitInG3 => {
            if let Some(id) = managed().last() {
                hub.update(id, |c| c.rate_limited = true);
            }
        }
        Planted::LostTargetInG3 | Planted::StoppedMidG3 | Planted::InterruptedMidG3 => {
            // Once a G3 task is in a conversation (a second user turn), that
            // tab goes (or the operator stops the canary) while the model is
            // surely still on it: the answers wait until the gate has judged
            // (or 60 s).
            hub.hold_replies.send_replace(true);
            let tasked = || -> Option<String> {
                let oracle = hub.oracle();
                oracle["conversations"]
                    .as_object()?
                    .iter()
                    .find_map(|(id, c)| (c["user_turns"].as_array().map_or(0, Vec::len) >= 2).then(|| id.clone()))
            };
            let until = tokio::time::Instant::now() + Duration::from_secs(60);
            let mut id = tasked();
            while id.is_none() && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(10)).await;
                id = tasked();
            }
            let mut said = Vec::new();
            match (planted, id) {
                (Planted::LostTargetInG3, Some(id)) => {
                    let fault = serde_json::json!({"fault": "lose_target", "conversation_id": id});
                    let _ = person.lock().await.act(&fault).await;
                }
                (Planted::StoppedMidG3, Some(_)) => {
                    let stop = tokio::process::Command::new(&orchestrator)
                        .args(["canary", "stop", "--state-dir"])
                        .arg(&state_dir)
                        .output()
                        .await;
                    said = match stop {
                        Ok(out) => String::from_utf8_lossy(&[out.stdout, out.stderr].concat())
                            .lines()
                            .map(String::from)
                            .collect(),
                        Err(e) => vec![format!("canary stop did not run: {e}")],
                    };
                }
                (Planted::InterruptedMidG3, Some(_)) => {
                    // What Ctrl-C sends the terminal's foreground process.
                    // Never pid 0: that would signal the rig's whole process group.
                    let pid = runner.load(std::sync::atomic::Ordering::SeqCst);
                    if pid > 1 {
                        let sent = std::process::Command::new("kill").args(["-INT", &pid.to_string()]).status();
                        said.push(format!("SIGINT to the runner (pid {pid}): {sent:?}"));
                    }
                }
                _ => {}
            }
            let until = tokio::time::Instant::now() + Duration::from_secs(60);
            while !written("G3") && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            hub.hold_replies.send_replace(false);
            return said;
        }
        Planted::ExecutorKilledMidSend => {
            // Hold the page's submit in flight, then take the executor away under it.
            hub.hold_submissions.send_replace(true);
            while hub.held.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            eprintln!("canary rig: a submit is in flight; the agent's process ends under it");
            // The agent's process ends under the submit and starts again from its journal.
            if let Hands::Cdp(world) = &mut person.lock().await.hands {
                let _ = world.agent.restart().await;
            }
            // The page keeps its submit in flight until the gate has judged
            // (or 60 s): the new process cannot see whether the prompt went in.
            let until = tokio::time::Instant::now() + Duration::from_secs(60);
            while !written("G3") && tokio::time::Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            hub.hold_submissions.send_replace(false);
        }
    }
    Vec::new()
}

/// Starts the rig, runs the gates with the product's runner, and returns
/// its exit code and the verified chain.
pub async fn rehearse(options: Options) -> anyhow::Result<Rehearsal> {
    let started = std::time::Instant::now();
    // G5 scales to five: room for them, and quick pacing on a fake site.
    // Exposed as a live canary's daemon must be for ChatGPT to reach it
    // (a tunnel's host, a secret): the runner then needs the secret too.
    let mut daemon_args = vec![
        "--pool-pacing-ms",
        "200",
        "--max-launches",
        "4",
        "--max-active-workers",
        "8",
        "--allowed-host",
        "canary-tunnel.example",
    ];
    if let Some(Planted::RequestIds(_)) = options.planted {
        // A call that no page shows is refused after this wait (30 s by default).
        daemon_args.extend(["--attribution-wait-ms", "4000"]);
    }
    let orchestrator = options.orchestrator.as_path();
    let (hands, mcp_url, state_dir, hub, site_port) = match options.carrier {
        Carrier::Cdp => {
            let world = crate::cdp::CdpWorld::start(orchestrator, &daemon_args).await?;
            let (url, state, hub) = (world.daemon.mcp_url(), world.dir.path().join("state"), world.fake.hub.clone());
            let port = world.fake.addr.port();
            (Hands::Cdp(Box::new(world)), url, state, hub, port)
        }
        Carrier::Webext => {
            let world = crate::World::start(orchestrator, &daemon_args).await?;
            let (url, state, hub) = (world.daemon.mcp_url(), world.dir.path().join("state"), world.fake.hub.clone());
            let port = world.fake.addr.port();
            (Hands::Webext { world: Box::new(world), extension: crate::chromium_dist()? }, url, state, hub, port)
        }
        Carrier::Firefox => {
            let dir = tempfile::tempdir()?;
            let (daemon, fake) = crate::daemon_and_site(orchestrator, dir.path(), &daemon_args).await?;
            let dist = crate::firefox_dist()?;
            let mut firefox =
                crate::firefox::Firefox::launch(&dist, fake.addr.port(), &fake.ca_pem, &dir.path().join("ff")).await?;
            firefox.pair(&daemon.executor_url(), &daemon.credential()?).await?;
            let (url, hub, port, state) =
                (daemon.mcp_url(), fake.hub.clone(), fake.addr.port(), dir.path().join("state"));
            (Hands::Firefox(Box::new((firefox, daemon, fake, dir))), url, state, hub, port)
        }
    };
    let person = Arc::new(Mutex::new(Person { hands, site_port }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let hook = format!("http://{}/fault", listener.local_addr()?);
    let hook_task = tokio::spawn(serve_faults(listener, person.clone()));
    match options.planted {
        Some(Planted::StaleApp) => crate::install_apps(&hub, crate::APP_LABEL, fakechat::render::AppState::Stale),
        Some(Planted::RequestIds(broken)) => {
            hub.request_ids.send_replace(broken);
        }
        _ => {}
    }
    if options.sessions {
        *hub.sessions.lock().expect("sessions lock") = Some(Default::default());
    }
    let stopping = (options.orchestrator.clone(), state_dir.clone());
    let runner = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let planter = options.planted.map(|p| {
        let receipts = options.receipts.clone();
        tokio::spawn(plant(p, receipts, person.clone(), hub.clone(), stopping.clone(), runner.clone()))
    });
    eprintln!("canary rig: daemon {mcp_url}, fault hook {hook} (ready in {:.1} s)", started.elapsed().as_secs_f64());
    let mut run = tokio::process::Command::new(orchestrator);
    run.args(["canary", "run", "--state-dir"]).arg(&state_dir).arg("--receipts").arg(&options.receipts);
    run.args(["--carrier", options.carrier.runner_name(), "--target", "fakechat", "--faults", &hook]);
    run.args(["--gate-timeout-s", "120", "--pacing-ms", "200", "--prompt-budget", "40"]);
    if let Some(gates) = &options.gates {
        run.args(["--gates", gates]);
    }
    run.args(&options.run_args);
    // The runner's own lines go to stderr: stdout is the chain's JSON.
    let mut child = run.stdout(std::io::stderr()).spawn()?;
    runner.store(child.id().unwrap_or_default(), std::sync::atomic::Ordering::SeqCst);
    let code = child.wait().await?.code().unwrap_or(1);
    let show = tokio::process::Command::new(orchestrator)
        .args(["canary", "show", "--json"])
        .arg(&options.receipts)
        .output()
        .await?;
    anyhow::ensure!(show.status.success(), "canary show refused the chain: {}", String::from_utf8_lossy(&show.stderr));
    let show: Value = serde_json::from_slice(&show.stdout)?;
    let status = tokio::process::Command::new(orchestrator)
        .args(["status", "--json", "--state-dir"])
        .arg(&state_dir)
        .output()
        .await?;
    let status_after: Value = serde_json::from_slice(&status.stdout).unwrap_or(Value::Null);
    // Everything the rig started ends with it: the tasks holding the
    // person go first, then the browser, the daemon and the site.
    hook_task.abort();
    let _ = hook_task.await;
    // A planter still waiting for a gate the runner never reached ends here.
    let stop_said = match planter {
        Some(mut planter) => match tokio::time::timeout(Duration::from_secs(2), &mut planter).await {
            Ok(said) => said.unwrap_or_default(),
            Err(_) => {
                planter.abort();
                Vec::new()
            }
        },
        None => Vec::new(),
    };
    match Arc::into_inner(person).map(Mutex::into_inner) {
        Some(Person { hands: Hands::Webext { world, .. }, .. }) => world.shutdown().await,
        Some(person) => drop(person),
        None => anyhow::bail!("the rig's browser and daemon are still held"),
    }
    Ok(Rehearsal { code, show, elapsed: started.elapsed(), status_after, stop_said })
}
