//! A person's browser quit and started again, or cut off by a power cut,
//! with its tabs restored or not (issue 44, item 7): the test's own hands
//! on the browser's process and tabs, never the product's.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::json;

use crate::person::Act;

/// A browser the rig can end and start again on the same profile.
pub trait Restarts: Send {
    /// Opens `url` in a new tab, as a person would, and waits for its composer.
    fn open<'a>(&'a mut self, url: &'a str) -> Act<'a, ()>;
    /// Ends the browser: quit as a person quits, its session kept
    /// (`restore_tabs`), or a power cut (no tab is reported closed).
    fn end(&mut self, restore_tabs: bool) -> Act<'_, ()>;
    /// Starts it again on the same profile, its tabs restored or not.
    fn start(&mut self, restore_tabs: bool) -> Act<'_, ()>;
    /// Whether the extension says it is connected within `within`.
    fn connected(&mut self, within: Duration) -> Act<'_, bool>;
    /// Shows each chatgpt.com tab in turn (a restored tab loads only then)
    /// and returns their paths; an error if any composer holds text (no
    /// keystroke of ours left anywhere).
    fn composers_empty(&mut self) -> Act<'_, Vec<String>>;
}

/// Whether a chatgpt.com page has loaded its composer.
const LOADED: &str = "document.readyState === 'complete' && !!document.querySelector('#prompt-textarea')";
/// A chatgpt.com page's path and the text its composer holds.
const PATH_AND_DRAFT: &str = "[location.pathname, document.querySelector('#prompt-textarea')?.textContent ?? '']";

/// A Chromium the rig launched, with what relaunching it takes: the
/// unpacked extension it loads at every start, or none (installed from a
/// CRX, [`crate::Chromium::launch_crx`]).
pub struct ChromiumRestarts<'b> {
    pub chromium: &'b mut crate::Chromium,
    pub extension: Option<&'b Path>,
    pub port: u16,
    pub dir: &'b Path,
}

impl Restarts for ChromiumRestarts<'_> {
    fn open<'a>(&'a mut self, url: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            let page = self.chromium.open(url).await?;
            crate::browser::until(&page, LOADED).await
        })
    }

    fn end(&mut self, restore_tabs: bool) -> Act<'_, ()> {
        Box::pin(async move {
            if restore_tabs {
                let _ = self.chromium.browser.close().await;
                let _ = self.chromium.browser.wait().await;
                Ok(())
            } else {
                self.chromium.crash().await
            }
        })
    }

    fn start(&mut self, restore_tabs: bool) -> Act<'_, ()> {
        Box::pin(async move {
            let (port, dir) = (self.port, self.dir);
            *self.chromium = match self.extension {
                Some(extension) => crate::Chromium::relaunch(extension, port, dir, restore_tabs).await,
                None => crate::Chromium::relaunch_installed(&self.chromium.extension_id, port, dir, restore_tabs).await,
            }
            .context("relaunching")?;
            Ok(())
        })
    }

    fn connected(&mut self, within: Duration) -> Act<'_, bool> {
        Box::pin(async move { Ok(self.chromium.wait_connected(within).await) })
    }

    fn composers_empty(&mut self) -> Act<'_, Vec<String>> {
        Box::pin(async move {
            use chromiumoxide::cdp::browser_protocol::target::{ActivateTargetParams, GetTargetsParams};
            let browser = &self.chromium.browser;
            let mut paths = Vec::new();
            // The browser's own list of tabs (a restored one may not have reached
            // the automation library's list of pages yet).
            let targets = browser.execute(GetTargetsParams::default()).await?.result.target_infos;
            for target in
                targets.into_iter().filter(|t| t.r#type == "page" && t.url.starts_with("https://chatgpt.com/"))
            {
                // The automation library attaches to a just-restored tab a moment later.
                let mut page = browser.get_page(target.target_id.clone()).await;
                for _ in 0..50 {
                    if page.is_ok() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    page = browser.get_page(target.target_id.clone()).await;
                }
                let page = page.with_context(|| format!("{target:?}"))?;
                browser.execute(ActivateTargetParams::new(target.target_id.clone())).await?;
                crate::browser::until(&page, LOADED).await.with_context(|| format!("{} never loaded", target.url))?;
                let [path, draft] =
                    crate::browser::eval::<[String; 2]>(&page, PATH_AND_DRAFT).await.context("a page's composer")?;
                if !draft.is_empty() {
                    bail!("the tab at {path} holds {draft:?}");
                }
                paths.push(path);
            }
            Ok(paths)
        })
    }
}

/// A Firefox the rig launched with its add-on installed for good
/// ([`crate::firefox::Install::Permanent`]): a temporary one is gone at
/// the next start.
pub struct FirefoxRestarts<'f>(pub &'f mut crate::Firefox);

impl Restarts for FirefoxRestarts<'_> {
    fn open<'a>(&'a mut self, url: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            let tab = self.0.command("browsingContext.create", json!({"type": "tab"})).await?;
            let tab = tab["context"].as_str().context("no tab")?.to_owned();
            self.0.command("browsingContext.navigate", json!({"context": tab, "url": url, "wait": "complete"})).await?;
            self.0.until(&tab, LOADED).await
        })
    }

    fn end(&mut self, restore_tabs: bool) -> Act<'_, ()> {
        let ending = if restore_tabs { crate::firefox::Ending::Quit } else { crate::firefox::Ending::PowerCut };
        Box::pin(self.0.end(ending))
    }

    fn start(&mut self, restore_tabs: bool) -> Act<'_, ()> {
        Box::pin(self.0.start_again(restore_tabs))
    }

    fn connected(&mut self, within: Duration) -> Act<'_, bool> {
        Box::pin(async move {
            let deadline = std::time::Instant::now() + within;
            while std::time::Instant::now() < deadline {
                if self.0.popup_live().await.unwrap_or(false) {
                    return Ok(true);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Ok(false)
        })
    }

    fn composers_empty(&mut self) -> Act<'_, Vec<String>> {
        Box::pin(async move {
            let chats = self.0.show_every_tab().await?;
            let mut tabs = Vec::new();
            for _ in 0..100 {
                let tree = self.0.command("browsingContext.getTree", json!({"maxDepth": 0})).await?;
                tabs = tree["contexts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| Some((c["context"].as_str()?.to_owned(), c["url"].as_str()?.to_owned())))
                    .filter(|(_, url)| url.starts_with("https://chatgpt.com/"))
                    .collect::<Vec<_>>();
                if tabs.len() == chats {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            anyhow::ensure!(tabs.len() == chats, "{chats} chatgpt.com tabs, {} listed: {tabs:?}", tabs.len());
            let mut paths = Vec::new();
            for (tab, url) in tabs {
                self.0.until(&tab, LOADED).await.with_context(|| format!("{url} never loaded"))?;
                let js = format!("JSON.stringify({PATH_AND_DRAFT})");
                let said = self.0.eval(&tab, &js).await.context("a page's composer")?;
                let [path, draft]: [String; 2] = serde_json::from_str(said.as_str().unwrap_or_default())?;
                if !draft.is_empty() {
                    bail!("the tab at {path} holds {draft:?}");
                }
                paths.push(path);
            }
            Ok(paths)
        })
    }
}
