// Content-script loader. `pkg/extension_cs.js` (listed before this file) is
// the classic-script build of the Rust module: it defines `wasm_bindgen` in
// the content script's own world, so neither the page's realm nor its CSP
// for scripts is involved.
//
// Chromium does apply the page's CSP to WebAssembly in content scripts: on
// a page whose CSP lacks 'wasm-unsafe-eval' the module does not compile
// (`WebAssembly.CompileError`). The loader then imports the same Rust
// compiled to JavaScript (`pkg/extension_cs_js.js`, through `cs_fallback.js`:
// both in Chromium's build only, as Firefox compiles the module whatever
// the page's CSP). If neither starts, it answers every request of the
// background with why (`not_started`, `messages::NotStarted`), so a command
// fails at once with the reason instead of waiting out its deadline for a
// silent page.
(async () => {
  const api = globalThis.browser ?? globalThis.chrome;
  let wasmBlocked = false;
  try {
    try {
      await wasm_bindgen({ module_or_path: api.runtime.getURL("pkg/extension_cs_bg.wasm") });
    } catch (e) {
      if (!(e instanceof WebAssembly.CompileError)) throw e;
      wasmBlocked = true;
      if (typeof orchestratorImportFallback !== "function") {
        throw new Error("this browser's build has no WebAssembly-free build");
      }
      await orchestratorImportFallback(api);
      await wasm_bindgen_js();
      wasm_bindgen_js.cs_main(api);
      console.info("orchestrator: the page's CSP blocks WebAssembly; the adapter runs its WebAssembly-free build");
      return;
    }
    wasm_bindgen.cs_main(api);
  } catch (e) {
    console.error("orchestrator content script failed to start:", e);
    const reply = { kind: "not_started", wasmBlocked, error: String(e).slice(0, 300) };
    api.runtime.onMessage.addListener((_message, _sender, respond) => {
      respond(reply);
    });
  }
})();
