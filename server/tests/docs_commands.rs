//! Every command the README and `docs/` show a person is one the binary
//! takes (issue 29 item 15): each `orchestrator …` line in a fenced `sh`
//! block names a subcommand that exists, and every `--flag` on it is in
//! that subcommand's `--help` (the part after `service install --` in the
//! help of the command it installs); each `cargo xtask` task is one xtask
//! knows; and every tool the daemon serves is named in the README.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::docs::sh_commands as commands;

fn orchestrator() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orchestrator"));
    cmd.env_remove("ORCHESTRATOR_MCP_SECRET");
    cmd
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_owned()
}

/// The pages a person reads commands from.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![workspace().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The flags a help text lists.
fn flags_in(help: &str) -> Vec<String> {
    help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(str::to_owned)
        .collect()
}

fn help(path: &[&str]) -> String {
    let out = orchestrator().args(path).arg("--help").output().unwrap();
    assert!(out.status.success(), "`orchestrator {} --help` failed: {out:?}", path.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The words of `command` after `orchestrator`, split at a lone `--`.
fn orchestrator_words(command: &str) -> Option<(Vec<&str>, Vec<&str>)> {
    let rest = command.split_once("orchestrator ")?.1;
    let words: Vec<&str> = rest.split_whitespace().collect();
    match words.iter().position(|w| *w == "--") {
        Some(i) => Some((words[..i].to_vec(), words[i + 1..].to_vec())),
        None => Some((words, Vec::new())),
    }
}

/// The subcommand path at the head of `words` (`service install`, `pair`).
fn subcommand<'a>(words: &[&'a str]) -> Vec<&'a str> {
    let top = help(&[]);
    let first = words.first().copied().unwrap_or_default();
    assert!(
        top.lines().any(|l| l.split_whitespace().next() == Some(first)),
        "`orchestrator {first}` is no subcommand:\n{top}"
    );
    let mut path = vec![first];
    if let Some(second) = words.get(1).filter(|w| !w.starts_with('-') && !w.starts_with('[')) {
        let nested = help(&[first]);
        if nested.contains("Commands:") && nested.lines().any(|l| l.split_whitespace().next() == Some(*second)) {
            path.push(second);
        }
    }
    path
}

/// Checks every flag of `words` against the help of `path`; returns how many.
fn check_flags(page: &Path, command: &str, path: &[&str], words: &[&str]) -> usize {
    let known = flags_in(&help(path));
    let mut n = 0;
    for flag in flags_in(&words.join(" ")) {
        let flag = flag.split('=').next().unwrap().to_owned();
        assert!(
            known.contains(&flag),
            "{}: `{command}`: `orchestrator {}` has no {flag}",
            page.display(),
            path.join(" ")
        );
        n += 1;
    }
    n
}

#[test]
fn every_documented_command_names_flags_the_binary_takes() {
    let (mut commands_checked, mut flags_checked) = (0, 0);
    let xtask = std::fs::read_to_string(workspace().join("xtask/src/main.rs")).unwrap();
    for page in pages() {
        for command in commands(&std::fs::read_to_string(&page).unwrap()) {
            if let Some(task) = command.strip_prefix("cargo xtask ") {
                let task = task.split_whitespace().next().unwrap();
                assert!(xtask.contains(&format!("Some(\"{task}\")")), "{}: no xtask {task}", page.display());
                commands_checked += 1;
                continue;
            }
            let Some((words, after)) = orchestrator_words(&command) else { continue };
            if command.trim_start().starts_with("cargo ") {
                continue; // `cargo run … -- serve` is the README's build line, checked by CI itself.
            }
            let path = subcommand(&words);
            flags_checked += check_flags(&page, &command, &path, &words[path.len()..]);
            if !after.is_empty() && path == ["service", "install"] {
                let installs = if words.contains(&"--carrier-agent") { "carrier-agent" } else { "serve" };
                let real: Vec<&str> = after.iter().copied().filter(|w| !w.ends_with("...")).collect();
                flags_checked += check_flags(&page, &command, &[installs], &real);
            }
            commands_checked += 1;
        }
    }
    println!("checked {commands_checked} documented commands and {flags_checked} flags against the binary");
    assert!(commands_checked >= 15, "the pages hold more commands than {commands_checked}");
}

/// Every tool the daemon serves is named in the README's tool lists.
#[test]
fn every_served_tool_is_named_in_the_readme() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = support::Daemon::start(dir.path());
    let tools = support::Mcp::connect(&daemon.addr).list_tools();
    let readme = std::fs::read_to_string(workspace().join("README.md")).unwrap();
    let names: Vec<String> =
        tools["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
    assert!(names.len() > 30, "{names:?}");
    let missing: Vec<&String> = names.iter().filter(|n| !readme.contains(&format!("`{n}"))).collect();
    assert!(missing.is_empty(), "tools the README does not name: {missing:?}");
}

/// Issue 29 item 15: `expose` for a loopback tunnel prints the serve line
/// docs/setup.md gives (no `--allowed-host`) and a local secret URL.
#[test]
fn expose_for_a_loopback_tunnel_agrees_with_the_setup_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = orchestrator().args(["expose", "--host", "localhost", "--json", "--state-dir"]).arg(dir.path()).output();
    let printed: serde_json::Value = serde_json::from_slice(&out.unwrap().stdout).unwrap();
    assert_eq!(printed["serve"], "orchestrator serve");
    assert!(printed["url"].as_str().unwrap().starts_with("http://127.0.0.1:7777/s/"), "{printed}");
    let setup = std::fs::read_to_string(workspace().join("docs/setup.md")).unwrap();
    assert!(setup.contains("run `serve` without\n`--allowed-host`"), "the page still says so");
}

/// Issue 44: docs/setup.md's section on a person's everyday browser quotes
/// the daemon's own defaults for when a lapsed connection and an
/// unreachable page are noticed: each "`--flag` (N by default)" it names is
/// the default `serve --help` prints.
#[test]
fn the_everyday_browser_section_quotes_the_daemons_defaults() {
    let setup = std::fs::read_to_string(workspace().join("docs/setup.md")).unwrap();
    let section = setup.split("## 7. Your browser, day to day").nth(1).expect("the section exists");
    let section = section.split("\n## ").next().unwrap();
    let help = orchestrator().args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8(help.stdout).unwrap();
    let mut quoted = 0;
    for (at, _) in section.match_indices("`--") {
        let rest = &section[at + 1..];
        let flag = &rest[..rest.find('`').unwrap()];
        let said = rest.split("` (").nth(1).and_then(|r| r.split_whitespace().next()).unwrap_or("");
        let entry = help.split(&format!("{flag} <")).nth(1).unwrap_or_else(|| panic!("serve has no {flag}"));
        let default = entry.split("[default: ").nth(1).and_then(|d| d.split(']').next()).unwrap();
        assert_eq!(said, default, "docs/setup.md says {flag} is {said} by default; serve --help says {default}");
        quoted += 1;
    }
    assert_eq!(quoted, 2, "the section names the lease and the recheck");
}
