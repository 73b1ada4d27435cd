//! A person at the browser, acting in a managed tab: the test's own hands,
//! through the browser's automation interface (DevTools for Chromium,
//! WebDriver BiDi for Firefox), never the product's. A file is chosen the
//! way a person's file dialog hands it to the page: the page's own file
//! input gets the file, and the page reacts to its `change`.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// A boxed future, so the scenarios take either browser's hands.
pub type Act<'a, T> = Pin<Box<dyn Future<Output = anyhow::Result<T>> + Send + 'a>>;

/// What a person does in the tab showing a conversation.
pub trait Person: Send {
    /// Chooses `file` in that tab's composer, as their file dialog would.
    fn attach<'a>(&'a mut self, conversation: &'a str, file: &'a Path) -> Act<'a, ()>;
    /// Runs `js` in that tab's page (a person's click, or a look), returning its value.
    fn run<'a>(&'a mut self, conversation: &'a str, js: &'a str) -> Act<'a, Value>;
    /// Closes that tab.
    fn close<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()>;
    /// Moves that tab, or its window, as `to` says.
    fn place<'a>(&'a mut self, conversation: &'a str, to: Place) -> Act<'a, Placed>;
}

/// Where a person puts the tab showing a conversation, or what they do to
/// its window. The moves are made through the browser's `tabs`/`windows`
/// API from an extension page of the test's: dragging a tab out of its
/// window fires the same `tabs.onDetached`/`onAttached` and keeps the
/// tab's id, as the API's move does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Dragged out into a window of its own, which does not take the focus.
    NewWindow,
    /// Its window minimized.
    Minimized,
    /// Its window shown again, and a window of the person's opened and
    /// focused over it.
    Covered,
    /// Dragged back into the browser's first window, beside other tabs.
    Back,
}

/// What the browser said once a tab was placed.
#[derive(Debug)]
pub struct Placed {
    /// Whether the tab showing the conversation after the move is the one
    /// before it (the browser promises a move keeps the id).
    pub same_tab: bool,
    /// Its window's state (`normal`, `minimized`, …).
    pub window: String,
    /// Its page's `document.visibilityState`.
    pub visibility: String,
}

impl Placed {
    fn from(said: &Value, visibility: &Value) -> anyhow::Result<Placed> {
        // A JSON string: both automation protocols pass a string as it is.
        let moved: Value = said.as_str().and_then(|m| serde_json::from_str(m).ok()).unwrap_or(Value::Null);
        let same_tab = moved["sameTab"].as_bool().with_context(|| format!("the move said {said}"))?;
        let window = moved["window"].as_str().unwrap_or_default().to_owned();
        Ok(Placed { same_tab, window, visibility: visibility.as_str().unwrap_or_default().to_owned() })
    }
}

/// The extension-page script that places the tab showing `conversation`
/// (a promise of `{sameTab, window}` as JSON).
fn place_script(conversation: &str, to: Place) -> String {
    let how = match to {
        Place::NewWindow => "await api.windows.create({tabId: t.id, focused: false});",
        Place::Minimized => "await api.windows.update(t.windowId, {state: 'minimized'});",
        Place::Covered => {
            "await api.windows.update(t.windowId, {state: 'normal'}); \
             await api.windows.create({url: 'about:blank', focused: true});"
        }
        // Back among other tabs; the windows of blank pages the covers
        // opened are closed.
        Place::Back => {
            "const all = await api.windows.getAll({populate: true}); \
             const first = Math.min(...all.map(w => w.id)); \
             await api.tabs.move(t.id, {windowId: first, index: -1}); \
             for (const w of all) if (w.id !== first && w.tabs.every(x => x.url === 'about:blank')) await api.windows.remove(w.id);"
        }
    };
    format!(
        "(async () => {{ const api = globalThis.browser ?? chrome; \
         const t = (await api.tabs.query({{}})).find(t => (t.url || '').includes({conversation:?})); \
         if (!t) return null; {how} \
         const now = (await api.tabs.query({{}})).find(t => (t.url || '').includes({conversation:?})); \
         return JSON.stringify({{sameTab: !!now && now.id === t.id, \
           window: now ? (await api.windows.get(now.windowId)).state : null}}); }})()"
    )
}

/// The composer's file input in fakechat's page (`render::attachments_tray`).
const FILE_INPUT: &str = "#composer-region form input[type='file']";

/// A person at a Chromium the rig launched.
pub struct ChromiumHands<'b>(pub &'b crate::Chromium);

/// The tab of `chromium` showing `conversation` (waiting for it, 20 s).
pub(crate) async fn tab_showing(chromium: &crate::Chromium, conversation: &str) -> anyhow::Result<chromiumoxide::Page> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for page in chromium.browser.pages().await? {
            if page.url().await.ok().flatten().is_some_and(|u| u.contains(conversation)) {
                return Ok(page);
            }
        }
        if Instant::now() > deadline {
            bail!("no tab shows {conversation}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Person for ChromiumHands<'_> {
    fn attach<'a>(&'a mut self, conversation: &'a str, file: &'a Path) -> Act<'a, ()> {
        Box::pin(async move {
            use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
            let page = tab_showing(self.0, conversation).await?;
            let input = page.find_element(FILE_INPUT).await?;
            let params = SetFileInputFilesParams::builder()
                .file(file.display().to_string())
                .backend_node_id(input.backend_node_id)
                .build()
                .map_err(anyhow::Error::msg)?;
            page.execute(params).await?;
            Ok(())
        })
    }

    fn run<'a>(&'a mut self, conversation: &'a str, js: &'a str) -> Act<'a, Value> {
        Box::pin(async move {
            let page = tab_showing(self.0, conversation).await?;
            Ok(page.evaluate(js).await?.into_value::<Value>().unwrap_or(Value::Null))
        })
    }

    fn close<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            tab_showing(self.0, conversation).await?.close().await?;
            Ok(())
        })
    }

    fn place<'a>(&'a mut self, conversation: &'a str, to: Place) -> Act<'a, Placed> {
        Box::pin(async move {
            // The extension page opens in the background: the placed tab
            // stays the one its window shows.
            let options = self.0.open_background(&self.0.extension_url("options.html")).await?;
            let moved = options.evaluate(place_script(conversation, to)).await?.into_value::<Value>();
            options.close().await?;
            let moved = moved.unwrap_or(Value::Null);
            let visibility = self.run(conversation, "document.visibilityState").await?;
            Placed::from(&moved, &visibility)
        })
    }
}

/// A person at a Firefox the rig launched.
pub struct FirefoxHands<'b>(pub &'b mut crate::Firefox);

impl Person for FirefoxHands<'_> {
    fn attach<'a>(&'a mut self, conversation: &'a str, file: &'a Path) -> Act<'a, ()> {
        Box::pin(async move {
            let context = self.0.context_of(conversation).await?;
            let params = json!({
                "expression": format!("document.querySelector({FILE_INPUT:?})"),
                "target": {"context": context},
                "awaitPromise": false,
                "resultOwnership": "root",
            });
            let found = self.0.command("script.evaluate", params).await?;
            let element = found["result"]["sharedId"].as_str().context("no file input in the composer")?.to_owned();
            let files = json!([file.display().to_string()]);
            let params = json!({"context": context, "element": {"sharedId": element}, "files": files});
            self.0.command("input.setFiles", params).await?;
            Ok(())
        })
    }

    fn run<'a>(&'a mut self, conversation: &'a str, js: &'a str) -> Act<'a, Value> {
        Box::pin(async move {
            let context = self.0.context_of(conversation).await?;
            self.0.eval(&context, js).await
        })
    }

    fn close<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            let context = self.0.context_of(conversation).await?;
            self.0.command("browsingContext.close", json!({"context": context})).await?;
            Ok(())
        })
    }

    fn place<'a>(&'a mut self, conversation: &'a str, to: Place) -> Act<'a, Placed> {
        Box::pin(async move {
            // The options page the add-on opened on install, still open.
            let options = self.0.extension_page("/options.html").await?;
            let moved = self.0.eval(&options, &place_script(conversation, to)).await?;
            let visibility = self.run(conversation, "document.visibilityState").await?;
            Placed::from(&moved, &visibility)
        })
    }
}
