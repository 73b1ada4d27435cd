//! Headless Chromium ([`chromium`]) with the built extension, on a fresh
//! profile, reaching fakechat as `https://chatgpt.com`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use chromiumoxide::cdp::browser_protocol::extensions::LoadUnpackedParams;
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, GetTargetsParams};
use chromiumoxide::{Browser, BrowserConfig, Page};
use futures_util::StreamExt;
pub use server::setup::crx::{crx_id, id_of};

/// The Chromium the tests and the demo run (see [`find_chromium`]).
pub fn chromium() -> anyhow::Result<std::path::PathBuf> {
    crate::find_chromium::find_chromium().map_err(anyhow::Error::msg)
}

/// Headless Chromium on a fresh profile under `dir`, reaching
/// `127.0.0.1:port` as `https://chatgpt.com`. Without chromiumoxide's
/// default flags: they switch off background throttling and renderer
/// backgrounding, and a managed tab must face the real thing.
pub fn config(port: u16, dir: &Path) -> anyhow::Result<chromiumoxide::browser::BrowserConfigBuilder> {
    Ok(BrowserConfig::builder()
        .chrome_executable(chromium()?)
        .new_headless_mode()
        .no_sandbox()
        .user_data_dir(dir.join("profile"))
        .viewport(None)
        .disable_default_args()
        .envs([
            ("XDG_CONFIG_HOME", dir.join("config").display().to_string()),
            ("XDG_CACHE_HOME", dir.join("cache").display().to_string()),
        ])
        .args([
            format!("host-resolver-rules=MAP chatgpt.com 127.0.0.1:{port}"),
            "ignore-certificate-errors".to_owned(),
            "disable-gpu".to_owned(),
            "disable-quic".to_owned(),
            "no-first-run".to_owned(),
            // Without these, Chromium floods the closed network.
            "disable-background-networking".to_owned(),
            "disable-component-update".to_owned(),
            "disable-sync".to_owned(),
            "disable-dev-shm-usage".to_owned(),
            "disable-breakpad".to_owned(),
            "password-store=basic".to_owned(),
            // A person's background tabs: after five minutes hidden, Chromium
            // runs their timers once a minute (intensive wake-up
            // throttling). The same here after 10 s, so every managed tab,
            // opened in the background, faces it within a test's time.
            "enable-features=IntensiveWakeUpThrottling:grace_period_seconds/10".to_owned(),
        ]))
}

/// The browser, and the extension's id in it.
pub struct Chromium {
    /// The DevTools connection (the test's observer).
    pub browser: Browser,
    /// The extension id (fixed by the manifest key).
    pub extension_id: String,
    path: String,
    handler: tokio::task::JoinHandle<()>,
}

impl Chromium {
    /// Launches Chromium with `extension` loaded, `chatgpt.com` mapped to
    /// `127.0.0.1:port`, profile and caches under `dir`.
    pub async fn launch(extension: &Path, port: u16, dir: &Path) -> anyhow::Result<Chromium> {
        let chromium = Chromium::start(extension, port, dir, false).await?;
        chromium.close_welcome_tab().await?;
        Ok(chromium)
    }

    /// Starts Chromium again on the profile under `dir` a [`Chromium::launch`]
    /// made: a new browser generation, the extension installed and paired;
    /// with `restore_tabs`, the last session's tabs restored, as a person's
    /// "Continue where you left off" does.
    pub async fn relaunch(extension: &Path, port: u16, dir: &Path, restore_tabs: bool) -> anyhow::Result<Chromium> {
        let _ = std::fs::remove_file(dir.join("profile/SingletonLock"));
        Chromium::start(extension, port, dir, restore_tabs).await
    }

    async fn start(extension: &Path, port: u16, dir: &Path, restore_tabs: bool) -> anyhow::Result<Chromium> {
        let manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(extension.join("manifest.json"))?)?;
        let key = manifest["key"].as_str().context("the Chromium manifest has no key")?;
        Chromium::start_with(Some(extension), &chromium_id(key)?, port, dir, restore_tabs).await
    }

    /// Launches Chromium with the extension installed from `crx` (a CRX3
    /// package) through the browser's own off-store route on Linux: a file
    /// in the profile's `External Extensions` naming the package, which the
    /// browser installs, enabled, at its start and keeps from then on (no
    /// extension flag on the command line, now or at a restart).
    pub async fn launch_crx(crx: &Path, version: &str, port: u16, dir: &Path) -> anyhow::Result<Chromium> {
        let extension_id = crx_id(&std::fs::read(crx)?)?;
        let external = dir.join("profile/External Extensions");
        std::fs::create_dir_all(&external)?;
        let named = serde_json::json!({"external_crx": crx.canonicalize()?, "external_version": version});
        std::fs::write(external.join(format!("{extension_id}.json")), named.to_string())?;
        let chromium = Chromium::start_with(None, &extension_id, port, dir, false).await?;
        chromium.close_welcome_tab().await?;
        Ok(chromium)
    }

    /// Starts Chromium again on the profile under `dir` a
    /// [`Chromium::launch_crx`] made, with no extension flag: what it
    /// installed, it keeps.
    pub async fn relaunch_installed(
        extension_id: &str,
        port: u16,
        dir: &Path,
        restore_tabs: bool,
    ) -> anyhow::Result<Chromium> {
        let _ = std::fs::remove_file(dir.join("profile/SingletonLock"));
        Chromium::start_with(None, extension_id, port, dir, restore_tabs).await
    }

    /// Starts Chromium on the profile under `dir`, loading the unpacked
    /// extension at `load` (or none: it is installed in the profile).
    async fn start_with(
        load: Option<&Path>,
        extension_id: &str,
        port: u16,
        dir: &Path,
        restore_tabs: bool,
    ) -> anyhow::Result<Chromium> {
        crate::print_versions();
        let extension_id = extension_id.to_owned();
        let ext = load.map(|l| l.display().to_string()).unwrap_or_default();
        // Developer mode from the first moment: Chromium collects extension errors only then.
        std::fs::create_dir_all(dir.join("profile/Default"))?;
        if !dir.join("profile/Default/Preferences").exists() {
            std::fs::write(
                dir.join("profile/Default/Preferences"),
                r#"{"extensions":{"ui":{"developer_mode":true}}}"#,
            )?;
        }
        let mut config = config(port, dir)?
            .args(["enable-unsafe-extension-debugging".to_owned()])
            .args(restore_tabs.then_some("restore-last-session"));
        match load {
            Some(_) => config = config.extension(ext.clone()).args([format!("disable-extensions-except={ext}")]),
            // chromiumoxide adds `--disable-extensions` when it loads none,
            // which would keep the installed one off: a one-line wrapper
            // drops that flag and execs the browser (the same process).
            None => {
                let wrapper = dir.join("chromium-with-installed-extensions.sh");
                // The browser's path single-quoted, as the shell reads it verbatim.
                let quoted = format!("'{}'", chromium()?.display().to_string().replace('\'', "'\\''"));
                let script = format!(
                    "#!/bin/sh\nfor a; do shift; [ \"$a\" = --disable-extensions ] || set -- \"$@\" \"$a\"; done\nexec {quoted} \"$@\"\n"
                );
                std::fs::write(&wrapper, script)?;
                std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
                config = config.chrome_executable(wrapper);
            }
        }
        let config = config.build().map_err(anyhow::Error::msg)?;
        let (browser, mut handler) = Browser::launch(config).await.context("launching chromium")?;
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Ok(Chromium { browser, extension_id, path: ext, handler })
    }

    /// On a fresh install the extension opens its pairing page by itself.
    /// The rig waits for that tab and closes it, as a person who pairs
    /// later would: a page target appearing while the rig opens its own
    /// tabs races chromiumoxide's `new_page`, which then never returns.
    async fn close_welcome_tab(&self) -> anyhow::Result<()> {
        let options = self.extension_url("options.html");
        for _ in 0..200 {
            let targets = self.browser.execute(GetTargetsParams::default()).await?;
            if let Some(tab) =
                targets.result.target_infos.iter().find(|t| t.r#type == "page" && t.url.starts_with(&options))
            {
                self.browser.execute(CloseTargetParams::new(tab.target_id.clone())).await?;
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("the extension did not open its pairing page on a fresh install")
    }

    /// Turns on developer mode (Chromium collects extension errors only then).
    pub async fn collect_errors(&self) -> anyhow::Result<()> {
        let page = self.open("chrome://extensions/").await?;
        until(&page, "!!chrome.developerPrivate").await?;
        page.evaluate("chrome.developerPrivate.updateProfileConfiguration({inDeveloperMode: true}).then(() => true)")
            .await?;
        page.close().await?;
        Ok(())
    }

    /// The extension's manifest and runtime errors as Chromium's extensions
    /// page lists them (needs [`Chromium::collect_errors`] first).
    pub async fn extension_errors(&self) -> anyhow::Result<Vec<String>> {
        let page = self.open("chrome://extensions/").await?;
        until(&page, "!!chrome.developerPrivate").await?;
        let js = format!(
            "chrome.developerPrivate.getExtensionInfo('{}').then(i =>              [...i.manifestErrors, ...i.runtimeErrors].map(e => e.message + ' @ ' + (e.source || '')))",
            self.extension_id
        );
        let errors = eval::<Vec<String>>(&page, &js).await?;
        page.close().await?;
        Ok(errors)
    }

    /// A URL inside the extension.
    pub fn extension_url(&self, page: &str) -> String {
        format!("chrome-extension://{}/{page}", self.extension_id)
    }

    /// Opens a page (a tab of the test's own, not a managed one).
    pub async fn open(&self, url: &str) -> anyhow::Result<Page> {
        Ok(self.browser.new_page(url).await?)
    }

    /// Opens a page in a tab that does not come to the front (its window
    /// keeps showing the tab it showed).
    pub async fn open_background(&self, url: &str) -> anyhow::Result<Page> {
        use chromiumoxide::cdp::browser_protocol::target::CreateTargetParams;
        let params = CreateTargetParams::builder().url(url).background(true).build().map_err(anyhow::Error::msg)?;
        Ok(self.browser.new_page(params).await?)
    }

    /// Pairs the extension through its options page, as a person would, and
    /// waits until it reports `connected`.
    pub async fn pair(&self, endpoint: &str, token: &str) -> anyhow::Result<()> {
        let options = self.submit_pairing(endpoint, token).await?;
        until(&options, "document.querySelector('#connection').textContent === 'connected'").await?;
        options.close().await?;
        Ok(())
    }

    /// Types `endpoint` into the pairing page the extension opened by
    /// itself on its install and presses "Pair with orchestrator setup", as
    /// a person whose daemon is not on the default port would; the page
    /// stays open while setup answers.
    pub async fn pair_with_setup(&self, endpoint: &str) -> anyhow::Result<Page> {
        let url = self.extension_url("options.html");
        let mut found = None;
        for _ in 0..400 {
            let pages = self.browser.pages().await?;
            for page in pages {
                if page.url().await?.is_some_and(|u| u.starts_with(&url)) {
                    found = Some(page);
                }
            }
            if found.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let options = found.context("the extension never opened its pairing page")?;
        until(&options, "document.body.hasAttribute('data-ready')").await?;
        let press = format!(
            "document.querySelector('#endpoint').value = {}; document.querySelector('#setup-pair').click(); true",
            serde_json::to_string(endpoint)?
        );
        options.evaluate(press).await?;
        Ok(options)
    }

    /// Types `endpoint` and `token` into the options page and submits
    /// them, as a person pairs; the page, whatever comes of it.
    pub async fn submit_pairing(&self, endpoint: &str, token: &str) -> anyhow::Result<Page> {
        let options = self.open(&self.extension_url("options.html")).await?;
        // The module loads asynchronously; it marks the body once the form is wired.
        until(&options, "document.body.hasAttribute('data-ready')").await?;
        let fill = format!(
            "document.querySelector('#endpoint').value = {}; document.querySelector('#token').value = {}; \
             document.querySelector('#pairing').requestSubmit(); true",
            serde_json::to_string(endpoint)?,
            serde_json::to_string(token)?
        );
        options.evaluate(fill).await?;
        Ok(options)
    }

    /// The connection status the options page shows.
    pub async fn status(&self) -> anyhow::Result<String> {
        self.options_text("#connection").await
    }

    /// The managed workers the options page lists (one per line).
    pub async fn workers(&self) -> anyhow::Result<String> {
        self.options_text("#workers").await
    }

    async fn options_text(&self, selector: &str) -> anyhow::Result<String> {
        let options = self.open(&self.extension_url("options.html")).await?;
        until(&options, "document.body.hasAttribute('data-ready')").await?;
        let text = eval::<String>(&options, &format!("document.querySelector('{selector}').textContent")).await?;
        options.close().await?;
        Ok(text)
    }

    /// What the page whose URL contains `url_part` logged to its console so
    /// far, from every world (its content scripts' included), one line per
    /// call: DevTools replays the stored messages to a client that enables
    /// `Runtime`. The test's observer, on a session of its own (chromiumoxide
    /// enabled `Runtime` on its sessions before any test could listen).
    pub async fn console_of(&self, url_part: &str) -> anyhow::Result<Vec<String>> {
        use chromiumoxide::cdp::browser_protocol::target::{AttachToTargetParams, DetachFromTargetParams};
        use chromiumoxide::cdp::js_protocol::runtime::EnableParams;

        let cdp = carrier_cdp::cdp::Cdp::connect(self.browser.websocket_address()).await.map_err(anyhow::Error::msg)?;
        let targets = cdp.call(None, GetTargetsParams::default()).await?.target_infos;
        let target = targets
            .into_iter()
            .find(|t| t.r#type == "page" && t.url.contains(url_part))
            .with_context(|| format!("no page at a URL containing {url_part}"))?;
        let attach = AttachToTargetParams::builder()
            .target_id(target.target_id)
            .flatten(true)
            .build()
            .map_err(anyhow::Error::msg)?;
        let session = cdp.call(None, attach).await?.session_id;
        let mut events = cdp.events();
        cdp.call(Some(&session), EnableParams::default()).await?;
        let mut lines = Vec::new();
        let until = tokio::time::Instant::now() + Duration::from_secs(1);
        while let Ok(Ok(event)) = tokio::time::timeout_at(until, events.recv()).await {
            if event.method != "Runtime.consoleAPICalled" || event.session.as_deref() != Some(session.as_ref()) {
                continue;
            }
            let args = event.params["args"].as_array().cloned().unwrap_or_default();
            let words: Vec<String> = args
                .iter()
                .map(|a| a["value"].as_str().map_or_else(|| a["value"].to_string(), str::to_owned))
                .collect();
            lines.push(words.join(" "));
        }
        let _ = cdp.call(None, DetachFromTargetParams::builder().session_id(session).build()).await;
        Ok(lines)
    }

    /// The extension's service worker target, if one runs.
    async fn worker_target(&self) -> anyhow::Result<Option<String>> {
        let targets = self.browser.execute(GetTargetsParams::default()).await?;
        Ok(targets
            .result
            .target_infos
            .iter()
            .find(|t| t.r#type == "service_worker" && t.url.starts_with(&self.extension_url("")))
            .map(|t| t.target_id.inner().clone()))
    }

    /// Stops the extension's service worker as the browser does when it
    /// idles one out (DevTools `Target.closeTarget` on its target, what
    /// Chrome's own guide to testing service worker termination does), and
    /// waits until it is gone. Its next event starts it again.
    pub async fn stop_service_worker(&self) -> anyhow::Result<()> {
        let target = self.worker_target().await?.context("no service worker runs")?;
        self.browser
            .execute(CloseTargetParams::new(target.clone()))
            .await
            .context("Target.closeTarget on the service worker")?;
        for _ in 0..100 {
            if self.worker_target().await?.as_ref() != Some(&target) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("the service worker still runs after Target.closeTarget")
    }

    /// The connection line the extension's popup shows a person.
    pub async fn popup_connection(&self) -> anyhow::Result<String> {
        let popup = self.open(&self.extension_url("popup.html")).await?;
        until(&popup, crate::lifecycle::POPUP_RENDERED).await?;
        let text = eval::<String>(&popup, crate::lifecycle::POPUP_CONNECTION).await?;
        popup.close().await?;
        Ok(text)
    }

    /// The browser's main process, as DevTools reports it.
    pub async fn main_pid(&self) -> anyhow::Result<u32> {
        use chromiumoxide::cdp::browser_protocol::system_info::GetProcessInfoParams;
        let info = self.browser.execute(GetProcessInfoParams::default()).await?;
        let main = info.result.process_info.iter().find(|p| p.r#type == "browser").context("no browser process")?;
        Ok(u32::try_from(main.id)?)
    }

    /// Kills the browser and every process under it (SIGKILL), as a power
    /// cut or a crash does: none of its shutdown runs, so no tab is
    /// reported closed. Then it is reaped.
    pub async fn crash(&mut self) -> anyhow::Result<()> {
        let pids = process_tree(self.main_pid().await?)?;
        let status = std::process::Command::new("kill").arg("-KILL").args(pids.iter().map(u32::to_string)).status()?;
        anyhow::ensure!(status.success(), "kill -KILL {pids:?}");
        let _ = self.browser.wait().await;
        Ok(())
    }

    /// Polls the options page until it shows `connected`.
    pub async fn wait_connected(&self, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        while tokio::time::Instant::now() < deadline {
            if let Ok(Ok(status)) = tokio::time::timeout(Duration::from_secs(5), self.status()).await
                && status == "connected"
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Reloads the extension from disk (DevTools `Extensions.loadUnpacked`
    /// on its own path), as an update would: a new background instance
    /// whose content scripts in open tabs are orphaned. Waits until the new
    /// instance is connected.
    pub async fn reload_extension(&self) -> anyhow::Result<()> {
        let before = self.worker_target().await?;
        self.browser.execute(LoadUnpackedParams::new(self.path.clone())).await.context("Extensions.loadUnpacked")?;
        for _ in 0..100 {
            let now = self.worker_target().await?;
            if now.is_some() && now != before {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::ensure!(self.worker_target().await? != before, "no new service worker after the reload");
        anyhow::ensure!(
            self.wait_connected(Duration::from_secs(15)).await,
            "the extension did not reconnect after a reload"
        );
        Ok(())
    }
}

impl Chromium {
    /// Updates the extension to `version`, as the browser installs a
    /// higher version over a running one: this build under that manifest
    /// version (same key, so the same id), loaded from a copy under
    /// `scratch` over the running one (DevTools `Extensions.loadUnpacked`).
    /// Waits until the new instance runs that version and is connected.
    pub async fn update_extension(&mut self, version: &str, scratch: &Path) -> anyhow::Result<()> {
        let copy = scratch.join(format!("extension-{version}"));
        copy_dir(Path::new(&self.path), &copy)?;
        let manifest_path = copy.join("manifest.json");
        let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path)?)?;
        manifest["version"] = version.into();
        std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest)?)?;
        self.path = copy.display().to_string();
        self.reload_extension().await?;
        let page = self.open(&self.extension_url("options.html")).await?;
        let running = eval::<String>(&page, "chrome.runtime.getManifest().version").await?;
        page.close().await?;
        anyhow::ensure!(running == version, "the browser runs {running}, not the update {version}");
        Ok(())
    }
}

/// Copies the directory tree `from` to `to`.
fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        match entry.file_type()?.is_dir() {
            true => copy_dir(&entry.path(), &target)?,
            false => drop(std::fs::copy(entry.path(), target)?),
        }
    }
    Ok(())
}

impl Drop for Chromium {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

/// As a person would in their own tab: type into the composer and press
/// send. The conversation id the page then shows.
pub async fn chat_by_hand(page: &Page, text: &str) -> anyhow::Result<String> {
    use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
    until(page, "!!document.querySelector('#prompt-textarea') && document.readyState === 'complete'").await?;
    page.find_element("#prompt-textarea").await?.click().await?;
    page.execute(InsertTextParams::new(text)).await?;
    until(page, "document.querySelector('[data-testid=\"send-button\"]').disabled === false").await?;
    page.find_element("[data-testid=\"send-button\"]").await?.click().await?;
    until(page, "/^\\/c\\/[0-9a-f-]{36}$/.test(location.pathname)").await?;
    eval::<String>(page, "location.pathname.slice(3)").await
}

/// Evaluates `js` in `page`.
pub async fn eval<T: serde::de::DeserializeOwned>(page: &Page, js: &str) -> anyhow::Result<T> {
    Ok(page.evaluate(js).await?.into_value::<T>()?)
}

/// Polls `js` in `page` until it is true (bounded: 20 s).
pub async fn until(page: &Page, js: &str) -> anyhow::Result<()> {
    for _ in 0..400 {
        if eval::<bool>(page, js).await.unwrap_or(false) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("never true: {js}")
}

/// The id Chromium derives from a manifest key (SHA-256 of the DER key,
/// first 16 bytes, nibbles as `a`–`p`).
pub fn chromium_id(key_base64: &str) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    let der = base64_decode(key_base64.trim()).context("the manifest key is not base64")?;
    Ok(id_of(&Sha256::digest(der)[..16]))
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = text.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let mut acc = 0u32;
        for &c in chunk {
            acc = (acc << 6) | value(c)?;
        }
        acc <<= 6 * (4 - chunk.len() as u32);
        out.extend_from_slice(&acc.to_be_bytes()[1..chunk.len()]);
    }
    Some(out)
}

/// A whole browser stopped and woken as a laptop's sleep does it: every
/// process under its main one (renderers, the extension's, the GPU's)
/// gets `SIGSTOP`, then the same ones `SIGCONT`.
pub struct Sleeper {
    main: u32,
    stopped: std::sync::Mutex<Vec<u32>>,
}

impl Sleeper {
    /// The browser whose main process is `main`.
    pub fn of(main: u32) -> Sleeper {
        Sleeper { main, stopped: std::sync::Mutex::default() }
    }

    /// Stops (`true`) or wakes (`false`) the browser.
    pub fn asleep(&self, stopped: bool) -> anyhow::Result<()> {
        let mut held = self.stopped.lock().unwrap();
        let (signal, pids) = match stopped {
            true => {
                *held = process_tree(self.main)?;
                ("-STOP", held.clone())
            }
            false => ("-CONT", std::mem::take(&mut *held)),
        };
        let status = std::process::Command::new("kill").arg(signal).args(pids.iter().map(u32::to_string)).status()?;
        anyhow::ensure!(status.success(), "kill {signal} {pids:?}");
        Ok(())
    }
}

/// `main` and every process descended from it (from `/proc`).
pub(crate) fn process_tree(main: u32) -> anyhow::Result<Vec<u32>> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        // `pid (comm) state ppid …`: the name may hold spaces and parentheses.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        parent_of.extend(ppid.map(|ppid| (pid, ppid)));
    }
    let mut tree = vec![main];
    let mut next = 0;
    while next < tree.len() {
        let parent = tree[next];
        tree.extend(parent_of.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        next += 1;
    }
    Ok(tree)
}
