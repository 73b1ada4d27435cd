//! The content script in chatgpt.com pages: the shared `chatgpt-dom` adapter
//! over the live DOM, a mutation-driven observer (no timers: hidden tabs
//! throttle them) that reports coalesced state changes, and the typed
//! operations the background may ask for. It never clicks Retry and never
//! acts on a page unless the background asks, which it does only for the
//! tabs it manages.

use std::cell::RefCell;

use chatgpt_dom::{Act, Dom, Pressed, confirmed, parse_url, ready};
use js_sys::{Function, Promise, Reflect};
use protocol::ErrorCode;
use protocol::executor::ConversationState;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Document, Element, HtmlDocument, HtmlElement, MutationObserver, MutationObserverInit};

use super::{call, from_js, now_ms, set_timeout, to_js};
use crate::messages::{PageReply, Report, Submission, ToPage};

/// The live page as the adapter's [`Dom`].
struct LiveDom {
    document: Document,
}

impl Dom for LiveDom {
    type Node = Element;

    fn query_all(&self, scope: Option<&Element>, selector: &str) -> Vec<Element> {
        let list = match scope {
            Some(scope) => scope.query_selector_all(selector),
            None => self.document.query_selector_all(selector),
        };
        let Ok(list) = list else { return vec![] };
        (0..list.length()).filter_map(|i| list.item(i)?.dyn_into::<Element>().ok()).collect()
    }

    fn attr(&self, node: &Element, name: &str) -> Option<String> {
        node.get_attribute(name)
    }

    fn text(&self, node: &Element) -> String {
        match node.dyn_ref::<HtmlElement>() {
            Some(html) => html.inner_text(),
            None => node.text_content().unwrap_or_default(),
        }
    }

    fn within(&self, node: &Element, selector: &str) -> bool {
        node.parent_element().and_then(|p| p.closest(selector).ok().flatten()).is_some()
    }

    /// `hidden` ancestry, then the browser's own `checkVisibility` (display
    /// and visibility of every ancestor), then a box of some size.
    fn visible(&self, node: &Element) -> bool {
        if node.closest("[hidden]").ok().flatten().is_some() {
            return false;
        }
        if let Ok(check) = Reflect::get(node, &"checkVisibility".into())
            && let Ok(check) = check.dyn_into::<Function>()
        {
            let options = super::object(&[("visibilityProperty", true.into())]);
            if check.call1(node, &options).ok().and_then(|v| v.as_bool()) == Some(false) {
                return false;
            }
        }
        let rect = node.get_bounding_client_rect();
        rect.width() > 0.0 || rect.height() > 0.0
    }
}

impl Act for LiveDom {
    /// Types through the editing pipeline (`insertText`), which ProseMirror
    /// and Lexical both observe as user input.
    fn insert_text(&self, editor: &Element, text: &str) -> bool {
        self.select_contents(editor)
            && self.html_document().exec_command_with_show_ui_and_value("insertText", false, text).unwrap_or(false)
    }

    /// A press as a person makes it: pointer and mouse down, then up, then
    /// the click. A Radix trigger opens on a primary button's `pointerdown`
    /// and ignores a `click()` alone (the model picker of 2026-09; public
    /// code that drives the live site presses the same way); a plain
    /// button acts on the click, once.
    fn click(&self, node: &Element) {
        let Some(html) = node.dyn_ref::<HtmlElement>() else { return };
        let pointer = |kind: &str, buttons: u16| {
            let init = web_sys::PointerEventInit::new();
            init.set_bubbles(true);
            init.set_cancelable(true);
            init.set_composed(true);
            init.set_button(0);
            init.set_buttons(buttons);
            init.set_pointer_id(1);
            init.set_pointer_type("mouse");
            init.set_is_primary(true);
            if let Ok(event) = web_sys::PointerEvent::new_with_event_init_dict(kind, &init) {
                let _ = node.dispatch_event(&event);
            }
        };
        let mouse = |kind: &str, buttons: u16| {
            let init = web_sys::MouseEventInit::new();
            init.set_bubbles(true);
            init.set_cancelable(true);
            init.set_composed(true);
            init.set_button(0);
            init.set_buttons(buttons);
            if let Ok(event) = web_sys::MouseEvent::new_with_mouse_event_init_dict(kind, &init) {
                let _ = node.dispatch_event(&event);
            }
        };
        pointer("pointerdown", 1);
        mouse("mousedown", 1);
        pointer("pointerup", 0);
        mouse("mouseup", 0);
        html.click();
    }

    fn clear(&self, editor: &Element) {
        if self.select_contents(editor) {
            let _ = self.html_document().exec_command("delete");
        }
    }
}

impl LiveDom {
    /// Focuses `editor` and selects everything in it, as a person would
    /// before typing over it; with an app mention in it, everything after
    /// the mention and the one space after it (they are the binding: public
    /// code that drives the live site places its caret the same way).
    fn select_contents(&self, editor: &Element) -> bool {
        let Some(html) = editor.dyn_ref::<HtmlElement>() else { return false };
        let _ = html.focus();
        // No selection to type into: refuse rather than act at an unknown caret.
        let Ok(Some(selection)) = self.document.get_selection() else { return false };
        let atoms = editor.query_selector_all(chatgpt_dom::bind::ATOMS).ok();
        let last = atoms.and_then(|list| list.item(list.length().checked_sub(1)?));
        match (last, self.document.create_range()) {
            (Some(atom), Ok(range)) => {
                let _ = range.set_start_after(&atom);
                // The separator the editor keeps after the mention (a space
                // or a no-break space) stays too.
                if let Some(space) = atom.next_sibling().filter(|n| n.node_type() == web_sys::Node::TEXT_NODE) {
                    let shown = space.text_content().unwrap_or_default();
                    if !shown.is_empty() && shown.chars().all(char::is_whitespace) {
                        let _ = range.set_start(&space, shown.encode_utf16().count() as u32);
                    }
                }
                let _ = range.set_end(editor, editor.child_nodes().length());
                let _ = selection.remove_all_ranges();
                let _ = selection.add_range(&range);
            }
            _ => {
                let _ = selection.select_all_children(editor);
            }
        }
        true
    }

    fn html_document(&self) -> &HtmlDocument {
        self.document.unchecked_ref()
    }
}

/// Mutation-driven waiting with a deadline, for the binding steps.
struct Until {
    deadline_ms: u64,
}

impl chatgpt_dom::bind::Wait for Until {
    fn now_ms(&self) -> u64 {
        now_ms()
    }

    async fn change(&self, until_ms: u64) -> bool {
        if now_ms() >= self.deadline_ms {
            return false;
        }
        next_change(self.deadline_ms.min(until_ms)).await;
        now_ms() < self.deadline_ms
    }
}

thread_local! {
    /// Resolvers of futures waiting for the next mutation.
    static WAITERS: RefCell<Vec<Function>> = const { RefCell::new(Vec::new()) };
    /// The last report sent, to send changes only.
    static LAST: RefCell<Option<Report>> = const { RefCell::new(None) };
    /// When the running turn was last looked at for progress, and its mark then.
    static MARK: RefCell<(u64, Option<(usize, usize)>)> = const { RefCell::new((0, None)) };
    /// Keys being submitted right now in this page.
    static PENDING: RefCell<std::collections::HashSet<String>> = RefCell::new(std::collections::HashSet::new());
}

/// Keys this tab clicked send for, in `sessionStorage` so a page reload
/// keeps them: recorded before the click, so absence proves no click.
const SUBMITTED: &str = "orchestrator-submitted";
/// Keys whose submission the page confirmed.
const CONFIRMED: &str = "orchestrator-confirmed";
const RECORDS_KEEP: usize = 64;

fn dom() -> LiveDom {
    LiveDom { document: web_sys::window().and_then(|w| w.document()).expect("a content script has a document") }
}

fn session_storage() -> Option<web_sys::Storage> {
    web_sys::window().and_then(|w| w.session_storage().ok().flatten())
}

fn records(list: &str) -> Vec<String> {
    let text = session_storage().and_then(|s| s.get_item(list).ok().flatten()).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or_default()
}

fn write_records(list: &str, keys: &[String]) -> bool {
    let Some(storage) = session_storage() else { return false };
    let start = keys.len().saturating_sub(RECORDS_KEEP);
    storage.set_item(list, &serde_json::to_string(&keys[start..]).expect("strings serialize")).is_ok()
}

fn record(list: &str, key: &str) -> bool {
    let mut keys = records(list);
    keys.push(key.to_owned());
    write_records(list, &keys)
}

fn forget(list: &str, key: &str) {
    let keys: Vec<String> = records(list).into_iter().filter(|k| k != key).collect();
    write_records(list, &keys);
}

fn report(dom: &LiveDom) -> Report {
    let url = web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default();
    // Our own prompt, typed and not yet sent, is no person's draft.
    let typing = PENDING.with(|p| !p.borrow().is_empty());
    let (state, error) = match parse_url(&url) {
        Some(_) => chatgpt_dom::compose::observed(dom, typing),
        // Settings, the library, a GPT's page: no conversation to type into.
        None => (ConversationState::Error, Some(ErrorCode::NotConversationPage)),
    };
    Report { url, state, error }
}

/// After mutations (or a visibility change): report a change, wake waiters.
fn observe() {
    let now = report(&dom());
    let changed = LAST.with(|last| {
        let mut last = last.borrow_mut();
        let changed = last.as_ref() != Some(&now);
        *last = Some(now.clone());
        changed
    });
    let generating = now.state == ConversationState::Generating;
    if changed {
        wasm_bindgen_futures::spawn_local(async move {
            let _ = call("runtime.sendMessage", &[to_js(&PageReply::Report(now))]).await;
        });
    }
    if generating && turn_moved_on() {
        wasm_bindgen_futures::spawn_local(async move {
            let _ = call("runtime.sendMessage", &[to_js(&PageReply::Progress)]).await;
        });
    }
    for resolve in WAITERS.with(|w| std::mem::take(&mut *w.borrow_mut())) {
        let _ = resolve.call0(&JsValue::NULL);
    }
}

/// Whether the running turn's content moved on since it was last looked
/// at; looked at no more than every [`PROGRESS_LOOK_MS`] (a streaming turn
/// mutates the page many times a second; the executor sends the daemon at
/// most one progress frame per 30 s anyway).
fn turn_moved_on() -> bool {
    const PROGRESS_LOOK_MS: u64 = 5_000;
    let now = now_ms();
    MARK.with(|cell| {
        let mut cell = cell.borrow_mut();
        if now < cell.0.saturating_add(PROGRESS_LOOK_MS) {
            return false;
        }
        // Growth only (a new turn, or more in the last one): a reloaded page
        // starts a new baseline and moves nothing on by itself.
        let mark = chatgpt_dom::turn_mark(&dom());
        let moved = cell.1.is_some_and(|(turns, len)| mark.0 > turns || (mark.0 == turns && mark.1 > len));
        *cell = (now, Some(mark));
        moved
    })
}

/// Resolves on the next observed mutation, or at `deadline_ms` (a throttled
/// timer is only the ceiling, never the signal).
async fn next_change(deadline_ms: u64) {
    let wait = deadline_ms.saturating_sub(now_ms()).min(i32::MAX as u64) as i32;
    let promise = Promise::new(&mut |resolve, _| {
        WAITERS.with(|w| w.borrow_mut().push(resolve.clone()));
        set_timeout(&resolve, wait);
    });
    let _ = JsFuture::from(promise).await;
}

/// Entry point, called by the content-script loader once the module is up,
/// with the extension API object of the content script's world.
#[wasm_bindgen]
pub fn cs_main(api: JsValue) {
    if api.is_object() {
        super::set_api(api);
    }
    let document = dom().document;
    let observer = MutationObserver::new(Closure::<dyn FnMut()>::new(observe).into_js_value().unchecked_ref())
        .expect("MutationObserver exists");
    let options = MutationObserverInit::new();
    options.set_child_list(true);
    options.set_subtree(true);
    options.set_attributes(true);
    options.set_character_data(true);
    if let Some(root) = document.document_element() {
        let _ = observer.observe_with_options(&root, &options);
    }
    callers::open(callers::OFFERS);
    let visibility = Closure::<dyn FnMut()>::new(observe).into_js_value();
    let _ = document.add_event_listener_with_callback("visibilitychange", visibility.unchecked_ref());
    let on_message = Closure::<dyn FnMut(JsValue, JsValue, Function) -> bool>::new(
        |message: JsValue, _sender: JsValue, respond: Function| {
            let Ok(request) = from_js::<ToPage>(&message) else { return false };
            wasm_bindgen_futures::spawn_local(async move {
                let reply = handle(request).await;
                let _ = respond.call1(&JsValue::NULL, &to_js(&reply));
            });
            true
        },
    );
    if let Ok(on) = super::path(super::api(), "runtime.onMessage") {
        let add: Function = Reflect::get(&on, &"addListener".into()).unwrap().unchecked_into();
        let _ = add.call1(&on, &on_message.into_js_value());
    }
    observe();
}

async fn handle(request: ToPage) -> PageReply {
    match request {
        ToPage::Ping => PageReply::Report(report(&dom())),
        ToPage::Submit(submission) => submit_once(&submission).await,
        // Read-only: the adapter's reading, for the popup's page check.
        ToPage::Inspect => {
            PageReply::Inspection(crate::messages::PageCheck::from_report(&chatgpt_dom::inspect::inspect(&dom())))
        }
        ToPage::Callers { request_id } => {
            callers::look_now(&request_id);
            PageReply::Report(report(&dom()))
        }
        ToPage::Overlay { worker_id } => {
            super::overlay::show(&worker_id);
            PageReply::Report(report(&dom()))
        }
        ToPage::MayClose => match chatgpt_dom::compose::parkable(&dom()) {
            Ok(()) => PageReply::Report(report(&dom())),
            Err(refusal) => PageReply::Refused { code: refusal.code, detail: refusal.detail },
        },
    }
}

/// Caller attribution's isolated side: a private channel to the page
/// script (`static/page.js`, the page's own world), handed over in one
/// window message that the page script takes before any page listener
/// sees it, and what comes back checked before it leaves the tab.
mod callers {
    use std::cell::RefCell;

    use wasm_bindgen::prelude::*;
    use web_sys::{MessageChannel, MessageEvent, MessagePort};

    use super::{call, from_js, to_js};
    use crate::messages::{PageReply, PageRequests};

    /// The window message's tag (the page script's `TAG`).
    const TAG: &str = "chatgpt-orchestrator/callers/1";
    /// How many channels to offer before giving up (a page loaded before
    /// the extension has no page script until it reloads).
    pub(super) const OFFERS: u32 = 10;

    thread_local! {
        static PORT: RefCell<Option<MessagePort>> = const { RefCell::new(None) };
        static READY: RefCell<bool> = const { RefCell::new(false) };
    }

    /// Offers the page script a channel, again each second until it answers.
    pub(super) fn open(offers_left: u32) {
        if READY.with(|r| *r.borrow()) || offers_left == 0 {
            return;
        }
        let Some(window) = web_sys::window() else { return };
        let Ok(channel) = MessageChannel::new() else { return };
        let port = channel.port1();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(received).into_js_value();
        port.set_onmessage(Some(on_message.unchecked_ref()));
        PORT.with(|p| *p.borrow_mut() = Some(port));
        let message = super::super::object(&[("t", TAG.into())]);
        let transfer = js_sys::Array::of1(&channel.port2());
        let origin = window.location().origin().unwrap_or_else(|_| "https://chatgpt.com".into());
        let _ = window.post_message_with_transfer(&message, &origin, &transfer);
        let again = Closure::once_into_js(move || open(offers_left - 1));
        super::set_timeout(again.unchecked_ref(), 1_000);
    }

    /// Asks the page script to look now, for `request_id` above all.
    pub(super) fn look_now(request_id: &str) {
        PORT.with(|p| {
            if let Some(port) = p.borrow().as_ref() {
                let _ = port.post_message(&super::super::object(&[("scan", request_id.into())]));
            }
        });
    }

    fn received(event: MessageEvent) {
        let data = event.data();
        if data.as_string().as_deref() == Some("ready") {
            READY.with(|r| *r.borrow_mut() = true);
            return;
        }
        // Page-world data: its shape, and that it names the conversation
        // this page shows; the executor core then checks the tab's binding.
        let Ok(seen) = from_js::<PageRequests>(&data) else { return };
        let url = web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default();
        let shown = chatgpt_dom::parse_url(&url).and_then(|r| r.conversation).map(|c| c.to_string());
        if shown.as_deref() != Some(seen.conversation.as_str()) {
            return;
        }
        wasm_bindgen_futures::spawn_local(async move {
            let _ = call("runtime.sendMessage", &[to_js(&PageReply::Callers(seen))]).await;
        });
    }
}

/// Submits `prompt` for `key` at most once in this tab, whoever asks and
/// however often: a second request waits for the first, then answers from
/// the records (clicked and confirmed → submitted; clicked only → ambiguous).
async fn submit_once(submission: &Submission) -> PageReply {
    let (key, deadline_ms) = (submission.key.as_str(), submission.deadline_ms);
    while PENDING.with(|p| p.borrow().contains(key)) {
        if now_ms() >= deadline_ms {
            return PageReply::Ambiguous { detail: "another submission of this command is still in progress".into() };
        }
        next_change(deadline_ms).await;
    }
    if records(CONFIRMED).iter().any(|k| k == key) {
        return PageReply::Submitted(report(&dom()));
    }
    if records(SUBMITTED).iter().any(|k| k == key) {
        return PageReply::Ambiguous { detail: "send was clicked earlier but never confirmed".into() };
    }
    PENDING.with(|p| p.borrow_mut().insert(key.to_owned()));
    let reply = submit_fresh(submission).await;
    if matches!(reply, PageReply::Submitted(_)) {
        record(CONFIRMED, key);
    }
    PENDING.with(|p| p.borrow_mut().remove(key));
    reply
}

async fn submit_fresh(submission: &Submission) -> PageReply {
    let Submission { key, prompt, deadline_ms, expect_conversation, conversation, app, model, effort } = submission;
    let (deadline_ms, conversation) = (*deadline_ms, conversation.as_deref());
    let dom = dom();
    if parse_url(&report(&dom).url).is_none() {
        return PageReply::Refused {
            code: ErrorCode::NotConversationPage,
            detail: "the tab shows a chatgpt.com page that is not a chat".into(),
        };
    }
    loop {
        match ready(&dom) {
            Ok(true) => break,
            Ok(false) if now_ms() < deadline_ms => next_change(deadline_ms).await,
            Ok(false) => {
                return PageReply::Refused {
                    code: ErrorCode::DeadlineExceeded,
                    detail: "the page did not become idle".into(),
                };
            }
            Err(refusal) => return PageReply::Refused { code: refusal.code, detail: refusal.detail },
        }
    }
    // The exact conversation, or a new chat for a create: never another page.
    let shown = parse_url(&report(&dom).url).and_then(|r| r.conversation).map(|c| c.to_string());
    if shown.as_deref() != conversation {
        return PageReply::Refused {
            code: ErrorCode::ConversationIdentityDrift,
            detail: "the tab does not show the bound conversation".into(),
        };
    }
    // The app first: a conversation that cannot reach the orchestrator gets no prompt.
    if let Some(label) = app
        && let Err(refusal) = chatgpt_dom::bind::bind(&dom, label, &Until { deadline_ms }).await
    {
        return PageReply::Refused { code: refusal.code, detail: refusal.detail };
    }
    // Then the pinned model, verified: nothing is typed under another one.
    if let Some(label) = model
        && let Err(refusal) = chatgpt_dom::model::pin(&dom, label, &Until { deadline_ms }).await
    {
        return PageReply::Refused { code: refusal.code, detail: refusal.detail };
    }
    // And the thinking effort pinned with it, verified the same way.
    if let Some(label) = effort
        && let Err(refusal) = chatgpt_dom::model::pin_effort(&dom, label, &Until { deadline_ms }).await
    {
        return PageReply::Refused { code: refusal.code, detail: refusal.detail };
    }
    if !record(SUBMITTED, key) {
        return PageReply::Refused {
            code: ErrorCode::BrowserControlUnavailable,
            detail: "cannot record the submission".into(),
        };
    }
    // Type, wait (mutation-driven) for the page's send button, click once.
    let submitted = chatgpt_dom::submit(&dom, prompt, app.as_deref(), &Until { deadline_ms }).await;
    let pressed: Pressed = match submitted {
        Ok(pressed) => pressed,
        Err(refusal) => {
            // Refusals happen before any click: forget the key.
            forget(SUBMITTED, key);
            return PageReply::Refused { code: refusal.code, detail: refusal.detail };
        }
    };
    loop {
        let now = report(&dom);
        let identified = !expect_conversation || parse_url(&now.url).is_some_and(|r| r.conversation.is_some());
        if confirmed(&dom, pressed) && identified {
            return PageReply::Submitted(now);
        }
        if now_ms() >= deadline_ms {
            return PageReply::Ambiguous { detail: "send was clicked but the page did not show the turn".into() };
        }
        next_change(deadline_ms).await;
    }
}
