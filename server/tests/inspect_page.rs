//! `orchestrator inspect-page` on every page of the real-evidence corpus
//! prints the reading a human gives it (text and JSON), what a submit would
//! click, and refuses unreadable or oversized files with a clear error.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn orchestrator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_orchestrator"))
}

/// Each corpus page with its expected reading and its `notes:` line.
fn corpus() -> Vec<(PathBuf, String, String)> {
    let dir = e2e::workspace().join("chatgpt-dom/fixtures/corpus");
    let mut out: Vec<(PathBuf, String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let header = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).unwrap_or_default().to_owned();
            let (expect, notes) = (header("expect: "), header("notes: "));
            (p, expect, notes)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_corpus_page_prints_the_reading_a_human_gives_it() {
    let corpus = corpus();
    assert!(corpus.len() >= 20);
    for (path, expect, notes) in corpus {
        let out = orchestrator().arg("inspect-page").arg(&path).output().unwrap();
        assert!(out.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(&format!("state:     {expect}\n")), "{}:\n{text}", path.display());
        assert!(text.starts_with("adapter:   chatgpt-dom "), "{text}");

        let out = orchestrator().arg("inspect-page").arg("--json").arg(&path).output().unwrap();
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["state"], expect.as_str(), "{}", path.display());
        // Only a page that takes a prompt offers a plan (the composer's own
        // decision: an in-turn delivery timeout takes one, a draft does
        // not); the stop button is never it.
        let takes = matches!(expect.as_str(), "ready" | "idle" | "delivery_timeout");
        let ready = takes && !notes.contains("draft");
        assert_eq!(report["submit"].get("nothing").is_none(), ready, "{}: {}", path.display(), report["submit"]);
        if let Some(click) = report["submit"]["click"].as_str() {
            assert!(!click.contains("stop"), "{}: {click}", path.display());
        }
        assert_eq!(report["locators"].as_array().unwrap().len(), 4);
    }
}

#[test]
fn a_hidden_legacy_element_is_listed_as_hidden_and_the_shared_id_stop_as_stop() {
    let dir = e2e::workspace().join("chatgpt-dom/fixtures/corpus");
    let out =
        orchestrator().arg("inspect-page").arg(dir.join("b-2026-09-home-empty-hidden-legacy.html")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("hidden  <div contenteditable=\"true\" id=\"prompt-textarea\">"), "{text}");
    assert!(text.contains("submit:    would type the prompt"), "{text}");
    let out =
        orchestrator().arg("inspect-page").arg(dir.join("a-2026-generating-stop-streaming.html")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let stop = text.lines().find(|l| l.starts_with("stop:")).unwrap();
    assert!(stop.contains(r#"data-testid="stop-button""#) && stop.contains(r#"id="composer-submit-button""#), "{text}");
    assert!(text.contains("submit:    nothing"), "{text}");
}

#[test]
fn a_missing_or_oversized_file_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = orchestrator().arg("inspect-page").arg(dir.path().join("nope.html")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"), "{out:?}");
    let big = dir.path().join("big.html");
    std::fs::File::create(&big).unwrap().set_len(server::inspect_page::MAX_PAGE_BYTES + 1).unwrap();
    let out = orchestrator().arg("inspect-page").arg(&big).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("TOO_LARGE"), "{out:?}");
}

/// Issue 29 item 14: a binary file or one with no markup is refused as not
/// a page (exit non-zero, `NOT_HTML`), not read as a "loading" page.
#[test]
fn a_file_that_is_not_a_page_is_refused_as_not_html() {
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes) in [
        ("shot.png", &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10"[..]),
        ("nul.html", &b"<html>\0</html>"[..]),
        ("notes.txt", &b"just some notes about the chat"[..]),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        for json in [false, true] {
            let mut cmd = orchestrator();
            cmd.arg("inspect-page").arg(&file);
            if json {
                cmd.arg("--json");
            }
            let out = cmd.output().unwrap();
            assert!(!out.status.success(), "{name}: {out:?}");
            assert!(String::from_utf8_lossy(&out.stderr).contains("NOT_HTML"), "{name}: {out:?}");
            assert!(out.stdout.is_empty(), "{name}: nothing read as a page");
        }
    }
}
