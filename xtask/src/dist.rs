//! `cargo xtask dist`: one Rust source, two extension builds.
//!
//! 1. `cargo build -p extension --target wasm32-unknown-unknown --profile wasm-release`
//! 2. `wasm-bindgen --target web` (the CLI pinned to the crate's version)
//! 3. binaryen's `wasm-opt -Oz`
//! 4. `dist/firefox/` (MV3 event page, `browser_specific_settings.gecko`) and
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
const STATIC: &[&str] = &["bg.js", "cs.js", "options.html", "options.js", "popup.html", "popup.js"];

fn common(version: &str) -> Value {
    json!({
        "manifest_version": 3,
        "name": "ChatGPT orchestrator executor",
        "version": version,
        "description": "Runs the local orchestrator's worker conversations in managed chatgpt.com tabs.",
        "permissions": ["storage", "alarms"],
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

fn copy_into(dir: &Path, pkg: &Path, manifest: &Value) -> anyhow::Result<()> {
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
    let version = env!("CARGO_PKG_VERSION");
    let key = std::fs::read_to_string(root().join("extension/static/chromium-key.txt"))?;
    copy_into(&root().join("dist/firefox"), &pkg, &firefox_manifest(version))?;
    copy_into(&root().join("dist/chromium"), &pkg, &chromium_manifest(version, key.trim()))?;
    let size = std::fs::metadata(&optimized)?.len();
    eprintln!("xtask: dist/firefox and dist/chromium (wasm {} KiB)", size / 1024);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_ask_for_the_minimal_permissions() {
        for manifest in [firefox_manifest("0.1.0"), chromium_manifest("0.1.0", "k")] {
            assert_eq!(manifest["permissions"], json!(["storage", "alarms"]));
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
    }
}
