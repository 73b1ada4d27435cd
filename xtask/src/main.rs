//! `cargo xtask`: chores beyond plain cargo.
//!
//! - `cargo xtask ci`: installs what the tests need (idempotently) and runs
//!   every gate: fmt, clippy, the wasm build of `protocol`, all tests, and the
//!   benchmarks in quick mode. The README's test command and `.ci/run`.
//! - `cargo xtask dist`: builds the extension into `dist/firefox` and
//!   `dist/chromium` (see [`dist`]).
//! - `cargo xtask demo`: installs only what the demo needs (the extension's
//!   build tools, a Chromium), builds the extension and the daemon (the
//!   README's release build), runs the e2e crate's `demo` (the two-worker
//!   scenario in headless Chromium against fakechat).
//! - `cargo xtask errors-doc`: regenerates `docs/errors.md` from the codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

mod dist;
mod errors_doc;
#[path = "../../e2e/src/find_chromium.rs"]
mod find_chromium;
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

/// Installs what the demo needs and nothing else (no Python, Firefox or
/// TypeScript SDK): the extension's build tools and a Chromium, from apt only
/// on Debian when none is found. Each step is skipped when already done.
fn demo_install() -> anyhow::Result<()> {
    extension_tools()?;
    if let Err(missing) = find_chromium::find_chromium() {
        anyhow::ensure!(Path::new("/usr/bin/apt-get").exists(), "{missing}");
        apt_install(&["chromium"])?;
    }
    Ok(())
}

/// The wasm target, wasm-bindgen at the pinned version, binaryen and web-ext.
fn extension_tools() -> anyhow::Result<()> {
    let targets =
        Command::new("rustup").args(["target", "list", "--installed"]).output().context("rustup is required")?;
    if !String::from_utf8_lossy(&targets.stdout).contains("wasm32-unknown-unknown") {
        run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
    }
    if !root().join("extension/node_modules/.bin/wasm-opt").exists() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix", "extension"]))?;
    }
    let bindgen = Command::new("wasm-bindgen").arg("--version").output();
    if !bindgen.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(dist::WASM_BINDGEN)) {
        // Without --locked: the CLI's lock file pins a crate the registry no longer has.
        run(Command::new("cargo").args(["install", "wasm-bindgen-cli", "--version", dist::WASM_BINDGEN]))?;
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

/// Installs the test prerequisites; each step is skipped when already done.
fn install() -> anyhow::Result<()> {
    extension_tools()?;
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        if !succeeds(Command::new("cargo").args([probe, "--version"])) {
            run(Command::new("rustup").args(["component", "add", component]))?;
        }
    }
    // A Chromium for the real-browser tests against fakechat (Debian's, when none is found).
    if find_chromium::find_chromium().is_err() {
        apt_install(&["chromium"])?;
    }
    let requirements = "server/tests/py/requirements.txt";
    if !succeeds(
        Command::new("python3").args([
            "-c",
            "import mcp, websockets, importlib.metadata as m; assert m.version('mcp') == '2.3.0' and m.version('websockets') == '17.4'",
        ]),
    ) {
        run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "-r", requirements]))?;
    }
    // The TypeScript SDK client and the MCP Inspector CLI, pinned in its package.json.
    let ts = root().join("server/tests/ts/node_modules");
    if !ts.join("@modelcontextprotocol/sdk").is_dir() || !ts.join(".bin/mcp-inspector").exists() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix", "server/tests/ts"]))?;
    }
    // iproute2, for the second host (a network namespace) of the CDP carrier's tests.
    if !succeeds(Command::new("ip").arg("-V")) {
        apt_install(&["iproute2"])?;
    }
    // systemd-analyze, to verify the unit `orchestrator service install` writes.
    if !succeeds(Command::new("systemd-analyze").arg("--version")) {
        apt_install(&["systemd"])?;
    }
    // Firefox ESR for the extension's Firefox run, certutil to trust fakechat's CA there.
    if !Path::new("/usr/bin/firefox-esr").exists() || !Path::new("/usr/bin/certutil").exists() {
        apt_install(&["firefox-esr", "libnss3-tools"])?;
    }
    Ok(())
}

fn ci() -> anyhow::Result<()> {
    install()?;
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

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => ci(),
        Some("install") => install(),
        Some("dist") => {
            install()?;
            dist::dist()
        }
        Some("demo") => {
            demo_install()?;
            dist::dist()?;
            // The README's release build of the daemon, reused as is; the demo rig (fakechat and
            // the browser driver) in the dev profile, which builds in about half the time.
            run(Command::new("cargo").args(["build", "--release", "-p", "server", "--bin", "orchestrator"]))?;
            let daemon = target_dir().join("release/orchestrator");
            run(Command::new("cargo").args(["run", "-p", "e2e", "--bin", "demo"]).env("ORCHESTRATOR_BIN", daemon))
        }
        Some("torture") => torture(),
        Some("skill") => skills(),
        Some("errors-doc") => {
            std::fs::write(root().join("docs/errors.md"), errors_doc::render())?;
            Ok(())
        }
        _ => bail!(
            "usage: cargo xtask <ci | install | dist | demo | torture [--minutes N] [--seed S] | errors-doc | skill>"
        ),
    }
}
