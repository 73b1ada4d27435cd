//! The managed tabs' lifecycle in a person's browser: a tab the browser
//! discarded or froze, a stored tab id that may name a person's tab after a
//! restart, and every question to a page bounded (a frozen page never
//! answers).

use js_sys::Array;
use wasm_bindgen_futures::JsFuture;

use super::*;

impl Background {
    /// A managed tab the browser discarded (Memory Saver): reported, then
    /// reloaded at its exact conversation (its page is gone: nothing of a
    /// person's is lost by the reload that was not lost by the discard).
    pub(super) fn reload_discarded(&self, tab: i32) {
        if self.core.borrow().worker_of(&tab).is_none() || !self.reloading.borrow_mut().insert(tab) {
            return;
        }
        let frames =
            self.core.borrow_mut().page_unreachable(&tab, "the browser discarded the managed tab; reloading it");
        if frames.is_empty() {
            return;
        }
        self.emit(frames);
        let Some(bg) = background() else { return };
        wasm_bindgen_futures::spawn_local(async move {
            if bg.still_ours(tab).await {
                let _ = call("tabs.reload", &[tab.into()]).await;
            }
        });
    }

    /// A managed tab the browser froze: reloaded at its exact conversation
    /// when its page last reported itself idle with nothing of a person's
    /// (a frozen page is exactly as it last reported, and nobody typed into
    /// it since: the reload loses nothing of theirs) and no submission of
    /// ours may be in it; reported either way. A page that last showed
    /// anything else (generating, a person's draft, a question card) is
    /// left for a person to open. Returns whether it was reloaded.
    pub(super) async fn thaw(&self, tab: i32) -> bool {
        let Some(worker) = self.core.borrow().worker_of(&tab).cloned() else { return false };
        let state = self.core.borrow().managed(&worker).and_then(|m| m.state);
        // Idle only: a page generating may hold a draft typed meanwhile.
        let reload = state == Some(ConversationState::Idle)
            && !self.core.borrow().submitting(&worker)
            && self.still_ours(tab).await;
        let frames = self.core.borrow_mut().page_unreachable(&tab, if reload { FROZEN_RELOADED } else { FROZEN_LEFT });
        self.emit(frames);
        if reload {
            let _ = call("tabs.reload", &[tab.into()]).await;
        }
        reload
    }

    /// Whether `tab` still shows what its worker owns, as the browser says
    /// now (`Core::shows_own`): nothing is reloaded, parked or closed in a
    /// tab that does not.
    pub(super) async fn still_ours(&self, tab: i32) -> bool {
        let Ok(info) = call("tabs.get", &[tab.into()]).await else { return false };
        let url = Reflect::get(&info, &"url".into()).ok().and_then(|u| u.as_string()).unwrap_or_default();
        self.core.borrow().shows_own(&tab, &url)
    }

    /// The worker's tab is no longer its own (closed, or showing something
    /// else): forgotten and reported closed, as a closed tab is.
    pub(super) async fn lost(&self, tab: i32) {
        let frames = self.core.borrow_mut().tab_removed(&tab);
        self.emit(frames);
        self.persist().await;
    }
}

pub(super) const FROZEN_RELOADED: &str = "the browser froze the managed tab; reloading it";
pub(super) const FROZEN_LEFT: &str = "the browser froze the managed tab, whose page last showed something of a person's \
                           (a draft, a card): it is not reloaded; open the tab to wake it";

/// Shows `tab` the page at `url`.
pub(super) async fn show(tab: i32, url: &str) -> Result<(), CommandOutcome> {
    match call("tabs.update", &[tab.into(), object(&[("url", url.into())])]).await {
        Ok(_) => Ok(()),
        Err(_) => Err(error(ErrorCode::BrowserControlUnavailable, "the create's tab could not be shown its page")),
    }
}

/// How long a page's content script has to answer a request that asks it
/// to do nothing but look (a ping, whether it may close): a frozen page
/// never answers, and no wait may last for ever.
pub(super) const PAGE_ANSWERS_MS: i32 = 5_000;

/// How long past a submission's own deadline its answer is awaited (the
/// page bounds the submission by that deadline itself).
pub(super) const SUBMIT_GRACE_MS: u64 = 15_000;

/// Sends a typed request to the tab's content script, waiting at most `ms`.
pub(super) async fn ask(tab: i32, request: &ToPage, ms: i32) -> Result<PageReply, String> {
    let reply =
        call_within("tabs.sendMessage", &[tab.into(), to_js(request)], ms).await.map_err(|e| format!("{e:?}"))?;
    from_js(&reply)
}

/// Whether the browser froze `tab` (Chromium's `frozen`, Energy Saver):
/// its page runs nothing until it is shown or reloaded.
pub(super) async fn frozen(tab: i32) -> bool {
    let info = call("tabs.get", &[tab.into()]).await.ok();
    info.and_then(|i| Reflect::get(&i, &"frozen".into()).ok()).and_then(|f| f.as_bool()) == Some(true)
}

/// How long a background that did not find its session marker waits to
/// hear why it started before it trusts no stored tab id.
const WHY_STARTED_MS: i32 = 3_000;

/// Whether the tab ids stored before this background started still name
/// the same tabs: yes when it was only woken (its `storage.session` marker
/// is there) or installed, updated or reloaded (the same browser session);
/// no when the browser started (`runtime.onStartup`: a restored tab has a
/// new id, and an old id may name a person's tab), and no when nothing says
/// why within [`WHY_STARTED_MS`] (enabled again, say): fail closed.
pub(super) async fn stored_tabs_trusted(why: js_sys::Promise) -> bool {
    let woken = storage_get("session", SESSION_MARKER).await.is_some();
    woken || {
        let expired = js_sys::Promise::new(&mut |resolve, _| {
            set_timeout(&resolve, WHY_STARTED_MS);
        });
        let said = JsFuture::from(js_sys::Promise::race(&Array::of2(&why, &expired))).await;
        said.ok().and_then(|w| w.as_string()).as_deref() == Some("installed")
    }
}

/// Marks this browser session as one the background ran in, once the tabs
/// it keeps are journaled (a wake after a stop in between must not trust
/// ids it had dropped).
pub(super) async fn mark_session() {
    let _ = storage_set("session", SESSION_MARKER, true.into()).await;
}

const SESSION_MARKER: &str = "backgroundRan";
