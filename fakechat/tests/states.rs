//! Every state and incident is reachable through the control API and shows
//! up in the DOM and the oracle; the page routes mirror the real site's.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use fakechat::hub::Hub;
use fakechat::server::{Csp, router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Site {
    app: axum::Router,
}

impl Site {
    fn new(csp: Csp) -> Site {
        Site { app: router(Arc::new(Hub::new(None)), csp) }
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let res = self.app.clone().oneshot(req).await.unwrap();
        let (status, headers) = (res.status(), res.headers().clone());
        let body = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
        (status, headers, body)
    }

    async fn get(&self, path: &str) -> (StatusCode, String) {
        let (s, _, b) = self.send(Request::get(path).body(Body::empty()).unwrap()).await;
        (s, b)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, String) {
        let req =
            Request::post(path).header("content-type", "application/json").body(Body::from(body.to_string())).unwrap();
        let (s, _, b) = self.send(req).await;
        (s, b)
    }

    async fn conversation(&self, text: &str) -> String {
        let (status, body) = self.post("/_fakechat/api/submit", json!({"text": text, "tab": "t1"})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let r: Value = serde_json::from_str(&body).unwrap();
        r["conversation"].as_str().unwrap().to_owned()
    }

    async fn control(&self, c: Value) {
        let (status, body) = self.post("/_fakechat/control", c).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }

    async fn oracle(&self) -> Value {
        serde_json::from_str(&self.get("/_fakechat/oracle").await.1).unwrap()
    }

    async fn page(&self, id: &str) -> String {
        let (status, body) = self.get(&format!("/c/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        body
    }

    /// Waits (bounded) until the echo reply has finished streaming.
    async fn settle(&self, id: &str) {
        for _ in 0..200 {
            if self.oracle().await["conversations"][id]["state"] != "generating" {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the reply never finished");
    }
}

#[tokio::test]
async fn a_submitted_turn_streams_a_reply_and_finishes_with_the_copy_button() {
    let site = Site::new(Csp::Strict);
    let id = site.conversation("hello").await;
    let oracle = site.oracle().await;
    assert_eq!(oracle["conversations"][&id]["user_turns"].as_array().unwrap().len(), 1);
    assert_eq!(oracle["conversations"][&id]["user_turns"][0]["len"], 5);
    site.settle(&id).await;
    let page = site.page(&id).await;
    assert!(page.contains(r#"data-message-author-role="user""#) && page.contains("You said: hello"));
    assert!(page.contains(r#"data-testid="copy-turn-action-button""#));
    // The idle slot holds the voice button; the send button exists only once the editor has text.
    assert!(page.contains(r#"data-slot="empty""#) && !page.contains(r#"data-testid="stop-button""#));
    assert_eq!(site.oracle().await["conversations"][&id]["state"], "idle");
}

#[tokio::test]
async fn every_state_and_incident_is_reachable() {
    let site = Site::new(Csp::Strict);
    let id = site.conversation("hello").await;
    site.settle(&id).await;
    let cases: Vec<(Value, Vec<&str>, &str)> = vec![
        (json!({"generating": true}), vec![r#"data-testid="stop-button""#], "generating"),
        (json!({"generating": false}), vec![r#"data-slot="empty""#, "copy-turn-action-button"], "idle"),
        (json!({"deferral": true}), vec!["Our systems are thinking a bit more"], "idle"),
        (
            json!({"deferral": false, "turn_error": "delivery_timeout"}),
            vec!["Message delivery timed out. Please try again.", "regenerate-thread-error-button"],
            "error",
        ),
        (json!({"turn_error": "something_went_wrong"}), vec!["Something went wrong. Please try again."], "error"),
        (json!({"rate_limited": true}), vec![r#"role="dialog""#, "Too many requests", "Got it"], "error"),
        (json!({"rate_limited": false, "screen": "loading"}), vec![r#"data-fakechat-loading="true""#], "loading"),
        (json!({"screen": "signed_out"}), vec![r#"data-testid="login-button""#], "signedout"),
        (json!({"screen": "challenge"}), vec!["Verify you are human"], "challenge"),
        (
            json!({"screen": "pre_hydration"}),
            vec![r#"name="prompt-textarea" placeholder="Ask anything">"#],
            "prehydration",
        ),
        (
            json!({"screen": "logged_out_chat"}),
            vec![r#"data-testid="login-button""#, r#"data-type="unified-composer""#],
            "loggedoutchat",
        ),
        (
            json!({"screen": "chat", "integrity": "missing"}),
            vec![r#"<div id="composer-actions" data-slot="empty"></div>"#],
            "error",
        ),
        (json!({"integrity": "duplicated"}), vec!["id=&quot;prompt-textarea&quot;"], "error"),
        (json!({"integrity": "intact", "locale": "ja"}), vec![r#"lang="ja""#, "問題が発生しました"], "error"),
        (
            json!({"locale": "en", "generation": "b"}),
            vec!["data-chatgpt-composer", r#"aria-label="Start Voice""#, "data-turn-key"],
            "error",
        ),
        (json!({"generation": "a", "editor": "lexical"}), vec!["data-lexical-editor=&quot;true&quot;"], "error"),
    ];
    for (control, markers, state) in cases {
        let mut c = control.clone();
        c["conversation"] = json!(id);
        site.control(c).await;
        let page = site.page(&id).await;
        for marker in markers {
            assert!(page.contains(marker), "{control}: missing {marker}");
        }
        assert_eq!(site.oracle().await["conversations"][&id]["state"], state, "{control}");
    }
    let page = site.page(&id).await;
    assert!(!page.contains("id=&quot;prompt-textarea&quot;"), "the Lexical variant has no ProseMirror editor");
    let duplicated = {
        site.control(json!({"conversation": id, "integrity": "duplicated", "editor": "prose_mirror"})).await;
        site.page(&id).await
    };
    // The first paint carries the editors for hydration, twice; the slot shows two voice buttons.
    assert_eq!(duplicated.matches("id=&quot;prompt-textarea&quot;").count(), 2);
    assert_eq!(duplicated.matches(r#"aria-label="Start Voice""#).count(), 2);
    let incidents = site.oracle().await["conversations"][&id]["incidents"].clone();
    for expected in [
        "deferral",
        "delivery_timeout",
        "something_went_wrong",
        "rate_limited",
        "loading",
        "signedout",
        "challenge",
        "prehydration",
        "loggedoutchat",
    ] {
        assert!(incidents.as_array().unwrap().iter().any(|i| i == expected), "{expected} not in {incidents}");
    }
}

#[tokio::test]
async fn retry_clicks_are_counted_and_busy_or_broken_pages_take_no_turn() {
    let site = Site::new(Csp::Strict);
    let id = site.conversation("hello").await;
    site.settle(&id).await;
    site.control(json!({"conversation": id, "turn_error": "delivery_timeout"})).await;
    let (status, _) = site.post("/_fakechat/api/retry", json!({"conversation": id})).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(site.oracle().await["conversations"][&id]["retry_clicks"], 1);
    site.control(json!({"conversation": id, "generating": true})).await;
    let (status, _) = site.post("/_fakechat/api/submit", json!({"conversation": id, "text": "again"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "no submission while generating");
    site.control(json!({"conversation": id, "generating": false, "screen": "signed_out"})).await;
    let (status, _) = site.post("/_fakechat/api/submit", json!({"conversation": id, "text": "again"})).await;
    assert_eq!(status, StatusCode::CONFLICT, "no composer when signed out");
    assert_eq!(site.oracle().await["conversations"][&id]["user_turns"].as_array().unwrap().len(), 1);
    let (status, _) = site.post("/_fakechat/control", json!({"conversation": id, "weather": "rain"})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "unknown control fields are refused");
}

#[tokio::test]
async fn routes_mirror_the_real_site_and_defaults_apply_to_new_chats() {
    let site = Site::new(Csp::Strict);
    let project = "g-p-0123456789abcdef0123456789abcdef-workers";
    let (status, page) = site.get(&format!("/g/{project}/project")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains(&format!(r#"data-fakechat-project="{project}""#)));
    let (status, body) = site.post("/_fakechat/api/submit", json!({"text": "in a project", "project": project})).await;
    assert_eq!(status, StatusCode::OK);
    let r: Value = serde_json::from_str(&body).unwrap();
    let id = r["conversation"].as_str().unwrap();
    assert_eq!(r["url"], format!("/g/{project}/c/{id}"));
    assert_eq!(site.get(&format!("/g/{project}/c/{id}")).await.0, StatusCode::OK);
    assert_eq!(site.get("/g/g-p-0123456789abcdef0123456789abcdef-other/c/x").await.0, StatusCode::NOT_FOUND);
    assert_eq!(site.get("/g/not-a-project/project").await.0, StatusCode::NOT_FOUND);
    assert_eq!(site.get("/c/00000000-0000-4000-8000-000000000000").await.0, StatusCode::NOT_FOUND);
    site.control(json!({"generation": "b", "locale": "ja"})).await;
    let (_, fresh) = site.get("/").await;
    assert!(fresh.contains("data-chatgpt-composer") && fresh.contains(r#"lang="ja""#));
}

#[tokio::test]
async fn the_csp_is_strict_by_default_with_a_real_like_and_an_off_switch() {
    for (csp, expect) in [(Csp::Strict, Some(false)), (Csp::RealLike, Some(true)), (Csp::None, None)] {
        let site = Site::new(csp);
        let (_, headers, body) = site.send(Request::get("/").body(Body::empty()).unwrap()).await;
        let header = headers.get("content-security-policy").map(|h| h.to_str().unwrap().to_owned());
        match expect {
            None => assert!(header.is_none()),
            Some(wasm) => {
                let header = header.unwrap();
                assert_eq!(header.contains("'wasm-unsafe-eval'"), wasm, "{header}");
                assert!(!header.contains("'unsafe-eval'") && !header.contains("'unsafe-inline'; script"));
                let nonce = header.split("'nonce-").nth(1).unwrap().split('\'').next().unwrap();
                assert!(body.contains(&format!(r#"nonce="{nonce}""#)), "the page script carries the header's nonce");
            }
        }
    }
}

#[test]
fn the_fixtures_are_fresh() {
    let dir = e2e::workspace().join("chatgpt-dom/fixtures");
    let stale = fakechat::fixtures::stale(&dir);
    assert!(stale.is_empty(), "stale fixtures {stale:?}: run `cargo run -p fakechat -- fixtures` and commit them");
}
