//! Headless Firefox ESR with the built extension, driven over WebDriver
//! BiDi as a test observer: a fresh profile that trusts fakechat's CA and
//! maps `chatgpt.com` to it, the add-on installed temporarily, and pairing
//! typed into its options page.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

pub(crate) const FIREFOX: &str = "/usr/bin/firefox-esr";
/// The add-on's internal UUID, fixed by a pref so its pages have a known URL.
const UUID: &str = "5d1c2f4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f";

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A running Firefox and its BiDi session.
pub struct Firefox {
    child: Child,
    socket: Socket,
    next_id: u64,
    /// The add-on's id, as its manifest names it.
    gecko_id: String,
    /// The rig's directory (the profile is `profile/` in it) and the
    /// preferences it was launched with, to start it again on the same profile.
    dir: PathBuf,
    prefs: Vec<(String, Value)>,
}

/// How the add-on goes into the profile.
pub enum Install<'a> {
    /// Loaded from a directory for this browser session only, as
    /// `about:debugging` does: gone at the next start.
    Temporary(&'a Path),
    /// An `.xpi` installed for good, as a person's "Install Add-on From
    /// File" does (unsigned: ESR with `xpinstall.signatures.required` off).
    Permanent(&'a Path),
}

/// How a running Firefox [ends](Firefox::end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Quit as a person quits from the menu (its session is written).
    Quit,
    /// A power cut: every process killed at once.
    PowerCut,
}

impl Firefox {
    /// Launches Firefox on a fresh profile under `dir` with `extension`
    /// installed; `chatgpt.com:443` goes to `127.0.0.1:port`, whose CA is `ca_pem`.
    pub async fn launch(extension: &Path, port: u16, ca_pem: &str, dir: &Path) -> anyhow::Result<Firefox> {
        Firefox::launch_with(extension, port, ca_pem, dir, &[]).await
    }

    /// [`Firefox::launch`] with `extra` preferences in its profile.
    pub async fn launch_with(
        extension: &Path,
        port: u16,
        ca_pem: &str,
        dir: &Path,
        extra: &[(&str, Value)],
    ) -> anyhow::Result<Firefox> {
        Firefox::launch_installing(Install::Temporary(extension), port, ca_pem, dir, extra).await
    }

    /// Launches Firefox on a fresh profile under `dir` with the add-on
    /// installed as `install` says, and `extra` preferences.
    pub async fn launch_installing(
        install: Install<'_>,
        port: u16,
        ca_pem: &str,
        dir: &Path,
        extra: &[(&str, Value)],
    ) -> anyhow::Result<Firefox> {
        anyhow::ensure!(Path::new(FIREFOX).exists(), "{FIREFOX} is missing: run `cargo xtask install`");
        crate::print_versions();
        let (gecko_id, data, permanent) = match install {
            Install::Temporary(extension) => {
                let manifest: Value = serde_json::from_slice(&std::fs::read(extension.join("manifest.json"))?)?;
                let path = extension.canonicalize()?.display().to_string();
                (gecko_id(&manifest)?, json!({"type": "path", "path": path}), false)
            }
            Install::Permanent(xpi) => {
                let mut archive =
                    zip::ZipArchive::new(std::fs::File::open(xpi).with_context(|| xpi.display().to_string())?)?;
                let manifest: Value = serde_json::from_reader(archive.by_name("manifest.json")?)?;
                let path = xpi.canonicalize()?.display().to_string();
                (gecko_id(&manifest)?, json!({"type": "archivePath", "path": path}), true)
            }
        };
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile)?;
        let mut prefs: Vec<(String, Value)> = vec![
            ("network.dns.localDomains".into(), json!("chatgpt.com")),
            ("network.socket.forcePort".into(), json!(format!("443={port}"))),
            ("extensions.webextensions.uuids".into(), json!(json!({&gecko_id: UUID}).to_string())),
            ("browser.shell.checkDefaultBrowser".into(), json!(false)),
            ("datareporting.policy.dataSubmissionEnabled".into(), json!(false)),
            ("toolkit.telemetry.reportingpolicy.firstRun".into(), json!(false)),
            ("app.update.disabledForTesting".into(), json!(true)),
            ("network.captive-portal-service.enabled".into(), json!(false)),
            ("extensions.update.enabled".into(), json!(false)),
            // MV3 host permissions are opt-in on Firefox; a person grants them at
            // install (or from the add-on's permissions tab). The profile grants them.
            ("extensions.originControls.grantByDefault".into(), json!(true)),
        ];
        if permanent {
            // An unsigned add-on installed for good: what ESR, Developer
            // Edition and Nightly allow and release Firefox does not.
            prefs.push(("xpinstall.signatures.required".into(), json!(false)));
        }
        prefs.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        // Trust fakechat's CA in the profile's own NSS database.
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, ca_pem)?;
        let db = format!("sql:{}", profile.display());
        certutil(&["-N", "--empty-password", "-d", &db])?;
        certutil(&["-A", "-n", "fakechat", "-t", "C,,", "-i", &ca.display().to_string(), "-d", &db])?;
        let mut firefox = Firefox::spawn(dir, prefs, gecko_id).await?;
        let mut params = json!({"extensionData": data});
        if permanent {
            params["moz:permanent"] = json!(true);
        }
        firefox.command("webExtension.install", params).await?;
        Ok(firefox)
    }

    /// Starts Firefox on the profile under `dir` with `prefs` (in its
    /// `user.js`, read at every start) and opens a BiDi session.
    async fn spawn(dir: &Path, prefs: Vec<(String, Value)>, gecko_id: String) -> anyhow::Result<Firefox> {
        let profile = dir.join("profile");
        let user_js: String = prefs.iter().map(|(k, v)| format!("user_pref({}, {v});\n", json!(k))).collect();
        std::fs::write(profile.join("user.js"), user_js)?;
        let mut child = Command::new(FIREFOX)
            // System access lets the test's hands reach the browser's own
            // window (to unload the add-on's event page, as Firefox does when
            // it idles) and open the add-on's popup, which Firefox 153
            // otherwise refuses to BiDi.
            .args([
                "--headless",
                "--no-remote",
                "--remote-debugging-port=0",
                "--remote-allow-system-access",
                "--profile",
            ])
            .arg(&profile)
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("XDG_CACHE_HOME", dir.join("cache"))
            .env("HOME", dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting firefox")?;
        let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
        let url = loop {
            let line = lines.next().context("firefox exited before BiDi listened")??;
            if let Some(url) = line.split("WebDriver BiDi listening on ").nth(1) {
                break url.trim().to_owned();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        let (socket, _) = tokio_tungstenite::connect_async(format!("{url}/session")).await?;
        let mut firefox = Firefox { child, socket, next_id: 0, gecko_id, dir: dir.to_owned(), prefs };
        firefox.command("session.new", json!({"capabilities": {"alwaysMatch": {"acceptInsecureCerts": true}}})).await?;
        Ok(firefox)
    }

    /// Ends this Firefox as `ending` says, and waits until it is gone.
    pub async fn end(&mut self, ending: Ending) -> anyhow::Result<()> {
        let pid = self.child.id();
        match ending {
            Ending::Quit => {
                // The menu's Quit, from the browser's own window: the session
                // is written as the browser goes (on SIGTERM it is not). The
                // answer may never come.
                let quit = self.in_browser_window("Services.startup.quit(Ci.nsIAppStartup.eAttemptQuit); true");
                let _ = tokio::time::timeout(Duration::from_secs(5), quit).await;
            }
            Ending::PowerCut => {
                let pids = crate::browser::process_tree(pid)?;
                let status = Command::new("kill").arg("-KILL").args(pids.iter().map(u32::to_string)).status()?;
                anyhow::ensure!(status.success(), "kill -KILL {pids:?}");
            }
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.child.try_wait()?.is_none() {
            anyhow::ensure!(std::time::Instant::now() < deadline, "firefox did not end within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Starts this Firefox again, once [ended](Firefox::end), on the same
    /// profile, with its tabs restored or not (`browser.startup.page`, and
    /// after a power cut `browser.sessionstore.resume_from_crash`). A
    /// temporary add-on is gone now; a permanent one starts with the browser.
    pub async fn start_again(&mut self, restore_tabs: bool) -> anyhow::Result<()> {
        let mut prefs = self.prefs.clone();
        prefs.retain(|(k, _)| k != "browser.startup.page" && k != "browser.sessionstore.resume_from_crash");
        prefs.push(("browser.startup.page".into(), json!(if restore_tabs { 3 } else { 1 })));
        prefs.push(("browser.sessionstore.resume_from_crash".into(), json!(restore_tabs)));
        *self = Firefox::spawn(&self.dir.clone(), prefs, self.gecko_id.clone()).await?;
        Ok(())
    }

    /// The browser's main process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a BiDi command and returns its result.
    pub async fn command(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.socket.send(Message::text(json!({"id": id, "method": method, "params": params}).to_string())).await?;
        loop {
            let message = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .with_context(|| format!("{method}: no answer"))?
                .context("BiDi closed")??;
            let Message::Text(text) = message else { continue };
            let reply: Value = serde_json::from_str(&text)?;
            if reply["id"] != id {
                continue;
            }
            if reply["type"] == "error" {
                bail!("{method}: {} {}", reply["error"], reply["message"]);
            }
            return Ok(reply["result"].clone());
        }
    }

    /// Evaluates `expression` in `context`.
    pub async fn eval(&mut self, context: &str, expression: &str) -> anyhow::Result<Value> {
        let params = json!({"expression": expression, "target": {"context": context}, "awaitPromise": true});
        let out = self.command("script.evaluate", params).await?;
        Ok(out["result"]["value"].clone())
    }

    /// Polls `expression` until it is true (20 s).
    pub async fn until(&mut self, context: &str, expression: &str) -> anyhow::Result<()> {
        for _ in 0..200 {
            if self.eval(context, expression).await.ok() == Some(Value::Bool(true)) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("never true: {expression}")
    }

    /// Pairs the add-on through the options page it opened on install, as a
    /// person would, and waits for `connected`.
    ///
    /// Through the page the add-on opens itself: Firefox 153 refuses a
    /// BiDi `browsingContext.navigate` to a `moz-extension:` URL ("not
    /// allowed in this context") unless it runs with
    /// `--remote-allow-system-access` (ESR 140 allowed it), and a person
    /// pairs on that page.
    pub async fn pair(&mut self, endpoint: &str, token: &str) -> anyhow::Result<()> {
        let options = self.extension_page("/options.html").await?;
        self.until(&options, "document.body.hasAttribute('data-ready')").await?;
        let fill = format!(
            "document.querySelector('#endpoint').value = {}; document.querySelector('#token').value = {}; \
             document.querySelector('#pairing').requestSubmit(); true",
            json!(endpoint),
            json!(token)
        );
        self.eval(&options, &fill).await?;
        self.until(&options, "document.querySelector('#connection').textContent === 'connected'").await
    }

    /// Calls `function` (a JS function declaration) with `this` the
    /// overlay's shadow root in `context`, which BiDi serializes even when
    /// closed (`includeShadowTree: "all"`); `None` when the page has no
    /// overlay or it is hidden.
    pub async fn in_overlay(&mut self, context: &str, function: &str, args: Value) -> anyhow::Result<Option<Value>> {
        let host = json!({"expression": "document.querySelector('[data-orchestrator-overlay]:not([hidden])')",
            "target": {"context": context}, "awaitPromise": false,
            "serializationOptions": {"maxDomDepth": 1, "includeShadowTree": "all"}});
        let out = self.command("script.evaluate", host).await?;
        let Some(shadow) = out["result"]["value"]["shadowRoot"]["sharedId"].as_str().map(str::to_owned) else {
            return Ok(None);
        };
        let arguments: Vec<Value> =
            args.as_array().into_iter().flatten().map(|a| json!({"type": "string", "value": a})).collect();
        let call = json!({"functionDeclaration": function, "this": {"sharedId": shadow}, "arguments": arguments,
            "target": {"context": context}, "awaitPromise": false});
        let out = self.command("script.callFunction", call).await?;
        Ok(Some(out["result"]["value"].clone()))
    }

    /// The overlay's text in `context` (its buttons and lines), if it shows.
    pub async fn overlay_text(&mut self, context: &str) -> anyhow::Result<Option<String>> {
        let text =
            "function() { return [...this.querySelectorAll('button, p, h2')].map(e => e.textContent).join(' | '); }";
        Ok(self.in_overlay(context, text, json!([])).await?.and_then(|v| v.as_str().map(str::to_owned)))
    }

    /// Clicks the overlay's button whose text starts with `label`.
    pub async fn click_overlay(&mut self, context: &str, label: &str) -> anyhow::Result<()> {
        let click = "function(label) { const b = [...this.querySelectorAll('button')].find(b => b.textContent.startsWith(label)); \
                     if (!b) return false; b.click(); return true; }";
        match self.in_overlay(context, click, json!([label])).await? {
            Some(Value::Bool(true)) => Ok(()),
            other => bail!("no overlay button {label:?} ({other:?})"),
        }
    }

    /// Evaluates `js` in the browser's own window (system access).
    /// A script that throws is an error here (a look that fails must
    /// not read as a state).
    async fn in_browser_window(&mut self, js: &str) -> anyhow::Result<Value> {
        let tree = self.command("browsingContext.getTree", json!({"maxDepth": 0, "moz:scope": "chrome"})).await?;
        let window = tree["contexts"][0]["context"].as_str().context("no browser window")?.to_owned();
        let params = json!({"expression": js, "target": {"context": window}, "awaitPromise": true});
        let out = self.command("script.evaluate", params).await?;
        if out["type"] == "exception" {
            bail!("{js}: threw {}", out["exceptionDetails"]["text"]);
        }
        Ok(out["result"]["value"].clone())
    }

    /// Shows every tab of every window in turn, as a person clicking
    /// through them (a restored tab loads only once shown, and BiDi lists
    /// only loaded ones), each until it shows its page (10 s); how many
    /// show a chatgpt.com page.
    pub async fn show_every_tab(&mut self) -> anyhow::Result<usize> {
        let js = "(async () => { let chats = 0; \
                  for (const w of Services.wm.getEnumerator('navigator:browser')) for (const t of [...w.gBrowser.tabs]) { \
                    w.gBrowser.selectedTab = t; \
                    for (let i = 0; i < 100 && t.linkedBrowser.currentURI.spec === 'about:blank'; i++) \
                      await new Promise(r => w.setTimeout(r, 100)); \
                    if (t.linkedBrowser.currentURI.spec.startsWith('https://chatgpt.com/')) chats++; } \
                  return chats; })()";
        let chats = self.in_browser_window(js).await?;
        chats.as_u64().map(|n| n as usize).with_context(|| format!("not a count: {chats}"))
    }

    /// The add-on's background state as Firefox keeps it (`running`,
    /// `suspending`, `stopped`, `starting`).
    pub async fn background_state(&mut self) -> anyhow::Result<String> {
        let js = format!("WebExtensionPolicy.getByID({}).extension.backgroundState", json!(self.gecko_id));
        let state = self.in_browser_window(&js).await?;
        state.as_str().map(str::to_owned).with_context(|| format!("no background state: {state}"))
    }

    /// Unloads the add-on's event page as Firefox does once it idles
    /// (`extensions.background.idle.timeout`), even with a socket open:
    /// from the browser's own window, as Firefox's own tests do. Whatever
    /// the add-on listens for wakes it again.
    pub async fn stop_background(&mut self) -> anyhow::Result<()> {
        // Firefox unloads only a running page (it ignores the call
        // otherwise): one still starting is waited for (20 s).
        for _ in 0..200 {
            if self.background_state().await? == "running" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let js = format!(
            "(async () => {{ const e = WebExtensionPolicy.getByID({}).extension; \
             if (e.backgroundState !== 'running') return 'not running: ' + e.backgroundState; \
             const before = e.backgroundContext; \
             await e.terminateBackground({{ignoreDevToolsAttached: true, disableResetIdleForTest: true}}); \
             if (e.backgroundState === 'running' && e.backgroundContext !== before) return 'restarted'; \
             return e.backgroundState; }})()",
            json!(self.gecko_id)
        );
        let state = self.in_browser_window(&js).await?;
        // It was running; "starting", or "restarted" (running in a new
        // context): an event in the meantime (a page's message, the alarm)
        // woke it again, which it can only do once stopped.
        let state = state.as_str().unwrap_or_default();
        anyhow::ensure!(
            ["stopped", "starting", "restarted"].contains(&state),
            "the event page was not unloaded: {state}"
        );
        Ok(())
    }

    /// The connection line the add-on's popup shows, opened in a tab of its own.
    pub async fn popup_connection(&mut self) -> anyhow::Result<String> {
        let said = self.in_popup(crate::lifecycle::POPUP_CONNECTION).await?;
        Ok(said.as_str().unwrap_or_default().to_owned())
    }

    /// Whether the add-on's popup marks its connection line live.
    pub async fn popup_live(&mut self) -> anyhow::Result<bool> {
        let live = self.in_popup("document.querySelector('#connection').classList.contains('live')").await?;
        Ok(live == Value::Bool(true))
    }

    /// `js` evaluated in the add-on's popup, opened in a tab of its own once rendered.
    async fn in_popup(&mut self, js: &str) -> anyhow::Result<Value> {
        let tab = self.command("browsingContext.create", json!({"type": "tab", "background": true})).await?;
        let tab = tab["context"].as_str().context("no tab")?.to_owned();
        let url = format!("moz-extension://{UUID}/popup.html");
        let navigated =
            self.command("browsingContext.navigate", json!({"context": tab, "url": url, "wait": "complete"})).await;
        let text = match navigated {
            Ok(_) => match self.until(&tab, crate::lifecycle::POPUP_RENDERED).await {
                Ok(()) => self.eval(&tab, js).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        // Closed whatever happened.
        self.command("browsingContext.close", json!({"context": tab})).await?;
        text
    }

    /// The top-level context whose URL contains `part` (20 s).
    pub async fn context_of(&mut self, part: &str) -> anyhow::Result<String> {
        for _ in 0..200 {
            let tree = self.command("browsingContext.getTree", json!({"maxDepth": 0})).await?;
            let found = tree["contexts"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["url"].as_str().is_some_and(|u| u.contains(part)));
            if let Some(context) = found.and_then(|c| c["context"].as_str()) {
                return Ok(context.to_owned());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("no tab shows {part}")
    }

    /// The top-level context showing the add-on's page `path`, waiting for
    /// the add-on to open it (20 s).
    pub async fn extension_page(&mut self, path: &str) -> anyhow::Result<String> {
        let prefix = format!("moz-extension://{UUID}{path}");
        self.context_of(&prefix).await.with_context(|| format!("the add-on never opened {prefix}"))
    }
}

/// The add-on id a manifest names.
fn gecko_id(manifest: &Value) -> anyhow::Result<String> {
    let id = manifest["browser_specific_settings"]["gecko"]["id"].as_str().context("no gecko id")?;
    Ok(id.to_owned())
}

fn certutil(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("certutil").args(args).output().context("certutil (libnss3-tools) is required")?;
    anyhow::ensure!(out.status.success(), "certutil {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

impl Drop for Firefox {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
