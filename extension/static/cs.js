// Content-script loader. `pkg/extension_cs.js` (listed before this file) is
// the classic-script build of the Rust module: it defines `wasm_bindgen` in
// the content script's own world, so neither the page's realm nor its CSP
// for scripts is involved (only Chromium applies the page CSP to wasm).
(async () => {
  const api = globalThis.browser ?? globalThis.chrome;
  await wasm_bindgen({ module_or_path: api.runtime.getURL("pkg/extension_cs_bg.wasm") });
  wasm_bindgen.cs_main(api);
})().catch((e) => console.error("orchestrator content script failed to start:", e));
