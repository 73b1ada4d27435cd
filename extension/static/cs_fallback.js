// Chromium's build only (Firefox compiles the content script's WebAssembly
// whatever the page's CSP, and has no use for this): imports the content
// script's WebAssembly-free build (`pkg/extension_cs_js.js`, wasm2js) for
// the loader, `cs.js`, listed after this file in the same content script,
// so both run in the one isolated world.
function orchestratorImportFallback(api) {
  return import(api.runtime.getURL("pkg/extension_cs_js.js"));
}
