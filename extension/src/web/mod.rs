//! Browser glue (wasm32 only): the extension APIs reached dynamically
//! through `browser` (Firefox) or `chrome` (Chromium), both promise-based
//! under Manifest V3, and JSON bridging between serde types and JS objects.

mod background;
mod content;
mod overlay;
mod pages;
mod pair_offer;

use js_sys::{Array, Function, JSON, Promise, Reflect};
use serde::Serialize;
use serde::de::DeserializeOwned;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::JsFuture;

thread_local! {
    /// The extension API object when the loader hands it over (content scripts).
    static API: std::cell::RefCell<Option<JsValue>> = const { std::cell::RefCell::new(None) };
}

/// Uses `api` as the extension API from now on in this context.
fn set_api(api: JsValue) {
    API.with(|a| *a.borrow_mut() = Some(api));
}

/// The extension API: the one handed over, else `browser` where it exists
/// (Firefox), else `chrome`.
fn api() -> JsValue {
    if let Some(api) = API.with(|a| a.borrow().clone()) {
        return api;
    }
    let global = js_sys::global();
    match Reflect::get(&global, &"browser".into()) {
        Ok(browser) if browser.is_object() => browser,
        _ => Reflect::get(&global, &"chrome".into()).unwrap_or(JsValue::UNDEFINED),
    }
}

/// The platform URL parser's reading of `text` (`new URL(text)`).
fn url_parts(text: &str) -> Option<crate::pairing::UrlParts> {
    let url = web_sys::Url::new(text).ok()?;
    Some(crate::pairing::UrlParts {
        protocol: url.protocol(),
        username: url.username(),
        password: url.password(),
        hostname: url.hostname(),
    })
}

/// Follows a dotted path from `root`.
fn path(root: JsValue, dotted: &str) -> Result<JsValue, JsValue> {
    dotted.split('.').try_fold(root, |object, key| Reflect::get(&object, &key.into()))
}

/// Calls `api.<dotted>(args…)` and awaits the promise it returns.
async fn call(dotted: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    match invoke(dotted, args)?.dyn_into::<Promise>() {
        Ok(promise) => JsFuture::from(promise).await,
        Err(value) => Ok(value),
    }
}

/// [`call`], given up (an error) after `ms`: a message to a frozen tab is
/// never answered, and no wait may last for ever.
async fn call_within(dotted: &str, args: &[JsValue], ms: i32) -> Result<JsValue, JsValue> {
    match invoke(dotted, args)?.dyn_into::<Promise>() {
        Ok(promise) => {
            let expired = Promise::new(&mut |_, reject| {
                set_timeout(&reject, ms);
            });
            JsFuture::from(Promise::race(&Array::of2(&promise, &expired))).await
        }
        Err(value) => Ok(value),
    }
}

/// `api.<dotted>(args…)`, as it returns.
fn invoke(dotted: &str, args: &[JsValue]) -> Result<JsValue, JsValue> {
    let (owner, method) = dotted.rsplit_once('.').expect("api paths have an owner");
    let this = path(api(), owner)?;
    let function: Function = Reflect::get(&this, &method.into())?.dyn_into()?;
    Reflect::apply(&function, &this, &args.iter().collect::<Array>())
}

fn to_js<T: Serialize>(value: &T) -> JsValue {
    JSON::parse(&serde_json::to_string(value).expect("our types serialize")).expect("serde_json writes JSON")
}

fn from_js<T: DeserializeOwned>(value: &JsValue) -> Result<T, String> {
    let text: String = JSON::stringify(value).map_err(|_| "not JSON".to_owned())?.into();
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// A plain object from key/value pairs.
fn object(pairs: &[(&str, JsValue)]) -> JsValue {
    let object = js_sys::Object::new();
    for (key, value) in pairs {
        Reflect::set(&object, &(*key).into(), value).expect("setting on a fresh object");
    }
    object.into()
}

fn now_ms() -> u64 {
    js_sys::Date::now() as u64
}

/// `setTimeout` in whatever global this is (window or worker).
fn set_timeout(callback: &Function, ms: i32) -> i32 {
    let set: Function = Reflect::get(&js_sys::global(), &"setTimeout".into()).unwrap().unchecked_into();
    set.call2(&JsValue::NULL, callback, &ms.into()).ok().and_then(|id| id.as_f64()).unwrap_or(0.0) as i32
}

async fn sleep(ms: i32) {
    let promise = Promise::new(&mut |resolve, _| {
        set_timeout(&resolve, ms);
    });
    let _ = JsFuture::from(promise).await;
}

/// A random 128-bit hex string from the platform's CSPRNG.
fn random_hex() -> String {
    let crypto = Reflect::get(&js_sys::global(), &"crypto".into()).unwrap();
    let uuid: Function = Reflect::get(&crypto, &"randomUUID".into()).unwrap().unchecked_into();
    uuid.call0(&crypto).unwrap().as_string().unwrap_or_default().replace('-', "")
}

/// Reads one key of `storage.<area>`.
async fn storage_get(area: &str, key: &str) -> Option<JsValue> {
    let items = call(&format!("storage.{area}.get"), &[key.into()]).await.ok()?;
    Reflect::get(&items, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null())
}

async fn storage_set(area: &str, key: &str, value: JsValue) -> Result<(), JsValue> {
    call(&format!("storage.{area}.set"), &[object(&[(key, value)])]).await.map(|_| ())
}
