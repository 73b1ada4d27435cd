//! The overlay in a managed tab (seed §17.3): a closed Shadow DOM host, so
//! neither ChatGPT's styles nor its scripts reach it and it depends on none
//! of ChatGPT's components. Collapsed by default to one line ("● Working ·
//! Attempt 4") at the top right, below ChatGPT's header and clear of the
//! composer; only its own box takes pointer events. Keys and input typed in
//! it stop at its box (they would otherwise bubble out of the shadow root to
//! ChatGPT's own shortcuts); a page's capture-phase listeners still see them,
//! so an answer typed here is not secret from the page (the popup's is). A
//! click opens a drawer with the worker's state and the popup's controls.
//! Built with DOM calls (no HTML strings), so a page's Trusted Types policy
//! has nothing to say. It re-renders only when what it shows changed.

use std::cell::RefCell;

use js_sys::{Function, Reflect};
use protocol::operator::{Action, View, Worker};
use wasm_bindgen::prelude::*;
use web_sys::{Document, Element, HtmlInputElement, ShadowRoot, ShadowRootInit, ShadowRootMode};

use super::{call, from_js, now_ms, storage_get, to_js};
use crate::messages::{FromOverlay, Settings};
use crate::operator::{collapsed, controls, duration, find};

const STYLE: &str = ":host{all:initial}\
.box{position:fixed;top:64px;right:16px;z-index:2147483646;max-width:22rem;font:13px/1.4 system-ui,sans-serif;color:#111}\
button{font:inherit;cursor:pointer;border:1px solid #444;border-radius:6px;background:#fff;color:#111;padding:2px 8px;margin:2px 4px 2px 0}\
button:focus-visible,input:focus-visible{outline:3px solid #1a56db;outline-offset:2px}\
.pill{border-radius:999px;box-shadow:0 1px 4px rgba(0,0,0,.25);padding:3px 10px}\
.drawer{margin-top:6px;background:#fff;border:1px solid #444;border-radius:8px;padding:8px 10px;box-shadow:0 2px 10px rgba(0,0,0,.25)}\
.drawer h2{font-size:14px;margin:0 0 4px}.drawer p{margin:2px 0}.drawer ul{margin:4px 0;padding-left:18px;color:#333}.stop{border-color:#8a1c00;color:#8a1c00}\
button[aria-pressed=true]{background:#e8f0fe}input{font:inherit;width:12rem}\
@media (prefers-reduced-motion:reduce){*{transition:none!important;animation:none!important}}";

struct Overlay {
    host: Element,
    root: ShadowRoot,
    worker_id: String,
    open: bool,
    /// The answer being typed survives re-renders.
    draft: String,
    /// What it shows now (worker, drawer open, hidden): nothing else re-renders it.
    shown: Option<(Option<Worker>, bool, bool)>,
}

thread_local! {
    static OVERLAY: RefCell<Option<Overlay>> = const { RefCell::new(None) };
}

fn document() -> Document {
    web_sys::window().and_then(|w| w.document()).expect("a page has a document")
}

/// Shows the overlay for `worker_id` (the background says this tab is its
/// managed tab); again for the same worker changes nothing.
pub(super) fn show(worker_id: &str) {
    let fresh = OVERLAY.with(|o| {
        let mut o = o.borrow_mut();
        if o.as_ref().is_some_and(|o| o.worker_id == worker_id && o.host.is_connected()) {
            return false;
        }
        if let Some(old) = o.take() {
            old.host.remove();
        }
        let document = document();
        let Ok(host) = document.create_element("div") else { return false };
        let _ = host.set_attribute("data-orchestrator-overlay", "");
        let Ok(root) = host.attach_shadow(&ShadowRootInit::new(ShadowRootMode::Closed)) else { return false };
        if let Some(html) = document.document_element() {
            let _ = html.append_child(&host);
        }
        *o = Some(Overlay {
            host,
            root,
            worker_id: worker_id.to_owned(),
            open: false,
            draft: String::new(),
            shown: None,
        });
        true
    });
    if fresh {
        listen_once();
        wasm_bindgen_futures::spawn_local(refresh());
    }
}

/// Re-renders on every change of the view or the settings.
fn listen_once() {
    thread_local!(static LISTENING: RefCell<bool> = const { RefCell::new(false) });
    if LISTENING.with(|l| l.replace(true)) {
        return;
    }
    let listener = Closure::<dyn FnMut(JsValue)>::new(|changes: JsValue| {
        let ours = ["operator", "settings"].iter().any(|k| Reflect::has(&changes, &(*k).into()).unwrap_or(false));
        if ours {
            wasm_bindgen_futures::spawn_local(refresh());
        }
    })
    .into_js_value();
    if let Ok(on) = super::path(super::api(), "storage.onChanged") {
        let add: Function = Reflect::get(&on, &"addListener".into()).unwrap().unchecked_into();
        let _ = add.call1(&on, &listener);
    }
}

async fn refresh() {
    let view: View = match storage_get("local", "operator").await {
        Some(v) => from_js(&v).unwrap_or_default(),
        None => View::default(),
    };
    let settings: Settings = match storage_get("local", "settings").await {
        Some(v) => from_js(&v).unwrap_or_default(),
        None => Settings::default(),
    };
    OVERLAY.with(|o| {
        if let Some(o) = o.borrow_mut().as_mut() {
            render(o, &view, &settings);
        }
    });
}

fn el(document: &Document, tag: &str, attrs: &[(&str, &str)], text: &str) -> Element {
    let e = document.create_element(tag).expect("a known tag");
    for (name, value) in attrs {
        let _ = e.set_attribute(name, value);
    }
    if !text.is_empty() {
        e.set_text_content(Some(text));
    }
    e
}

fn render(o: &mut Overlay, view: &View, settings: &Settings) {
    let worker = find(view, &o.worker_id).map(|(_, w)| w.clone());
    let now = (worker.clone(), o.open, settings.hide_overlay);
    if o.shown.as_ref() == Some(&now) {
        return;
    }
    o.shown = Some(now);
    // Keep what a person is typing across live refreshes.
    if let Ok(Some(input)) = o.root.query_selector("input") {
        o.draft = input.unchecked_into::<HtmlInputElement>().value();
    }
    let focused = o.root.active_element().and_then(|e| e.get_attribute("data-key"));
    while let Some(child) = o.root.first_child() {
        let _ = o.root.remove_child(&child);
    }
    o.host.toggle_attribute_with_force("hidden", settings.hide_overlay || worker.is_none()).ok();
    let Some(w) = worker else { return };
    let d = document();
    let style = el(&d, "style", &[], STYLE);
    let boxed = el(&d, "div", &[("class", "box")], "");
    let line = format!("Orchestrated · {}", collapsed(&w));
    let pill = el(
        &d,
        "button",
        &[
            ("class", "pill"),
            ("data-key", "pill"),
            ("aria-expanded", if o.open { "true" } else { "false" }),
            ("aria-controls", "drawer"),
            ("aria-label", &format!("{line}: {}", if o.open { "hide details" } else { "show details" })),
        ],
        &line,
    );
    on_click(&pill, None);
    let _ = boxed.append_child(&pill);
    if o.open {
        let _ = boxed.append_child(&drawer(&d, &w, &o.draft));
    }
    let _ = o.root.append_child(&style);
    let _ = o.root.append_child(&boxed);
    // What is typed here stays here; Escape closes the drawer.
    let keys = Closure::<dyn FnMut(web_sys::Event)>::new(|e: web_sys::Event| {
        e.stop_propagation();
        if e.type_() == "keydown" && e.dyn_ref::<web_sys::KeyboardEvent>().is_some_and(|k| k.key() == "Escape") {
            toggle(Some(false));
        }
    })
    .into_js_value();
    for kind in ["keydown", "keyup", "keypress", "beforeinput", "input", "paste"] {
        let _ = boxed.add_event_listener_with_callback(kind, keys.unchecked_ref());
    }
    if let Some(key) = focused
        && let Ok(Some(again)) = o.root.query_selector(&format!("[data-key=\"{key}\"]"))
    {
        let _ = again.unchecked_into::<web_sys::HtmlElement>().focus();
    }
}

fn drawer(d: &Document, w: &Worker, draft: &str) -> Element {
    let drawer = el(
        d,
        "div",
        &[
            ("id", "drawer"),
            ("class", "drawer"),
            ("role", "region"),
            ("aria-label", &format!("Orchestrator: {}", w.path)),
        ],
        "",
    );
    let _ = drawer.append_child(&el(d, "h2", &[], &w.path));
    let since = duration(now_ms(), w.since_ms);
    for line in [
        format!("{} · for {since}", w.status.label()),
        w.why.clone(),
        w.attempts_label(),
        w.conversation_label(),
        format!("Auto Resume {}", if w.auto_resume { "on" } else { "off" }),
    ] {
        if !line.is_empty() {
            let _ = drawer.append_child(&el(d, "p", &[], &line));
        }
    }
    if w.answerable {
        if let Some(context) = w.ask.as_ref().and_then(|a| a.context.as_deref()) {
            let _ = drawer.append_child(&el(d, "p", &[], context));
        }
        let answer = el(d, "p", &[], "");
        for (i, choice) in w.ask.iter().flat_map(|a| &a.choices).enumerate() {
            let b = el(
                d,
                "button",
                &[("data-key", &format!("choice-{i}")), ("aria-label", &format!("Answer: {choice}"))],
                choice,
            );
            on_click(&b, Some((Action::Answer, Some(choice.clone()))));
            let _ = answer.append_child(&b);
        }
        let label = el(d, "label", &[], "Answer ");
        let input = el(
            d,
            "input",
            &[
                ("type", "text"),
                ("maxlength", "16384"),
                ("data-key", "answer"),
                ("aria-label", &format!("Answer {}", w.path)),
            ],
            "",
        );
        input.clone().unchecked_into::<HtmlInputElement>().set_value(draft);
        let _ = label.append_child(&input);
        let send =
            el(d, "button", &[("data-key", "send"), ("aria-label", &format!("Send the answer to {}", w.path))], "Send");
        on_click(&send, Some((Action::Answer, None)));
        let _ = answer.append_child(&label);
        let _ = answer.append_child(&send);
        let _ = drawer.append_child(&answer);
    }
    if !w.recent.is_empty() {
        let list = el(d, "ul", &[("aria-label", "Recent Execution Continuity events")], "");
        for event in w.recent.iter().rev() {
            let line = format!("{} · {} ago", event.words(), duration(now_ms(), event.at_ms));
            let _ = list.append_child(&el(d, "li", &[], &line));
        }
        let _ = drawer.append_child(&list);
    }
    let row = el(d, "p", &[], "");
    for (action, label) in controls(w) {
        let key = serde_json::to_value(action).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let mut attrs = vec![("data-key", key.as_str())];
        match action {
            Action::AutoResumeOff => attrs.push(("aria-pressed", "true")),
            Action::AutoResumeOn => attrs.push(("aria-pressed", "false")),
            Action::Stop => attrs.push(("class", "stop")),
            _ => {}
        }
        let b = el(d, "button", &attrs, label);
        on_click(&b, Some((action, None)));
        let _ = row.append_child(&b);
    }
    let _ = drawer.append_child(&row);
    drawer
}

/// Opens or closes the drawer (`None`: the other way).
fn toggle(open: Option<bool>) {
    OVERLAY.with(|o| {
        if let Some(o) = o.borrow_mut().as_mut() {
            o.open = open.unwrap_or(!o.open);
            o.shown = None;
        }
    });
    wasm_bindgen_futures::spawn_local(refresh());
}

/// A button's click: the pill toggles; a control goes to the background,
/// which sends it for this tab's worker only.
fn on_click(button: &Element, act: Option<(Action, Option<String>)>) {
    let handler = Closure::<dyn FnMut(web_sys::Event)>::new(move |e: web_sys::Event| {
        e.stop_propagation();
        let Some((action, choice)) = act.clone() else {
            toggle(None);
            return;
        };
        let text = match (action, choice) {
            (Action::Answer, Some(choice)) => Some(choice),
            (Action::Answer, None) => {
                let typed = OVERLAY.with(|o| {
                    let o = o.borrow();
                    let input = o.as_ref()?.root.query_selector("input").ok()??;
                    Some(input.unchecked_into::<HtmlInputElement>().value())
                });
                match typed.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()) {
                    Some(t) => Some(t),
                    None => return,
                }
            }
            _ => None,
        };
        // The worker this overlay shows: the background refuses any other.
        let worker_id = OVERLAY.with(|o| {
            let mut o = o.borrow_mut();
            let o = o.as_mut()?;
            if action == Action::Answer {
                o.draft.clear();
                if let Ok(Some(input)) = o.root.query_selector("input") {
                    input.unchecked_into::<HtmlInputElement>().set_value("");
                }
            }
            Some(o.worker_id.clone())
        });
        let Some(worker_id) = worker_id else { return };
        let message = to_js(&FromOverlay::Act { worker_id, action, text });
        wasm_bindgen_futures::spawn_local(async move {
            let _ = call("runtime.sendMessage", &[message]).await;
        });
    })
    .into_js_value();
    let _ = button.add_event_listener_with_callback("click", handler.unchecked_ref());
}
