//! What a person's browser does to a managed tab behind their back, to
//! save memory or power: Memory Saver discards it, Energy Saver freezes it
//! (Chromium's `Page.setWebLifecycleState`, the page lifecycle API's
//! `frozen`); and to the extension's background, which it stops when idle. The test's own hands, through DevTools or WebDriver BiDi and
//! an extension page (`tabs.discard`), never the product's.

use anyhow::Context;

use crate::person::Act;

/// The browser's own lifecycle moves on the tab showing a conversation.
pub trait Lifecycle: Send {
    /// Discards it, as Memory Saver does (the tab stays, its page is gone
    /// until it is reloaded).
    fn discard<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()>;
    /// Freezes it (no script, timer or event runs) or thaws it.
    fn freeze<'a>(&'a mut self, conversation: &'a str, frozen: bool) -> Act<'a, ()>;
    /// Whether this browser freezes pages at all.
    fn freezes(&self) -> bool;
    /// Stops the extension's background (an MV3 service worker idled out).
    fn stop_background(&mut self) -> Act<'_, ()>;
    /// The connection line the extension's popup shows a person.
    fn said(&mut self) -> Act<'_, String>;
}

/// True once the extension's popup has rendered its connection line (its
/// own placeholder says "starting" until then).
pub(crate) const POPUP_RENDERED: &str =
    "!['', 'starting'].includes(document.querySelector('#connection')?.textContent ?? '')";
/// The popup's connection line.
pub(crate) const POPUP_CONNECTION: &str = "document.querySelector('#connection').textContent";

/// The extension-page script that discards the tab showing
/// `conversation`: what the browser then says of it.
fn discard_script(conversation: &str) -> String {
    format!(
        "(async () => {{ const api = globalThis.browser ?? chrome; \
         const t = (await api.tabs.query({{}})).find(t => (t.url || '').includes({conversation:?})); \
         if (!t) return 'no tab'; \
         const d = await api.tabs.discard(t.id); \
         const now = d ?? await api.tabs.get(t.id); \
         return now.discarded ? 'discarded' : (t.active ? 'the active tab of its window' : 'loaded'); }})()"
    )
}

/// Whether the discard script said the tab was discarded.
fn discarded(conversation: &str, said: &str) -> anyhow::Result<()> {
    anyhow::ensure!(said == "discarded", "the tab showing {conversation} was not discarded: {said}");
    Ok(())
}

/// The lifecycle of a Chromium the rig launched.
pub struct ChromiumLifecycle<'b>(pub &'b crate::Chromium);

impl Lifecycle for ChromiumLifecycle<'_> {
    fn discard<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            // `tabs.discard` is an extension API: run from the extension's
            // options page (the browser's own Memory Saver needs no page).
            let page = self.0.open(&self.0.extension_url("options.html")).await?;
            let said = page.evaluate(discard_script(conversation)).await?.into_value::<String>();
            page.close().await?;
            discarded(conversation, &said.unwrap_or_default())
        })
    }

    fn freeze<'a>(&'a mut self, conversation: &'a str, frozen: bool) -> Act<'a, ()> {
        Box::pin(async move {
            use chromiumoxide::cdp::browser_protocol::page::{SetWebLifecycleStateParams, SetWebLifecycleStateState};
            let page = crate::person::tab_showing(self.0, conversation).await?;
            let state = if frozen { SetWebLifecycleStateState::Frozen } else { SetWebLifecycleStateState::Active };
            page.execute(SetWebLifecycleStateParams::new(state)).await.context("Page.setWebLifecycleState")?;
            Ok(())
        })
    }

    fn freezes(&self) -> bool {
        true
    }

    fn stop_background(&mut self) -> Act<'_, ()> {
        Box::pin(self.0.stop_service_worker())
    }

    fn said(&mut self) -> Act<'_, String> {
        Box::pin(self.0.popup_connection())
    }
}

/// The lifecycle of a Firefox the rig launched. Firefox freezes no page
/// (it throttles timers in background tabs) and unloads an idle add-on's
/// event page rather than stopping a service worker.
pub struct FirefoxLifecycle<'f>(pub &'f mut crate::Firefox);

impl Lifecycle for FirefoxLifecycle<'_> {
    fn discard<'a>(&'a mut self, conversation: &'a str) -> Act<'a, ()> {
        Box::pin(async move {
            // The options page the add-on opened on install, still open.
            let options = self.0.extension_page("/options.html").await?;
            let said = self.0.eval(&options, &discard_script(conversation)).await?;
            discarded(conversation, said.as_str().unwrap_or_default())
        })
    }

    fn freeze<'a>(&'a mut self, _conversation: &'a str, _frozen: bool) -> Act<'a, ()> {
        Box::pin(async { anyhow::bail!("Firefox freezes no page") })
    }

    fn freezes(&self) -> bool {
        false
    }

    fn stop_background(&mut self) -> Act<'_, ()> {
        Box::pin(self.0.stop_background())
    }

    fn said(&mut self) -> Act<'_, String> {
        Box::pin(self.0.popup_connection())
    }
}
