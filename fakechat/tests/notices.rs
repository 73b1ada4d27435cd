//! The notices and the tool-approval card through the hub, as a test drives
//! them: each shows up in the served page and in its live update, inside
//! the last turn, and reads to the adapter as the corpus says (busy; a
//! question to the person until it is answered).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chatgpt_dom::html::HtmlPage;
use fakechat::hub::Hub;
use fakechat::server::{Csp, router};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn call(app: &axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status();
    (status, String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap())
}

async fn page(app: &axum::Router, id: &str) -> String {
    let (status, body) = call(app, Request::get(format!("/c/{id}")).body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    body
}

fn reading(html: &str) -> &'static str {
    chatgpt_dom::reading(&HtmlPage::parse(html))
}

/// The hydrated page (what the page script shows once it ran; the served
/// first paint is the server-rendered one, still loading).
fn hydrated(hub: &Hub, id: &str) -> String {
    fakechat::render::page(&hub.view(Some(id), None, "test".into()).unwrap())
}

/// A conversation whose echo reply has finished.
async fn finished_chat(hub: &Arc<Hub>, app: &axum::Router) -> String {
    let req = Request::post("/_fakechat/api/submit")
        .header("content-type", "application/json")
        .body(Body::from(json!({"text": "hello", "tab": "t1"}).to_string()))
        .unwrap();
    let (status, body) = call(app, req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["conversation"].as_str().unwrap().to_owned();
    for _ in 0..200 {
        if hub.read(&id, |c| !c.generating).unwrap() {
            return id;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the reply never finished");
}

#[tokio::test]
async fn the_approval_card_waits_in_the_turn_until_a_test_answers_it() {
    for generation in ["a", "b"] {
        let hub = Arc::new(Hub::new(None));
        let app = router(hub.clone(), Csp::Strict);
        let id = finished_chat(&hub, &app).await;
        hub.update(&id, |c| c.settings.generation = serde_json::from_value(json!(generation)).unwrap());
        assert_eq!(reading(&hydrated(&hub, &id)), "idle", "{generation}");
        // The card stands during a turn, while Stop shows.
        hub.update(&id, |c| c.generating = true);
        assert!(hub.approval(&id, Some("Orchestrator")));
        let shown = page(&app, &id).await;
        assert!(shown.contains(r#"data-codex-approval-surface="true""#), "{generation}");
        assert!(shown.contains("Allow ChatGPT to use Orchestrator?"), "{generation}");
        assert_eq!(reading(&hydrated(&hub, &id)), "approval_required", "{generation}: read before the stop button");
        // The live update carries it too (the thread region is replaced).
        let (_, update) = call(
            &app,
            Request::get(format!("/_fakechat/api/view?conversation={id}&after=0")).body(Body::empty()).unwrap(),
        )
        .await;
        let thread = serde_json::from_str::<Value>(&update).unwrap()["thread"].as_str().unwrap().to_owned();
        assert!(thread.contains("data-codex-approval-surface"), "{generation}");
        // Answered: the card stays with its buttons disabled; the turn goes on.
        assert!(hub.answer_approval(&id));
        assert!(!hub.answer_approval(&id), "answered once");
        let answered = page(&app, &id).await;
        assert!(answered.contains(r#"<button type="button" disabled="">Allow once</button>"#), "{generation}");
        assert_eq!(reading(&hydrated(&hub, &id)), "generating", "{generation}");
        hub.end_turn(&id, None);
        assert_eq!(reading(&hydrated(&hub, &id)), "idle", "{generation}");
        let oracle = hub.oracle();
        assert_eq!(oracle["conversations"][&id]["approval"]["answered"], true);
        assert!(oracle["conversations"][&id]["incidents"].as_array().unwrap().iter().any(|i| i == "approval_required"));
        assert!(hub.approval(&id, None));
        assert!(!page(&app, &id).await.contains("data-codex-approval-surface"));
    }
}

#[tokio::test]
async fn the_notices_render_inside_the_last_turn_and_keep_a_finished_looking_page_busy() {
    for generation in ["a", "b"] {
        let hub = Arc::new(Hub::new(None));
        let app = router(hub.clone(), Csp::Strict);
        let id = finished_chat(&hub, &app).await;
        hub.update(&id, |c| c.settings.generation = serde_json::from_value(json!(generation)).unwrap());
        // The recovery notice beside a finished answer's action bar: busy.
        assert!(hub.recovery(&id, true));
        let shown = hydrated(&hub, &id);
        assert!(page(&app, &id).await.contains("text-chatgpt-recovery"), "{generation}: served");
        let parsed = HtmlPage::parse(&shown);
        let last = *chatgpt_dom::classify::turns(&parsed).last().unwrap();
        let inside = chatgpt_dom::Dom::query_all(&parsed, Some(&last), ".text-chatgpt-recovery");
        assert_eq!(inside.len(), 1, "{generation}: inside the last turn");
        assert_eq!(reading(&shown), "generating+recovery", "{generation}");
        assert!(hub.recovery(&id, false));
        // The deferral notice, inside the turn, not after the thread.
        hub.update(&id, |c| c.deferral = true);
        let shown = hydrated(&hub, &id);
        let parsed = HtmlPage::parse(&shown);
        let last = *chatgpt_dom::classify::turns(&parsed).last().unwrap();
        assert!(
            chatgpt_dom::Dom::text(&parsed, &last).contains("Our systems are"),
            "{generation}: inside the last turn"
        );
        assert_eq!(reading(&shown), "generating+deferral", "{generation}");
        hub.end_turn(&id, None);
        assert_eq!(reading(&hydrated(&hub, &id)), "idle", "{generation}: ending the turn clears the notices");
    }
}
