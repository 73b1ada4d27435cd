//! The options page (endpoint, token, connection status, managed workers)
//! and the popup (connected?, workers and their states). Both render the
//! status the background publishes in `storage.local`.

use js_sys::{Function, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{Document, HtmlInputElement};

use protocol::operator::{Action, View};

use super::background::{Pairing, Status};
use super::{call, from_js, storage_get, storage_set, to_js};
use crate::messages::{FromPopup, Settings};

fn document() -> Document {
    web_sys::window().and_then(|w| w.document()).expect("extension pages have a document")
}

fn set_text(id: &str, text: &str) {
    if let Some(element) = document().get_element_by_id(id) {
        element.set_text_content(Some(text));
    }
}

fn input(id: &str) -> Option<HtmlInputElement> {
    document().get_element_by_id(id)?.dyn_into().ok()
}

/// Accepts only a loopback `ws://` endpoint, as the platform's URL parser
/// reads it, and a credential of `orchestrator pair`'s form: the daemon is
/// local, and the credential must never travel anywhere else.
pub(super) fn check_pairing(endpoint: &str, token: &str) -> Result<Pairing, &'static str> {
    let parts = super::url_parts(endpoint).ok_or("the endpoint is not a URL")?;
    crate::pairing::check_endpoint(&parts)?;
    crate::pairing::check_credential(token)?;
    Ok(Pairing { endpoint: endpoint.into(), token: token.into() })
}

async fn render_status() {
    let status: Status = match storage_get("local", "status").await {
        Some(value) => from_js(&value).unwrap_or_default(),
        None => Status::default(),
    };
    set_text("connection", if status.connection.is_empty() { "starting" } else { &status.connection });
    set_text("executor-id", &status.executor_id);
    let workers: Vec<String> = status
        .workers
        .iter()
        .map(|w| {
            let state = w.state.map(|s| format!("{s:?}").to_lowercase()).unwrap_or_else(|| "unknown".into());
            let conversation = w.conversation_id.as_deref().unwrap_or("(not bound yet)");
            let tab = w.tab.map_or("no tab".to_owned(), |t| format!("tab {t}"));
            format!("{} · {conversation} · {tab} · {state}", w.worker_id)
        })
        .collect();
    set_text("workers", &if workers.is_empty() { "no managed workers".to_owned() } else { workers.join("\n") });
}

fn rerender_on_change() {
    let listener = Closure::<dyn FnMut()>::new(|| wasm_bindgen_futures::spawn_local(render_status())).into_js_value();
    if let Ok(on) = super::path(super::api(), "storage.onChanged") {
        let add: Function = Reflect::get(&on, &"addListener".into()).unwrap().unchecked_into();
        let _ = add.call1(&on, &listener);
    }
}

/// The two settings' checkboxes: shown as saved, saved on change.
async fn settings_form() {
    let settings: Settings = storage_get("local", "settings").await.and_then(|v| from_js(&v).ok()).unwrap_or_default();
    for (id, on) in [("hide-overlay", settings.hide_overlay), ("no-notifications", settings.no_notifications)] {
        if let Some(checkbox) = input(id) {
            checkbox.set_checked(on);
            let save = Closure::<dyn FnMut()>::new(|| {
                let checked = |id: &str| input(id).is_some_and(|i| i.checked());
                let settings =
                    Settings { hide_overlay: checked("hide-overlay"), no_notifications: checked("no-notifications") };
                wasm_bindgen_futures::spawn_local(async move {
                    let _ = storage_set("local", "settings", to_js(&settings)).await;
                });
            })
            .into_js_value();
            let _ = checkbox.add_event_listener_with_callback("change", save.unchecked_ref());
        }
    }
}

/// Shows how pairing with `orchestrator setup` goes: its code, in words.
fn say_offer(code: &str, status: &str) {
    if !code.is_empty() {
        set_text("setup-code", code);
    }
    set_text("setup-status", status);
}

/// The endpoint field's value, else the daemon's default.
fn endpoint_or_default() -> String {
    let typed = input("endpoint").map(|i| i.value().trim().to_owned()).unwrap_or_default();
    if typed.is_empty() { super::pair_offer::DEFAULT_ENDPOINT.to_owned() } else { typed }
}

/// The options page. Not paired yet, it offers itself to `orchestrator
/// setup` at once (a fresh install opens it); the button offers again.
#[wasm_bindgen]
pub async fn options_main() {
    let paired = storage_get("local", "pairing").await.and_then(|value| from_js::<Pairing>(&value).ok());
    if let Some(pairing) = &paired
        && let Some(endpoint) = input("endpoint")
    {
        endpoint.set_value(&pairing.endpoint);
    }
    let offer = Closure::<dyn FnMut()>::new(|| {
        wasm_bindgen_futures::spawn_local(super::pair_offer::offer(endpoint_or_default(), say_offer));
    })
    .into_js_value();
    if let Some(button) = document().get_element_by_id("setup-pair") {
        let _ = button.add_event_listener_with_callback("click", offer.unchecked_ref());
    }
    if paired.is_none() {
        wasm_bindgen_futures::spawn_local(super::pair_offer::offer(endpoint_or_default(), say_offer));
    }
    let save = Closure::<dyn FnMut(web_sys::Event)>::new(|event: web_sys::Event| {
        event.prevent_default();
        let endpoint = input("endpoint").map(|i| i.value()).unwrap_or_default();
        let token = input("token").map(|i| i.value()).unwrap_or_default();
        match check_pairing(endpoint.trim(), token.trim()) {
            Ok(pairing) => wasm_bindgen_futures::spawn_local(async move {
                match storage_set("local", "pairing", to_js(&pairing)).await {
                    Ok(()) => set_text("message", "saved; connecting…"),
                    Err(_) => set_text("message", "could not save"),
                }
                if let Some(token) = input("token") {
                    token.set_value("");
                }
            }),
            Err(why) => set_text("message", why),
        }
    })
    .into_js_value();
    if let Some(form) = document().get_element_by_id("pairing") {
        let _ = form.add_event_listener_with_callback("submit", save.unchecked_ref());
    }
    settings_form().await;
    rerender_on_change();
    render_status().await;
    // Tells automation (and people reading the DOM) that the form is live and the status shown.
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-ready", "");
    }
}

/// The chatgpt.com tab the person is looking at: the active tab of the
/// popup's window, else (the popup opened as a page of its own) the most
/// recently used active chatgpt.com tab.
async fn current_chatgpt_tab() -> Option<(f64, String)> {
    let pick = |tabs: JsValue| -> Vec<(f64, String, f64)> {
        let tabs: js_sys::Array = tabs.dyn_into().unwrap_or_default();
        tabs.iter()
            .filter_map(|t| {
                let id = Reflect::get(&t, &"id".into()).ok()?.as_f64()?;
                let url = Reflect::get(&t, &"url".into()).ok()?.as_string()?;
                let used = Reflect::get(&t, &"lastAccessed".into()).ok().and_then(|v| v.as_f64()).unwrap_or(0.0);
                url.starts_with("https://chatgpt.com/").then_some((id, url, used))
            })
            .collect()
    };
    let here = super::object(&[("active", true.into()), ("currentWindow", true.into())]);
    if let Some((id, url, _)) = call("tabs.query", &[here]).await.ok().map(pick).and_then(|t| t.into_iter().next()) {
        return Some((id, url));
    }
    let anywhere = super::object(&[("active", true.into()), ("url", "https://chatgpt.com/*".into())]);
    let mut tabs = call("tabs.query", &[anywhere]).await.ok().map(pick).unwrap_or_default();
    tabs.sort_by(|a, b| b.2.total_cmp(&a.2));
    tabs.into_iter().next().map(|(id, url, _)| (id, url))
}

/// "Check this page": asks the page's content script how this build's
/// adapter reads it (read-only: nothing is clicked or typed) and shows it.
async fn check_page() {
    set_text("page-check", "checking…");
    let Some((tab, url)) = current_chatgpt_tab().await else {
        set_text("page-check", "no chatgpt.com tab is active");
        return;
    };
    let request = to_js(&crate::messages::ToPage::Inspect);
    let text = match call("tabs.sendMessage", &[tab.into(), request]).await.map(|r| from_js(&r)) {
        Ok(Ok(crate::messages::PageReply::Inspection(check))) => format!("{url}\n{}", check.render()),
        Ok(Ok(crate::messages::PageReply::NotStarted(why))) => format!("{url}\nADAPTER_BLOCKED: {}", why.detail()),
        _ => "this page's content script does not answer (reload the tab)".to_owned(),
    };
    set_text("page-check", &text);
}

/// "Block this chat" / "Unblock": the person tells the daemon (through
/// the background's session) that the chat in the current tab must stop
/// calling tools, or may again. Only a chat the extension manages has a
/// worker to block.
async fn block_chat(blocked: bool) {
    let Some((tab, _)) = current_chatgpt_tab().await else {
        set_text("block-status", "no chatgpt.com tab is active");
        return;
    };
    let request = to_js(&FromPopup::Block { tab, blocked });
    let sent = call("runtime.sendMessage", &[request]).await.is_ok();
    let said = match (sent, blocked) {
        (false, _) => "the extension's background did not answer",
        (true, true) => "asked to block: if it is a managed chat, its tool calls are refused until unblocked",
        (true, false) => "asked to unblock",
    };
    set_text("block-status", &format!("tab {tab}: {said}"));
}

/// Whether a person is in an answer box now (a live refresh waits for them).
fn typing() -> bool {
    document().active_element().is_some_and(|a| a.has_attribute("data-answer"))
}

/// The answers typed so far, by worker, and the focused control: a live
/// refresh puts them back.
fn keep() -> (Vec<(String, String)>, Option<String>) {
    let mut typed = Vec::new();
    if let Ok(inputs) = document().query_selector_all("input[data-answer]") {
        for input in (0..inputs.length()).filter_map(|i| inputs.item(i)?.dyn_into::<HtmlInputElement>().ok()) {
            if !input.value().is_empty() {
                typed.push((input.get_attribute("data-answer").unwrap_or_default(), input.value()));
            }
        }
    }
    let focused = document().active_element().filter(|e| e.tag_name() == "BUTTON").map(|b| {
        ["data-worker", "data-run", "data-act", "data-choice", "data-open"]
            .iter()
            .filter_map(|k| b.get_attribute(k).map(|v| format!("[{k}=\"{}\"]", v.replace('"', "\\\""))))
            .collect::<String>()
    });
    (typed, focused.filter(|f| !f.is_empty()))
}

fn restore((typed, focused): (Vec<(String, String)>, Option<String>)) {
    for (worker, text) in typed {
        if let Ok(Some(input)) = document().query_selector(&format!("input[data-answer=\"{worker}\"]"))
            && let Ok(input) = input.dyn_into::<HtmlInputElement>()
        {
            input.set_value(&text);
        }
    }
    if let Some(selector) = focused
        && let Ok(Some(button)) = document().query_selector(&format!("button{selector}"))
        && let Ok(button) = button.dyn_into::<web_sys::HtmlElement>()
    {
        let _ = button.focus();
    }
}

/// The popup's live part, from the daemon's view (seed §17.2).
async fn render_popup() {
    let status: Status = storage_get("local", "status").await.and_then(|v| from_js(&v).ok()).unwrap_or_default();
    let (live, words) = crate::operator::connection_words(&status.connection);
    // Written only when it changes: it is a live region.
    if let Some(line) = document().get_element_by_id("connection")
        && line.text_content().as_deref() != Some(words.as_str())
    {
        line.set_text_content(Some(&words));
        let _ = line.set_attribute("class", if live { "live" } else { "" });
    }
    set_text("executor-id", &status.executor_id);
    if typing() {
        return;
    }
    let html = match storage_get("local", "operator").await.and_then(|v| from_js::<View>(&v).ok()) {
        Some(view) => {
            let current_tab = current_chatgpt_tab().await.map(|(tab, _)| tab as i32);
            let current =
                status.workers.iter().find(|w| w.tab.is_some() && w.tab == current_tab).map(|w| w.worker_id.clone());
            let has_tab = |id: &str| status.workers.iter().any(|w| w.worker_id == id && w.tab.is_some());
            crate::operator::popup_html(&view, super::now_ms(), current.as_deref(), &has_tab)
        }
        // No view without a live connection (no controls over a pool not
        // heard from), or without the pairing's grant.
        None if live => "<section><p>This browser's pairing shows no pool. To see and steer it here, pair \
                         again with <code>orchestrator pair --operator</code>.</p></section>"
            .to_owned(),
        None => "<section><p>The pool shows here once the orchestrator is connected.</p></section>".to_owned(),
    };
    if let Some(main) = document().get_element_by_id("live") {
        let kept = keep();
        main.set_inner_html(&html);
        restore(kept);
    }
}

/// How the last control went, in words.
async fn render_acted() {
    let Some(acted) = storage_get("local", "acted").await else { return };
    let field = |k: &str| Reflect::get(&acted, &k.into()).ok();
    let error = field("error").and_then(|e| e.as_string()).unwrap_or_default();
    let text = if error.is_empty() {
        let changed = field("changed").and_then(|c| c.as_f64()).unwrap_or(0.0);
        if changed > 0.0 { "Done.".to_owned() } else { "Nothing to change: it was already so.".to_owned() }
    } else {
        // A refused control can be used again at once.
        if let Ok(buttons) = document().query_selector_all("#live button[disabled]") {
            for b in (0..buttons.length()).filter_map(|i| buttons.item(i)?.dyn_into::<web_sys::Element>().ok()) {
                let _ = b.remove_attribute("disabled");
            }
        }
        format!("Refused ({error}): {}", field("detail").and_then(|d| d.as_string()).unwrap_or_default())
    };
    set_text("acted", &text);
}

/// A click on a control in the live part: sent to the background, which
/// sends it to the daemon.
fn on_control(event: web_sys::Event) {
    let Some(button) = event
        .target()
        .and_then(|t| t.dyn_into::<web_sys::Element>().ok())
        .and_then(|e| e.closest("button").ok().flatten())
    else {
        return;
    };
    let data = |k: &str| button.get_attribute(k);
    if let (Some(worker_id), Some(_)) = (data("data-worker"), data("data-open")) {
        send(FromPopup::Open { worker_id });
        return;
    }
    let Some(action) = data("data-act").and_then(|a| serde_json::from_value::<Action>(a.into()).ok()) else { return };
    // One click, one act: the control waits for the next view.
    let _ = button.set_attribute("disabled", "");
    let worker_id = data("data-worker");
    let mut text = None;
    if action == Action::Answer {
        // This button's own box (a worker can be listed twice: the current tab's, and in its run).
        text = data("data-choice").or_else(|| {
            let input = button.closest(".answer").ok()??.query_selector("input").ok()??;
            let typed = input.dyn_into::<HtmlInputElement>().ok()?.value().trim().to_owned();
            (!typed.is_empty()).then_some(typed)
        });
        if text.is_none() {
            let _ = button.remove_attribute("disabled");
            set_text("acted", "Write the answer first.");
            return;
        }
    }
    set_text("acted", "Sending…");
    send(FromPopup::Act { action, worker_id, run_id: data("data-run"), text });
}

fn send(message: FromPopup) {
    let message = to_js(&message);
    wasm_bindgen_futures::spawn_local(async move {
        if call("runtime.sendMessage", &[message]).await.is_err() {
            set_text("acted", "The extension's background did not answer.");
        }
    });
}

/// The popup.
#[wasm_bindgen]
pub async fn popup_main() {
    // Only what the popup shows: the journal and the registry change often.
    let listener = Closure::<dyn FnMut(JsValue)>::new(|changes: JsValue| {
        let has = |k: &str| Reflect::has(&changes, &k.into()).unwrap_or(false);
        let (pool, acted) = (has("operator") || has("status"), has("acted"));
        wasm_bindgen_futures::spawn_local(async move {
            if pool {
                render_popup().await;
            }
            if acted {
                render_acted().await;
            }
        })
    })
    .into_js_value();
    if let Ok(on) = super::path(super::api(), "storage.onChanged") {
        let add: Function = Reflect::get(&on, &"addListener".into()).unwrap().unchecked_into();
        let _ = add.call1(&on, &listener);
    }
    render_popup().await;
    let controls = Closure::<dyn FnMut(web_sys::Event)>::new(on_control).into_js_value();
    if let Some(main) = document().get_element_by_id("live") {
        let _ = main.add_event_listener_with_callback("click", controls.unchecked_ref());
    }
    let check = Closure::<dyn FnMut()>::new(|| wasm_bindgen_futures::spawn_local(check_page())).into_js_value();
    if let Some(button) = document().get_element_by_id("check") {
        let _ = button.add_event_listener_with_callback("click", check.unchecked_ref());
    }
    let open = Closure::<dyn FnMut()>::new(|| {
        wasm_bindgen_futures::spawn_local(async {
            let _ = call("runtime.openOptionsPage", &[]).await;
        })
    })
    .into_js_value();
    if let Some(link) = document().get_element_by_id("options") {
        let _ = link.add_event_listener_with_callback("click", open.unchecked_ref());
    }
    for (id, blocked) in [("block", true), ("unblock", false)] {
        let act =
            Closure::<dyn FnMut()>::new(move || wasm_bindgen_futures::spawn_local(block_chat(blocked))).into_js_value();
        if let Some(button) = document().get_element_by_id(id) {
            let _ = button.add_event_listener_with_callback("click", act.unchecked_ref());
        }
    }
    if let Some(body) = document().body() {
        let _ = body.set_attribute("data-ready", "");
    }
}
