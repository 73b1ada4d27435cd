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
//!
//! Chromium applies the page's CSP to WebAssembly in this world too: on a
//! page whose CSP lacks `'wasm-unsafe-eval'` the module does not compile.
//! The shim then starts the content script's WebAssembly-free build
//! (`extension_cs_js.js`, wasm2js), as the extension's loader does; if
//! neither starts it says why at once ([`Said::Failed`]), and the agent
//! fails the command waiting on that page with `ADAPTER_BLOCKED`.

use std::path::Path;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use chromiumoxide::cdp::browser_protocol::target::SessionId;
use chromiumoxide::cdp::js_protocol::runtime::{AddBindingParams, EvaluateParams, ExecutionContextId};
use extension::messages::{NotStarted, PageReply, ToPage};

use crate::cdp::{Cdp, Error};

/// The isolated world the adapter runs in.
pub const WORLD: &str = "chatgpt-orchestrator";
/// The binding the adapter reports through (exists in [`WORLD`] only).
pub const BINDING: &str = "__orchestratorOut";
/// The content script's WebAssembly-free build in a bundle directory
/// (`cargo xtask dist` writes it; a bundle without it runs where the page
/// allows WebAssembly only).
pub const FALLBACK: &str = "extension_cs_js.js";
/// What the adapter logs in its page's console when it runs the
/// WebAssembly-free build (the extension's loader logs the same).
pub const FALLBACK_NOTICE: &str =
    "orchestrator: the page's CSP blocks WebAssembly; the adapter runs its WebAssembly-free build";

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
    /// A bundle with nothing to run, for tests that reach no page.
    #[cfg(test)]
    pub(crate) fn empty() -> Bundle {
        Bundle { source: String::new(), page_script: String::new() }
    }

    /// Loads `extension_cs.js` and `extension_cs_bg.wasm` from `dir` (the
    /// `pkg` folder of `dist/chromium`), and its WebAssembly-free build
    /// when there is one, and wraps them with the shim.
    pub fn load(dir: &Path) -> Result<Bundle, BundleError> {
        let fail = |why: String| BundleError { dir: dir.display().to_string(), why };
        let glue = std::fs::read_to_string(dir.join("extension_cs.js")).map_err(|e| fail(e.to_string()))?;
        let wasm = std::fs::read(dir.join("extension_cs_bg.wasm")).map_err(|e| fail(e.to_string()))?;
        if !glue.contains("cs_main") || !wasm.starts_with(b"\0asm") {
            return Err(fail("not the extension's content-script build".into()));
        }
        let fallback = match std::fs::read_to_string(dir.join(FALLBACK)) {
            Ok(script) if script.contains("globalThis.wasm_bindgen_js =") && script.contains("cs_main") => Some(script),
            Ok(_) => return Err(fail(format!("{FALLBACK} is not the content script's WebAssembly-free build"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(fail(e.to_string())),
        };
        let page_script = std::fs::read_to_string(dir.join("page.js")).map_err(|e| fail(e.to_string()))?;
        Ok(Bundle::new(&glue, &wasm, fallback.as_deref(), page_script))
    }

    fn new(glue: &str, wasm: &[u8], fallback: Option<&str>, page_script: String) -> Bundle {
        let wasm = base64::engine::general_purpose::STANDARD.encode(wasm);
        // Inside a function that runs only when the module does not compile:
        // every document parses the function's text lazily, not its code.
        let fallback = match fallback {
            Some(script) => format!("() => {{\n{script}\n}}"),
            None => "null".to_owned(),
        };
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
  const fallback = {fallback};
  // Started when the extension's content script would be (`document_idle`):
  // a script for new documents runs before the document has an element to
  // observe, and the adapter's waits are driven by its observer.
  const loaded = () => new Promise((resolve) => {{
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", resolve, {{ once: true }});
    else resolve();
  }});
  let wasmBlocked = false;
  (async () => {{
    let main;
    try {{
      await wasm_bindgen({{ module_or_path: bytes }});
      main = wasm_bindgen.cs_main;
    }} catch (e) {{
      if (!(e instanceof WebAssembly.CompileError)) throw e;
      wasmBlocked = true;
      if (fallback === null) throw new Error("the bundle has no WebAssembly-free build (rebuild it: cargo xtask dist)");
      fallback();
      await wasm_bindgen_js();
      main = wasm_bindgen_js.cs_main;
      console.info({notice});
    }}
    await loaded();
    main(api);
    globalThis.__orchestratorReady = true;
    say("ready", null);
  }})().catch((e) => say("failed", {{ wasmBlocked, error: String(e).slice(0, 300) }}));
}})();
"#,
            notice = serde_json::to_string(FALLBACK_NOTICE).expect("a string"),
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
    /// The adapter could not start (why, as the shim caught it).
    Failed(NotStarted),
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
        "failed" => serde_json::from_value(envelope.body).ok().map(Said::Failed),
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
        let glue = "let wasm_bindgen = (function(){ /* cs_main */ })();";
        let bundle = Bundle::new(glue, b"\0asm\x01\0\0\0", None, "/* page */".into());
        assert!(bundle.source.contains("window !== window.top"), "the top document only");
        assert!(bundle.source.contains(BINDING) && bundle.source.contains("__orchestratorAsk"));
        assert!(bundle.source.contains("AGFzbQEAAAA="), "the module inline");
        assert!(bundle.source.contains("const fallback = null;"), "no WebAssembly-free build in this bundle");
        // With one, it is defined in the shim and run only if the module does not compile.
        let script = "globalThis.wasm_bindgen_js = (function () { /* cs_main */ })();";
        let bundle = Bundle::new(glue, b"\0asm\x01\0\0\0", Some(script), "/* page */".into());
        assert!(bundle.source.contains(&format!("const fallback = () => {{\n{script}\n}};")));
        assert!(bundle.source.contains("e instanceof WebAssembly.CompileError"));
        // One notice for both carriers: the extension's loader says the same.
        assert!(include_str!("../../../extension/static/cs.js").contains(FALLBACK_NOTICE));
    }

    #[test]
    fn a_bundle_directory_without_the_fallback_loads_and_a_foreign_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("extension_cs.js"), "let wasm_bindgen; /* cs_main */").unwrap();
        std::fs::write(dir.path().join("extension_cs_bg.wasm"), b"\0asm\x01\0\0\0").unwrap();
        std::fs::write(dir.path().join("page.js"), "/* page */").unwrap();
        assert!(Bundle::load(dir.path()).unwrap().source.contains("const fallback = null;"));
        std::fs::write(dir.path().join(FALLBACK), "alert(1)").unwrap();
        let refused = Bundle::load(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("WebAssembly-free"), "{refused}");
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
        let failed = r#"{"kind":"failed","body":{"wasmBlocked":true,"error":"CompileError: no"}}"#;
        let why = NotStarted { wasm_blocked: true, error: "CompileError: no".into() };
        assert_eq!(read_binding(failed, context), Some(Said::Failed(why)));
    }
}
