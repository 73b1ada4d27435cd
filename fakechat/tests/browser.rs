//! Headless Chromium against fakechat mapped as https://chatgpt.com:
//! typing into the composer and pressing send through the page's own
//! controls submits exactly one user turn and moves the URL to /c/<uuid>;
//! the reply streams into the open page. The DevTools endpoint is the test's
//! observer and hands, never a product path.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::{Browser, Page};
use fakechat::server::Csp;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

async fn launch(port: u16, profile: &std::path::Path) -> Browser {
    let config = e2e::browser::config(port, profile).expect("a Chromium (the README test command installs it)");
    let config = config.build().unwrap();
    let (browser, mut handler) = Browser::launch(config).await.expect("chromium starts");
    tokio::spawn(async move { while handler.next().await.is_some() {} });
    browser
}

async fn eval_bool(page: &Page, js: &str) -> bool {
    page.evaluate(js).await.ok().and_then(|r| r.into_value::<bool>().ok()).unwrap_or(false)
}

/// Polls `js` in the page until it is true (bounded).
async fn until(page: &Page, js: &str) {
    for _ in 0..200 {
        if eval_bool(page, js).await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("never true: {js}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typing_and_sending_through_the_page_submits_exactly_one_turn() {
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), None, Csp::Strict, None).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut browser = launch(fake.addr.port(), dir.path()).await;
    let page = browser.new_page("https://chatgpt.com/").await.unwrap();
    until(&page, "!!document.querySelector('#prompt-textarea') && document.readyState === 'complete'").await;
    // Over HTTP/2, as chatgpt.com: one connection for every tab.
    assert!(eval_bool(&page, "performance.getEntriesByType('navigation')[0].nextHopProtocol === 'h2'").await);

    let text = "hello from a real browser";
    page.find_element("#prompt-textarea").await.unwrap().click().await.unwrap();
    page.execute(InsertTextParams::new(text)).await.unwrap();
    until(&page, "document.querySelector('[data-testid=\"send-button\"]').disabled === false").await;
    page.find_element("[data-testid=\"send-button\"]").await.unwrap().click().await.unwrap();

    until(&page, "/^\\/c\\/[0-9a-f-]{36}$/.test(location.pathname)").await;
    let url = page.url().await.unwrap().unwrap();
    let id = url.rsplit('/').next().unwrap().to_owned();
    // The reply streams into the open page through its own updates.
    // (The copy action may show on the user's turn first: wait for the reply's text itself.)
    until(&page, "!!document.querySelector('[data-testid=\"copy-turn-action-button\"]')").await;
    until(
        &page,
        "(document.querySelector('[data-message-author-role=\"assistant\"]')?.innerText ?? '').includes('You said: hello')",
    )
    .await;

    let oracle = fake.hub.oracle();
    let conversations = oracle["conversations"].as_object().unwrap();
    assert_eq!(conversations.len(), 1, "{oracle}");
    let turns = conversations[&id]["user_turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1, "exactly one user turn");
    let digest: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(turns[0]["sha256"], digest);
    let tabs = oracle["tabs"].as_object().unwrap();
    assert!(tabs.values().any(|t| t["conversation"] == id.as_str() && t["visible"] == true), "{oracle}");

    browser.close().await.ok();
    browser.wait().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redesigned_composer_works_the_same_way() {
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), None, Csp::Strict, None).await.unwrap();
    fake.hub
        .set_defaults(fakechat::hub::Settings { generation: fakechat::render::Generation::B, ..Default::default() });
    let dir = tempfile::tempdir().unwrap();
    let mut browser = launch(fake.addr.port(), dir.path()).await;
    let page = browser.new_page("https://chatgpt.com/").await.unwrap();
    until(
        &page,
        "!!document.querySelector('form[data-chatgpt-composer] [role=textbox]') && document.readyState === 'complete'",
    )
    .await;
    page.find_element("form[data-chatgpt-composer] [role=textbox]").await.unwrap().click().await.unwrap();
    page.execute(InsertTextParams::new("generation B")).await.unwrap();
    until(&page, "document.querySelector('form[data-chatgpt-composer] button[type=submit]').disabled === false").await;
    page.find_element("form[data-chatgpt-composer] button[type=submit]").await.unwrap().click().await.unwrap();
    until(&page, "location.pathname.startsWith('/c/')").await;
    // The redesign's finished answer: the assistant's own action bar after its unit.
    until(&page, "!!document.querySelector('[data-content-search-unit-key$=\":assistant\"] ~ .turn-action-controls')")
        .await;
    let oracle = fake.hub.oracle();
    let only = oracle["conversations"].as_object().unwrap().values().next().unwrap().clone();
    assert_eq!(only["user_turns"].as_array().unwrap().len(), 1);
    browser.close().await.ok();
    browser.wait().await.ok();
}

/// The tool-approval card's buttons work as the live card's: a click in the
/// page answers it (its buttons then disabled), and fakechat's recorder
/// counts the click, so a test can assert that the product never clicked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_click_on_the_approval_card_answers_it_and_is_counted() {
    let fake = fakechat::start("127.0.0.1:0".parse().unwrap(), None, Csp::Strict, None).await.unwrap();
    let id = fake.hub.submit(None, None, "call a tool", None, None, None).unwrap();
    assert!(fake.hub.approval(&id, Some("Orchestrator")));
    let dir = tempfile::tempdir().unwrap();
    let mut browser = launch(fake.addr.port(), dir.path()).await;
    let page = browser.new_page(format!("https://chatgpt.com/c/{id}")).await.unwrap();
    let allow = "[data-codex-approval-surface] button:nth-of-type(2)";
    until(&page, &format!("document.querySelector('{allow}')?.disabled === false")).await;
    assert_eq!(fake.hub.approval_clicks(&id), 0);
    page.find_element(allow).await.unwrap().click().await.unwrap();
    until(&page, &format!("document.querySelector('{allow}')?.disabled === true")).await;
    assert_eq!(fake.hub.approval_clicks(&id), 1);
    let oracle = fake.hub.oracle();
    assert_eq!(oracle["conversations"][&id]["approval_clicked"], serde_json::json!(["Allow once"]), "{oracle:#}");
    assert_eq!(oracle["conversations"][&id]["approval"]["answered"], true);
    browser.close().await.ok();
    browser.wait().await.ok();
}
