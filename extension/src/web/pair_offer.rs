//! The pairing page's side of `orchestrator setup`
//! (`protocol::executor::pair_offer`): it shows a code, asks the daemon
//! on this computer for a credential over `/executor/pair`, and saves the
//! pairing once the person accepts the same code at `setup`. No daemon or
//! no setup waiting: it asks again every few seconds while the page is open.

use std::cell::Cell;

use js_sys::{Function, Promise, Reflect, Uint8Array};
use protocol::executor::pair_offer::{NAME_MAX, PATH, PairAnswer, PairRefusal, PairRequest, WINDOW_MOST_MS, code_from};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::{MessageEvent, WebSocket};

use super::{set_timeout, sleep, storage_set, to_js};

/// Where the daemon listens unless told otherwise (`serve`'s default).
pub(super) const DEFAULT_ENDPOINT: &str = "ws://127.0.0.1:7777/executor";

/// The wait between two requests nobody answered.
const AGAIN_MS: i32 = 3_000;

thread_local! {
    /// The page's latest offer: a new one (the button, another endpoint)
    /// ends the one before at its next pass.
    static LATEST: Cell<u32> = const { Cell::new(0) };
}

/// Offers this browser to the `setup` on this computer, at `endpoint`'s
/// daemon, until it is accepted or declined or a newer offer replaces it;
/// `say` shows how it goes.
pub(super) async fn offer(endpoint: String, say: impl Fn(&str, &str)) {
    let this = LATEST.with(|l| l.get().wrapping_add(1));
    LATEST.with(|l| l.set(this));
    let current = || LATEST.with(|l| l.get()) == this;
    let Some(pair_url) = pair_url(&endpoint) else {
        say("", "the endpoint must be ws://127.0.0.1:<port>/executor");
        return;
    };
    let code = code_from(random_bytes());
    let request = PairRequest { code: code.clone(), browser: agent(), release: env!("CARGO_PKG_VERSION").into() };
    while current() {
        say(&code, &format!("waiting for `orchestrator setup` at {endpoint} to accept this code…"));
        // A credential that came is kept even when a newer offer replaced
        // this one (a setup accepted it); anything else ends a replaced offer.
        let answer = ask(&pair_url, &request).await;
        if !current() && !matches!(answer, Some(PairAnswer::Paired { .. })) {
            return;
        }
        match answer {
            Some(PairAnswer::Paired { executor_id, credential }) => {
                match super::pages::check_pairing(&endpoint, &credential) {
                    Ok(pairing) => match storage_set("local", "pairing", to_js(&pairing)).await {
                        Ok(()) => say(&code, &format!("paired as {executor_id}; connecting…")),
                        Err(_) => say(&code, "paired, but the browser could not save it: run setup again"),
                    },
                    Err(why) => say(&code, why),
                }
                break;
            }
            Some(PairAnswer::Refused { reason: PairRefusal::Declined, detail }) => {
                say(&code, &format!("{detail}; press the button to ask again"));
                break;
            }
            Some(PairAnswer::Refused { detail, .. }) => say(&code, &format!("{detail}; asking again…")),
            None => say(&code, &format!("no orchestrator answers at {endpoint} yet; asking again…")),
        }
        sleep(AGAIN_MS).await;
    }
}

/// `/executor/pair` beside a loopback `ws://` endpoint, or `None` for any
/// other endpoint (the pairing check's rules: the credential stays local).
fn pair_url(endpoint: &str) -> Option<String> {
    let parts = super::url_parts(endpoint)?;
    crate::pairing::check_endpoint(&parts).ok()?;
    let url = web_sys::Url::new(endpoint).ok()?;
    url.set_pathname(PATH);
    url.set_search("");
    url.set_hash("");
    Some(url.href())
}

/// One request on a fresh socket: the daemon's answer, or `None` when no
/// daemon answers, the socket closes first, or a setup's longest window passed.
async fn ask(pair_url: &str, request: &PairRequest) -> Option<PairAnswer> {
    let socket = WebSocket::new(pair_url).ok()?;
    let text = serde_json::to_string(request).ok()?;
    let answered = Promise::new(&mut |resolve: Function, _| {
        let (on_message, on_close) = (resolve.clone(), resolve.clone());
        let (sender, text) = (socket.clone(), text.clone());
        let open = Closure::once_into_js(move || {
            let _ = sender.send_with_str(&text);
        });
        let message = Closure::once_into_js(move |event: MessageEvent| {
            let _ = on_message.call1(&JsValue::NULL, &event.data());
        });
        let close = Closure::once_into_js(move || {
            let _ = on_close.call0(&JsValue::NULL);
        });
        socket.set_onopen(Some(open.unchecked_ref()));
        socket.set_onmessage(Some(message.unchecked_ref()));
        socket.set_onclose(Some(close.unchecked_ref()));
        set_timeout(&resolve, WINDOW_MOST_MS as i32 + 30_000);
    });
    let answer = JsFuture::from(answered).await.ok().and_then(|v| v.as_string());
    let _ = socket.close();
    serde_json::from_str(&answer?).ok()
}

/// Eight bytes from the platform's CSPRNG.
fn random_bytes() -> [u8; 8] {
    let array = Uint8Array::new_with_length(8);
    if let Ok(crypto) = Reflect::get(&js_sys::global(), &"crypto".into())
        && let Ok(fill) = Reflect::get(&crypto, &"getRandomValues".into()).and_then(|f| f.dyn_into::<Function>())
    {
        let _ = fill.call1(&crypto, &array);
    }
    let mut bytes = [0u8; 8];
    array.copy_to(&mut bytes);
    bytes
}

/// The user agent, cut to the request's bound (setup shows its product token).
fn agent() -> String {
    let navigator = Reflect::get(&js_sys::global(), &"navigator".into()).unwrap_or(JsValue::UNDEFINED);
    let agent = Reflect::get(&navigator, &"userAgent".into()).ok().and_then(|a| a.as_string()).unwrap_or_default();
    let cut: String = agent.chars().filter(|c| !c.is_control()).take(NAME_MAX).collect();
    let mut end = cut.len().min(NAME_MAX);
    while !cut.is_char_boundary(end) {
        end -= 1;
    }
    cut[..end].to_owned()
}
