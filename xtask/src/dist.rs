//! `cargo xtask dist`: one Rust source, two extension builds.
//!
//! 1. `cargo build -p extension --target wasm32-unknown-unknown --profile wasm-release`
//! 2. `wasm-bindgen --target web` (the CLI pinned to the crate's version)
//! 3. binaryen's `wasm-opt -Oz`
//! 4. the content script's WebAssembly-free build ([`wasm2js`]), for
//!    Chromium only: Chromium applies a page's CSP to WebAssembly in content
//!    scripts (and in the CDP agent's world), and a CSP without
//!    `'wasm-unsafe-eval'` keeps the real module from compiling there.
//! 5. `dist/firefox/` (MV3 event page, `browser_specific_settings.gecko`) and
//!    `dist/chromium/` (MV3 service worker, a fixed `key` so the id is
//!    stable), each with the loaders, pages and the module.
//!
//! Permissions are justified one by one in `docs/permissions.md`.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use serde_json::{Value, json};

use crate::{root, run, target_dir};

/// The add-on id Firefox knows the extension by.
pub const GECKO_ID: &str = "executor@chatgpt-orchestrator.local";
/// The pinned wasm-bindgen version (crate and CLI must match).
pub const WASM_BINDGEN: &str = "0.2.130";
/// The content script's WebAssembly-free build, in `pkg/` of `dist/chromium`
/// (the extension's loader imports it, the CDP agent evaluates it).
pub const FALLBACK: &str = "extension_cs_js.js";
/// The wasm features the Rust standard library is built with (it is not
/// rebuilt for `target-cpu=mvp`): binaryen must accept them to read it.
const FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-bulk-memory-opt",
    "--enable-nontrapping-float-to-int",
    "--enable-sign-ext",
    "--enable-mutable-globals",
    "--enable-multivalue",
];
const STATIC: &[&str] = &["bg.js", "cs.js", "options.html", "options.js", "popup.html", "popup.js"];

fn common(version: &str) -> Value {
    json!({
        "manifest_version": 3,
        "name": "ChatGPT orchestrator executor",
        "version": version,
        "description": "Runs the local orchestrator's worker conversations in managed chatgpt.com tabs.",
        "permissions": ["storage", "alarms", "notifications"],
        "host_permissions": ["https://chatgpt.com/*"],
        // The page script (caller attribution) runs in the page's own world
        // from the start, before any page script; the adapter in the
        // isolated world once the document is idle (docs/permissions.md).
        "content_scripts": [{
            "matches": ["https://chatgpt.com/*"],
            "js": ["pkg/page.js"],
            "run_at": "document_start",
            "world": "MAIN"
        }, {
            "matches": ["https://chatgpt.com/*"],
            "js": ["pkg/extension_cs.js", "cs.js"],
            "run_at": "document_idle"
        }],
        "web_accessible_resources": [{
            "resources": ["pkg/extension_cs_bg.wasm"],
            "matches": ["https://chatgpt.com/*"]
        }],
        "options_ui": { "page": "options.html", "open_in_tab": true },
        "action": { "default_popup": "popup.html", "default_title": "Orchestrator executor" },
        // connect-src: the extension's own files, and WebSockets to loopback only
        // (the daemon); nothing else, whatever a pairing says. (CSP has no
        // syntax for an IPv6 literal, so `[::1]` endpoints are not offered.)
        "content_security_policy": { "extension_pages": "script-src 'self' 'wasm-unsafe-eval'; object-src 'self'; connect-src 'self' ws://127.0.0.1:* ws://localhost:*" }
    })
}

/// The Firefox manifest: an event page.
pub fn firefox_manifest(version: &str) -> Value {
    let mut manifest = common(version);
    manifest["background"] = json!({ "scripts": ["bg.js"], "type": "module" });
    manifest["browser_specific_settings"] = json!({
        "gecko": {
            "id": GECKO_ID,
            "strict_min_version": "140.0",
            "data_collection_permissions": { "required": ["none"] }
        }
    });
    manifest
}

/// The Chromium manifest: a module service worker and a fixed key.
pub fn chromium_manifest(version: &str, key: &str) -> Value {
    let mut manifest = common(version);
    manifest["background"] = json!({ "service_worker": "bg.js", "type": "module" });
    manifest["minimum_chrome_version"] = json!("116");
    manifest["key"] = json!(key);
    // The fixed id must not be probeable by pages: a per-session URL instead.
    manifest["web_accessible_resources"][0]["use_dynamic_url"] = json!(true);
    manifest
}

/// The loader's importer of the WebAssembly-free build, in Chromium's
/// build only (a dynamic `import()` Firefox never needs, and its linter flags).
const FALLBACK_LOADER: &str = "cs_fallback.js";

/// The Chromium manifest with the WebAssembly-free content script: its
/// importer runs before the loader in the same content script, and the
/// build is reachable to its `import()` (from the page's origin, as every
/// web-accessible resource).
fn with_fallback(mut manifest: Value) -> Value {
    manifest["content_scripts"][1]["js"] = json!(["pkg/extension_cs.js", FALLBACK_LOADER, "cs.js"]);
    manifest["web_accessible_resources"][0]["resources"]
        .as_array_mut()
        .expect("the resources are a list")
        .push(json!(format!("pkg/{FALLBACK}")));
    manifest
}

fn copy_into(dir: &Path, pkg: &Path, manifest: &Value, fallback: Option<&Path>) -> anyhow::Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    std::fs::create_dir_all(dir.join("pkg"))?;
    let statics = root().join("extension/static");
    for file in STATIC {
        std::fs::copy(statics.join(file), dir.join(file)).with_context(|| format!("copying {file}"))?;
    }
    for file in ["extension.js", "extension_bg.wasm", "extension_cs.js", "extension_cs_bg.wasm"] {
        std::fs::copy(pkg.join(file), dir.join("pkg").join(file)).with_context(|| format!("copying {file}"))?;
    }
    // Beside the adapter's build, so the CDP agent's bundle (`pkg/`) has it too.
    std::fs::copy(statics.join("page.js"), dir.join("pkg/page.js")).context("copying page.js")?;
    if let Some(fallback) = fallback {
        std::fs::copy(fallback, dir.join("pkg").join(FALLBACK)).context("copying the wasm2js build")?;
        std::fs::copy(statics.join(FALLBACK_LOADER), dir.join(FALLBACK_LOADER)).context("copying its importer")?;
    }
    std::fs::write(dir.join("manifest.json"), serde_json::to_string_pretty(manifest)? + "\n")?;
    Ok(())
}

/// Builds `dist/firefox` and `dist/chromium`.
pub fn dist() -> anyhow::Result<()> {
    let target = target_dir();
    run(Command::new("cargo").args([
        "build",
        "-p",
        "extension",
        "--target",
        "wasm32-unknown-unknown",
        "--profile",
        "wasm-release",
    ]))?;
    let wasm = target.join("wasm32-unknown-unknown/wasm-release/extension.wasm");
    let pkg = target.join("extension-pkg");
    // Pages and the background load an ES module; content scripts cannot
    // (Firefox evaluates a dynamically imported module in the page's realm,
    // under the page's CSP), so they get a classic-script build of the same wasm.
    for (target, name) in [("web", "extension"), ("no-modules", "extension_cs")] {
        run(Command::new("wasm-bindgen")
            .args(["--target", target, "--out-name", name, "--no-typescript", "--out-dir"])
            .arg(&pkg)
            .arg(&wasm))?;
        let optimized = pkg.join(format!("{name}_bg.wasm"));
        run(Command::new(root().join("extension/node_modules/.bin/wasm-opt"))
            .args(["-Oz", "--enable-bulk-memory", "--enable-nontrapping-float-to-int", "--enable-sign-ext"])
            .arg(&optimized)
            .arg("-o")
            .arg(&optimized))?;
    }
    let optimized = pkg.join("extension_bg.wasm");
    let fallback = wasm2js(&target)?;
    let version = env!("CARGO_PKG_VERSION");
    let key = std::fs::read_to_string(root().join("extension/static/chromium-key.txt"))?;
    // Firefox runs the real module in content scripts whatever the page's CSP: no fallback there.
    copy_into(&root().join("dist/firefox"), &pkg, &firefox_manifest(version), None)?;
    let chromium = with_fallback(chromium_manifest(version, key.trim()));
    copy_into(&root().join("dist/chromium"), &pkg, &chromium, Some(&fallback))?;
    let size = std::fs::metadata(&optimized)?.len();
    let js = std::fs::metadata(&fallback)?.len();
    eprintln!("xtask: dist/firefox and dist/chromium (wasm {} KiB, wasm2js {} KiB)", size / 1024, js / 1024);
    // What a person installs, packed as a bundle packs it (`dist/packed`).
    // The CRX is signed with a throwaway key here; a release signs with the project's.
    let key = crate::release::throwaway_key()?;
    crate::release::extensions(&root().join("dist"), &crate::release::packed_dir(), Some(&key))?;
    Ok(())
}

/// Builds the content script's WebAssembly-free fallback and returns its
/// path: the same Rust for the MVP wasm feature set (wasm2js reads no
/// reference types), in a profile of its own so the two builds never
/// invalidate each other, with symbols stripped; wasm-bindgen's classic
/// glue for it; binaryen's `wasm-opt` and `wasm2js`; then both joined
/// into one script ([`classic_fallback`]).
fn wasm2js(target: &Path) -> anyhow::Result<std::path::PathBuf> {
    // The profile is given on the command line (it inherits the release
    // profile of the workspace manifest and differs only in `strip`).
    run(Command::new("cargo")
        .args(["build", "-p", "extension", "--target", "wasm32-unknown-unknown", "--profile", "wasm2js"])
        .args(["--config", "profile.wasm2js.inherits=\"wasm-release\"", "--config", "profile.wasm2js.strip=true"])
        .env("RUSTFLAGS", "-C target-cpu=mvp")
        .env_remove("CARGO_ENCODED_RUSTFLAGS"))?;
    let wasm = target.join("wasm32-unknown-unknown/wasm2js/extension.wasm");
    let out = target.join("extension-pkg-js");
    run(Command::new("wasm-bindgen")
        .args(["--target", "no-modules", "--out-name", "extension_cs_js", "--no-typescript", "--out-dir"])
        .arg(&out)
        .arg(&wasm))?;
    let module = out.join("extension_cs_js_bg.wasm");
    let bin = root().join("extension/node_modules/.bin");
    run(Command::new(bin.join("wasm-opt")).arg("-Oz").args(FEATURES).arg(&module).arg("-o").arg(&module))?;
    let compiled = out.join("extension_cs_js_bg.wasm.js");
    run(Command::new(bin.join("wasm2js")).args(FEATURES).arg("-Oz").arg(&module).arg("-o").arg(&compiled))?;
    let glue = std::fs::read_to_string(out.join("extension_cs_js.js"))?;
    let script = classic_fallback(&glue, &std::fs::read_to_string(&compiled)?)?;
    let file = out.join(FALLBACK);
    std::fs::write(&file, script)?;
    Ok(file)
}

/// Joins wasm2js's output (an ES module: one namespace import of the glue,
/// the compiled `asmFunc(imports)`, then exports of its result) and
/// wasm-bindgen's no-modules glue into one script that is valid both as a
/// classic script (the CDP agent evaluates it) and as a module (the
/// extension's loader imports it): it only sets `wasm_bindgen_js`, the
/// glue's init function (called without arguments) with its exports. The
/// glue is handed a `WebAssembly` whose `instantiate` runs the compiled
/// function on the glue's own imports. Fails on output of another shape
/// (binaryen and wasm-bindgen are pinned; a new version must be looked at).
fn classic_fallback(glue: &str, compiled: &str) -> anyhow::Result<String> {
    // wasm2js splits i64 into two i32 at the boundary; the glue would pass BigInts.
    anyhow::ensure!(!glue.contains("BigInt"), "the glue passes 64-bit integers, which wasm2js cannot take");
    anyhow::ensure!(glue.starts_with("let wasm_bindgen = ("), "not wasm-bindgen's no-modules glue");
    let body = compiled.strip_prefix("import * as ").context("wasm2js output without its import line")?;
    let body = &body[body.find('\n').context("wasm2js output of one line")?..];
    anyhow::ensure!(!body.contains("\nimport "), "wasm2js output with more than one import");
    let end = body.find("\nvar retasmFunc = asmFunc(").context("wasm2js output without its instantiation")?;
    let body = detach_on_growth(&body[..end])?;
    Ok(format!(
        "// The content script's WebAssembly-free build (cargo xtask dist): the same\n\
         // Rust, compiled to JavaScript by binaryen's wasm2js, under wasm-bindgen's\n\
         // own glue. Used where a page's CSP keeps WebAssembly from compiling.\n\
         globalThis.wasm_bindgen_js = (function (WebAssembly) {{\n{body}\n{glue}\n\
         return Object.assign(() => wasm_bindgen({{ module_or_path: asmFunc }}), wasm_bindgen);\n\
         }})({{\n\
         \x20 instantiate: async (compiled, imports) => ({{ instance: {{ exports: compiled(imports) }}, module: compiled }}),\n\
         \x20 // Nothing is an instance of it: the glue takes the pair above as it is.\n\
         \x20 Instance: function Instance() {{}},\n\
         }});\n"
    ))
}

/// wasm2js grows memory by copying into a new buffer and leaves the old
/// one usable, where WebAssembly detaches it; the glue keeps views on the
/// old buffer until it sees one detached, and would then read and write
/// stale memory. `ArrayBuffer.prototype.transfer` copies and detaches.
fn detach_on_growth(body: &str) -> anyhow::Result<String> {
    const NEW: &str = "var newBuffer = new ArrayBuffer(";
    const COPY: [&str; 2] = ["var newHEAP8 = new Int8Array(newBuffer);", "newHEAP8.set(HEAP8);"];
    anyhow::ensure!(body.matches(NEW).count() == 1, "wasm2js output without one memory growth");
    let start = body.find(NEW).expect("counted");
    let size_end = start + body[start..].find(");").context("an unterminated growth")?;
    let size = &body[start + NEW.len()..size_end];
    let mut rest = &body[size_end + 2..];
    for statement in COPY {
        rest = rest.trim_start().strip_prefix(statement).context("wasm2js grows memory in an unknown way")?;
    }
    Ok(format!("{}var newBuffer = buffer.transfer({size});{rest}", &body[..start]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_ask_for_the_minimal_permissions() {
        for manifest in [firefox_manifest("0.1.0"), chromium_manifest("0.1.0", "k")] {
            assert_eq!(manifest["permissions"], json!(["storage", "alarms", "notifications"]));
            assert_eq!(manifest["host_permissions"], json!(["https://chatgpt.com/*"]));
            let text = manifest.to_string();
            for forbidden in ["<all_urls>", "debugger", "cookies", "webRequest"] {
                assert!(!text.contains(forbidden), "{forbidden}");
            }
            // WebSockets to loopback only, whatever a pairing says.
            let csp = manifest["content_security_policy"]["extension_pages"].as_str().unwrap();
            let connect = csp.split(';').find(|d| d.trim().starts_with("connect-src")).expect("a connect-src");
            assert_eq!(connect.trim(), "connect-src 'self' ws://127.0.0.1:* ws://localhost:*");
        }
        // The fixed Chromium id is not probeable through web-accessible resources.
        let chromium = chromium_manifest("0.1.0", "k");
        assert_eq!(chromium["web_accessible_resources"][0]["use_dynamic_url"], json!(true));
        let chromium = with_fallback(chromium);
        let resources = &chromium["web_accessible_resources"][0]["resources"];
        assert_eq!(resources, &json!(["pkg/extension_cs_bg.wasm", "pkg/extension_cs_js.js"]));
        let loaders = &chromium["content_scripts"][1]["js"];
        assert_eq!(loaders, &json!(["pkg/extension_cs.js", "cs_fallback.js", "cs.js"]));
    }

    /// The shapes of wasm-bindgen 0.2.130's no-modules glue and binaryen
    /// 132's wasm2js output, cut down to what the join reads.
    const GLUE: &str = "let wasm_bindgen = (function(exports) {\n    return Object.assign(__wbg_init, { initSync }, exports);\n})({ __proto__: null });\n";
    const COMPILED: &str = "import * as $_extension_cs_js_bg_js from './extension_cs_js_bg.js';\n\
        \n  var bufferView;\nfunction asmFunc(imports) {\n var buffer = new ArrayBuffer(1114112);\n\
        \x20function __wasm_memory_grow(pagesToAdd) {\n\
        \x20  if ((oldPages < newPages) && (newPages < 65536)) {\n\
        \x20  var newBuffer = new ArrayBuffer(newPages << 16);\n\
        \x20  var newHEAP8 = new Int8Array(newBuffer);\n\
        \x20  newHEAP8.set(HEAP8);\n\
        \x20  HEAP8 = new Int8Array(newBuffer);\n\
        \x20  }\n }\n}\n\
        \nvar retasmFunc = asmFunc({\n  \"./extension_cs_js_bg.js\": $_extension_cs_js_bg_js,\n});\n\
        export var memory = retasmFunc.memory;\nexport var cs_main = retasmFunc.cs_main;\n";

    #[test]
    fn the_fallback_is_one_script_setting_one_global_with_growth_that_detaches() {
        let script = classic_fallback(GLUE, COMPILED).unwrap();
        assert!(script.contains("globalThis.wasm_bindgen_js = (function (WebAssembly) {"), "{script}");
        // Neither an import nor an export is left: a classic script and a module alike.
        for line in script.lines() {
            assert!(!line.starts_with("import ") && !line.starts_with("export "), "{line}");
        }
        assert!(script.contains("function asmFunc(imports)") && script.contains(GLUE.trim_end()));
        assert!(
            script.contains("var newBuffer = buffer.transfer(newPages << 16);\n   HEAP8 = new Int8Array(newBuffer);")
        );
        assert!(!script.contains("newHEAP8") && !script.contains("retasmFunc"), "{script}");
        assert!(script.contains("wasm_bindgen({ module_or_path: asmFunc })"));
    }

    #[test]
    fn output_of_another_shape_is_refused_rather_than_joined_blindly() {
        let no_growth = COMPILED.replace("var newBuffer = new ArrayBuffer(newPages << 16);", "");
        assert!(classic_fallback(GLUE, &no_growth).is_err());
        let other_copy = COMPILED.replace("newHEAP8.set(HEAP8);", "copy(HEAP8);");
        assert!(classic_fallback(GLUE, &other_copy).is_err());
        assert!(classic_fallback(GLUE, &COMPILED.replace("import * as", "// import")).is_err());
        assert!(classic_fallback(&GLUE.replace("exports)", "exports, BigInt)"), COMPILED).is_err());
        assert!(classic_fallback("export function cs_main() {}", COMPILED).is_err());
    }
}
