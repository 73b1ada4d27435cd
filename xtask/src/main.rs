//! `cargo xtask`: chores beyond plain cargo.
//!
//! - `cargo xtask ci`: installs what the tests need (idempotently) and runs
//!   every gate: fmt, clippy, the wasm build of `protocol`, all tests, and the
//!   benchmarks in quick mode. The README's test command and `.ci/run`.
//! - `cargo xtask errors-doc`: regenerates `docs/errors.md` from the codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

mod errors_doc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
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

/// Installs the test prerequisites; each step is skipped when already done.
fn install() -> anyhow::Result<()> {
    let targets =
        Command::new("rustup").args(["target", "list", "--installed"]).output().context("rustup is required")?;
    if !String::from_utf8_lossy(&targets.stdout).contains("wasm32-unknown-unknown") {
        run(Command::new("rustup").args(["target", "add", "wasm32-unknown-unknown"]))?;
    }
    for (component, probe) in [("rustfmt", "fmt"), ("clippy", "clippy")] {
        if !succeeds(Command::new("cargo").args([probe, "--version"])) {
            run(Command::new("rustup").args(["component", "add", component]))?;
        }
    }
    // Debian's Chromium for the real-browser tests against fakechat.
    if !Path::new("/usr/bin/chromium").exists() {
        run(Command::new("apt-get").args(["update"]))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends", "chromium"])
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    let requirements = "server/tests/py/requirements.txt";
    if !succeeds(
        Command::new("python3").args(["-c", "import mcp, importlib.metadata as m; assert m.version('mcp') == '2.3.0'"]),
    ) {
        run(Command::new("python3").args(["-m", "pip", "install", "--quiet", "-r", requirements]))?;
    }
    if !root().join("server/tests/ts/node_modules/@modelcontextprotocol/sdk").is_dir() {
        run(Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--prefix", "server/tests/ts"]))?;
    }
    Ok(())
}

fn ci() -> anyhow::Result<()> {
    install()?;
    run(Command::new("cargo").args(["fmt", "--all", "--", "--check"]))?;
    run(Command::new("cargo").args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    // What the extension will compile: the wire types and the DOM adapter.
    run(Command::new("cargo").args([
        "build",
        "-p",
        "protocol",
        "-p",
        "chatgpt-dom",
        "--target",
        "wasm32-unknown-unknown",
    ]))?;
    run(Command::new("cargo").args(["build", "--workspace", "--all-targets"]))?;
    run(Command::new("cargo").args(["test", "--workspace", "--all-targets"]))?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let task = std::env::args().nth(1);
    match task.as_deref() {
        Some("ci") => ci(),
        Some("install") => install(),
        Some("errors-doc") => {
            std::fs::write(root().join("docs/errors.md"), errors_doc::render())?;
            Ok(())
        }
        _ => bail!("usage: cargo xtask <ci | install | errors-doc>"),
    }
}
