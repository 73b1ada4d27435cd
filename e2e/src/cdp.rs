//! The CDP carrier's rig: a headless Chromium started by the test with
//! `--remote-debugging-port=0` on a fresh profile (standing in for a
//! browser session its user authorized; the real authorization prompt
//! cannot be approved headless), reaching fakechat as `https://chatgpt.com`,
//! and the CDP host agent attached to it through its `DevToolsActivePort`.
//! The test's own DevTools connection (`observer`) plays the user: it may
//! open, navigate and close tabs as a person would.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use carrier_cdp::{Agent, Config, Endpoint};

use crate::Daemon;

/// The flags of a headless Chromium with remote debugging on port 0 that
/// stays off the closed network (the profile and host mapping come apart).
const HEADLESS_FLAGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--disable-breakpad",
    "--password-store=basic",
    "--ignore-certificate-errors",
    "--remote-debugging-port=0",
];

/// The flags the agent's dedicated-profile fallback (`--launch-arg`) needs
/// for a headless Chromium reaching `site` as chatgpt.com: the rig's own,
/// less those the agent sets itself (the port and the profile).
pub fn dedicated_launch_args(site: &str) -> Vec<String> {
    HEADLESS_FLAGS
        .iter()
        .filter(|f| !f.starts_with("--remote-debugging") && **f != "--no-first-run")
        .map(|f| f.to_string())
        .chain([format!("--host-resolver-rules=MAP chatgpt.com {site}")])
        .collect()
}

/// Chromium with remote debugging allowed, as its own process.
pub struct AuthorizedChromium {
    child: Child,
    /// Its user-data directory (holds `DevToolsActivePort`).
    pub user_data_dir: PathBuf,
    port: u16,
    dir: PathBuf,
}

impl AuthorizedChromium {
    /// Starts Chromium on a fresh profile under `dir`, `chatgpt.com` mapped
    /// to `127.0.0.1:port`, and waits for its `DevToolsActivePort`.
    pub fn launch(port: u16, dir: &Path) -> anyhow::Result<AuthorizedChromium> {
        crate::print_versions();
        let user_data_dir = dir.join("profile");
        let child = spawn(port, dir, &user_data_dir)?;
        Ok(AuthorizedChromium { child, user_data_dir, port, dir: dir.to_owned() })
    }

    /// Kills the browser and starts it again on the same profile: a new
    /// generation, whose targets are all new.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        let _ = std::fs::remove_file(self.user_data_dir.join("DevToolsActivePort"));
        self.child = spawn(self.port, &self.dir, &self.user_data_dir)?;
        Ok(())
    }

    /// The browser's DevTools WebSocket URL.
    pub fn ws_url(&self) -> anyhow::Result<String> {
        let text = std::fs::read_to_string(self.user_data_dir.join("DevToolsActivePort"))?;
        Ok(carrier_cdp::discovery::parse_active_port(&text)?)
    }

    /// Kills the browser and every process it started (its targets die with it).
    pub fn kill(&mut self) {
        let _ = signal_group(&self.child, "KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the whole browser (`SIGSTOP` to every one of its processes, as
    /// a laptop's sleep stops them all), or wakes it (`SIGCONT`).
    pub fn asleep(&self, stopped: bool) -> anyhow::Result<()> {
        signal_group(&self.child, if stopped { "STOP" } else { "CONT" })
    }
}

/// Sends `signal` to the process group `child` leads (see [`spawn_with`]).
fn signal_group(child: &Child, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill").arg(format!("-{signal}")).arg("--").arg(format!("-{}", child.id())).status()?;
    anyhow::ensure!(status.success(), "kill -{signal} of the browser's process group failed");
    Ok(())
}

/// Starts Chromium with remote debugging on `user_data_dir` and waits for
/// its `DevToolsActivePort`.
fn spawn(port: u16, dir: &Path, user_data_dir: &Path) -> anyhow::Result<Child> {
    let site = format!("127.0.0.1:{port}");
    spawn_with(Command::new(crate::browser::chromium()?), &site, dir, user_data_dir)
}

/// Starts `chromium` (a command naming the browser, perhaps run inside a
/// network namespace) as an authorized session on `user_data_dir`,
/// reaching `site` as chatgpt.com, and waits for its `DevToolsActivePort`.
pub fn spawn_with(mut chromium: Command, site: &str, dir: &Path, user_data_dir: &Path) -> anyhow::Result<Child> {
    std::fs::create_dir_all(user_data_dir)?;
    // A process group of its own: the whole browser is stopped, woken and
    // killed together.
    std::os::unix::process::CommandExt::process_group(&mut chromium, 0);
    let child = chromium
        .args(HEADLESS_FLAGS)
        .arg(format!("--host-resolver-rules=MAP chatgpt.com {site}"))
        .arg(format!("--user-data-dir={}", user_data_dir.display()))
        .arg("about:blank")
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting chromium")?;
    let file = user_data_dir.join("DevToolsActivePort");
    for _ in 0..400 {
        if std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() >= 2) {
            return Ok(child);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    anyhow::bail!("chromium wrote no DevToolsActivePort in 10 s")
}

impl Drop for AuthorizedChromium {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The daemon, fakechat, an authorized Chromium and the CDP agent, paired.
pub struct CdpWorld {
    /// The daemon process.
    pub daemon: Daemon,
    /// fakechat, in process.
    pub fake: fakechat::Running,
    /// The browser session.
    pub chromium: AuthorizedChromium,
    /// The agent (in process; `orchestrator carrier-agent --cdp` runs the same).
    pub agent: Agent,
    /// The agent's configuration (to start it again).
    pub config: Config,
    /// Temporary state.
    pub dir: tempfile::TempDir,
}

impl CdpWorld {
    /// Starts everything and waits until the agent's session is up.
    pub async fn start(orchestrator: &Path, daemon_args: &[&str]) -> anyhow::Result<CdpWorld> {
        let dir = tempfile::tempdir()?;
        let (daemon, fake) = crate::daemon_and_site(orchestrator, dir.path(), daemon_args).await?;
        let chromium = AuthorizedChromium::launch(fake.addr.port(), &dir.path().join("chromium"))?;
        let config = agent_config(&daemon, &chromium.user_data_dir, &dir.path().join("agent.json"))?;
        let agent = Agent::start(config.clone())?;
        wait_until(Duration::from_secs(20), || agent.is_connected()).await.context("the agent never connected")?;
        Ok(CdpWorld { daemon, fake, chromium, agent, config, dir })
    }
}

/// An agent configuration for `daemon`, a fresh credential, the browser
/// whose user-data directory is `user_data_dir`, and its journal in `state_file`.
pub fn agent_config(daemon: &Daemon, user_data_dir: &Path, state_file: &Path) -> anyhow::Result<Config> {
    let token = daemon.credential()?;
    let bundle = carrier_cdp::page::Bundle::load(&crate::chromium_dist()?.join("pkg"))?;
    Ok(Config {
        daemon: daemon.executor_url(),
        daemon_pin: None,
        executor_id: carrier_cdp::pairing::executor_id_of(&token).context("a credential names its executor")?,
        token,
        browser: Endpoint::UserDataDir(user_data_dir.to_owned()),
        bundle,
        state_file: state_file.to_owned(),
        connect_timeout: Duration::from_secs(5),
        approval_wait: carrier_cdp::connect::APPROVAL_WAIT,
        reconnect_delay: Duration::from_millis(100),
        capacity: Some(carrier_cdp::agent::DEFAULT_CAPACITY),
        dedicated: None,
    })
}

/// Polls `done` (bounded).
pub async fn wait_until(within: Duration, done: impl Fn() -> bool) -> anyhow::Result<()> {
    let until = tokio::time::Instant::now() + within;
    while !done() {
        anyhow::ensure!(tokio::time::Instant::now() < until, "not within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// Types `text` into the page of `session` and sends it, by hand (a
/// person's DevTools session, in the page's own world): the conversation
/// id the page then shows.
pub async fn chat_by_hand(
    observer: &carrier_cdp::cdp::Cdp,
    session: &chromiumoxide::cdp::browser_protocol::target::SessionId,
    text: &str,
) -> anyhow::Result<String> {
    use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
    let eval = |expression: String| {
        let params = EvaluateParams::builder().expression(expression).return_by_value(true).build();
        async move { Ok::<_, anyhow::Error>(observer.call(Some(session), params.map_err(anyhow::Error::msg)?).await?) }
    };
    let until = |expression: &'static str| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let value = eval(expression.to_owned()).await.ok().and_then(|r| r.result.value);
            if value == Some(serde_json::json!(true)) {
                return Ok(());
            }
            anyhow::ensure!(tokio::time::Instant::now() < deadline, "never true: {expression}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    until("!!document.querySelector('#prompt-textarea') && document.readyState === 'complete'").await?;
    let text = serde_json::to_string(text)?;
    eval(format!(
        "(() => {{ const e = document.querySelector('#prompt-textarea'); e.focus(); \
         document.execCommand('insertText', false, {text}); return true; }})()"
    ))
    .await?;
    until("!!document.querySelector('[data-testid=\"send-button\"]')").await?;
    eval("document.querySelector('[data-testid=\"send-button\"]').click(), true".into()).await?;
    until("/^\\/c\\/[0-9a-f-]{36}$/.test(location.pathname)").await?;
    let path = eval("location.pathname.slice(3)".into()).await?.result.value;
    path.and_then(|p| p.as_str().map(str::to_owned)).context("the page shows no conversation")
}

/// Chrome's own remote-debugging route (`chrome://inspect/#remote-debugging`)
/// played in front of the rig's authorized Chromium: every new DevTools
/// connection waits for a person's Allow or Deny (here the test's), as
/// Chrome's dialog holds it (`../shared/RECIPES.md`), then passes through
/// to the browser (with no browser behind it, an Allow only completes the
/// WebSocket handshake). Its own `DevToolsActivePort`, in
/// [`Asking::user_data_dir`], announces this endpoint with the browser's
/// path. A bare probe that sends nothing is no dialog.
pub struct Asking {
    /// The user-data directory to give the agent.
    pub user_data_dir: PathBuf,
    asked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    decide: tokio::sync::mpsc::UnboundedSender<bool>,
    cut: tokio::sync::watch::Sender<u64>,
    _dir: tempfile::TempDir,
}

impl Asking {
    /// Stands in front of the browser whose user-data directory is
    /// `behind`, or of none.
    pub async fn start(behind: Option<&Path>) -> anyhow::Result<Asking> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let dir = tempfile::tempdir()?;
        let path = match behind {
            Some(behind) => {
                let real = std::fs::read_to_string(behind.join("DevToolsActivePort"))?;
                real.lines().nth(1).context("the browser's DevToolsActivePort names no path")?.to_owned()
            }
            None => "/devtools/browser/asking".to_owned(),
        };
        std::fs::write(dir.path().join("DevToolsActivePort"), format!("{port}\n{path}\n"))?;
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (decide, mut decisions) = tokio::sync::mpsc::unbounded_channel::<bool>();
        let (cut, _) = tokio::sync::watch::channel(0u64);
        let (asks, mut asking) = tokio::sync::mpsc::unbounded_channel::<tokio::net::TcpStream>();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let asks = asks.clone();
                tokio::spawn(async move {
                    if socket.peek(&mut [0u8; 1]).await.is_ok_and(|n| n > 0) {
                        let _ = asks.send(socket);
                    }
                });
            }
        });
        let (counted, cuts, behind) = (asked.clone(), cut.clone(), behind.map(Path::to_owned));
        tokio::spawn(async move {
            let mut waiting = Vec::new();
            loop {
                tokio::select! {
                    Some(socket) = asking.recv() => {
                        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        waiting.push(socket);
                    }
                    Some(allow) = decisions.recv() => {
                        // The oldest dialog is answered; a Deny closes its connection.
                        if waiting.is_empty() { continue }
                        let mut socket = waiting.remove(0);
                        if !allow { continue }
                        let (mut cut, behind) = (cuts.subscribe(), behind.clone());
                        tokio::spawn(async move {
                            let Some(behind) = behind else {
                                let _open = tokio_tungstenite::accept_async(socket).await;
                                let _ = cut.changed().await;
                                return;
                            };
                            let Ok(text) = std::fs::read_to_string(behind.join("DevToolsActivePort")) else { return };
                            let Some(port) = text.lines().next().map(str::to_owned) else { return };
                            let Ok(mut browser) = tokio::net::TcpStream::connect(format!("127.0.0.1:{port}")).await else { return };
                            tokio::select! {
                                _ = tokio::io::copy_bidirectional(&mut socket, &mut browser) => {}
                                _ = cut.changed() => {}
                            }
                        });
                    }
                }
            }
        });
        Ok(Asking { user_data_dir: dir.path().to_owned(), asked, decide, cut, _dir: dir })
    }

    /// How many connections have asked so far.
    pub fn asked(&self) -> usize {
        self.asked.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Answers the oldest dialog still open.
    pub fn answer(&self, allow: bool) {
        let _ = self.decide.send(allow);
    }

    /// Ends every connection passed through so far (the connection lost).
    pub fn cut(&self) {
        self.cut.send_modify(|n| *n += 1);
    }
}
