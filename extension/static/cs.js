// Content-script loader: content scripts cannot be modules, so the Rust
// module is imported dynamically from the extension's own files.
(async () => {
  const api = globalThis.browser ?? globalThis.chrome;
  const ext = await import(api.runtime.getURL("pkg/extension.js"));
  await ext.default({ module_or_path: api.runtime.getURL("pkg/extension_bg.wasm") });
  ext.cs_main();
})();
