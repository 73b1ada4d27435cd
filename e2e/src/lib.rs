//! The end-to-end rig: the real `orchestrator serve` process, fakechat as
//! `https://chatgpt.com`, and headless Chromium with `dist/chromium` loaded
//! and paired through its own options page, each on fresh temporary state.
//!
//! The browser's DevTools endpoint is used as a *test observer* (and to
//! type into the options page as a person would), never as the product path:
//! everything the product does in the browser, the extension does.

pub mod browser;
pub mod canary;
pub mod canary_docs;
pub mod cdp;
pub mod daemon;
pub mod docs;
pub mod find_chromium;
pub mod firefox;
pub mod history;
pub mod lifecycle;
pub mod person;
pub mod restart;
pub mod scenario;
pub mod setup;
pub mod surfaces;

pub use browser::Chromium;
pub use daemon::Daemon;
pub use firefox::Firefox;

use std::path::{Path, PathBuf};

/// The workspace root (for `dist/` and the fixtures), from the running
/// package's directory, which cargo sets for tests and `cargo run`: the
/// compile-time path goes stale when another clone shares the target
/// directory (CI's clone and a working copy do), and a fresh binary would
/// then read the other clone's files.
pub fn workspace() -> PathBuf {
    let package = std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo (it sets CARGO_MANIFEST_DIR)");
    Path::new(&package).parent().expect("every package lives in the workspace root").to_owned()
}

/// The built Firefox extension, or a clear error saying how to build it.
pub fn firefox_dist() -> anyhow::Result<PathBuf> {
    let dir = workspace().join("dist/firefox");
    anyhow::ensure!(dir.join("manifest.json").exists(), "{} is missing: run `cargo xtask dist`", dir.display());
    Ok(dir)
}

/// The Firefox add-on packed as the release bundle packs it (byte for
/// byte the bundle's): `cargo xtask dist` writes it to `dist/packed/`.
pub fn packed_xpi() -> anyhow::Result<PathBuf> {
    packed(&format!("orchestrator-executor-{}.xpi", env!("CARGO_PKG_VERSION")))
}

/// The Chromium extension packed for an install off the store, as the
/// bundle packs it but signed with a throwaway key (`cargo xtask dist`).
pub fn packed_crx() -> anyhow::Result<PathBuf> {
    packed(&format!("orchestrator-executor-{}-chromium.crx", env!("CARGO_PKG_VERSION")))
}

fn packed(name: &str) -> anyhow::Result<PathBuf> {
    let path = workspace().join("dist/packed").join(name);
    anyhow::ensure!(path.exists(), "{} is missing: run `cargo xtask dist`", path.display());
    Ok(path)
}

/// The built Chromium extension, or a clear error saying how to build it.
pub fn chromium_dist() -> anyhow::Result<PathBuf> {
    let dir = workspace().join("dist/chromium");
    anyhow::ensure!(dir.join("manifest.json").exists(), "{} is missing: run `cargo xtask dist`", dir.display());
    Ok(dir)
}

/// The app label the rig's daemon is configured with (unless a test passes
/// its own `--app-label`), and the orchestrator's app in fakechat.
pub const APP_LABEL: &str = "Orchestrator";

/// The daemon (state under `dir`) and fakechat wired to its MCP, with the
/// orchestrator's app installed: what every browser rig starts from. A
/// daemon given `--allowed-host H` is exposed as a person exposes one
/// (`orchestrator expose --host H` first, which makes its secret), and
/// fakechat, standing in for ChatGPT behind the tunnel, calls it at the
/// secret path the person pasted.
pub async fn daemon_and_site(
    orchestrator: &Path,
    dir: &Path,
    daemon_args: &[&str],
) -> anyhow::Result<(Daemon, fakechat::Running)> {
    let state = dir.join("state");
    let exposed = daemon_args.iter().position(|a| *a == "--allowed-host").and_then(|i| daemon_args.get(i + 1));
    if let Some(host) = exposed {
        let out = std::process::Command::new(orchestrator)
            .args(["expose", "--host", host, "--json", "--state-dir"])
            .arg(&state)
            .output()?;
        anyhow::ensure!(out.status.success(), "`orchestrator expose`: {}", String::from_utf8_lossy(&out.stderr));
    }
    let daemon = Daemon::start(orchestrator, &state, "127.0.0.1:0", daemon_args)?;
    let mcp_url = match std::fs::read_to_string(state.join("mcp-secret")) {
        Ok(secret) if exposed.is_some() => format!("http://{}/s/{}/mcp", daemon.addr, secret.trim()),
        _ => daemon.mcp_url(),
    };
    let fake = fakechat::start("127.0.0.1:0".parse()?, Some(mcp_url), fakechat::server::Csp::RealLike, None).await?;
    install_apps(&fake.hub, APP_LABEL, fakechat::render::AppState::Enabled);
    Ok((daemon, fake))
}

/// Gives fakechat's account the orchestrator's app labelled `label` among
/// look-alikes: a case variant, a longer name and a disabled one.
pub fn install_apps(hub: &fakechat::hub::Hub, label: &str, state: fakechat::render::AppState) {
    use fakechat::hub::AppConfig;
    use fakechat::render::AppState;
    let app = AppConfig::new;
    hub.set_apps(vec![
        app(&format!("{label} Dev"), false, AppState::Enabled),
        app(&label.to_lowercase(), false, AppState::Enabled),
        app(label, true, state),
        app(&format!("{label} Legacy"), false, AppState::Disabled),
    ]);
}

/// Everything a two-worker run needs, started and paired.
pub struct World {
    /// The daemon process.
    pub daemon: Daemon,
    /// fakechat, in process.
    pub fake: fakechat::Running,
    /// The browser with the extension.
    pub chromium: Chromium,
    /// Temporary state (daemon state dir, browser profile).
    pub dir: tempfile::TempDir,
}

impl World {
    /// Starts the daemon (binary `orchestrator`), fakechat wired to its MCP,
    /// Chromium with the extension, and pairs the extension.
    pub async fn start(orchestrator: &Path, daemon_args: &[&str]) -> anyhow::Result<World> {
        let dir = tempfile::tempdir()?;
        let (daemon, fake) = daemon_and_site(orchestrator, dir.path(), daemon_args).await?;
        let chromium = Chromium::launch(&chromium_dist()?, fake.addr.port(), &dir.path().join("chromium")).await?;
        chromium.collect_errors().await?;
        let token = daemon.credential()?;
        chromium.pair(&daemon.executor_url(), &token).await?;
        Ok(World { daemon, fake, chromium, dir })
    }

    /// Closes the browser and stops the daemon.
    pub async fn shutdown(mut self) {
        let _ = self.chromium.browser.close().await;
        let _ = self.chromium.browser.wait().await;
        self.daemon.kill();
    }
}

/// The browser rig's versions on one line (Chromium, Firefox, web-ext,
/// wasm-bindgen), so a break after a distribution update is diagnosed from
/// a failing test's output alone. A tool that is missing says so.
pub fn versions() -> String {
    let web_ext = workspace().join("extension/node_modules/.bin/web-ext");
    let chromium = find_chromium::find_chromium().unwrap_or_default();
    let tools: [(&str, &std::ffi::OsStr); 4] = [
        ("chromium", chromium.as_os_str()),
        ("firefox", firefox::FIREFOX.as_ref()),
        ("web-ext", web_ext.as_os_str()),
        ("wasm-bindgen", "wasm-bindgen".as_ref()),
    ];
    let found: Vec<String> = tools
        .iter()
        .map(|(name, program)| {
            let out = std::process::Command::new(program).arg("--version").output();
            let line = out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let version = line
                .as_deref()
                .and_then(|l| l.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit())));
            format!("{name} {}", version.unwrap_or("missing"))
        })
        .collect();
    format!("versions: {}", found.join(", "))
}

/// Prints [`versions`] once per test binary (on the first browser launch).
pub fn print_versions() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| eprintln!("e2e {}", versions()));
}
