//! Tidy checks, run by `cargo test` so there is one gate.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo")).parent().unwrap().to_owned()
}

#[path = "../src/errors_doc.rs"]
mod errors_doc;

#[test]
fn errors_doc_is_fresh() {
    let on_disk = std::fs::read_to_string(root().join("docs/errors.md")).unwrap_or_default();
    assert!(on_disk == errors_doc::render(), "docs/errors.md is stale: run `cargo xtask errors-doc` and commit it");
}

/// The dependencies a crate's manifest names in the tables `section` accepts.
fn manifest_dependencies(krate: &str, section: impl Fn(&str) -> bool) -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join(krate).join("Cargo.toml")).unwrap();
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = section(line);
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once('=') {
            deps.push(name.trim().trim_end_matches(".workspace").to_owned());
        }
    }
    deps
}

/// The dependencies named in a crate's `[dependencies]` table.
fn dependencies(krate: &str) -> Vec<String> {
    manifest_dependencies(krate, |table| table == "[dependencies]")
}

#[test]
fn domain_crates_stay_free_of_io_frameworks() {
    // protocol is shared with the wasm extension: serde only.
    for dep in dependencies("protocol") {
        assert!(["serde", "serde_json", "schemars"].contains(&dep.as_str()), "protocol must not depend on {dep}");
    }
    // control owns the store adapter (rusqlite) and bounded waits (tokio sync/time),
    // but never a transport or a browser driver.
    for dep in dependencies("control") {
        assert!(
            !["axum", "rmcp", "chromiumoxide", "tokio-tungstenite", "hyper", "reqwest"].contains(&dep.as_str()),
            "control must not depend on {dep}"
        );
    }
}

#[test]
fn the_dom_adapter_knows_no_browser() {
    // chatgpt-dom runs in wasm (web-sys) and over CDP: protocol types only,
    // plus an HTML parser behind the optional `html` feature (saved pages).
    for dep in dependencies("chatgpt-dom") {
        assert!(["protocol", "scraper", "ego-tree"].contains(&dep.as_str()), "chatgpt-dom must not depend on {dep}");
    }
    let manifest = std::fs::read_to_string(root().join("chatgpt-dom/Cargo.toml")).unwrap();
    for parser in ["scraper", "ego-tree"] {
        let line = manifest.lines().find(|l| l.starts_with(&format!("{parser} ="))).unwrap();
        assert!(line.contains("optional = true"), "chatgpt-dom's {parser} must stay optional: {line}");
    }
    // The extension builds the adapter without it.
    let extension = std::fs::read_to_string(root().join("extension/Cargo.toml")).unwrap();
    let line = extension.lines().find(|l| l.starts_with("chatgpt-dom")).unwrap();
    assert!(!line.contains("html"), "the extension must not enable chatgpt-dom's html feature: {line}");
}

#[test]
fn pool_crates_stay_pure() {
    // registry and admission are decision logic over protocol types only
    // (the registry derives serde, as protocol does: the control plane
    // snapshots it with the rest of its state).
    for krate in ["registry", "admission"] {
        for dep in dependencies(krate) {
            let allowed = ["protocol", "registry", "thiserror"].contains(&dep.as_str())
                || (krate == "registry" && dep == "serde");
            assert!(allowed, "{krate} must not depend on {dep}");
        }
    }
    // pool reconciles through the control plane; it does no IO of its own.
    for dep in dependencies("pool") {
        assert!(
            !["tokio", "axum", "rmcp", "rusqlite", "tokio-tungstenite", "chromiumoxide"].contains(&dep.as_str()),
            "pool must not depend on {dep}"
        );
    }
}

#[test]
fn no_forbidden_browser_automation_in_any_manifest() {
    for entry in std::fs::read_dir(root()).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        for banned in ["playwright", "puppeteer", "selenium", "fantoccini", "thirtyfour"] {
            assert!(!text.to_lowercase().contains(banned), "{} names {banned}", manifest.display());
        }
    }
}

#[test]
fn the_extension_judges_without_a_browser() {
    // The journal and registry build and test natively; browser crates are
    // wasm32-only (a `[target.'cfg(target_arch = "wasm32")'.dependencies]` section).
    for dep in dependencies("extension") {
        assert!(
            ["protocol", "chatgpt-dom", "executor-core", "serde", "serde_json"].contains(&dep.as_str()),
            "extension's native build must not depend on {dep}"
        );
    }
}

/// Every dependency a crate links in the product: `[dependencies]` and the
/// target-specific `[target.'…'.dependencies]` tables (not dev or build).
fn product_dependencies(krate: &str) -> Vec<String> {
    manifest_dependencies(krate, |table| {
        table == "[dependencies]" || (table.starts_with("[target.") && table.ends_with(".dependencies]"))
    })
}

/// The crates the shipped `orchestrator` and the extension are built from,
/// each with the only dependencies it may link. The test rig (fakechat, e2e,
/// the fake executor, chromiumoxide, TLS for the fake site) is never among
/// them: a product crate that needs something new names it here, on purpose.
const PRODUCT: [(&str, &[&str]); 16] = [
    ("protocol", &["serde", "serde_json", "schemars"]),
    ("registry", &["protocol", "serde", "thiserror"]),
    // The remote executor endpoint's TLS (issue 47): the one product crate with TLS.
    ("carriers/tls", &["rcgen", "rustls", "tokio-rustls", "sha2", "thiserror"]),
    ("admission", &["protocol", "registry", "thiserror"]),
    // serde: why a path cannot carry attribution is reported (admin status, the canary).
    ("attribution", &["protocol", "thiserror", "serde"]),
    (
        "control",
        &[
            "protocol",
            "registry",
            "admission",
            "serde",
            "serde_json",
            "thiserror",
            "rusqlite",
            "uuid",
            "hmac",
            "sha2",
            "getrandom",
            "tokio",
            "tracing",
        ],
    ),
    ("pool", &["protocol", "control", "registry", "admission", "serde", "schemars", "uuid", "sha2", "thiserror"]),
    (
        "carriers/webext",
        &[
            "protocol",
            "attribution",
            "control",
            "axum",
            "tokio",
            "tokio-util",
            "futures-util",
            "serde",
            "serde_json",
            "tracing",
            "getrandom",
            "sha2",
            "thiserror",
        ],
    ),
    ("chatgpt-dom", &["protocol", "scraper", "ego-tree"]),
    ("carriers/core", &["protocol", "chatgpt-dom", "serde"]),
    (
        "extension",
        &[
            "protocol",
            "chatgpt-dom",
            "executor-core",
            "serde",
            "serde_json",
            "wasm-bindgen",
            "wasm-bindgen-futures",
            "js-sys",
            "web-sys",
        ],
    ),
    ("mcp-client", &["serde_json", "thiserror", "tokio"]),
    // The canary's core: receipts and their hash chain, no IO framework.
    // libc: receipts are read with `O_NOFOLLOW | O_NONBLOCK` (never a link, never a FIFO's wait).
    ("canary", &["serde", "serde_json", "sha2", "thiserror", "libc"]),
    // The Git adapter of worktree ownership: it runs `git`, nothing more.
    ("worktrees", &["protocol", "thiserror"]),
    // The CDP host agent: chromiumoxide's connection and typed protocol are
    // its product path (issue 19), and it runs the extension's page adapter.
    (
        "carriers/cdp",
        &[
            "protocol",
            "executor-core",
            "executor-tls",
            "extension",
            "chromiumoxide",
            "nix",
            "sysinfo",
            "tokio",
            "tokio-util",
            "tokio-tungstenite",
            "futures-util",
            "serde",
            "serde_json",
            "thiserror",
            "tracing",
            "uuid",
            "base64",
        ],
    ),
    (
        "server",
        &[
            "protocol",
            "attribution",
            "control",
            "carrier-webext",
            "carrier-cdp",
            "executor-tls",
            "pool",
            "admission",
            "chatgpt-dom",
            "ego-tree",
            "rmcp",
            "axum",
            "tokio",
            "tokio-util",
            "schemars",
            "serde",
            "serde_json",
            "getrandom",
            "hyper",
            "hyper-util",
            "tower-http",
            "tower",
            "thiserror",
            "anyhow",
            "sha2",
            "hmac",
            "clap",
            "tracing",
            "tracing-subscriber",
            "mcp-client",
            "oauth-as",
            "serde_urlencoded",
            "base64",
            // `orchestrator canary` (its receipts) and the instance id.
            "canary",
            "uuid",
            // The dashboard's server-sent events stream.
            "futures-util",
            // Worktree ownership's Git adapter.
            "worktrees",
            // The canary's files: opened `O_NOFOLLOW`.
            "libc",
        ],
    ),
];

#[test]
fn product_crates_link_only_their_allowlisted_dependencies() {
    for (krate, allowed) in PRODUCT {
        for dep in product_dependencies(krate) {
            assert!(
                allowed.contains(&dep.as_str()),
                "{krate} links {dep}, which is not on its allowlist in xtask/tests/tidy.rs (the test rig never \
                 belongs in the product)"
            );
        }
    }
    // Every workspace member is either product or rig, so a new crate is classified on purpose.
    let rig = ["xtask", "carriers/fake", "fakechat", "e2e"];
    let workspace = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let members = workspace.lines().find(|l| l.starts_with("members")).unwrap();
    for member in members.split('"').skip(1).step_by(2) {
        assert!(
            PRODUCT.iter().any(|(k, _)| *k == member) || rig.contains(&member),
            "{member} is neither a product crate nor a test-rig crate in xtask/tests/tidy.rs"
        );
    }
    for (krate, _) in PRODUCT {
        for banned in ["fakechat", "e2e", "fake-executor", "chromiumoxide", "rcgen", "rustls", "tokio-rustls"] {
            // DevTools is the CDP carrier's product path, and no other crate's.
            if krate == "carriers/cdp" && banned == "chromiumoxide" {
                continue;
            }
            // The remote executor endpoint's TLS lives in its own crate only.
            if krate == "carriers/tls" && ["rcgen", "rustls", "tokio-rustls"].contains(&banned) {
                continue;
            }
            assert!(!product_dependencies(krate).iter().any(|d| d == banned), "{krate} links the test rig's {banned}");
        }
    }
}

#[test]
fn every_executor_runs_on_the_one_executor_core() {
    // The journal, plans and handshake are written once, in carriers/core;
    // a carrier that keeps its own would test (or ship) other logic.
    for krate in ["extension", "carriers/fake", "carriers/cdp"] {
        assert!(dependencies(krate).iter().any(|d| d == "executor-core"), "{krate} must run on executor-core");
    }
    let mut dirs =
        vec![root().join("extension/src"), root().join("carriers/fake/src"), root().join("carriers/cdp/src")];
    let mut files = 0;
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()) {
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            for own in ["enum Phase", "struct Entry", "in_flight", "fn tab_marker"] {
                assert!(!text.contains(own), "{} keeps executor logic of its own ({own})", path.display());
            }
        }
    }
    assert!(files >= 8, "the walk must reach extension/src/web");
}
