//! `orchestrator setup` (issue 46): a first-time person's one command. It
//! starts the daemon if none runs on the state directory, installs the
//! extension into a browser it finds (or says the one step the browser
//! needs a person for), pairs it without pasting (the person compares a
//! code), and then proves each link live, one line each, stopping at the
//! first broken one with the one next step ([`judge`] decides; this file
//! reads). No secret is printed or written where `status` reads it: the
//! credential goes from the daemon to the extension's page over one socket.

pub mod crx;
pub mod judge;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use protocol::executor::ExecutorKind;

pub use judge::{Broken, Browser, Link};

/// What `setup` was asked.
pub struct Options {
    /// The state directory.
    pub state_dir: PathBuf,
    /// Where a daemon setup starts listens.
    pub listen: SocketAddr,
    /// The browser to install into (default: the first found).
    pub browser: Option<Browser>,
    /// Chromium's user-data directory (default: this user's).
    pub chromium_user_data_dir: Option<PathBuf>,
    /// The release bundle's directory (default: beside the binary).
    pub bundle: Option<PathBuf>,
    /// The app's name in ChatGPT.
    pub app_label: Option<String>,
    /// A tunnel's public hostname to expose the tools through.
    pub expose_host: Option<String>,
    /// How long to wait for the browser to ask to pair.
    pub wait: Duration,
}

/// Whoever answers setup's questions.
pub trait Person {
    /// The answer to `question`, or `None` where nobody is asked (`--yes`).
    fn ask(&mut self, question: &str) -> Option<String>;
}

/// `--yes`: nobody is asked; the defaults and flags decide.
pub struct Nobody;

impl Person for Nobody {
    fn ask(&mut self, _: &str) -> Option<String> {
        None
    }
}

/// A person at this terminal.
pub struct Terminal;

impl Person for Terminal {
    fn ask(&mut self, question: &str) -> Option<String> {
        print!("{question}");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).ok()?;
        // At most a line's worth: a label or a host name, never a document.
        Some(line.trim().chars().take(256).collect())
    }
}

/// Prints each link as it is proven; the first broken one ends the run.
struct Report {
    started: Instant,
}

impl Report {
    fn ok(&self, link: &str, seen: &str) {
        println!("  ok    {link:<12} {seen}");
    }

    fn todo(&self, step: &str) {
        println!("  do    {:<12} {step}", "");
    }

    fn broken(&self, link: &str, broken: &Broken) -> i32 {
        println!("  FAIL  {link:<12} {}", broken.what);
        println!("        next: {}", broken.next);
        1
    }

    fn done(&self) -> i32 {
        println!("setup: every link proven in {:.1} s", self.started.elapsed().as_secs_f64());
        0
    }
}

/// Runs setup; the exit code (0: every link proven, 1: one broken).
pub async fn run(options: Options, person: &mut dyn Person) -> i32 {
    let report = Report { started: Instant::now() };
    println!("setup: state directory {}", options.state_dir.display());
    let mut options = options;
    if options.app_label.is_none() {
        options.app_label = person
            .ask("The app's name in ChatGPT, as you will name it there (Enter: set it later): ")
            .filter(|l| !l.is_empty());
    }
    if options.expose_host.is_none() {
        options.expose_host = person
            .ask("A tunnel's public hostname to reach the tools from ChatGPT (Enter: loopback only for now): ")
            .filter(|h| !h.is_empty());
    }
    let state = options.state_dir.as_path();
    let daemon = match daemon(&options).await {
        Ok(daemon) => daemon,
        Err(broken) => return report.broken("daemon", &broken),
    };
    report.ok("daemon", &daemon.seen);
    let addr = daemon.addr.to_string();
    let browser = match options.browser.or_else(find_browser) {
        Some(browser) => browser,
        None => {
            let broken = Broken {
                what: "no Chromium or Firefox found on PATH".into(),
                next: "install Chromium or Firefox ESR, or name one with --browser, then run setup again".into(),
            };
            return report.broken("extension", &broken);
        }
    };
    // Setup run again: an extension of this release already connected is kept.
    let already = daemon.status.executors.iter().find(|e| e.kind == Some(ExecutorKind::Webext));
    let executor_id = match already {
        Some(live) => {
            report.ok("extension", &format!("{} already paired and connected", live.executor_id));
            live.executor_id.clone()
        }
        None => {
            let chromium_id = match install(&options, browser) {
                Ok(installed) => {
                    report.ok("extension", &installed.seen);
                    report.todo(&installed.step);
                    installed.chromium_id
                }
                Err(broken) => return report.broken("extension", &broken),
            };
            match pair(&addr, state, browser, chromium_id.as_deref(), &options, person).await {
                Ok((executor_id, seen)) => {
                    report.ok("paired", &seen);
                    executor_id
                }
                Err(broken) => return report.broken("paired", &broken),
            }
        }
    };
    match connected(&addr, state, &executor_id).await {
        Ok(seen) => report.ok("connected", &seen),
        Err(broken) => return report.broken("connected", &broken),
    }
    let readings = crate::admin::inspect_page(&addr, state, "https://chatgpt.com/").await;
    let page = match readings {
        Ok(readings) => judge::page(&readings, &executor_id, browser),
        Err(e) => Err(Broken {
            what: format!("the daemon did not answer the page inspection: {e}"),
            next: "see daemon.log in the state directory, then run setup again".into(),
        }),
    };
    match page {
        Ok(seen) => report.ok("chatgpt.com", &seen),
        Err(broken) => return report.broken("chatgpt.com", &broken),
    }
    let secret = crate::exposure::load_secret(state).ok().flatten();
    let url = format!("http://{addr}/mcp");
    let listed = async {
        let mut client = mcp_client::Client::connect_bearing(&url, secret.as_deref()).await?;
        Ok::<_, mcp_client::Error>(client.list_tools().await?.len())
    };
    match judge::mcp(
        &url,
        tokio::time::timeout(Duration::from_secs(20), listed)
            .await
            .map_or_else(|_| Err("no answer within 20 s".to_owned()), |listed| listed.map_err(|e| e.to_string())),
    ) {
        Ok(seen) => report.ok("mcp", &seen),
        Err(broken) => return report.broken("mcp", &broken),
    }
    if let Some(host) = &options.expose_host {
        let answered = match &secret {
            Some(secret) => through_host(&addr, host, secret).await,
            None => Err("no MCP secret in the state directory".to_owned()),
        };
        match judge::exposed(host, &addr, answered) {
            Ok(seen) => report.ok("exposed", &seen),
            Err(broken) => return report.broken("exposed", &broken),
        }
    }
    if options.expose_host.is_none() {
        report.todo(
            "ChatGPT reaches the tools through a tunnel: `orchestrator expose --host <tunnel host>` (docs/setup.md)",
        );
    }
    report.done()
}

/// The daemon setup proved: where, and its status.
struct Daemon {
    addr: SocketAddr,
    status: crate::admin::Status,
    seen: String,
}

/// The daemon running on the state directory, or one setup starts there.
async fn daemon(options: &Options) -> Result<Daemon, Broken> {
    let state = options.state_dir.as_path();
    let fail = |what: String, next: &str| Broken { what, next: next.to_owned() };
    if let Some(url) = crate::state_dir::running_endpoint(state) {
        let addr: SocketAddr = crate::admin::authority_of(&url).parse().map_err(|_| {
            fail(format!("the running daemon's endpoint {url} is not host:port"), "stop it and run setup again")
        })?;
        let status = crate::admin::fetch(&addr.to_string(), state).await.map_err(|e| {
            fail(
                format!("the daemon running on this state directory does not answer: {e}"),
                "stop it (or see daemon.log), then run setup again",
            )
        })?;
        if let Some(label) = &options.app_label
            && status.app_label.as_deref() != Some(label.as_str())
        {
            return Err(fail(
                format!(
                    "the running daemon's app label is {:?}, not {label:?}",
                    status.app_label.as_deref().unwrap_or("unset")
                ),
                "stop the daemon and run setup again (it starts one with the label), or leave out --app-label",
            ));
        }
        if let Some(host) = &options.expose_host
            && !status.exposed_hosts.iter().any(|h| h == host)
        {
            return Err(fail(
                format!("the running daemon does not answer for {host}"),
                "stop the daemon and run setup again (it starts one exposed), or leave out the tunnel host",
            ));
        }
        let seen = format!("already running at {url} (orchestrator {})", status.version);
        return Ok(Daemon { addr, status, seen });
    }
    let mut serve = vec!["--state-dir".to_owned(), absolute(state).display().to_string()];
    serve.extend(["--listen".to_owned(), options.listen.to_string()]);
    if let Some(label) = &options.app_label {
        serve.extend(["--app-label".to_owned(), label.clone()]);
    }
    if let Some(host) = &options.expose_host {
        crate::exposure::create_secret(state, false).map_err(|e| {
            fail(format!("could not write the MCP secret: {e}"), "check the state directory's permissions")
        })?;
        serve.extend(["--allowed-host".to_owned(), host.clone()]);
    }
    std::fs::create_dir_all(state)
        .map_err(|e| fail(format!("could not create {}: {e}", state.display()), "pass a --state-dir you can write"))?;
    let record = serde_json::json!({"started_by": "orchestrator setup"});
    let started = crate::daemon_process::start(state, options.listen, &serve, ("daemon.log", "setup.json"), record)
        .await
        .map_err(|e| {
            fail(
                format!("could not start the daemon: {e:#}"),
                "see daemon.log in the state directory; another program may hold the port (--listen)",
            )
        })?;
    let seen = format!(
        "started at http://{}/mcp (orchestrator {}, pid {}, log {}); to have it start at login: \
         orchestrator service install -- {}",
        started.addr,
        started.status.version,
        started.pid,
        state.join("daemon.log").display(),
        judge::shell_words(&serve)
    );
    Ok(Daemon { addr: started.addr, status: started.status, seen })
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The first browser on `PATH`: Chromium, then Firefox.
fn find_browser() -> Option<Browser> {
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
    };
    if ["chromium", "chromium-browser"].iter().any(|n| on_path(n)) {
        return Some(Browser::Chromium);
    }
    ["firefox-esr", "firefox"].iter().any(|n| on_path(n)).then_some(Browser::Firefox)
}

/// The extension, as setup left it for the browser to install.
struct Installed {
    seen: String,
    /// What the person does now.
    step: String,
    /// Chromium's extension id (the package's).
    chromium_id: Option<String>,
}

/// The bundle's directory: as given, else the binary's own (an unpacked
/// tarball sits in the bundle's directory), else its parent.
fn bundle_dir(options: &Options, file: &str) -> Option<PathBuf> {
    if let Some(dir) = &options.bundle {
        return Some(dir.clone());
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(1).take(2).find(|dir| dir.join(file).is_file()).map(Path::to_path_buf)
}

/// Checks `file` in `dir` against the bundle's `SHA256SUMS`, when it has one.
fn check_sum(dir: &Path, file: &str, bytes: &[u8]) -> Result<&'static str, Broken> {
    use sha2::{Digest, Sha256};
    let Ok(sums) = std::fs::read_to_string(dir.join("SHA256SUMS")) else { return Ok("no SHA256SUMS beside it") };
    let digest: String = Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    let listed = sums.lines().find_map(|l| l.split_once("  ").filter(|(_, name)| *name == file).map(|(sum, _)| sum));
    match listed {
        Some(sum) if sum == digest => Ok("matches SHA256SUMS"),
        Some(_) => Err(Broken {
            what: format!("{file} does not match the bundle's SHA256SUMS"),
            next: "download the release bundle again".into(),
        }),
        None => Err(Broken {
            what: format!("{file} is not listed in the bundle's SHA256SUMS"),
            next: "download the release bundle again".into(),
        }),
    }
}

/// Leaves the extension where `browser` installs it from, or says how.
fn install(options: &Options, browser: Browser) -> Result<Installed, Broken> {
    let file = match browser {
        Browser::Chromium => format!("orchestrator-executor-{}-chromium.crx", crate::deployment::VERSION),
        Browser::Firefox => format!("orchestrator-executor-{}.xpi", crate::deployment::VERSION),
    };
    let Some(dir) = bundle_dir(options, &file) else {
        return Err(Broken {
            what: format!("{file} is not beside this orchestrator binary"),
            next: "run setup from the unpacked release bundle, or pass --bundle <its directory>".into(),
        });
    };
    let path = dir.join(&file);
    let bytes = std::fs::read(&path).map_err(|e| Broken {
        what: format!("cannot read {}: {e}", path.display()),
        next: "pass --bundle <the release bundle's directory>".into(),
    })?;
    let sum = check_sum(&dir, &file, &bytes)?;
    match browser {
        Browser::Firefox => Ok(Installed {
            seen: format!("{} found ({sum}); Firefox installs it at your click, below", path.display()),
            step: format!(
                "in Firefox (ESR, Developer Edition or Nightly): about:config → xpinstall.signatures.required = false; \
                 about:addons → gear → Install Add-on From File → {}; its pairing page then opens and asks",
                path.display()
            ),
            chromium_id: None,
        }),
        Browser::Chromium => install_chromium(options, &file, &bytes, sum),
    }
}

/// Names the package in the profile's `External Extensions` (Chromium on
/// Linux installs it, enabled, at its next start, and keeps it), from a
/// copy in the state directory (the bundle may be deleted later).
fn install_chromium(options: &Options, file: &str, bytes: &[u8], sum: &str) -> Result<Installed, Broken> {
    let fail =
        |what: String| Broken { what, next: "pass --chromium-user-data-dir <Chromium's profile directory>".into() };
    if !cfg!(target_os = "linux") {
        return Err(Broken {
            what: "Chromium installs a package from outside its store on Linux only".into(),
            next: "install the extension from the Chrome Web Store, or load the bundle's -chromium.zip unpacked (docs/setup.md §4)".into(),
        });
    }
    let id = crx::crx_id(bytes).map_err(|e| Broken {
        what: format!("{file} is not a Chromium package: {e}"),
        next: "download the release bundle again".into(),
    })?;
    let user_data = match &options.chromium_user_data_dir {
        Some(dir) => dir.clone(),
        None => chromium_user_data_dir().ok_or_else(|| fail("neither XDG_CONFIG_HOME nor HOME is set".into()))?,
    };
    let kept = options.state_dir.join("extension");
    std::fs::create_dir_all(&kept).map_err(|e| fail(format!("cannot create {}: {e}", kept.display())))?;
    let copy = absolute(&kept.join(file));
    std::fs::write(&copy, bytes).map_err(|e| fail(format!("cannot write {}: {e}", copy.display())))?;
    let external = user_data.join("External Extensions");
    std::fs::create_dir_all(&external).map_err(|e| fail(format!("cannot create {}: {e}", external.display())))?;
    let named = serde_json::json!({"external_crx": copy, "external_version": crate::deployment::VERSION});
    let naming = external.join(format!("{id}.json"));
    std::fs::write(&naming, named.to_string()).map_err(|e| fail(format!("cannot write {}: {e}", naming.display())))?;
    Ok(Installed {
        seen: format!("{file} ({sum}, id {id}) named in {}", naming.display()),
        step: "quit Chromium if it runs and start it: it installs the extension at its start and the extension's \
               pairing page opens and asks"
            .into(),
        chromium_id: Some(id),
    })
}

/// Chromium's user-data directory on Linux: `$XDG_CONFIG_HOME/chromium`,
/// else `~/.config/chromium`.
fn chromium_user_data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("chromium"));
    }
    Some(PathBuf::from(std::env::var_os("HOME")?).join(".config/chromium"))
}

/// How long the daemon takes pairing requests without hearing from setup.
const PAIRING_LEASE: Duration = Duration::from_secs(15);

/// Takes pairing requests for the wait, and accepts the one the person
/// says shows the same code (or, with `--yes`, the first from the
/// extension installed); the executor id paired.
async fn pair(
    addr: &str,
    state: &Path,
    browser: Browser,
    chromium_id: Option<&str>,
    options: &Options,
    person: &mut dyn Person,
) -> Result<(String, String), Broken> {
    let desk = crate::admin::PairingDesk { addr, state_dir: state };
    let unreachable = |e: anyhow::Error| Broken {
        what: format!("the daemon's pairing desk does not answer: {e}"),
        next: "see daemon.log in the state directory, then run setup again".into(),
    };
    let listen: SocketAddr = addr.parse().unwrap_or(options.listen);
    println!("        waiting up to {} s for {} to ask to pair…", options.wait.as_secs(), browser.name());
    let deadline = Instant::now() + options.wait;
    let mut asked = std::collections::HashSet::new();
    let mut renewed: Option<Instant> = None;
    let outcome = loop {
        if Instant::now() > deadline {
            break Err(judge::no_request(browser, options.wait.as_secs(), listen));
        }
        // The window is a lease this setup renews: one killed mid-wait
        // leaves it open for seconds, not for the whole wait.
        if renewed.is_none_or(|at| at.elapsed() >= PAIRING_LEASE / 3) {
            if let Err(e) = desk.open(PAIRING_LEASE).await {
                break Err(unreachable(e));
            }
            renewed = Some(Instant::now());
            // An extension paired before (its daemon restarted, it came back)
            // never asks: it connects, and that is the link.
            match crate::admin::fetch(addr, state).await {
                Ok(status) => {
                    if let Some(live) = status.executors.iter().find(|e| e.kind == Some(ExecutorKind::Webext)) {
                        break Ok((live.executor_id.clone(), format!("{} connected, paired before", live.executor_id)));
                    }
                }
                Err(e) => break Err(unreachable(e)),
            }
        }
        let requests = match desk.requests().await {
            Ok(requests) => requests,
            Err(e) => break Err(unreachable(e)),
        };
        let mut answered = None;
        for request in requests.iter() {
            if !asked.insert(request.id) {
                continue;
            }
            let question = format!(
                "A browser asks to pair: {} (extension {}, {}). Does its pairing page show the code {}? [y/N] ",
                judge::short_browser(&request.browser),
                request.release,
                request.origin,
                request.code
            );
            let accept = match person.ask(&question) {
                Some(answer) => matches!(answer.as_str(), "y" | "Y" | "yes"),
                None => judge::request_for_yes(std::slice::from_ref(request), browser, chromium_id).is_some(),
            };
            match desk.answer(request.id, accept).await {
                Ok(Some(executor_id)) => {
                    answered = Some((executor_id, request.code.clone()));
                    break;
                }
                Ok(None) => println!("        declined {}", request.code),
                Err(e) => println!("        {}: {e}", request.code),
            }
        }
        if let Some((executor_id, code)) = answered {
            let seen = format!(
                "{} accepted as {executor_id} (code {code}); the credential went to its page only",
                browser.name()
            );
            break Ok((executor_id, seen));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let _ = desk.close().await;
    outcome
}

/// Waits (30 s) for the paired executor to connect, then judges it.
async fn connected(addr: &str, state: &Path, executor_id: &str) -> Link {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = crate::admin::fetch(addr, state).await.map_err(|e| Broken {
            what: format!("the daemon did not answer: {e}"),
            next: "see daemon.log in the state directory, then run setup again".into(),
        })?;
        let judged = judge::connected(&status, executor_id);
        let settled = status.executors.iter().any(|e| e.executor_id == executor_id)
            || status.executors_refused.iter().any(|r| r.executor_id == executor_id);
        if settled || Instant::now() > deadline {
            return judged;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// An MCP `initialize` sent on loopback as a tunnel forwards it: the
/// exposed host's name and the secret's path. The server's name, if it answered.
async fn through_host(addr: &str, host: &str, secret: &str) -> Result<String, String> {
    let endpoint = mcp_client::Endpoint { authority: addr.to_owned(), path: format!("/s/{secret}/mcp") };
    let init = serde_json::json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion": mcp_client::VERSION, "capabilities": {},
        "clientInfo": {"name": "orchestrator-setup", "version": crate::deployment::VERSION}}});
    let headers =
        [("Host", host), ("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")];
    let mut name = None;
    let init = init.to_string();
    let relayed = mcp_client::post_each(&endpoint, &headers, &init, |message| {
        name = message["result"]["serverInfo"]["name"].as_str().map(str::to_owned);
    });
    match tokio::time::timeout(Duration::from_secs(10), relayed).await {
        Err(_) => Err("no answer within 10 s".into()),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(relayed)) if !(200..300).contains(&relayed.status) => {
            Err(format!("HTTP {}: {}", relayed.status, relayed.refusal))
        }
        Ok(Ok(_)) => name.ok_or_else(|| "no MCP initialize result".to_owned()),
    }
}
