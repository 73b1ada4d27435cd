//! `cargo xtask`: chores beyond plain cargo.
//!
//! - `cargo xtask ci`: installs what the tests need (idempotently) and runs
//!   every gate: fmt, clippy, the wasm build of `protocol`, all tests, and the
//!   benchmarks in quick mode. The README's test command and `.ci/run`.
//! - `cargo xtask dist`: installs only the extension's build tools (the
//!   wasm32 target, wasm-bindgen, binaryen from npm) and builds the
//!   extension into `dist/firefox` and `dist/chromium` (see [`dist`]).
//! - `cargo xtask demo`: installs only what the demo needs (the extension's
//!   build tools, a Chromium), builds the extension, then the daemon and the
//!   e2e crate's `demo` in one dev build, and runs the demo (the two-worker
//!   scenario in headless Chromium against fakechat).
//! - `cargo xtask canary [--carrier cdp|webext|firefox] [--receipts DIR]`:
//!   what the demo installs (and Firefox for `--carrier firefox`), then the
//!   product's canary runner against fakechat through that carrier, the e2e
//!   crate's `canary_rig` playing the person whose faults the gates need
//!   (`docs/canary.md`). Receipts default to `target/canary-receipts/xtask-<carrier>`.
//! - `cargo xtask errors-doc`: regenerates `docs/errors.md` from the codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

mod archive;
mod dist;
mod errors_doc;
#[path = "../../e2e/src/find_chromium.rs"]
mod find_chromium;
mod release;
mod skill;

/// The workspace root. Read at run time (`cargo run` sets it): two clones
/// sharing one target dir share the uplifted `xtask` binary, whose
/// compile-time path may be the other clone's.
fn root() -> PathBuf {
    let dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    dir.parent().expect("xtask lives in the workspace").to_owned()
}

/// Where cargo puts build output (CI keeps it outside the clone).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from)
}

fn run(cmd: &mut Command) -> anyhow::Result<()> {
    eprintln!("xtask: {cmd:?}");
    let status = cmd.current_dir(root()).status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed: {status}");
    }
    Ok(())
}

fn succeeds(cmd: &mut Command) -> bool {
    cmd.current_dir(root()).output().is_ok_and(|o| o.status.success())
}

/// Prints, on one line, the versions the browser tests will run against:
/// when a distribution update breaks the rig, this line says what moved.
fn print_versions() {
    let version = |program: &str, args: &[&str]| -> String {
        let out = Command::new(program).args(args).current_dir(root()).output();
        let text = out.ok().filter(|o| o.status.success()).map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        let words = text.as_deref().map(str::split_whitespace).into_iter().flatten();
        let word = words.map(|w| w.trim_start_matches('v')).find(|w| w.starts_with(|c: char| c.is_ascii_digit()));
        word.unwrap_or("missing").to_owned()
    };
    let web_ext = root().join("extension/node_modules/.bin/web-ext").display().to_string();
    eprintln!(
        "xtask versions: chromium {}, firefox {}, web-ext {}, wasm-bindgen {}, rustc {}, node {}",
        version(&find_chromium::find_chromium().unwrap_or_default().display().to_string(), &["--version"]),
        version("/usr/bin/firefox-esr", &["--version"]),
        version(&web_ext, &["--version"]),
        version("wasm-bindgen", &["--version"]),
        version("rustc", &["--version"]),
        version("node", &["--version"]),
    );
}

/// One prerequisite a task may install. Each is probed first and skipped
/// when already there, so every install is idempotent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    /// `rustup target add wasm32-unknown-unknown`.
    Wasm32,
    /// `wasm-bindgen-cli` at the crate's pinned version.
    WasmBindgen,
    /// The extension's npm devDependencies (binaryen's `wasm-opt` and
    /// `wasm2js`; web-ext, its linter, comes from the same lock file).
    ExtensionNpm,
    /// rustfmt and clippy (the CI gates).
    RustComponents,
    /// A Chromium (Debian's, from apt, when none is found).
    Chromium,
    /// The Python MCP SDK and `websockets` (external-client tests).
    Python,
    /// The TypeScript MCP SDK and the MCP Inspector CLI.
    TypeScript,
    /// iproute2: the CDP carrier's second host is a network namespace.
    Iproute2,
    /// systemd-analyze, to verify the unit `service install` writes.
    Systemd,
    /// Firefox ESR and certutil (to trust fakechat's CA there).
    Firefox,
    /// `cargo-cyclonedx`, pinned: the release bundle's SBOM of crates (the
    /// npm one comes with the extension's devDependencies).
    Sbom,
}

/// What the extension's build needs: all `cargo xtask dist` installs.
const BUILD: &[Tool] = &[Tool::Wasm32, Tool::WasmBindgen, Tool::ExtensionNpm];
/// A release: the build's tools and the SBOM generator.
const RELEASE: &[Tool] = &[Tool::Wasm32, Tool::WasmBindgen, Tool::ExtensionNpm, Tool::Sbom];
/// The demo: the build's tools and a browser to run it in (no Python,
/// Firefox or TypeScript SDK).
const DEMO: &[Tool] = &[Tool::Wasm32, Tool::WasmBindgen, Tool::ExtensionNpm, Tool::Chromium];
/// The canary through Firefox: the demo's tools and Firefox.
const CANARY_FIREFOX: &[Tool] = &[Tool::Wasm32, Tool::WasmBindgen, Tool::ExtensionNpm, Tool::Chromium, Tool::Firefox];
/// Everything the tests need (`cargo xtask ci`, `cargo xtask install`).
const EVERYTHING: &[Tool] = &[
    Tool::Wasm32,
    Tool::WasmBindgen,
    Tool::ExtensionNpm,
    Tool::RustComponents,
    Tool::Chromium,
    Tool::Python,
    Tool::TypeScript,
    Tool::Iproute2,
    Tool::Systemd,
    Tool::Firefox,
];

/// What `task` installs before it runs (none for tasks that only read the tree).
fn prerequisites(task: &str) -> &'static [Tool] {
    match task {
        "ci" | "install" => EVERYTHING,
        "dist" => BUILD,
        "release" => RELEASE,
        "demo" | "canary" | "soak" => DEMO,
        "canary-firefox" | "screenshots" => CANARY_FIREFOX,
        _ => &[],
    }
}

/// Installs `tools`, each only when its probe says it is missing.
fn install(tools: &[Tool]) -> anyhow::Result<()> {
    for tool in tools {
        install_one(*tool)?;
    }
    Ok(())
}

fn install_one(tool: Tool) -> anyhow::Result<()> {
    match tool {
        Tool::Wasm32 => {
            let targets = Command::new("rustup")
                .args(["target", "list", "--installed"])
                .output()
                .context("rustup is required (see the README's Prerequisites)")?;
            if !String::from_utf8_lossy(&targets.stdout).contains("wasm32-unknown-unknown") {
                run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
            }
        }
        Tool::WasmBindgen => {
            let bindgen = Command::new("wasm-bindgen").arg("--version").output();
            if !bindgen.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(dist::WASM_BINDGEN)) {
                // Without --locked: the CLI's lock file pins a crate the registry no longer has.
                run(Command::new("cargo").args(["install", "wasm-bindgen-cli", "--version", dist::WASM_BINDGEN]))?;
            }
        }
        Tool::ExtensionNpm => {
            let modules = root().join("extension/node_modules");
            let bin = modules.join(".bin");
            // axe-core: the operator surfaces' accessibility check (server/tests/dashboard.rs).
            let axe = modules.join("axe-core/axe.min.js");
            let sbom = bin.join("cyclonedx-npm");
            if !bin.join("wasm-opt").exists() || !bin.join("wasm2js").exists() || !axe.exists() || !sbom.exists() {
                run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix", "extension"]))?;
            }
        }
        Tool::RustComponents => {
            for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
                if !succeeds(Command::new("cargo").args([probe, "--version"])) {
                    run(Command::new("rustup").args(["component", "add", component]))?;
                }
            }
        }
        Tool::Chromium => {
            if let Err(missing) = find_chromium::find_chromium() {
                anyhow::ensure!(Path::new("/usr/bin/apt-get").exists(), "{missing}");
                apt_install(&["chromium"])?;
            }
        }
        Tool::Python => {
            let pinned = "import mcp, websockets, importlib.metadata as m; \
                          assert m.version('mcp') == '2.3.0' and m.version('websockets') == '17.4'";
            if !succeeds(Command::new("python3").args(["-c", pinned])) {
                let requirements = "server/tests/py/requirements.txt";
                run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "-r", requirements]))?;
            }
        }
        Tool::TypeScript => {
            // Pinned in its package.json.
            let ts = root().join("server/tests/ts/node_modules");
            if !ts.join("@modelcontextprotocol/sdk").is_dir() || !ts.join(".bin/mcp-inspector").exists() {
                run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix", "server/tests/ts"]))?;
            }
        }
        Tool::Iproute2 => {
            if !succeeds(Command::new("ip").arg("-V")) {
                apt_install(&["iproute2"])?;
            }
        }
        Tool::Systemd => {
            if !succeeds(Command::new("systemd-analyze").arg("--version")) {
                apt_install(&["systemd"])?;
            }
        }
        Tool::Sbom => {
            let probe = Command::new("cargo").args(["cyclonedx", "--version"]).output();
            if !probe.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(release::CARGO_CYCLONEDX)) {
                let pinned = ["install", "cargo-cyclonedx", "--locked", "--version", release::CARGO_CYCLONEDX];
                run(Command::new("cargo").args(pinned))?;
            }
        }
        Tool::Firefox => {
            if !Path::new("/usr/bin/firefox-esr").exists() || !Path::new("/usr/bin/certutil").exists() {
                apt_install(&["firefox-esr", "libnss3-tools"])?;
            }
        }
    }
    Ok(())
}

/// `apt-get install` of Debian packages, after refreshing the lists.
fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    run(Command::new("apt-get").args(["update"]))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn ci() -> anyhow::Result<()> {
    install(prerequisites("ci"))?;
    print_versions();
    run(Command::new("cargo").args(["fmt", "--all", "--", "--check"]))?;
    run(Command::new("cargo").args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    // The extension's browser glue exists only on wasm32.
    run(Command::new("cargo").args([
        "clippy",
        "-p",
        "extension",
        "--target",
        "wasm32-unknown-unknown",
        "--",
        "-D",
        "warnings",
    ]))?;
    // The extension (and with it the wire types and the DOM adapter) for
    // wasm32, packaged for both browsers: the browser tests load `dist/`.
    dist::dist()?;
    // The uploadable skill archives, next to the extension packages.
    skills()?;
    run(Command::new("cargo").args(["build", "--workspace", "--all-targets"]))?;
    run(Command::new("cargo").args(["test", "--workspace", "--all-targets"]))?;
    Ok(())
}

/// Packages every skill under `<target>/skills/`, printing each archive's path.
fn skills() -> anyhow::Result<()> {
    for name in skill::SKILLS {
        let path = skill::package(&root().join("skills"), name, &target_dir().join("skills"))?;
        println!("xtask: {}", path.display());
    }
    Ok(())
}

/// `cargo xtask torture [--minutes N] [--seed S]`: the crash torture of
/// `server/tests/torture.rs` for N minutes (default 10) instead of CI's
/// 20 kills, printing its history summary.
fn torture() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let minutes = flag("--minutes").unwrap_or_else(|| "10".into());
    minutes.parse::<u64>().map_err(|_| anyhow::anyhow!("--minutes takes a whole number"))?;
    let mut cmd = Command::new("cargo");
    cmd.args(["test", "-p", "server", "--test", "torture", "--", "--nocapture"]).env("TORTURE_MINUTES", &minutes);
    if let Some(seed) = flag("--seed") {
        seed.parse::<u64>().map_err(|_| anyhow::anyhow!("--seed takes a whole number"))?;
        cmd.env("TORTURE_SEED", seed);
    }
    run(&mut cmd)
}

/// `cargo xtask soak [--minutes N] [--seed S]`: the hostile day of
/// `server/tests/extension_chromium.rs` (a real browser, four workers, a
/// seeded sequence of browser and daemon trouble) for N minutes (default
/// 30) instead of CI's 2, printing its figures.
fn soak() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let minutes = flag("--minutes").unwrap_or_else(|| "30".into());
    minutes.parse::<u64>().map_err(|_| anyhow::anyhow!("--minutes takes a whole number"))?;
    install(prerequisites("soak"))?;
    dist::dist()?;
    let mut cmd = Command::new("cargo");
    cmd.args(["test", "-p", "server", "--test", "extension_chromium", "--", "hostile_day", "--nocapture"])
        .env("SOAK_MINUTES", &minutes);
    if let Some(seed) = flag("--seed") {
        seed.parse::<u64>().map_err(|_| anyhow::anyhow!("--seed takes a whole number"))?;
        cmd.env("SOAK_SEED", seed);
    }
    run(&mut cmd)
}

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => ci(),
        Some("install") => install(prerequisites("install")),
        Some("dist") => {
            install(prerequisites("dist"))?;
            dist::dist()
        }
        Some("release") => {
            let args: Vec<String> = std::env::args().skip(2).collect();
            let key = match args.as_slice() {
                [flag, path] if flag == "--chromium-key" => PathBuf::from(path),
                _ => bail!("usage: cargo xtask release --chromium-key <the project's RSA private key, PEM>"),
            };
            install(prerequisites("release"))?;
            release::release(&key)
        }
        Some("demo") => {
            install(prerequisites("demo"))?;
            dist::dist()?;
            // One dev build of the daemon and the demo rig (fakechat, the browser driver): they
            // share every dependency, and a dev build takes well under half a release one's time
            // (the release build is for everyday use; the demo does not wait for it).
            let bins = ["build", "-p", "server", "--bin", "orchestrator", "-p", "e2e", "--bin", "demo"];
            run(Command::new("cargo").args(bins))?;
            let daemon = target_dir().join("debug/orchestrator");
            // Run as `cargo run` would (the rig finds the workspace through CARGO_MANIFEST_DIR),
            // without a second cargo call that could select other features and build again.
            let demo = target_dir().join("debug/demo");
            run(Command::new(demo).env("ORCHESTRATOR_BIN", daemon).env("CARGO_MANIFEST_DIR", root().join("e2e")))
        }
        Some("canary") => canary(),
        // The tests that show each operator surface write its pictures into docs/screenshots/.
        Some("screenshots") => {
            install(prerequisites("screenshots"))?;
            dist::dist()?;
            run(Command::new("cargo").args([
                "test",
                "-p",
                "server",
                "--test",
                "dashboard",
                "--test",
                "operator_surfaces",
            ]))
        }
        Some("torture") => torture(),
        Some("soak") => soak(),
        Some("skill") => skills(),
        Some("errors-doc") => {
            std::fs::write(root().join("docs/errors.md"), errors_doc::render())?;
            Ok(())
        }
        _ => bail!(
            "usage: cargo xtask <ci | install | dist | release --chromium-key PEM | demo | canary [--carrier cdp|webext|firefox] [--receipts DIR] [--gates G1D,G2,…] | screenshots | torture [--minutes N] [--seed S] | soak [--minutes N] [--seed S] | errors-doc | skill>"
        ),
    }
}

/// `cargo xtask canary`: the gates through one carrier against fakechat,
/// by the product's runner; exits non-zero unless every gate passed.
fn canary() -> anyhow::Result<()> {
    let mut carrier = "cdp".to_owned();
    let mut receipts = None;
    let mut gates = None;
    let mut args = std::env::args().skip(2);
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--carrier" if ["cdp", "webext", "firefox"].contains(&value.as_str()) => carrier = value,
            "--receipts" => receipts = Some(PathBuf::from(value)),
            "--gates" => gates = Some(value),
            _ => bail!("usage: cargo xtask canary [--carrier cdp|webext|firefox] [--receipts DIR] [--gates G1D,G2,…]"),
        }
    }
    install(prerequisites(if carrier == "firefox" { "canary-firefox" } else { "canary" }))?;
    dist::dist()?;
    let bins = ["build", "-p", "server", "--bin", "orchestrator", "-p", "e2e", "--bin", "canary_rig"];
    run(Command::new("cargo").args(bins))?;
    let receipts = receipts.unwrap_or_else(|| target_dir().join(format!("canary-receipts/xtask-{carrier}")));
    // A run writes a new chain: the previous one of this default place goes.
    let _ = std::fs::remove_dir_all(&receipts);
    let rig = target_dir().join("debug/canary_rig");
    let mut rig = Command::new(rig);
    if let Some(gates) = &gates {
        rig.args(["--gates", gates]);
    }
    run(rig
        .args(["--carrier", &carrier, "--receipts"])
        .arg(&receipts)
        .env("ORCHESTRATOR_BIN", target_dir().join("debug/orchestrator"))
        .env("CARGO_MANIFEST_DIR", root().join("e2e")))?;
    eprintln!("xtask: receipts in {} (orchestrator canary show {0})", receipts.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29 item 14: building the extension installs what the build
    /// needs and nothing of the test rig (no browser, Python, TypeScript
    /// or system package); the demo adds a browser; CI has everything.
    #[test]
    fn dist_installs_only_the_extension_build_tools() {
        assert_eq!(prerequisites("dist"), [Tool::Wasm32, Tool::WasmBindgen, Tool::ExtensionNpm]);
        let demo = prerequisites("demo");
        assert!(BUILD.iter().all(|t| demo.contains(t)) && demo.contains(&Tool::Chromium));
        assert!(!demo.iter().any(|t| matches!(t, Tool::Python | Tool::TypeScript | Tool::Firefox)));
        for task in ["ci", "install"] {
            assert_eq!(prerequisites(task), EVERYTHING, "{task}");
        }
        assert!(prerequisites("errors-doc").is_empty());
    }
}
