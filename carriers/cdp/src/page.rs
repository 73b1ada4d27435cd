//! The page side of a managed target: the extension's own content script
//! (the `chatgpt-dom` adapter compiled to wasm, `dist/chromium/pkg`),
//! evaluated by the agent in an isolated world of each target it opened.
//! One locator table, one classifier, the same fail-closed rules and the
//! same exactly-once submission record as in the extension; only the
//! transport differs: a small shim gives the content script the two
//! extension calls it uses (`runtime.sendMessage` for its reports,
//! `runtime.onMessage` for requests), carried over a DevTools binding
//! (page → agent) and `Runtime.evaluate` in that world (agent → page).
//!
//! The page's own scripts cannot reach the isolated world, so they can
//! neither call the binding nor answer for the adapter; whatever arrives
//! is parsed into the typed messages of `extension::messages` and nothing
//! else.

use std::path::Path;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::cdp::js_protocol::runtime::{AddBindingParams, EvaluateParams, ExecutionContextId};
use extension::messages::{PageReply, ToPage};

use crate::cdp::{Cdp, Error};

/// The isolated world the adapter runs in.
pub const WORLD: &str = "chatgpt-orchestrator";
/// The binding the adapter reports through (exists in [`WORLD`] only).
pub const BINDING: &str = "__orchestratorOut";

/// The content script, ready to evaluate in a target, and the page script
/// (`page.js`, caller attribution) for the target's own world.
#[derive(Debug, Clone)]
pub struct Bundle {
    source: String,
    page_script: String,
}

/// Why the bundle cannot be loaded.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the page bundle in {dir}: {why} (build it with `cargo xtask dist`)")]
pub struct BundleError {
    dir: String,
    why: String,
}

impl Bundle {
    /// Loads `extension_cs.js` and `extension_cs_bg.wasm` from `dir` (the
    /// `pkg` folder of `dist/chromium`) and wraps them with the shim.
    pub fn load(dir: &Path) -> Result<Bundle, BundleError> {
        let fail = |why: String| BundleError { dir: dir.display().to_string(), why };
        let glue = std::fs::read_to_string(dir.join("extension_cs.js")).map_err(|e| fail(e.to_string()))?;
        let wasm = std::fs::read(dir.join("extension_cs_bg.wasm")).map_err(|e| fail(e.to_string()))?;
        if !glue.contains("cs_main") || !wasm.starts_with(b"\0asm") {
            return Err(fail("not the extension's content-script build".into()));
        }
        let page_script = std::fs::read_to_string(dir.join("page.js")).map_err(|e| fail(e.to_string()))?;
        Ok(Bundle::new(&glue, &wasm, page_script))
    }

    fn new(glue: &str, wasm: &[u8], page_script: String) -> Bundle {
        let wasm = base64::engine::general_purpose::STANDARD.encode(wasm);
        let source = format!(
            r#"(() => {{
  // As the extension's manifest: chatgpt.com's top document only.
  if (window !== window.top || location.origin !== "https://chatgpt.com") return;
  const say = (kind, body) => globalThis.{BINDING}(JSON.stringify({{ kind, body }}));
  // Isolated worlds are per name, not per DevTools session: an agent that
  // attaches again (a new connection or process) finds the adapter already
  // running here, and only needs to hear that it is.
  if (globalThis.__orchestratorStarted) {{
    if (globalThis.__orchestratorReady) say("ready", null);
    return;
  }}
  globalThis.__orchestratorStarted = true;
  const listeners = [];
  const api = {{ runtime: {{
    sendMessage: (message) => {{ say("page", message); return Promise.resolve(); }},
    onMessage: {{ addListener: (listener) => {{ listeners.push(listener); }} }},
  }} }};
  globalThis.__orchestratorAsk = (json) => new Promise((resolve) => {{
    const message = JSON.parse(json);
    const answered = listeners.some((l) => l(message, {{}}, (reply) => resolve(JSON.stringify(reply))));
    if (!answered) resolve("null");
  }});
{glue}
  const bytes = Uint8Array.from(atob("{wasm}"), (c) => c.charCodeAt(0));
  // Started when the extension's content script would be (`document_idle`):
  // a script for new documents runs before the document has an element to
  // observe, and the adapter's waits are driven by its observer.
  const start = () => {{ wasm_bindgen.cs_main(api); globalThis.__orchestratorReady = true; say("ready", null); }};
  wasm_bindgen({{ module_or_path: bytes }})
    .then(() => {{
      if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start, {{ once: true }});
      else start();
    }})
    .catch((e) => say("failed", String(e)));
}})();
"#
        );
        Bundle { source, page_script }
    }

    /// The script itself.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The script's size, for logs.
    pub fn len(&self) -> usize {
        self.source.len()
    }

    /// Whether the bundle is empty (never, once loaded).
    pub fn is_empty(&self) -> bool {
        self.source.is_empty()
    }
}

/// What a managed target's adapter said through the binding.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// The adapter is up in a new document (its world's context id).
    Ready(ExecutionContextId),
    /// A report or progress from the page.
    Page(PageReply),
    /// The adapter could not start (its message, no page content).
    Failed(String),
}

/// Reads one binding payload from the world with context `context`;
/// `None` for anything that is not one of the adapter's messages.
pub fn read_binding(payload: &str, context: ExecutionContextId) -> Option<Said> {
    #[derive(serde::Deserialize)]
    struct Envelope {
        kind: String,
        #[serde(default)]
        body: serde_json::Value,
    }
    let envelope: Envelope = serde_json::from_str(payload).ok()?;
    match envelope.kind.as_str() {
        "ready" => Some(Said::Ready(context)),
        "page" => serde_json::from_value(envelope.body).ok().map(Said::Page),
        "failed" => Some(Said::Failed(envelope.body.as_str().unwrap_or_default().chars().take(200).collect())),
        _ => None,
    }
}

/// Makes the adapter run in every document of the target of `session`,
/// from now on and in the document it shows now.
pub async fn install(cdp: &Cdp, session: &SessionId, bundle: &Bundle) -> Result<(), Error> {
    // Scripts for new documents run only while the Page domain is enabled,
    // and binding calls are reported only while the Runtime domain is.
    cdp.call(Some(session), chromiumoxide::cdp::browser_protocol::page::EnableParams::default()).await?;
    cdp.call(Some(session), chromiumoxide::cdp::js_protocol::runtime::EnableParams::default()).await?;
    // A managed target is a background tab; typing into its editor needs
    // the focus a person's tab would have (the extension's tabs get it
    // from the browser; a DevTools session asks for it, for this target only).
    let focus = chromiumoxide::cdp::browser_protocol::emulation::SetFocusEmulationEnabledParams::new(true);
    cdp.call(Some(session), focus).await?;
    let binding = AddBindingParams::builder().name(BINDING).execution_context_name(WORLD).build().expect("name set");
    cdp.call(Some(session), binding).await?;
    let script = AddScriptToEvaluateOnNewDocumentParams::builder()
        .source(bundle.source.clone())
        .world_name(WORLD)
        .run_immediately(true)
        .build()
        .expect("source set");
    cdp.call(Some(session), script).await?;
    // The page script reads the page's own data (caller attribution): it
    // runs in the page's world, as the extension's `world: MAIN` script.
    let page = AddScriptToEvaluateOnNewDocumentParams::builder()
        .source(bundle.page_script.clone())
        .run_immediately(true)
        .build()
        .expect("source set");
    cdp.call(Some(session), page).await?;
    Ok(())
}

/// Asks the adapter in the world with context `context`, waiting at most
/// `within` for the page's typed answer.
pub async fn ask(
    cdp: &Cdp,
    session: &SessionId,
    context: ExecutionContextId,
    request: &ToPage,
    within: std::time::Duration,
) -> Result<PageReply, Error> {
    let json = serde_json::to_string(&serde_json::to_string(request).expect("requests serialize")).expect("a string");
    let evaluate = EvaluateParams::builder()
        .expression(format!("globalThis.__orchestratorAsk({json})"))
        .context_id(context)
        .await_promise(true)
        .return_by_value(true)
        .build()
        .expect("expression set");
    let answer = cdp.call_within(within, Some(session), evaluate).await?;
    if answer.exception_details.is_some() {
        return Err(Error::Refused { method: "Runtime.evaluate".into(), message: "the adapter threw".into() });
    }
    let text = answer.result.value.as_ref().and_then(|v| v.as_str()).unwrap_or("null");
    serde_json::from_str(text).map_err(|_| Error::Unreadable("the adapter's answer".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_wraps_the_content_script_and_its_module() {
        let bundle =
            Bundle::new("let wasm_bindgen = (function(){ /* cs_main */ })();", b"\0asm\x01\0\0\0", "/* page */".into());
        assert!(bundle.source.contains("window !== window.top"), "the top document only");
        assert!(bundle.source.contains(BINDING) && bundle.source.contains("__orchestratorAsk"));
        assert!(bundle.source.contains("AGFzbQEAAAA="), "the module inline");
    }

    #[test]
    fn only_the_adapters_messages_are_read() {
        let context = ExecutionContextId::new(7);
        assert_eq!(read_binding(r#"{"kind":"ready","body":null}"#, context), Some(Said::Ready(context)));
        assert_eq!(
            read_binding(r#"{"kind":"page","body":{"kind":"progress"}}"#, context),
            Some(Said::Page(PageReply::Progress))
        );
        let report = r#"{"kind":"page","body":{"kind":"report","url":"https://chatgpt.com/","state":"idle"}}"#;
        assert!(matches!(read_binding(report, context), Some(Said::Page(PageReply::Report(_)))));
        assert_eq!(read_binding(r#"{"kind":"page","body":{"kind":"eval","code":"x"}}"#, context), None);
        assert_eq!(read_binding("not json", context), None);
        assert_eq!(read_binding(r#"{"kind":"other"}"#, context), None);
    }
}
