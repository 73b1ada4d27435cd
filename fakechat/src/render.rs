//! The page as ChatGPT's frontend would render it, from a [`View`]. Pure: the
//! same function serves the live page, its live updates and the fixtures in
//! `chatgpt-dom/fixtures/`, so adapter unit tests and browser tests see one DOM.
//!
//! Every structure comes from the real-evidence corpus in
//! `chatgpt-dom/fixtures/corpus/` (named per function below; the table and
//! the gaps are in `chatgpt-dom/fixtures/README.md`). Two UI generations (A:
//! the 2025–mid-2026 composer with test ids and `<section>` turns; B: the
//! 2026-09 redesign with turn keys, label-only stop, hidden legacy
//! elements), two editors (ProseMirror, Lexical), two locales (English,
//! Japanese), the first paint before hydration, and a deliberately broken
//! variant (elements missing or duplicated).

use std::fmt::Write;

/// Which frontend generation to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// `#prompt-textarea`, `data-testid="send-button"` / `"stop-button"`.
    #[default]
    A,
    /// `form[data-chatgpt-composer]`, a textbox and the form's submit button.
    B,
}

/// Which rich-text editor the composer uses (generation A only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Editor {
    /// `div#prompt-textarea.ProseMirror`.
    #[default]
    ProseMirror,
    /// `[data-lexical-editor="true"]`.
    Lexical,
}

/// UI language; labels change, structure does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Locale {
    /// English.
    #[default]
    En,
    /// Japanese: generation B's labels from the 2026-09 map
    /// (`b-2026-09-ja-*`); generation A reads its test ids, its Japanese
    /// labels are an assumption.
    Ja,
}

/// Whether the expected elements are intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Integrity {
    /// As the generation renders it.
    #[default]
    Intact,
    /// The composer's editor and send button are missing.
    Missing,
    /// The editor and send button appear twice.
    Duplicated,
}

/// What occupies the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Screen {
    /// The chat: thread and composer.
    #[default]
    Chat,
    /// Still loading: a skeleton, no composer.
    Loading,
    /// Signed out: the login screen.
    SignedOut,
    /// A bot challenge interstitial, as chatgpt.com serves it
    /// (`x-2026-06-challenge-served`).
    Challenge,
    /// The server-rendered page that never hydrates: the fallback textarea,
    /// no editor (`a-2025-09-new-chat-prehydration`, `b-2026-09-prehydration`).
    PreHydration,
    /// A logged-out chat: composer and turns, and Log in / Sign up
    /// (`a-2026-04-signed-out-sections`).
    LoggedOutChat,
}

/// An error shown inside the last assistant turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnError {
    /// "Message delivery timed out. Please try again." with Retry.
    DeliveryTimeout,
    /// "Something went wrong. Please try again." with Retry.
    SomethingWentWrong,
    /// "You've reached the maximum length for this conversation…" with
    /// "Start new chat": the conversation takes no more turns.
    TooLong,
}

/// One turn of the thread.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Turn {
    /// `user` or `assistant`.
    pub role: Role,
    /// Visible text.
    pub text: String,
    /// Finished (assistant): shows the action bar with the copy button.
    pub finished: bool,
    /// An error inside the turn (assistant).
    pub error: Option<TurnError>,
    /// The tool calls the assistant made in this turn, in order.
    #[serde(default)]
    pub calls: Vec<ToolCall>,
}

/// One connector call in an assistant turn. ChatGPT shows it only as a
/// collapsed "Called tool" row (one row can stand for several calls). Its
/// request id (the call's `x-request-id` before its `/`) is the turn's:
/// every connector call of one turn carries the same one. The id lands in
/// the page's data first on a plain message, the moment the turn starts a
/// connector request (`stamped`), and on the call's own `api_tool` request
/// message only once that clears a safety check (`shown`; live, forty
/// seconds later).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The turn's request id (the header's).
    pub request_id: String,
    /// `metadata.request_id` when the page shows another than the header's
    /// (a planted fault, [`crate::hub::RequestIds::OtherForm`]).
    #[serde(default)]
    pub shown_id: Option<String>,
    /// The tool called.
    pub tool: String,
    /// The app's name as ChatGPT knows it (the request path's first segment).
    pub app: String,
    /// The plain message with the request id is in the page's data.
    #[serde(default)]
    pub stamped: bool,
    /// The `api_tool` request message (and its result) is in the page's data.
    pub shown: bool,
}

/// The collapsed row a turn's connector calls render as. What a human
/// reads on it: the words "Called tool" and nothing else, one row for
/// several calls (`../shared/CHATGPT-DOM.md`, "Tool calls in the
/// conversation"). The markup is NOT from a rendered page: no public
/// capture of this row was found (searched: "Called tool" across the
/// stored repositories). Its class only follows the selector public code
/// uses for it (totec448-spec/chat-on-steroids `extension/fiber.js` at
/// 0cce1eecfc290627d3ec829b8ae7a6dac4dbee91: `span[class*="tool-message"]`),
/// and no locale's wording is known, so every locale gets the English words.
/// The product never reads this row (attribution reads page data only; the
/// progress mark counts the turn's text), so nothing depends on the guess.
fn tool_row(turn: &Turn) -> &'static str {
    if turn.calls.is_empty() {
        ""
    } else {
        "<div class=\"flex items-center\"><span class=\"tool-message text-token-text-secondary\">Called tool</span></div>"
    }
}

/// The page data of a turn, as React keeps it on the turn's element: the
/// turn's message list, in the shapes ChatGPT's conversation model uses.
/// A request id first lands on a plain assistant message (`recipient`
/// `all`) with `metadata.request_id`; the request message, later, is an
/// assistant message whose `recipient` starts `api_tool`, whose code
/// content begins `{"path":"/<app>/link_…/<tool>"` and is stored
/// truncated, with the same `metadata.request_id`; the result is a tool
/// message with `metadata.invoked_resource` and `metadata.parent_id`.
/// Evidence (public code that reads the live page, not a rendered page:
/// page data is not in any saved HTML): `../shared/CHATGPT-DOM.md`, and
/// totec448-spec/chat-on-steroids `extension/fiber.js` at
/// 0cce1eecfc290627d3ec829b8ae7a6dac4dbee91 (`requestIdsOf`: "ChatGPT
/// stamps `metadata.request_id` on the plain `recipient: "all"` message the
/// moment a turn starts a connector request, and only materializes the
/// `api_tool` message once its safety check clears — live 2026-08-21,
/// forty seconds later"; `requestOf`, `PATH_HEAD`, and `turnMessagesOf`
/// reading `turn.messages`/`allMessages` up a turn element's
/// `__reactFiber$…` chain; `completedCallOf` and `conflictingRequestScope`
/// reading the result message's own `metadata.request_id`, the turn's),
/// `src/main/session/correlation.ts` at
/// e6b5d8ab5a177244ef373f06e6f80adc86d27e98 ("Live ChatGPT gives every
/// connector request in one turn the same request_id") and
/// `src/main/mcp/call-context.ts` at 0f255b727914807d4f2c42664b6dc4a584d5d203
/// (the header's id before `/` is the page's `metadata.request_id`,
/// "measured live on 2026-08-18"). NOT from evidence: the plain message's
/// content and channel (no capture shows them; the product reads only its
/// `metadata.request_id`). A human reads none of it. Where the real page
/// differs, the page script finds no id and the call is refused
/// (`UNIDENTIFIED_CALLER`): it fails closed.
pub fn turn_messages(turn: &Turn, n: usize) -> serde_json::Value {
    let mut messages = Vec::new();
    let mut stamped: Vec<&str> = Vec::new();
    for (i, call) in turn.calls.iter().enumerate() {
        let shown_id = call.shown_id.as_deref().unwrap_or(&call.request_id);
        if call.stamped && !stamped.contains(&shown_id) {
            stamped.push(shown_id);
            messages.push(serde_json::json!({
                "id": format!("msg-{n}-request-{}", stamped.len()),
                "author": {"role": "assistant"},
                "recipient": "all",
                "channel": "commentary",
                "content": {"content_type": "text", "parts": [""]},
                "metadata": {"request_id": shown_id}
            }));
        }
        if !call.shown {
            continue;
        }
        let request = format!("msg-{n}-call-{i}");
        let link = &call.request_id[call.request_id.len().saturating_sub(8)..];
        messages.push(serde_json::json!({
            "id": request,
            "author": {"role": "assistant"},
            "recipient": "api_tool.call_tool",
            "channel": "commentary",
            "content": {"content_type": "code", "text": format!(
                "{{\"path\":\"/{}/link_{link}/{}\",\"args\":\"{{\\\"capab", call.app, call.tool)},
            "metadata": {"request_id": shown_id}
        }));
        messages.push(serde_json::json!({
            "id": format!("msg-{n}-result-{i}"),
            "author": {"role": "tool", "name": "api_tool.call_tool"},
            "content": {"content_type": "text", "parts": [""]},
            "metadata": {
                "parent_id": request,
                "request_id": shown_id,
                "invoked_resource": {"app_name": call.app, "resource_uri": format!("/asdk_app_fake/link_{link}/{}", call.tool)}
            }
        }));
    }
    if turn.role == Role::Assistant && !turn.text.is_empty() {
        messages.push(serde_json::json!({
            "id": format!("msg-{n}"),
            "author": {"role": "assistant"},
            "recipient": "all",
            "channel": "final",
            "content": {"content_type": "text", "parts": [turn.text]}
        }));
    }
    serde_json::Value::Array(messages)
}

/// Every turn anchor's page data, keyed by the anchor's own attribute value
/// (`data-testid` in generation A, `data-turn-key` in B): what the page's
/// script hangs on each anchor as React's fiber would.
pub fn page_data(view: &View) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    match view.generation {
        Generation::A => {
            for (i, turn) in view.turns.iter().enumerate() {
                out.insert(format!("conversation-turn-{}", i + 1), turn_messages(turn, i + 1));
            }
        }
        Generation::B => {
            // The exchanges of `thread_b`: a user turn opens one, the
            // assistant's answer joins it.
            let mut k: Option<usize> = None;
            let mut answered = true;
            for (i, turn) in view.turns.iter().enumerate() {
                if turn.role == Role::User || answered {
                    k = Some(k.map_or(0, |k| k + 1));
                }
                answered = turn.role == Role::Assistant;
                let entry = out.entry(format!("turn-{}", k.unwrap_or(0))).or_insert_with(|| serde_json::json!([]));
                if let (Some(all), serde_json::Value::Array(more)) = (entry.as_array_mut(), turn_messages(turn, i + 1))
                {
                    all.extend(more);
                }
            }
        }
    }
    serde_json::Value::Object(out)
}

/// Author of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person (or the orchestrator typing for them).
    User,
    /// The model.
    Assistant,
}

/// ChatGPT's tool-approval card ("Allow ChatGPT to use <App>?"): a question
/// to the person, which the product never answers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Approval {
    /// The app named on the card.
    pub app: String,
    /// Answered: the card stays, its buttons disabled.
    pub answered: bool,
    /// The turn it stands in (an index into [`View::turns`]).
    pub turn: usize,
}

/// How an app (a developer-mode connector) can be used right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppState {
    /// Selectable; its tools reach the model.
    #[default]
    Enabled,
    /// Listed, greyed out, not selectable.
    Disabled,
    /// Selectable, but ChatGPT holds an old tool list until it is refreshed.
    Stale,
}

/// An app in the account's app list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct App {
    /// The connector id (`plugin:<id>` in the page).
    pub id: String,
    /// The name the operator gave it.
    pub label: String,
    /// Usable, disabled or stale.
    #[serde(default)]
    pub state: AppState,
}

/// A model the account's picker offers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Model {
    /// Its label in the picker ("GPT-5.5").
    pub label: String,
    /// The slug in its generation-A test id (`model-switcher-<slug>`).
    pub slug: String,
    /// Listed under "Legacy models" (generation A) rather than first.
    #[serde(default)]
    pub legacy: bool,
    /// Shown but not selectable (a plan without it, a cap reached).
    #[serde(default)]
    pub disabled: bool,
}

/// How far the model picker is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Picker {
    /// The first level.
    Open,
    /// Generation B: "Show advanced options" expanded (Model and Effort openers).
    Advanced,
    /// The model submenu: A's "Legacy models", B's Advanced → Model.
    Submenu,
    /// Generation B: Advanced → Effort, whose tiers end with Pro (2026-08-10).
    Effort,
}

/// The effort a fresh page shows in generation B's pill.
pub const DEFAULT_EFFORT: &str = "High";
/// The first level's tiers (the 2026-06 intelligence content) and the
/// Effort submenu's (Advanced → Effort, 2026-08: Pro is an effort level;
/// steipete/oracle 0.17.2, TheBadFella/CatGPT PR #75).
const TIERS: &[&str] = &["Instant", "Medium", "High"];
const EFFORTS: &[&str] = &["Instant", "Medium", "High", "Extra High", "Pro"];

/// Which app popover is open in the composer.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Menu {
    /// The `+` menu's first level.
    Root,
    /// `+` → More.
    More,
    /// `+` → More → Developer mode: the app list.
    Apps,
    /// The `@` mention popover for this query.
    Mention(String),
}

/// Everything the renderer needs.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// What occupies the page.
    pub screen: Screen,
    /// Frontend generation.
    pub generation: Generation,
    /// Composer editor.
    pub editor: Editor,
    /// Labels' language.
    pub locale: Locale,
    /// Intact or broken.
    pub integrity: Integrity,
    /// The thread.
    pub turns: Vec<Turn>,
    /// An assistant turn is streaming.
    pub generating: bool,
    /// The slow-answer notice ("Our systems are thinking a bit more…"),
    /// inside the last turn.
    pub deferral: bool,
    /// The stream-recovery notice ("Connection interrupted. Waiting for the
    /// complete answer"), inside the last turn.
    pub recovery: bool,
    /// A tool-approval card, in the turn it stood in.
    pub approval: Option<Approval>,
    /// The "Too many requests" dialog.
    pub rate_limited: bool,
    /// The conversation UUID, once it has one.
    pub conversation: Option<String>,
    /// The script nonce of this response.
    pub nonce: String,
    /// The ChatGPT Project the page belongs to (`g-p-…`), if any.
    pub project: Option<String>,
    /// Update counter the page's script resumes from.
    pub version: u64,
    /// The account's apps (what the `+` menu and the mention popover list).
    pub apps: Vec<App>,
    /// The app pill in the composer: chosen, bound, or inherited from the Project.
    pub pill: Option<App>,
    /// An app mentioned inside the editor, as generation B's `@` route
    /// leaves it (see [`mention`]).
    pub mention: Option<App>,
    /// An open app popover.
    pub menu: Option<Menu>,
    /// The server's first paint: the fallback textarea shows and the editor
    /// arrives with hydration (the page script inserts it), as on the real
    /// site. Fixtures show the hydrated page.
    pub first_paint: bool,
    /// The models the account's picker offers; none: the page shows no
    /// picker (every page before model pinning was modelled).
    pub models: Vec<Model>,
    /// The model the picker shows as current.
    pub model: Option<String>,
    /// The thinking effort the page chose (none: the account's default,
    /// [`DEFAULT_EFFORT`]).
    pub effort: Option<String>,
    /// The picker's trigger opens on `pointerdown` only (2026-09).
    pub picker_pointer_only: bool,
    /// The picker, open.
    pub picker: Option<Picker>,
}

impl View {
    /// What, when changed, makes the page reload instead of patching the thread.
    pub fn layout(&self) -> String {
        format!(
            "{:?}/{:?}/{:?}/{:?}/{:?}/{}",
            self.screen, self.generation, self.editor, self.locale, self.integrity, self.rate_limited
        )
    }
}

struct Labels {
    send: &'static str,
    stop: &'static str,
    voice: &'static str,
    dictate: &'static str,
    textbox: &'static str,
    copy: &'static str,
    copy_message: &'static str,
    you_said: &'static str,
    chatgpt_said: &'static str,
    retry: &'static str,
    delivery_timeout: &'static str,
    went_wrong: &'static str,
    deferral: &'static str,
    edit_message: &'static str,
    /// The finished answer's other bar buttons: generation A's (test id,
    /// label) and generation B's labels, where the locale has evidence.
    a_bar: &'static [(&'static str, &'static str)],
    b_bar: &'static [&'static str],
    too_many: &'static str,
    too_quickly: &'static str,
    got_it: &'static str,
    log_in: &'static str,
    sign_up: &'static str,
    get_started: &'static str,
    verify: &'static str,
}

/// Labels per locale and generation. English: generation A from the
/// 2025–2026 captures ("Send prompt", "Stop streaming", "Start Voice",
/// "Copy response"), B from the 2026-09 map ("Send", "Stop", "Ask
/// ChatGPT"). Japanese: B from the 2026-09 map (送信, 停止, 再試行, the
/// delivery-timeout alert); A's Japanese labels and the texts marked below
/// have no capture.
fn labels(locale: Locale, generation: Generation) -> Labels {
    let a = generation == Generation::A;
    match locale {
        Locale::En => Labels {
            send: if a { "Send prompt" } else { "Send" },
            stop: if a { "Stop streaming" } else { "Stop" },
            voice: "Start Voice",
            dictate: if a { "Dictate button" } else { "Dictate" },
            textbox: "Ask ChatGPT",
            copy: if a { "Copy response" } else { "Copy" },
            copy_message: "Copy message",
            edit_message: "Edit message",
            // adamlporter/obsidian-AI-exporter chat-simple.html @ fb418636 (2026-01-29).
            a_bar: &[
                ("good-response-turn-action-button", "Good response"),
                ("bad-response-turn-action-button", "Bad response"),
                ("", "Share"),
                ("", "More actions"),
            ],
            // zain1237/codex-chatgpt-web chatgpt-power-complete.html @ e50725e6 (2026-09-25).
            b_bar: &["Rate response", "Share", "Regenerate response", "More actions"],
            you_said: "You said:",
            chatgpt_said: "ChatGPT said:",
            retry: "Retry",
            delivery_timeout: "Message delivery timed out. Please try again.",
            went_wrong: "Something went wrong. Please try again.",
            // A: the long-wait banner's text (GPT-AntiCurse @ 3e7da0a0; search-index id
            // 61173130995). B: the safety-review text of universal-dev-architecture's
            // test @ 2a913373 (the structure was seen live in Russian, Koba 2026-10-07).
            deferral: if a {
                "Our systems are thinking a bit more about this request before responding. You can retry with a \
                 faster model for a quicker response, though it may be less capable of handling complex requests."
            } else {
                "Our systems are checking a few extra things before responding. You can retry with a faster model \
                 to get an answer sooner."
            },
            // ../shared/CHATGPT-DOM.md; no rendered capture.
            too_many: "Too many requests",
            too_quickly: "You're making requests too quickly. We've temporarily limited access to your conversations.",
            got_it: "Got it",
            log_in: "Log in",
            sign_up: "Sign up for free",
            get_started: "Get started",
            verify: "Verify you are human by completing the action below.",
        },
        Locale::Ja => Labels {
            send: if a { "プロンプトを送信する" } else { "送信" },
            stop: if a { "ストリーミングの停止" } else { "停止" },
            voice: "音声モードを開始",
            dictate: "音声入力",
            textbox: "ChatGPT に質問",
            // Code naming the Japanese labels (search-index ids 70457634709,
            // 70283863509: 回答をコピーする, 回答を再生成; 70652083019: メッセージを編集).
            copy: "回答をコピーする",
            copy_message: "メッセージをコピーする",
            edit_message: "メッセージを編集",
            // No Japanese label of Good / Bad / Share / More is known: A keeps its test ids only.
            a_bar: &[("good-response-turn-action-button", ""), ("bad-response-turn-action-button", "")],
            b_bar: &["回答を再生成"],
            you_said: "あなたの発言:",
            chatgpt_said: "ChatGPT の発言:",
            retry: "再試行",
            delivery_timeout: "メッセージ配信がタイムアウトしました。もう一度お試しください。",
            // No capture of these in Japanese: the adapter reads them as unknown incidents.
            went_wrong: "問題が発生しました。もう一度お試しください。",
            // No capture: the adapter reads it as a status it does not know (busy all the same).
            deferral: "システムがこのリクエストについてもう少し考えています。",
            too_many: "リクエストが多すぎます",
            too_quickly: "リクエストの送信が速すぎます。",
            got_it: "了解しました",
            log_in: "ログイン",
            sign_up: "無料でサインアップ",
            get_started: "はじめる",
            verify: "人間であることを確認してください。",
        },
    }
}

/// Enough layout that elements have boxes a browser can click (inline
/// styles are allowed by the real site's CSP, as here).
const STYLE: &str = "<style>body{font-family:sans-serif;margin:0}main{display:flex;flex-direction:column;min-height:100vh}\
#thread{flex:1;padding:16px}article{margin:8px 0}form.composer{display:flex;gap:8px;padding:16px;align-items:flex-end}\
form [contenteditable]{flex:1;min-height:40px;min-width:320px;border:1px solid #999;border-radius:8px;padding:8px}\
#composer-actions button,.turn-actions button,.btn{min-width:36px;min-height:36px}[hidden],.hidden{display:none}\
[role=dialog]{position:fixed;top:30%;left:30%;background:#fff;border:1px solid #333;padding:24px}</style>";

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The page's permanent live regions, empty, outside every turn (every
/// 2026 capture: `a-2026-04-signed-out-sections`, `b-2026-09-*`).
const LIVE_REGIONS: &str = "<div id=\"aria-notify-live-region-assertive\" class=\"sr-only\" role=\"alert\" aria-live=\"assertive\" \
aria-atomic=\"true\" aria-relevant=\"additions text\"><span></span></div>\
<div id=\"aria-notify-live-region-polite\" class=\"sr-only\" role=\"status\" aria-live=\"polite\" aria-atomic=\"true\" \
aria-relevant=\"additions text\"><span></span></div>\n";

fn lang(locale: Locale) -> &'static str {
    match locale {
        Locale::En => "en",
        Locale::Ja => "ja",
    }
}

/// The whole document.
pub fn page(view: &View) -> String {
    let generation = match view.generation {
        Generation::A => "a",
        Generation::B => "b",
    };
    // The composer slot's two idle forms, for the page script to swap as the
    // editor fills and empties (the real frontend re-renders the slot).
    let slot = |draft| escape(&slot(view, draft));
    let hydrate =
        if view.first_paint && view.screen != Screen::PreHydration { escape(&editors(view)) } else { String::new() };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"{lang}\">\n<head>\n<meta charset=\"utf-8\">\n<title>ChatGPT</title>\n{STYLE}\n\
         <script nonce=\"{nonce}\" src=\"/_fakechat/app.js\" defer></script>\n</head>\n\
         <body data-fakechat-generation=\"{generation}\" data-fakechat-conversation=\"{conv}\" \
         data-fakechat-project=\"{project}\" data-fakechat-version=\"{version}\" data-fakechat-layout=\"{layout}\" \
         data-fakechat-slot-empty=\"{empty}\" data-fakechat-slot-draft=\"{draft}\" data-fakechat-editor=\"{hydrate}\" \
         data-fakechat-page-data=\"{data}\">\n",
        data = escape(&page_data(view).to_string()),
        lang = lang(view.locale),
        nonce = escape(&view.nonce),
        conv = escape(view.conversation.as_deref().unwrap_or("")),
        project = escape(view.project.as_deref().unwrap_or("")),
        version = view.version,
        layout = escape(&view.layout()),
        empty = slot(false),
        draft = slot(true),
    );
    let l = labels(view.locale, view.generation);
    match view.screen {
        Screen::Chat | Screen::PreHydration | Screen::LoggedOutChat => {
            if view.screen == Screen::LoggedOutChat {
                let _ = writeln!(
                    out,
                    "<div class=\"header\"><button class=\"btn btn-primary\" data-testid=\"login-button\">{}</button>\
                     <button data-testid=\"signup-button\">{}</button></div>",
                    l.log_in, l.sign_up
                );
            }
            if view.generation == Generation::B {
                out.push_str(&hidden_legacy(view));
            }
            out.push_str("<div id=\"__next\"><main id=\"main\">\n");
            if view.generation == Generation::A && !view.models.is_empty() {
                let _ = writeln!(out, "<header id=\"page-header\">{}</header>", model_trigger(view));
            }
            out.push_str(&thread(view));
            out.push_str(&composer(view));
            out.push_str("</main></div>\n");
            if view.rate_limited {
                out.push_str(&rate_limit_dialog(view));
            }
            out.push_str(LIVE_REGIONS);
        }
        Screen::Loading => {
            out.push_str("<div id=\"__next\"><main id=\"main\" aria-busy=\"true\"><div class=\"fakechat-skeleton\" data-fakechat-loading=\"true\"></div></main></div>\n");
        }
        Screen::SignedOut => {
            let _ = writeln!(
                out,
                "<div id=\"__next\"><div data-testid=\"login-screen\"><h1>{}</h1>\
                 <button data-testid=\"login-button\">{}</button>\
                 <button data-testid=\"signup-button\">{}</button></div></div>",
                l.get_started, l.log_in, l.sign_up
            );
        }
        // The bot check as chatgpt.com serves it (`x-2026-06-challenge-served`):
        // no widget, the platform's error text in `<noscript>`, and the inline
        // script that sets its options object. fakechat's script only sets
        // the object (no platform to load on loopback).
        Screen::Challenge => {
            let _ = writeln!(
                out,
                "<div class=\"container\" data-fakechat-challenge=\"true\"><div class=\"logo\"></div><div class=\"data\">\
                 <div class=\"main-wrapper\" role=\"main\"><div class=\"main-content\"><p>{verify}</p><noscript><div class=\"h2\">\
                 <span id=\"challenge-error-text\">Enable JavaScript and cookies to continue</span></div></noscript></div></div>\
                 <script nonce=\"{nonce}\">window._cf_chl_opt = {{cvId: '3', cZone: 'chatgpt.com', cType: 'managed'}};</script>\
                 </div></div>",
                verify = l.verify,
                nonce = escape(&view.nonce),
            );
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// Generation B keeps legacy elements hidden in the page: an old
/// `#prompt-textarea`, an old stop button, and on a conversation the home
/// composer (`b-2026-09-home-empty-hidden-legacy`,
/// `b-2026-09-thread-idle-finished`; *how* they are hidden is not
/// recorded: the `hidden` attribute is an assumption).
fn hidden_legacy(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let mut out = String::from(
        "<div hidden><div id=\"prompt-textarea\" contenteditable=\"true\"></div></div>\
         <button data-testid=\"stop-button\" aria-label=\"Stop streaming\" hidden></button>\n",
    );
    if view.conversation.is_some() {
        let _ = writeln!(
            out,
            "<form data-chatgpt-composer=\"\" data-composer-placement=\"home\" hidden><div contenteditable=\"true\" \
             role=\"textbox\" aria-label=\"{}\" class=\"ProseMirror\"><p></p></div></form>",
            l.textbox
        );
    }
    out
}

fn turn_error(view: &View, error: TurnError) -> String {
    let l = labels(view.locale, view.generation);
    let text = match error {
        TurnError::DeliveryTimeout => l.delivery_timeout,
        TurnError::SomethingWentWrong => l.went_wrong,
        TurnError::TooLong => TOO_LONG,
    };
    match (view.generation, error) {
        // The live 2026-09-06 observation in MichalMatu/local-agent
        // (`docs/CHATGPT_DOM_CONTRACT.md`): the sentence in
        // `div.text-token-text-error > p` inside the assistant message, and a
        // secondary button with an icon, "Start new chat" (no test id, no role).
        (Generation::A, TurnError::TooLong) => format!(
            "<div class=\"text-token-text-error\"><div class=\"markdown\"><p>{text}</p></div></div>\
             <button class=\"btn relative btn-secondary\"><svg width=\"16\" height=\"16\" aria-hidden=\"true\"></svg>\
             Start new chat</button>"
        ),
        // No capture of generation B's notice exists: it is shown as B's
        // other in-turn incidents are (an alert). Whatever B really renders,
        // the adapter reads an in-turn alert it has no words for as
        // `error{unknown}`, which types nothing.
        (Generation::B, TurnError::TooLong) => format!(
            "<aside role=\"alert\"><div aria-hidden=\"true\"></div><p>{text}</p>\
             <button type=\"button\" class=\"btn\">Start new chat</button></aside>"
        ),
        // `a-2026-06-error-delivery-timeout`: the error text and Retry inside the message.
        (Generation::A, _) => format!(
            "<div class=\"text-token-text-error\"><div class=\"markdown\"><p>{text}</p></div></div>\
             <button data-testid=\"regenerate-thread-error-button\" class=\"btn\">{}</button>",
            l.retry
        ),
        // `b-2026-09-ja-error-delivery-timeout`: an alert in the turn, Retry without a test id.
        (Generation::B, _) => format!(
            "<aside role=\"alert\"><div aria-hidden=\"true\"></div><p>{text}</p>\
             <button type=\"button\" class=\"btn\" data-fakechat-retry=\"true\">{}</button></aside>",
            l.retry
        ),
    }
}

/// The conversation-length notice as quoted in 2025–2026 (the curly
/// apostrophe of the live page): English only, no other locale is known.
const TOO_LONG: &str =
    "You\u{2019}ve reached the maximum length for this conversation, but you can keep talking by starting a new chat.";

/// The recovery notice's words: the client's default for
/// `errors.network.reconnecting_fallback` (KobaProduction/chatgpt-booster
/// `docs/CHATGPT_CLIENT_RESEARCH.md` @ 58739f28, Bloom++ @ e1c79ffb). No
/// Japanese text is known: every locale gets the English words (the
/// adapter reads the notice by its class).
const RECOVERY: &str = "Connection interrupted. Waiting for the complete answer";

/// The notices and the card that stand in the last turn (or, for the card,
/// in the turn it was shown in), in the order they render: inside the
/// running turn in every source (GPT-AntiCurse for A, Koba's live
/// observation for B; no capture shows one after the last turn).
fn in_turn(view: &View, index: usize) -> String {
    let l = labels(view.locale, view.generation);
    let last = index + 1 == view.turns.len();
    let mut out = String::new();
    let running = view.turns.get(index).is_some_and(|t| t.role == Role::Assistant && !t.finished && t.error.is_none());
    match view.generation {
        // `[data-streaming-response-status]` in the running turn; the long-wait
        // banner is its `.loading-shimmer-tertiary` with a help link
        // (`a-2026-09-working-status`, `a-2026-deferral-notice`).
        Generation::A if last && (view.deferral || (view.generating && running)) => {
            let banner = if view.deferral {
                format!(
                    "<span class=\"loading-shimmer-tertiary\">{} <a href=\"https://help.openai.com/articles/20001326\" \
                     target=\"_blank\" rel=\"noreferrer\">Learn more</a></span>",
                    l.deferral
                )
            } else {
                String::new()
            };
            let _ = write!(out, "<div data-streaming-response-status=\"streaming\"><div>{banner}</div></div>");
        }
        // A polite status with a shimmer and a shield icon (`b-2026-10-safety-review`).
        Generation::B if last && view.deferral => {
            let _ = write!(
                out,
                "<div role=\"status\" aria-live=\"polite\" class=\"loading-shimmer\"><svg aria-hidden=\"true\" \
                 width=\"16\" height=\"16\"></svg><span>{}</span></div>",
                l.deferral
            );
        }
        _ => {}
    }
    // `b-2026-10-recovery-finished-looking` (generation B, live); generation
    // A's recovery line is not captured: the same markup is an assumption.
    if last && view.recovery {
        let _ = write!(out, "<div role=\"status\"><span class=\"text-chatgpt-recovery\">{RECOVERY}</span></div>");
    }
    if let Some(card) = view.approval.as_ref().filter(|c| c.turn == index) {
        out.push_str(&approval_card(card));
    }
    out
}

/// The tool-approval card (`b-2026-10-approval-card-*`): the live card's
/// structure (`div[data-codex-approval-surface="true"]` holding a
/// `role=alert` question, totec448-spec/chat-on-steroids, 2026-10-06, in
/// German) with the English words of Froraut/NEKODEX's test ("Allow ChatGPT
/// to use <App>?", Allow once / Always allow / Deny). Every locale gets the
/// English words (the Japanese ones are not known; the adapter reads the
/// card by structure). Answered, it keeps its buttons, disabled. Generation
/// A's card is not captured: both generations render this one.
fn approval_card(card: &Approval) -> String {
    let disabled = if card.answered { " disabled=\"\"" } else { "" };
    format!(
        "<div data-codex-approval-surface=\"true\"><div role=\"alert\"><p>Allow ChatGPT to use {}?</p></div>\
         <button type=\"button\"{disabled}>Deny</button><button type=\"button\"{disabled}>Allow once</button>\
         <button type=\"button\"{disabled}>Always allow</button></div>",
        escape(&card.app)
    )
}

/// The thread region (replaced on every update).
pub fn thread(view: &View) -> String {
    let mut out = String::from("<div id=\"thread-region\"><div id=\"thread\" role=\"presentation\">\n");
    match view.generation {
        Generation::A => thread_a(view, &mut out),
        Generation::B => thread_b(view, &mut out),
    }
    // A card shown before any turn (none in the evidence) still shows;
    // notices have no place without a turn.
    if let Some(card) = view.approval.as_ref().filter(|c| c.turn >= view.turns.len()) {
        out.push_str(&approval_card(card));
    }
    out.push_str("</div>\n</div>\n");
    out
}

/// Generation A, 2026: one `<section>` per message with the test id and
/// `data-turn`, a screen-reader heading, the message, the running turn's
/// streaming status, and once an answer is finished its action bar: Copy,
/// Good / Bad response, Share, More actions; a user turn's bar is Copy and
/// Edit message (`a-2026-04-signed-out-sections`,
/// `a-2026-07-idle-section-containers`; the bar from adamlporter's
/// chat-simple.html @ fb418636).
fn thread_a(view: &View, out: &mut String) {
    let l = labels(view.locale, view.generation);
    for (i, turn) in view.turns.iter().enumerate() {
        let n = i + 1;
        let (role, said, copy) = match turn.role {
            Role::User => ("user", l.you_said, l.copy_message),
            Role::Assistant => ("assistant", l.chatgpt_said, l.copy),
        };
        let _ = write!(
            out,
            "<section class=\"text-token-text-primary\" dir=\"auto\" data-turn-id=\"turn-{n}\" \
             data-testid=\"conversation-turn-{n}\" data-scroll-anchor=\"false\" data-turn=\"{role}\">\
             <h4 class=\"sr-only select-none\">{said}</h4>\
             <div class=\"min-h-8 text-message\" data-message-author-role=\"{role}\" data-message-id=\"msg-{n}\" dir=\"auto\">\
             <div class=\"markdown\">{}</div>{}",
            escape(&turn.text),
            tool_row(turn)
        );
        if let Some(error) = turn.error {
            out.push_str(&turn_error(view, error));
        }
        out.push_str("</div>");
        out.push_str(&in_turn(view, i));
        if turn.error.is_none() && (turn.finished || turn.role == Role::User) {
            let _ = write!(
                out,
                "<div class=\"turn-actions\"><button data-testid=\"copy-turn-action-button\" aria-label=\"{copy}\" \
                 data-state=\"closed\"></button>"
            );
            match turn.role {
                Role::User => {
                    let _ = write!(out, "<button aria-label=\"{}\"></button>", l.edit_message);
                }
                Role::Assistant => {
                    for (test_id, label) in l.a_bar {
                        let test_id =
                            if test_id.is_empty() { String::new() } else { format!(" data-testid=\"{test_id}\"") };
                        let label = if label.is_empty() { String::new() } else { format!(" aria-label=\"{label}\"") };
                        let _ = write!(out, "<button{test_id}{label} data-state=\"closed\"></button>");
                    }
                }
            }
            out.push_str("</div>");
        }
        out.push_str("</section>\n");
    }
}

/// Generation B: one `[data-turn-key]` per exchange (with ChatGPT's own
/// `data-talvt-turn-state`, `in_progress` or `complete`: Koba, live
/// 2026-10-07), the user's unit with its own action row (Copy message,
/// Edit message), the assistant's unit (`data-markdown-animated` while it
/// streams), the running turn's notices, and, once finished, the
/// assistant's action bar: Copy, Rate response (a menu), Share,
/// Regenerate response, More actions (`b-2026-09-streaming`,
/// `b-2026-09-thread-idle-finished`; the bar from zain1237's
/// chatgpt-power-complete.html @ e50725e6).
fn thread_b(view: &View, out: &mut String) {
    let l = labels(view.locale, view.generation);
    let mut exchanges: Vec<(Option<usize>, Option<usize>)> = Vec::new();
    for (i, turn) in view.turns.iter().enumerate() {
        match (turn.role, exchanges.last_mut()) {
            (Role::Assistant, Some((_, answer @ None))) => *answer = Some(i),
            (Role::User, _) => exchanges.push((Some(i), None)),
            (Role::Assistant, _) => exchanges.push((None, Some(i))),
        }
    }
    for (k, (question, answer)) in exchanges.iter().enumerate() {
        let done = answer.and_then(|a| view.turns.get(a)).is_some_and(|a| a.finished || a.error.is_some());
        let state = if done { "complete" } else { "in_progress" };
        let _ = write!(
            out,
            "<div data-turn-key=\"turn-{k}\" data-talvt-turn-state=\"{state}\"><div data-content-search-turn-key=\"fallback-turn-{k}\"><div><div>"
        );
        if let Some(q) = question.and_then(|q| view.turns.get(q)) {
            let _ = write!(
                out,
                "<h4 class=\"sr-only\">{}</h4><div data-content-search-unit-key=\"fallback-turn-{k}:0:user\">\
                 <div data-user-message-bubble=\"true\"><div dir=\"auto\">{}</div></div>\
                 <div class=\"turn-action-controls\"><button type=\"button\" aria-label=\"{}\"></button>\
                 <button type=\"button\" aria-label=\"{}\"></button></div></div>",
                l.you_said,
                escape(&q.text),
                l.copy_message,
                l.edit_message
            );
        }
        out.push_str("</div><div><span hidden=\"\" data-chatgpt-agent-turn-start=\"\"></span>");
        if let Some(a) = answer.and_then(|a| view.turns.get(a)) {
            if let Some(error) = a.error {
                out.push_str(&turn_error(view, error));
            } else {
                let streaming = if a.finished { "" } else { " data-markdown-animated=\"\"" };
                let _ = write!(
                    out,
                    "<div data-content-search-unit-key=\"fallback-turn-{k}:2:assistant\">\
                     <h4 data-conversation-role=\"assistant\" tabindex=\"-1\" class=\"sr-only\">{}</h4>\
                     {}<div dir=\"auto\"{streaming} data-markdown-text-style=\"assistant-message\"><p>{}</p></div></div>",
                    l.chatgpt_said,
                    tool_row(a),
                    escape(&a.text)
                );
            }
        }
        for i in [*question, *answer].into_iter().flatten() {
            out.push_str(&in_turn(view, i));
        }
        if answer.and_then(|a| view.turns.get(a)).is_some_and(|a| a.finished && a.error.is_none()) {
            let _ = write!(
                out,
                "<div class=\"turn-action-controls\"><span data-state=\"closed\"><button type=\"button\" aria-label=\"{}\"></button></span>",
                l.copy
            );
            for label in l.b_bar {
                let menu = if *label == "Share" { "" } else { " aria-haspopup=\"menu\"" };
                let _ = write!(out, "<button type=\"button\" aria-label=\"{label}\"{menu}></button>");
            }
            out.push_str("</div>");
        }
        out.push_str("</div></div></div></div>\n");
    }
}

/// The app pill, as each generation shows the selected app.
pub fn pill(generation: Generation, app: &App) -> String {
    let label = escape(&app.label);
    match generation {
        Generation::A => format!(
            "<span data-inline-selection-pill=\"\" data-keyword=\"{label}\" data-id=\"plugin:{id}\">{label}</span>",
            id = escape(&app.id)
        ),
        Generation::B => format!("<button type=\"button\" aria-label=\"Remove {label}\">{label}</button>"),
    }
}

/// The editor's paragraph after an app is picked in generation B's `@`
/// list (2026-09): the mention is the paragraph's first node, a
/// non-editable span carrying the app's path, name and link label, then
/// the no-break space the editor keeps after it. Structure from code that
/// drives the live site and validates exactly this paragraph (search-index
/// id 70379502410; `miuuyy/codex-chatgpt-web` `src/chatgpt-session.ts`);
/// the path's id here is made up from the connector id. What a human reads:
/// the app's name at the start of the text box.
pub fn mention(app: &App) -> String {
    let label = escape(&app.label);
    let slug: String =
        app.label.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let hex: String = app.id.bytes().map(|b| format!("{b:02x}")).collect();
    let hex = format!("{hex:0<32.32}");
    format!(
        "<p><span contenteditable=\"false\" app-mention-path=\"app://asdk_app_{hex}\" \
         app-mention-display-name=\"{label}\" app-mention-name=\"{slug}\" \
         data-prompt-link-href=\"app://asdk_app_{hex}\" data-prompt-link-label=\"${slug}\">{label}</span>&nbsp;</p>"
    )
}

fn app_row(view: &View, app: &App, mention: bool) -> String {
    let label = escape(&app.label);
    let status = match (app.state, view.locale) {
        (AppState::Enabled, _) => String::new(),
        (AppState::Disabled, Locale::En) => "<span class=\"badge\">Disabled</span>".into(),
        (AppState::Disabled, Locale::Ja) => "<span class=\"badge\">無効</span>".into(),
        // An assumption (no public capture shows it): a stale connector is
        // marked in the list until the operator refreshes it.
        (AppState::Stale, Locale::En) => "<span data-app-status=\"needs-refresh\">Refresh needed</span>".into(),
        (AppState::Stale, Locale::Ja) => "<span data-app-status=\"needs-refresh\">更新が必要</span>".into(),
    };
    let disabled = if app.state == AppState::Disabled { " aria-disabled=\"true\"" } else { "" };
    let id = escape(&app.id);
    match (mention, view.generation) {
        (true, Generation::A) => format!(
            "<div data-list-navigation-item=\"true\" tabindex=\"0\" data-fakechat-app=\"{id}\"{disabled}><span>{label}</span>{status}</div>"
        ),
        // The redesign's rows: a button whose row content holds the title,
        // then a description (search-index id 68427678508).
        (true, Generation::B) => format!(
            "<button type=\"button\" data-list-navigation-item=\"true\" data-fakechat-app=\"{id}\"{disabled}>\
             <div data-menu-row-content=\"true\"><span><span>{label}</span></span><span>App</span>{status}</div></button>"
        ),
        (false, Generation::A) => format!(
            "<div tabindex=\"0\" role=\"menuitem\" data-composer-plugin-impression-id=\"plugin:{id}\" data-fakechat-app=\"{id}\"{disabled}><span>{label}</span>{status}</div>"
        ),
        (false, Generation::B) => format!(
            "<button type=\"button\" data-list-navigation-item=\"true\" data-fakechat-app=\"{id}\"{disabled}><span>{label}</span>{status}</button>"
        ),
    }
}

/// The open app popover, if any (`#composer-popover`'s content).
pub fn menu(view: &View) -> String {
    let Some(menu) = &view.menu else { return String::new() };
    let ja = view.locale == Locale::Ja;
    let nav = |id: &str, en: &str, japanese: &str| {
        format!(
            "<div tabindex=\"0\" role=\"menuitem\" data-composer-plugin-impression-id=\"{id}\" data-fakechat-nav=\"{id}\"><span>{}</span></div>",
            if ja { japanese } else { en }
        )
    };
    let rows: String = match (menu, view.generation) {
        (Menu::Mention(query), _) => {
            let query = query.to_lowercase();
            let rows: String = view
                .apps
                .iter()
                .filter(|a| a.label.to_lowercase().contains(&query))
                .map(|a| app_row(view, a, true))
                .collect();
            // Generation B's list has no scroll area around its rows in the
            // same evidence (search-index id 68427678508).
            return match view.generation {
                Generation::A => format!("<div data-mention-list-scroll-area=\"\" role=\"listbox\">{rows}</div>"),
                Generation::B => format!("<div role=\"listbox\">{rows}</div>"),
            };
        }
        (Menu::Root, Generation::A) => [
            nav("files", "Add photos &amp; files", "写真とファイルを追加"),
            nav("deep_research", "Deep research", "Deep Research"),
            nav("more", "More", "さらに表示"),
        ]
        .concat(),
        (Menu::More, Generation::A) => {
            [nav("canvas", "Canvas", "Canvas"), nav("developer_mode", "Developer mode", "開発者モード")].concat()
        }
        (Menu::Apps, Generation::A) => view.apps.iter().map(|a| app_row(view, a, false)).collect(),
        // The redesign lists apps directly in the "add context" list.
        (_, Generation::B) => {
            let files = if ja { "写真とファイルを追加" } else { "Add photos &amp; files" };
            let rows: String = view.apps.iter().map(|a| app_row(view, a, false)).collect();
            return format!(
                "<div data-mention-list-scroll-area=\"\"><button type=\"button\" data-list-navigation-item=\"true\" \
                 data-fakechat-nav=\"files\"><span>{files}</span></button>{rows}</div>"
            );
        }
    };
    format!("<div role=\"menu\" data-fakechat-menu=\"{menu:?}\">{rows}</div>")
}

/// The composer's app strip: the pill, if any (replaced on every update).
pub fn apps(view: &View) -> String {
    let pill = view.pill.as_ref().map(|a| pill(view.generation, a)).unwrap_or_default();
    format!("<div id=\"composer-apps\">{pill}</div>")
}

/// The composer's send slot when not generating: the voice button while
/// the editor is empty (no send button at all: every real idle capture,
/// `a-2026-02-idle-articles`, `b-2026-09-home-empty-hidden-legacy`), the
/// send button once it holds text (`a-2026-draft-send-prompt`,
/// `b-2026-09-draft-send`).
pub fn slot(view: &View, draft: bool) -> String {
    let l = labels(view.locale, view.generation);
    match (view.generation, draft) {
        (Generation::A, false) => format!(
            "<button type=\"button\" aria-label=\"{}\" class=\"composer-submit-button-color\" \
             style=\"view-transition-name: var(--vt-composer-speech-button)\"></button>",
            l.voice
        ),
        (Generation::A, true) => format!(
            "<button id=\"composer-submit-button\" aria-label=\"{}\" data-testid=\"send-button\" \
             class=\"composer-submit-btn composer-submit-button-color\"></button>",
            l.send
        ),
        (Generation::B, false) => format!("<button type=\"button\" aria-label=\"{}\"></button>", l.voice),
        (Generation::B, true) => format!("<button type=\"submit\" aria-label=\"{}\"></button>", l.send),
    }
}

/// The composer's action area, replaced on every update: the stop button
/// while generating — generation A's shares the send button's id
/// (`a-2026-generating-stop-streaming`), B's has only its label and
/// `type="button"` (`b-2026-09-streaming`) — else the empty slot (the page
/// script swaps in the send button as the editor fills).
pub fn actions(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let (state, button) = match (view.generation, view.generating) {
        (_, false) => ("empty", slot(view, false)),
        (Generation::A, true) => (
            "stop",
            format!(
                "<button id=\"composer-submit-button\" aria-label=\"{}\" data-testid=\"stop-button\" \
                 class=\"composer-submit-btn composer-secondary-button-color\"></button>",
                l.stop
            ),
        ),
        (Generation::B, true) => ("stop", format!("<button type=\"button\" aria-label=\"{}\"></button>", l.stop)),
    };
    let count = match view.integrity {
        Integrity::Intact => 1,
        Integrity::Missing => 0,
        Integrity::Duplicated => 2,
    };
    format!("<div id=\"composer-actions\" data-slot=\"{state}\">{}</div>", button.repeat(count))
}

/// The composer's editor(s): generation A's ProseMirror `#prompt-textarea`
/// (signed in: no role, no label: `a-2026-02-idle-articles`) or its Lexical
/// variant; B's labelled ProseMirror textbox (`b-2026-09-*`).
fn editors(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let editor = match (view.generation, view.editor) {
        (Generation::A, Editor::ProseMirror) => "<div contenteditable=\"true\" translate=\"no\" class=\"ProseMirror\" \
             id=\"prompt-textarea\" data-virtualkeyboard=\"true\"><p></p></div>"
            .to_owned(),
        (Generation::A, Editor::Lexical) => {
            "<div contenteditable=\"true\" data-lexical-editor=\"true\" role=\"textbox\"><p></p></div>".to_owned()
        }
        (Generation::B, _) => format!(
            "<div contenteditable=\"true\" role=\"textbox\" aria-label=\"{}\" class=\"ProseMirror\" \
             data-composer-markdown=\"\">{}</div>",
            l.textbox,
            view.mention.as_ref().map_or_else(|| "<p></p>".to_owned(), mention)
        ),
    };
    let count = match view.integrity {
        Integrity::Intact => 1,
        Integrity::Missing => 0,
        Integrity::Duplicated => 2,
    };
    editor.repeat(count)
}

fn composer(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    // Before hydration the fallback textarea shows and no editor exists
    // (`a-2025-09-new-chat-prehydration`); after it, the textarea is hidden.
    let painted_only = view.first_paint || view.screen == Screen::PreHydration;
    let editors = if painted_only { String::new() } else { editors(view) };
    let fallback_style = if painted_only { "" } else { " style=\"display: none\"" };
    let (form_open, fallback, plus) = match view.generation {
        Generation::A => (
            "<form data-type=\"unified-composer\" class=\"composer\">",
            format!("<textarea name=\"prompt-textarea\" placeholder=\"Ask anything\"{fallback_style}></textarea>"),
            "<button type=\"button\" data-testid=\"composer-plus-btn\" aria-haspopup=\"menu\"",
        ),
        Generation::B => (
            "<form data-chatgpt-composer=\"\" data-composer-placement=\"thread\" class=\"composer\">",
            format!(
                "<textarea name=\"prompt\" aria-label=\"{}\" placeholder=\"{}\"{fallback_style}></textarea>",
                l.textbox, l.textbox
            ),
            "<button type=\"button\" data-composer-navigation-target=\"add-context\" aria-haspopup=\"menu\"",
        ),
    };
    let plus_label = if view.locale == Locale::Ja { "ファイルなどを追加" } else { "Add files and more" };
    let expanded = matches!(view.menu, Some(Menu::Root | Menu::More | Menu::Apps));
    let pill =
        if view.generation == Generation::B && !view.models.is_empty() { model_trigger(view) } else { String::new() };
    format!(
        "<div id=\"composer-region\">{form_open}{files}{apps}{plus} aria-expanded=\"{expanded}\" aria-label=\"{plus_label}\" class=\"btn\">+</button>\
         {fallback}{editors}{pill}<button type=\"button\" aria-label=\"{dictate}\" class=\"btn\"></button>{actions}</form>\
         <div id=\"composer-popover\">{menu}</div><div id=\"model-popover\">{picker}</div></div>\n",
        actions = actions(view),
        files = attachments_tray(view),
        menu = menu(view),
        apps = apps(view),
        picker = picker(view),
        dictate = l.dictate,
    )
}

/// The composer's hidden file input and the tray a person's attachments
/// show in, empty until they choose a file (the page script fills it:
/// `static/app.js`). Generation A's header area holds plain chips
/// (`a-2026-01-attachment-image`); B's tray `[data-composer-attachments]`
/// renders even when empty and holds `group/composer-attachment` cards
/// (`b-2026-09-attachment-file`).
fn attachments_tray(view: &View) -> String {
    match view.generation {
        Generation::A => "<input type=\"file\" multiple hidden tabindex=\"-1\">\
                          <div class=\"composer-header\" id=\"composer-attachments\"></div>"
            .to_owned(),
        Generation::B => "<input type=\"file\" multiple hidden aria-label=\"Attach files\">\
                          <div id=\"composer-attachments\" data-composer-attachments=\"\" data-visible-attachments=\"false\">\
                          <div class=\"flex flex-wrap\"></div></div>"
            .to_owned(),
    }
}

/// The model picker's trigger. Generation A (2025 to early 2026): the
/// header button `data-testid="model-switcher-dropdown-button"`, a Radix
/// trigger (`aria-haspopup="menu"`, `aria-expanded`, `data-state`,
/// `id="radix-…"`) whose aria-label names the current model ("Model
/// selector, current model is 4o") and whose text is "ChatGPT <span>4o</span>"
/// (rendered pages, search-index ids 4759405593 and 14924903435; S3, S7 in
/// `docs/evidence/model-picker.md`). Generation B (August 2026): the
/// composer pill `button.__composer-pill` with the same test id and
/// `aria-haspopup="menu"`, whose text is the thinking effort, never the
/// model (steipete/oracle `tests/browser/modelSelection.test.ts` @ 7b364aa5,
/// srv1n/rzn-browser `workflows/chatgpt/README.md` @ ba6ea6b). The label in
/// B is an assumption: no capture records it.
fn model_trigger(view: &View) -> String {
    let current = escape(view.model.as_deref().unwrap_or(""));
    let open = view.picker.is_some();
    let state = if open { "open" } else { "closed" };
    match view.generation {
        Generation::A => format!(
            "<button aria-label=\"Model selector, current model is {current}\" id=\"radix-model-trigger\" \
             aria-haspopup=\"menu\" aria-expanded=\"{open}\" data-state=\"{state}\" \
             data-testid=\"model-switcher-dropdown-button\" data-fakechat-model-trigger=\"true\" class=\"btn\">\
             <div>ChatGPT <span>{current}</span></div></button>"
        ),
        Generation::B => format!(
            "<button type=\"button\" class=\"__composer-pill btn\" id=\"radix-model-pill\" aria-haspopup=\"menu\" \
             aria-expanded=\"{open}\" data-state=\"{state}\" data-testid=\"model-switcher-dropdown-button\" \
             data-fakechat-model-trigger=\"true\"{pointer}>{effort}</button>",
            effort = escape(view.effort.as_deref().unwrap_or(DEFAULT_EFFORT)),
            pointer = if view.picker_pointer_only { " data-fakechat-pointer-only=\"true\"" } else { "" },
        ),
    }
}

/// The open model picker. Generation A (2025): a Radix menu labelled by
/// its trigger, one `div[role=menuitem]` per model with
/// `data-testid="model-switcher-<slug>"`, its label and a subtitle as
/// sibling texts, the current one marked only by a check icon, and the
/// "Legacy models" submenu (`data-testid="Legacy models-submenu"`,
/// `aria-haspopup="menu"`, `data-has-submenu`) opening a second menu
/// (S2, S3, S4, S8 in `docs/evidence/model-picker.md`). Generation B
/// (August 2026): the menu holds `[data-testid=composer-intelligence-
/// picker-content][role=group]` with effort tiers as `menuitemradio`, the
/// "Show advanced options" toggle (`role=menuitem`, `aria-expanded`, no
/// popup), then in `[data-testid=composer-model-picker-slider-advanced-view]`
/// the Model and Effort openers (`role=menuitem aria-haspopup=menu
/// aria-controls=<submenu id>`), and the Model submenu's rows
/// `role=menuitemradio` with `aria-checked` and `data-state` (steipete/oracle
/// fixture @ 7b364aa5; rzn-browser's live note 2026-08-07). Disabled rows
/// carry `aria-disabled="true"` and `data-disabled` (Radix's marking; the
/// 2026 attribute is not evidenced).
pub fn picker(view: &View) -> String {
    let Some(picker) = view.picker else { return String::new() };
    let current = view.model.as_deref();
    let disabled = |m: &Model| if m.disabled { " aria-disabled=\"true\" data-disabled=\"\"" } else { "" };
    let fake = |m: &Model| format!(" data-fakechat-model=\"{}\"", escape(&m.label));
    match view.generation {
        Generation::A => {
            let row = |m: &Model| {
                let check = if current == Some(m.label.as_str()) {
                    "<svg class=\"icon-md\" aria-hidden=\"true\" data-fakechat-check=\"true\"></svg>"
                } else {
                    ""
                };
                format!(
                    "<div role=\"menuitem\" tabindex=\"-1\" data-radix-collection-item=\"\" data-testid=\"model-switcher-{slug}\"{disabled}{fake}>\
                     <div class=\"flex grow\"><div>{label}</div><div class=\"text-token-text-tertiary text-xs\">{subtitle}</div></div>{check}</div>",
                    slug = escape(&m.slug),
                    label = escape(&m.label),
                    subtitle = if m.legacy { "Legacy model" } else { "Great for most tasks" },
                    disabled = disabled(m),
                    fake = fake(m),
                )
            };
            let first: String = view.models.iter().filter(|m| !m.legacy).map(row).collect();
            let legacy: String = view.models.iter().filter(|m| m.legacy).map(row).collect();
            let opened = picker == Picker::Submenu;
            let opener = if legacy.is_empty() {
                String::new()
            } else {
                format!(
                    "<div role=\"menuitem\" tabindex=\"-1\" data-testid=\"Legacy models-submenu\" aria-haspopup=\"menu\" \
                     data-has-submenu=\"\" aria-expanded=\"{opened}\" aria-controls=\"radix-legacy-models\" \
                     data-state=\"{state}\" data-fakechat-model-nav=\"submenu\">Legacy models</div>",
                    state = if opened { "open" } else { "closed" }
                )
            };
            let submenu = if opened {
                format!(
                    "<div role=\"menu\" id=\"radix-legacy-models\" data-radix-menu-content=\"\" data-state=\"open\">{legacy}</div>"
                )
            } else {
                String::new()
            };
            format!(
                "<div role=\"menu\" data-radix-menu-content=\"\" data-state=\"open\" aria-labelledby=\"radix-model-trigger\" \
                 id=\"radix-model-menu\">{first}{opener}</div>{submenu}"
            )
        }
        Generation::B => {
            let advanced = matches!(picker, Picker::Advanced | Picker::Submenu | Picker::Effort);
            let effort = view.effort.as_deref().unwrap_or(DEFAULT_EFFORT);
            let radio = |t: &str| {
                let on = t == effort;
                format!(
                    "<div role=\"menuitemradio\" aria-checked=\"{on}\" data-state=\"{}\" tabindex=\"-1\" \
                     data-fakechat-effort=\"{t}\">{t}</div>",
                    if on { "checked" } else { "unchecked" }
                )
            };
            let tiers: String = TIERS.iter().map(|t| radio(t)).collect();
            let openers = if advanced {
                let (sub, eff) = (picker == Picker::Submenu, picker == Picker::Effort);
                let state = |open: bool| if open { "open" } else { "closed" };
                format!(
                    "<div data-testid=\"composer-model-picker-slider-advanced-view\">\
                     <div role=\"menuitem\" aria-haspopup=\"menu\" aria-controls=\"radix-model-submenu\" aria-expanded=\"{sub}\" \
                     data-state=\"{}\" data-fakechat-model-nav=\"submenu\"><span>Model</span><span>{current}</span></div>\
                     <div role=\"menuitem\" aria-haspopup=\"menu\" aria-controls=\"radix-effort-submenu\" aria-expanded=\"{eff}\" \
                     data-state=\"{}\" data-fakechat-model-nav=\"effort\"><span>Effort</span><span>{effort}</span></div></div>",
                    state(sub),
                    state(eff),
                    current = escape(current.unwrap_or("")),
                    effort = escape(effort),
                )
            } else {
                String::new()
            };
            let submenu = match picker {
                Picker::Submenu => {
                    let rows: String = view
                        .models
                        .iter()
                        .map(|m| {
                            let on = current == Some(m.label.as_str());
                            format!(
                                "<div role=\"menuitemradio\" aria-checked=\"{on}\" data-state=\"{state}\" tabindex=\"-1\"{disabled}{fake}>{label}</div>",
                                state = if on { "checked" } else { "unchecked" },
                                label = escape(&m.label),
                                disabled = disabled(m),
                                fake = fake(m),
                            )
                        })
                        .collect();
                    format!(
                        "<div role=\"menu\" id=\"radix-model-submenu\" data-radix-menu-content=\"\" data-state=\"open\">{rows}</div>"
                    )
                }
                Picker::Effort => {
                    let rows: String = EFFORTS.iter().map(|t| radio(t)).collect();
                    format!(
                        "<div role=\"menu\" id=\"radix-effort-submenu\" data-radix-menu-content=\"\" data-state=\"open\">{rows}</div>"
                    )
                }
                Picker::Open | Picker::Advanced => String::new(),
            };
            format!(
                "<div role=\"menu\" data-radix-menu-content=\"\" data-state=\"open\" aria-labelledby=\"radix-model-pill\" \
                 id=\"radix-model-menu\"><div data-testid=\"composer-intelligence-picker-content\" role=\"group\">{tiers}\
                 <div role=\"menuitem\" aria-label=\"Show advanced options\" aria-expanded=\"{advanced}\" \
                 data-fakechat-model-nav=\"advanced\">Advanced</div>{openers}</div></div>{submenu}"
            )
        }
    }
}

fn rate_limit_dialog(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    format!(
        "<div role=\"dialog\" aria-modal=\"true\" data-fakechat-dialog=\"rate-limit\"><h2>{}</h2><p>{}</p>\
         <button class=\"btn\" data-fakechat-dismiss=\"true\">{}</button></div>\n",
        l.too_many, l.too_quickly, l.got_it
    )
}
