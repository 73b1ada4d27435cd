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
}
