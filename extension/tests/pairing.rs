//! The pairing checks against endpoints as a WHATWG URL parser (the one the
//! browser uses) reads them: user-info tricks that a text check took for
//! loopback are refused, so the credential never leaves the machine.

use extension::pairing::{UrlParts, check_credential, check_endpoint, credential_executor_id};

fn parts(text: &str) -> UrlParts {
    let url = url::Url::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    UrlParts {
        protocol: format!("{}:", url.scheme()),
        username: url.username().to_owned(),
        password: url.password().unwrap_or_default().to_owned(),
        // `URL.hostname` writes IPv6 in brackets, as `host_str` does.
        hostname: url.host_str().unwrap_or_default().to_owned(),
    }
}

#[test]
fn loopback_endpoints_are_accepted() {
    // The last one reads as 127.0.0.1 with "@evil.com" in its path: the parser's host is what counts.
    for ok in ["ws://127.0.0.1:7777/executor", "ws://localhost:7777/executor", "ws://0x7f.1:7777/executor@evil.com"] {
        assert_eq!(check_endpoint(&parts(ok)), Ok(()), "{ok}");
    }
}

#[test]
fn an_endpoint_that_only_looks_like_loopback_is_refused() {
    for attack in [
        // The exfiltration the outside test found: the parser's host is evil.com.
        "ws://127.0.0.1:@evil.com/executor",
        "ws://[::1]:1@evil.com/executor",
        // Loopback, but not dialable under the extension's CSP.
        "ws://[::1]:7777/executor",
        "ws://localhost@evil.com/executor",
        "ws://127.0.0.1.evil.com/executor",
        "ws://evil.com/127.0.0.1:7777/executor",
        "ws://user:pass@127.0.0.1:7777/executor",
        "wss://127.0.0.1:7777/executor",
        "http://127.0.0.1:7777/executor",
    ] {
        let p = parts(attack);
        assert!(check_endpoint(&p).is_err(), "{attack} read as {p:?}");
    }
}

#[test]
fn only_a_credential_of_pairs_form_is_taken_and_it_names_its_executor() {
    let good = format!("exc1.exec-1a2b.{}", "0f".repeat(32));
    assert_eq!(check_credential(&good), Ok(()));
    assert_eq!(credential_executor_id(&good), Some("exec-1a2b"));
    for bad in [
        String::new(),
        "0f".repeat(32),
        format!("exc1..{}", "0f".repeat(32)),
        format!("exc1.exec.{}", "0F".repeat(32)),
        format!("exc1.exec.{}", "0f".repeat(31)),
        format!("exc1.ex ec.{}", "0f".repeat(32)),
        format!("exc2.exec.{}", "0f".repeat(32)),
    ] {
        assert!(check_credential(&bad).is_err(), "{bad}");
    }
}

/// Issue 44: the reconnect backoff the docs promise a person is the one the
/// extension runs.
#[test]
fn the_docs_quote_the_reconnect_backoff() {
    use extension::pairing::{RECONNECT_FIRST_MS, RECONNECT_MOST_MS};
    let secs = |ms: u32| format!("{} s", f64::from(ms) / 1000.0);
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for (doc, words) in [
        (
            "executor-protocol.md",
            format!("doubling from {} to at most {}", secs(RECONNECT_FIRST_MS), secs(RECONNECT_MOST_MS)),
        ),
        (
            "setup.md",
            format!(
                "after {}, then after twice as long each time up to {}",
                secs(RECONNECT_FIRST_MS),
                secs(RECONNECT_MOST_MS)
            ),
        ),
    ] {
        let text = std::fs::read_to_string(docs.join(doc)).unwrap();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(text.contains(&words), "docs/{doc} does not say {words:?}");
    }
}
