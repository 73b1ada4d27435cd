//! The page's coarse state, from structure, in a fixed order: page-level
//! screens (challenge, signed out), **a person's question** (the
//! tool-approval card, which stands during a turn while Stop shows), the
//! composer (an editor, or a pre-hydration fallback), **stop evidence
//! before anything else**, blocking incidents, busy notices, then the
//! turns (none: a new chat; the last one failed, finished, still going, or
//! unproven either way).
//!
//! Busy until proven finished: a turn is finished only on positive
//! evidence for its generation (an action bar of the answer, see
//! [`settle`]), and any wait, interruption, deferral or activity notice in
//! the last turn keeps the page busy whatever the action bar shows. An
//! answer with no evidence either way is [`PageState::Unsettled`], never
//! idle.
//!
//! Readiness never depends on a send button: the real site renders none
//! while the composer is empty. Text is read only to tell incidents and
//! notices apart, through per-locale tables, and an unrecognized incident
//! is `error{unknown}`, never ignored. The page's permanent live regions
//! are evidence of nothing unless they carry one of those texts.

use protocol::executor::ConversationState;

use crate::Dom;
use crate::locators::{Element, UiChanged, find, stop_buttons, supported_locale, visible};

/// Why the page is in `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incident {
    /// "Message delivery timed out" (with Retry: never clicked).
    DeliveryTimeout,
    /// The rate-limit dialog or alert.
    RateLimited,
    /// The login screen, or a composer offered to a logged-out visitor.
    SignedOut,
    /// A bot-check interstitial: the widget's markers, or the challenge
    /// platform's own (its options object, its orchestrate script, its
    /// error element) on a page with no composer.
    Challenge,
    /// A chatgpt.com page that is not one conversation: more than one
    /// visible composer (a GPT being edited beside its preview) or the GPT
    /// editor's controls. Nothing is typed on it.
    NotConversation,
    /// ChatGPT asks the person to allow or deny an app's tool call ("Allow
    /// ChatGPT to use <App>?", the tool-approval card), or to confirm an
    /// app's write action: a question to the person, never clicked.
    ApprovalRequired,
    /// "You've reached the maximum length for this conversation, but you
    /// can keep talking by starting a new chat." in the last assistant
    /// turn: the conversation takes no more turns (its "Start new chat"
    /// button is never clicked; the worker rolls over).
    ConversationTooLong,
    /// An error the table does not know (including "something went wrong").
    Unknown,
}

/// A notice shown in (or after) the running turn: the turn is not over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// A slow answer or a safety review ("Our systems are thinking a bit
    /// more…", "…checking a few extra things…"): not a stall.
    Deferral,
    /// "Connection interrupted. Waiting for the complete answer": ChatGPT is
    /// recovering the stream; the answer may look finished meanwhile.
    Recovery,
    /// A status inside the last turn whose words no table holds: read as
    /// busy (fail closed), never as idle.
    Unrecognized,
}

/// The classified page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageState {
    /// No composer yet, or the server-rendered page before hydration.
    Loading,
    /// A composer and no turns: a new chat.
    Ready,
    /// The assistant is producing the last turn (or has not started on it).
    Generating {
        /// The notice the running turn shows, if any.
        notice: Option<Notice>,
    },
    /// The last assistant turn finished.
    Idle,
    /// The last answer shows neither that it runs (no stop, no streaming
    /// marker, no notice) nor that it finished (no action bar): it needs
    /// inspection. Never idle; see [`PageState::coarse`].
    Unsettled,
    /// An incident.
    Error(Incident),
}

impl PageState {
    /// The state's name in reports and in the corpus (`fixtures/README.md`):
    /// `loading`, `ready`, `idle`, `unsettled`, `generating`
    /// (`+deferral`, `+recovery`, `+notice`), `delivery_timeout`,
    /// `rate_limited`, `signed_out`, `challenge`, `approval_required`,
    /// `error_unknown`.
    pub fn name(&self) -> &'static str {
        match self {
            PageState::Loading => "loading",
            PageState::Ready => "ready",
            PageState::Idle => "idle",
            PageState::Unsettled => "unsettled",
            PageState::Generating { notice: None } => "generating",
            PageState::Generating { notice: Some(Notice::Deferral) } => "generating+deferral",
            PageState::Generating { notice: Some(Notice::Recovery) } => "generating+recovery",
            PageState::Generating { notice: Some(Notice::Unrecognized) } => "generating+notice",
            PageState::Error(Incident::DeliveryTimeout) => "delivery_timeout",
            PageState::Error(Incident::RateLimited) => "rate_limited",
            PageState::Error(Incident::SignedOut) => "signed_out",
            PageState::Error(Incident::Challenge) => "challenge",
            PageState::Error(Incident::NotConversation) => "not_conversation",
            PageState::Error(Incident::ApprovalRequired) => "approval_required",
            PageState::Error(Incident::ConversationTooLong) => "conversation_too_long",
            PageState::Error(Incident::Unknown) => "error_unknown",
        }
    }

    /// The executor protocol's coarse state. [`PageState::Unsettled`] is
    /// `generating`: the protocol has no state for "needs inspection", and
    /// a busy reading is the one that never takes a prompt; the daemon's
    /// turn-stall rule (no progress for `stalled_turn_after_ms`) is what
    /// surfaces an answer that stays unsettled.
    pub fn coarse(&self) -> ConversationState {
        match self {
            PageState::Loading => ConversationState::Loading,
            PageState::Ready | PageState::Idle => ConversationState::Idle,
            PageState::Generating { .. } | PageState::Unsettled => ConversationState::Generating,
            PageState::Error(_) => ConversationState::Error,
        }
    }
}

/// What a classification saw, for diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The state.
    pub state: PageState,
    /// Turns on the page.
    pub turns: usize,
}

/// Incident texts per locale, for telling incidents apart (never for locating).
/// "Stream cache expired" (2026, a text marker in public code reading the
/// live page, search-index ids 69095230055, 70071102304; no structure
/// known): the answer was lost, as after a delivery timeout, and is
/// recovered the same way (a fresh message, never Retry).
///
/// Other locales, as public code records the live page (OBS/CODE; repository
/// not resolved): zh-CN 消息发送超时 (a transcript pasted from the page,
/// search-index id 62155489986), ko 메시지 전송 시간이 초과되었습니다
/// (recorded from a user's screen 2026-08-04, id 60690601782), ru Время
/// доставки сообщения истекло (id 69714885034), en "Message sending timed
/// out" (test data, id 68364360660).
const DELIVERY_TIMEOUT: &[&str] = &[
    "Message delivery timed out",
    "Message sending timed out",
    "メッセージ配信がタイムアウトしました",
    "消息发送超时",
    "메시지 전송 시간이 초과되었습니다",
    "Время доставки сообщения истекло",
    "Stream cache expired",
];
/// The conversation-length notice, inside the last assistant message as
/// `div.text-token-text-error > p` beside a "Start new chat" button
/// (MichalMatu/local-agent `docs/CHATGPT_DOM_CONTRACT.md`, observed live
/// 2026-09-06; XargonWan/Rekku_Freedom_Project `selenium_chatgpt.py` reads
/// the same element for "maximum length for this conversation"); the 2023
/// wording "The conversation is too long, please start a new one." (OpenAI
/// community forum thread 128517). English only: no other locale's words
/// are known, and an unknown text in the turn reads `error{unknown}`.
/// "You've hit max weighted tokens for this chat" (2026, text markers in
/// public code that reads the live page, search-index ids 68961211760,
/// 70071102304; no element structure known) says the same.
/// zh-CN 你已达到此对话的长度上限 (pasted from the live page, search-index id
/// 69465483315) and ko 이 대화의 최대 길이에 도달 (searched for on the live
/// page, id 63577220207).
const TOO_LONG: &[&str] = &[
    "maximum length for this conversation",
    "conversation is too long",
    "max weighted tokens for this chat",
    "你已达到此对话的长度上限",
    "이 대화의 최대 길이에 도달",
];
/// The length notice by structure, in any locale: generation A's error
/// block in the answer holding its own button ("Start new chat") and no
/// Retry (the 2026-09-06 live markup: `div.text-token-text-error > p` and
/// `button.btn.btn-secondary`, search-index id 67454464290). A delivery
/// timeout's block holds the Retry test id instead.
const ERROR_BLOCK: &str = ".text-token-text-error";
const RETRY: &str = r#"button[data-testid="regenerate-thread-error-button"]"#;
///
/// The dialog's title in other locales (OBS/CODE; search-index ids): fr
/// "Trop de requêtes" (an observed French popup, 68388789066), ko 요청이
/// 너무 많습니다 ("exact Korean access notice", 70426380483), ja
/// リクエストが多すぎます, zh-CN 太多请求, zh-TW 太多要求 (a fixture,
/// 59238857059; zh-TW also 71029811320).
const RATE_LIMITED: &[&str] = &[
    "Too many requests",
    "making requests too quickly",
    "You've hit your rate limit",
    "You\u{2019}ve hit your rate limit",
    "Trop de requêtes",
    "요청이 너무 많습니다",
    "リクエストが多すぎます",
    "太多请求",
    "太多要求",
];
/// The slow-answer and safety-review notices, compared lower-cased. en
/// "…thinking a bit more about this request…" (GPT-AntiCurse
/// `chrome/stall-recovery.js` @ 3e7da0a0; search-index ids 71298835724,
/// 61173130995), en "…checking a few extra things…" and fr "…effectuent
/// quelques vérifications supplémentaires…" (universal-dev-architecture
/// `test/cdp-composer.test.mjs` @ 2a913373), ru "…выполняют
/// дополнительную обработку этого запроса…" (KobaProduction
/// chatgpt-booster `docs/CHATGPT_CLIENT_RESEARCH.md` @ 58739f28, live
/// 2026-10-07). No ja, ko or zh text is known: there, an in-turn status
/// reads as [`Notice::Unrecognized`] (busy all the same).
/// Also zh-CN 我们的系统正在进一步处理此请求 (pasted from the live page,
/// search-index id 70507708648) and es "…procesando esta solicitud un poco
/// más…" / "…haciendo comprobaciones adicionales…" (fixtures, ids
/// 70083824030, 70094377953).
const DEFERRAL: &[&str] = &[
    "thinking a bit more",
    "checking a few extra things",
    "quelques vérifications supplémentaires",
    "выполняют дополнительную обработку",
    "正在进一步处理此请求",
    "procesando esta solicitud un poco más",
    "haciendo comprobaciones adicionales",
];
/// The stream-recovery notice, compared lower-cased: en "Connection
/// interrupted. Waiting for the complete answer" (the client's default for
/// `errors.network.reconnecting_fallback`, Bloom++ @ e1c79ffb), ru
/// "Соединение прервано. Ожидание полного ответа" (Koba, live 2026-10-07),
/// fr "Connexion interrompue" (a test input in universal-dev-architecture,
/// not a capture).
/// Also zh-CN 连接已中断 (a live incident note, search-index id
/// 70985334278), ja 接続が中断されました (a fixture, search-index id
/// 69163429949), ko 연결이 끊어졌습니다 (a classifier test, id 61708077880),
/// es "conexión interrumpida" (a fixture, id 70094377953), en "waiting for
/// the full response" (id 71355904937).
const RECOVERY: &[&str] = &[
    "connection interrupted",
    "waiting for the complete answer",
    "waiting for the full response",
    "соединение прервано",
    "ожидание полного ответа",
    "connexion interrompue",
    "连接已中断",
    "接続が中断されました",
    "연결이 끊어졌습니다",
    "conexión interrumpida",
];

/// Conversation turns, per generation: A's test-id turns (`article` until
/// 2025, `section` in 2026), B's turn keys. The first form present decides.
pub const TURNS: &[&str] =
    &[r#"article[data-testid^="conversation-turn-"], section[data-testid^="conversation-turn-"]"#, "[data-turn-key]"];
/// Generation A's wrapper around a turn: GPT-AntiCurse finds the running
/// turn's streaming status anywhere in the last one.
const A_TURN_CONTAINER: &str = "[data-turn-id-container]";
/// Message content, where a control is the answer's, not the page's (the
/// planner-bridge driver, search-index id 71020982796: a login control
/// "outside message content" fails closed).
const CONTENT: &str = r#"[data-message-author-role], [data-content-search-unit-key], [data-chatgpt-search-unit-key], [data-turn-key], article[data-testid^="conversation-turn-"], section[data-testid^="conversation-turn-"]"#;
/// A login control (generation A's test id; the logged-out mobile surface).
const LOGIN: &str = r#"[data-testid="login-button"], button[data-login-button]"#;
/// The challenge widget (Cloudflare's generic interstitial; older
/// chat.openai.com captures: `#challenge-running`, `#challenge-body-text`).
const CHALLENGE: &str =
    "#challenge-stage, .cf-turnstile, #challenge-running, #challenge-body-text, [id^=\"cf-chl-widget\"]";
/// The challenge as chatgpt.com serves it (REAL: `GET https://chatgpt.com/`
/// answered 403 `Cf-Mitigated: challenge`, 2026-06-11, search-index id
/// 60512985175; the same template 2026-05-15, id 54530411491): no widget,
/// no `<title>`, no `lang`; `div.main-wrapper[role=main]` holding
/// `noscript > div.h2 > span#challenge-error-text`, and an inline script
/// setting `window._cf_chl_opt` (`cZone:'chatgpt.com'`) that appends the
/// platform's `/cdn-cgi/challenge-platform/h/<x>/orchestrate/chl_page/…`
/// script. Read only where no composer exists: Cloudflare's JavaScript
/// detection puts a `/cdn-cgi/challenge-platform/scripts/jsd/` script on
/// ordinary pages, which is why `orchestrate` is part of the marker.
const CHALLENGE_PLATFORM: &str =
    r#"#challenge-error-text, script[src*="/cdn-cgi/challenge-platform/"][src*="/orchestrate/"]"#;
/// The challenge platform's options object, in an inline script's source.
const CHALLENGE_OPTIONS: &str = "_cf_chl_opt";
/// The GPT editor's own controls (CODE: public code that drives the live
/// editor names these test ids, search-index ids 66505384082 and
/// 54293305952): a GPT's builder, never one conversation.
const GPT_EDITOR: &str = r#"[data-testid="gizmo-editor-configure-button"], [data-testid="gizmo-name-input"], [data-testid="gizmo-instructions-input"], [data-testid="save-gizmo-button"]"#;
/// Incidents inside a turn: A's error text and Retry, B's alert.
const TURN_ERROR: &str =
    r#".text-token-text-error, button[data-testid="regenerate-thread-error-button"], [role="alert"]"#;
/// Blocking overlays outside the turns.
const BLOCKING: &str = r#"[role="dialog"], [role="alertdialog"], [role="alert"]"#;
/// The tool-approval card: the live card (totec448-spec/chat-on-steroids,
/// 2026-10-06: `div[data-codex-approval-surface="true"]` with Deny / Allow
/// once) and the write-action confirmation dialog of the 2026-09 map
/// (`div[role=dialog][data-app-name][data-tool-name]`, Cancel / Always
/// allow). Waiting while it holds an enabled button; answered cards keep
/// their buttons, disabled.
const APPROVAL: &str = r#"[data-codex-approval-surface="true"], [role="dialog"][data-app-name][data-tool-name]"#;
const APPROVAL_SURFACE: &str = "[data-codex-approval-surface]";
/// Notices a running turn shows, by structure: any status, A's streaming
/// status (`[data-streaming-response-status]`, GPT-AntiCurse; a live DOM
/// quoted 2026-09-09, search-index id 68942339257), the recovery line
/// (`.text-chatgpt-recovery`, Koba/Bloom++), and busy markers
/// (`[aria-busy="true"]`, Bloom++'s `turnBusy`).
const NOTICES: &str =
    r#"[role="status"], [data-streaming-response-status], .text-chatgpt-recovery, [aria-busy="true"]"#;
/// Generation A: an assistant message, and its finished action bar: Copy,
/// Good response, Bad response (adamlporter/obsidian-AI-exporter
/// `chat-simple.html` @ fb418636, 2026-01-29). A Copy test id shows in
/// user turns too: only the assistant turn's counts.
const A_ASSISTANT: &str = r#"[data-message-author-role="assistant"]"#;
const A_FINISHED: &str = r#"button[data-testid="copy-turn-action-button"], button[data-testid="good-response-turn-action-button"], button[data-testid="bad-response-turn-action-button"]"#;
/// Generation B: the assistant's unit in a turn (two spellings of the key:
/// `data-chatgpt-search-unit-key` in Bloom++ v2.0.56), its streaming
/// marker, and the action bars (the user's sits inside the user unit).
const B_ASSISTANT: &str =
    r#"[data-content-search-unit-key$=":assistant"], [data-chatgpt-search-unit-key$=":assistant"]"#;
const B_STREAMING: &str = "[data-markdown-animated]";
const B_USER_UNIT: &str = r#"[data-content-search-unit-key$=":user"], [data-chatgpt-search-unit-key$=":user"]"#;
const B_ACTIONS: &str = ".turn-action-controls";
/// The finished answer's bar buttons in generation B, by label, any locale:
/// en Copy, Rate response, Share, Regenerate response, More actions
/// (zain1237/codex-chatgpt-web `chatgpt-power-complete.html` @ e50725e6,
/// 2026-09-25); zh-CN 复制, 评价回复, 重新生成回复 (code, search-index id
/// 70141379628); ja 回答をコピーする, 回答を再生成 (code, search-index ids
/// 70457634709, 70283863509). A bar with none of them proves nothing.
const B_FINISHED_LABELS: &[&str] = &[
    "Copy",
    "Rate response",
    "Share",
    "Regenerate response",
    "More actions",
    "复制",
    "评价回复",
    "重新生成回复",
    "回答をコピーする",
    "回答を再生成",
];
// `data-talvt-turn-state` ("in_progress" | "complete", Koba 2026-10-07) is
// not read: it stays `in_progress` after the stream completed and after
// Stop, so it can prove neither busy nor idle. A turn that says `complete`
// without an action bar reads unsettled, as any such answer does.

/// The page's `html[lang]`.
fn lang<D: Dom>(dom: &D) -> Option<String> {
    dom.query_all(None, "html").first().and_then(|h| dom.attr(h, "lang"))
}

fn contains_any(text: &str, needles: &[&str]) -> bool {
    needles.iter().any(|n| text.contains(n))
}

/// Whether the challenge platform runs on this page (see
/// [`CHALLENGE_PLATFORM`]): its error element or orchestrate script, or an
/// inline script naming its options object. Structure, not words.
fn challenge_platform<D: Dom>(dom: &D) -> bool {
    !dom.query_all(None, CHALLENGE_PLATFORM).is_empty()
        || dom.query_all(None, "script:not([src])").iter().any(|script| dom.text(script).contains(CHALLENGE_OPTIONS))
}

fn enabled<D: Dom>(dom: &D, node: &D::Node) -> bool {
    dom.attr(node, "disabled").is_none() && dom.attr(node, "aria-disabled").as_deref() != Some("true")
}

/// Whether ChatGPT waits for the person to answer a tool-approval card or
/// an app's confirmation dialog: one is shown with an enabled button.
/// Nothing in this crate ever clicks inside one.
pub fn approval_waiting<D: Dom>(dom: &D) -> bool {
    visible(dom, None, APPROVAL)
        .iter()
        .any(|card| visible(dom, Some(card), "button").iter().any(|button| enabled(dom, button)))
}

/// What the dialogs and alerts outside the thread say, one incident each;
/// an empty one says nothing, nor a live region without an incident's
/// text, nor an approval card (read on its own, answered or not).
fn overlay_incidents<D: Dom>(dom: &D) -> Vec<Incident> {
    visible(dom, None, BLOCKING)
        .iter()
        .filter(|overlay| !TURNS.iter().any(|t| dom.within(overlay, t)))
        .filter(|overlay| !dom.within(overlay, APPROVAL_SURFACE))
        .filter_map(|overlay| {
            let text = dom.text(overlay);
            if contains_any(&text, RATE_LIMITED) {
                Some(Incident::RateLimited)
            } else if contains_any(&text, DELIVERY_TIMEOUT) {
                Some(Incident::DeliveryTimeout)
            } else {
                (dom.attr(overlay, "aria-live").is_none() && !text.trim().is_empty()).then_some(Incident::Unknown)
            }
        })
        .collect()
}

/// Whether a dialog or alert stands over the page, whatever it says:
/// nothing may be typed behind it.
pub fn overlay_shown<D: Dom>(dom: &D) -> bool {
    !overlay_incidents(dom).is_empty()
}

/// The turns, in the first form the page uses. Visibility is not asked:
/// turn wrappers may be layout-less (`display: contents`) and action bars
/// may show on hover only; hidden copies are a composer matter.
pub fn turns<D: Dom>(dom: &D) -> Vec<D::Node> {
    TURNS.iter().map(|s| dom.query_all(None, s)).find(|t| !t.is_empty()).unwrap_or_default()
}

/// What the thread shows, to tell that a running turn moves on: how many
/// turns there are and how much text the last one holds. Streamed text and
/// tool-call rows ("Called tool") grow it; a spinner, an animated attribute
/// or a live region outside the turns does not, so a turn that only looks
/// busy shows no progress. Compared between readings, never stored.
pub fn turn_mark<D: Dom>(dom: &D) -> (usize, usize) {
    let turns = turns(dom);
    (turns.len(), turns.last().map_or(0, |last| dom.text(last).len()))
}

/// What one notice node says: `None` when it says nothing (an empty
/// status); `Some(None)` a busy marker; `Some(Some(n))` a notice.
fn notice_of<D: Dom>(dom: &D, node: &D::Node) -> Option<Option<Notice>> {
    let text = dom.text(node);
    if contains_any(&text, DELIVERY_TIMEOUT) {
        // The failure words in a recovery line are the delivery timeout
        // (Bloom++), read with the turn's errors.
        return None;
    }
    let text = text.to_lowercase();
    let class = dom.attr(node, "class").unwrap_or_default();
    if class.split_whitespace().any(|c| c == "text-chatgpt-recovery")
        || !dom.query_all(Some(node), ".text-chatgpt-recovery").is_empty()
        || contains_any(&text, RECOVERY)
    {
        return Some(Some(Notice::Recovery));
    }
    if contains_any(&text, DEFERRAL) {
        return Some(Some(Notice::Deferral));
    }
    if dom.attr(node, "data-streaming-response-status").is_some()
        || dom.attr(node, "aria-busy").as_deref() == Some("true")
    {
        return Some(None);
    }
    (dom.attr(node, "role").as_deref() == Some("status") && !text.trim().is_empty())
        .then_some(Some(Notice::Unrecognized))
}

/// Whether the running turn is still busy by what it shows: `Some(notice)`
/// when a notice or busy marker stands in the last turn (or in generation
/// A's wrapper around it), or a notice whose words the tables know stands
/// anywhere outside the turns (the live regions included); `None` when
/// nothing says busy. The most telling notice wins: recovery, deferral,
/// unrecognized, then a plain marker.
fn busy<D: Dom>(dom: &D, last: Option<&D::Node>) -> Option<Option<Notice>> {
    let mut found: Vec<Option<Notice>> = Vec::new();
    if let Some(last) = last {
        let mut scopes = vec![last.clone()];
        if dom.within(last, A_TURN_CONTAINER)
            && let Some(container) = dom.query_all(None, A_TURN_CONTAINER).pop()
        {
            scopes.push(container);
        }
        for scope in &scopes {
            found.extend(visible(dom, Some(scope), NOTICES).iter().filter_map(|n| notice_of(dom, n)));
        }
    }
    // After the last turn, or in a live region: only words the tables know.
    found.extend(
        visible(dom, None, NOTICES)
            .iter()
            .filter(|n| !TURNS.iter().any(|t| dom.within(n, t)))
            .filter_map(|n| notice_of(dom, n))
            .filter(|notice| matches!(notice, Some(Notice::Recovery | Notice::Deferral))),
    );
    let rank = |n: &Option<Notice>| match n {
        Some(Notice::Recovery) => 0,
        Some(Notice::Deferral) => 1,
        Some(Notice::Unrecognized) => 2,
        None => 3,
    };
    found.into_iter().min_by_key(rank)
}

/// The incident the last turn shows, if any: A's error text and Retry, B's
/// alert, or a recovery line carrying the delivery-timeout words. An
/// approval card's alert is the card's, read on its own.
fn turn_incident<D: Dom>(dom: &D, last: &D::Node) -> Option<Incident> {
    let mut errors: Vec<D::Node> =
        dom.query_all(Some(last), TURN_ERROR).into_iter().filter(|n| !dom.within(n, APPROVAL_SURFACE)).collect();
    errors.extend(
        dom.query_all(Some(last), ".text-chatgpt-recovery")
            .into_iter()
            .filter(|n| contains_any(&dom.text(n), DELIVERY_TIMEOUT)),
    );
    if errors.is_empty() {
        return None;
    }
    let text: String = errors.iter().map(|n| dom.text(n)).collect();
    // By structure where the words are unknown: in a page whose language
    // the table has no words for, an error block with a button of its own
    // and no Retry in the turn is the length notice. In English, the words
    // tell it from other blocks of that shape (a plan's limit, say).
    let english = lang(dom).is_none_or(|l| l.to_ascii_lowercase().starts_with("en"));
    let length_notice = !english
        && dom.query_all(Some(last), RETRY).is_empty()
        && dom.query_all(Some(last), ERROR_BLOCK).iter().any(|block| !dom.query_all(Some(block), "button").is_empty());
    Some(if contains_any(&text, DELIVERY_TIMEOUT) {
        Incident::DeliveryTimeout
    } else if length_notice || contains_any(&text, TOO_LONG) {
        Incident::ConversationTooLong
    } else {
        Incident::Unknown
    })
}

/// Classifies the page. `HOST_UI_CHANGED` when the composer's elements are
/// ambiguous, the chat lacks an editor (and shows no stop button), or a
/// label-only page is in a locale the adapter does not carry.
pub fn classify<D: Dom>(dom: &D) -> Result<Snapshot, UiChanged> {
    let turns = turns(dom);
    let last = turns.last();
    let snapshot = |state| Ok(Snapshot { state, turns: turns.len() });
    if !visible(dom, None, CHALLENGE).is_empty() {
        return snapshot(PageState::Error(Incident::Challenge));
    }
    // A login control beside a composer is a logged-out chat: not ours to
    // use. One inside a turn's content is the answer's, not the page's.
    if visible(dom, None, LOGIN).iter().any(|n| !dom.within(n, CONTENT)) {
        return snapshot(PageState::Error(Incident::SignedOut));
    }
    // A question to the person comes before everything the page does
    // meanwhile: the card stands during a turn, while Stop shows, in any
    // locale.
    if approval_waiting(dom) {
        return snapshot(PageState::Error(Incident::ApprovalRequired));
    }
    if !visible(dom, None, GPT_EDITOR).is_empty() {
        return snapshot(PageState::Error(Incident::NotConversation));
    }
    let form = match find(dom, Element::ComposerForm) {
        Ok(form) => form,
        // Two visible composers are two surfaces (a GPT's builder and its
        // preview), not one conversation: refused, and named so.
        Err(e) if e.detail.starts_with("ambiguous") => return snapshot(PageState::Error(Incident::NotConversation)),
        Err(e) => return Err(e),
    };
    let Some(form) = form else {
        if challenge_platform(dom) {
            return snapshot(PageState::Error(Incident::Challenge));
        }
        // A fragment without a composer: its last turn's error still says
        // what happened (nothing can be typed without a composer).
        if let Some(incident) = last.and_then(|l| turn_incident(dom, l)) {
            return snapshot(PageState::Error(incident));
        }
        return snapshot(PageState::Loading);
    };
    // Generation B tells stop from send by label alone: fail closed on a locale we cannot read.
    let lang = lang(dom);
    let label_only = dom.attr(&form, "data-chatgpt-composer").is_some();
    let unreadable = label_only && !supported_locale(lang.as_deref());
    let generating = || PageState::Generating { notice: busy(dom, last).flatten() };
    if find(dom, Element::Editor)?.is_none() {
        // Server-rendered, not yet hydrated: the fallback textarea shows and
        // no editor exists. Once hydrated, that textarea is hidden.
        if !visible(dom, Some(&form), "textarea").is_empty() {
            return snapshot(PageState::Loading);
        }
        // Stop first: a composer showing an unambiguous stop button and no
        // editor is a running turn (the editor may be swapped out
        // meanwhile); nothing can be typed either way.
        if !unreadable && !stop_buttons(dom).is_empty() {
            return snapshot(generating());
        }
        return Err(UiChanged { element: Element::Editor, detail: "missing".into() });
    }
    if unreadable {
        return Err(UiChanged {
            element: Element::ComposerForm,
            detail: format!("unsupported locale {:?}: its stop label is unknown", lang.unwrap_or_default()),
        });
    }
    if !stop_buttons(dom).is_empty() {
        return snapshot(generating());
    }
    // Overlays: a rate limit wins over whatever else is shown beside it.
    let overlays = overlay_incidents(dom);
    if let Some(incident) = overlays.iter().find(|i| **i == Incident::RateLimited).or(overlays.first()) {
        return snapshot(PageState::Error(*incident));
    }
    // Busy until proven finished: a notice keeps the page busy whatever
    // the turn looks like, an error included (the answer may yet come).
    if let Some(notice) = busy(dom, last) {
        return snapshot(PageState::Generating { notice });
    }
    let Some(last) = last else { return snapshot(PageState::Ready) };
    if let Some(incident) = turn_incident(dom, last) {
        return snapshot(PageState::Error(incident));
    }
    snapshot(match settle(dom, last) {
        Settled::Finished => PageState::Idle,
        Settled::Running => PageState::Generating { notice: None },
        Settled::Unproven => PageState::Unsettled,
    })
}

/// What the last turn's own structure says about its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// The answer's action bar shows: A's Copy / Good / Bad response test
    /// ids in the assistant turn (whatever their labels: "Copy", "Copy
    /// response"); B's `.turn-action-controls` outside the user unit with
    /// its menu button or a finished-bar label, on an answer no longer
    /// streaming. A code block's own Copy (no test id, disabled while the
    /// block streams) is no action bar.
    Finished,
    /// The answer runs (B's `data-markdown-animated`) or has not begun (a
    /// user turn last, an assistant turn with no answer text yet).
    Running,
    /// An answer with text and neither a streaming marker nor an action bar.
    Unproven,
}

/// Reads the last turn's answer (stop buttons and notices aside).
pub fn settle<D: Dom>(dom: &D, turn: &D::Node) -> Settled {
    let a_answers = dom.query_all(Some(turn), A_ASSISTANT);
    if !a_answers.is_empty() {
        if !dom.query_all(Some(turn), A_FINISHED).is_empty() {
            return Settled::Finished;
        }
        let said = a_answers.iter().any(|n| !dom.text(n).trim().is_empty());
        return if said { Settled::Unproven } else { Settled::Running };
    }
    if dom.query_all(Some(turn), B_ASSISTANT).is_empty() {
        return Settled::Running;
    }
    if !dom.query_all(Some(turn), B_STREAMING).is_empty() {
        return Settled::Running;
    }
    // Structure first: the answer's bar (outside the user unit) holds the
    // menu button that regenerates or offers more (`aria-haspopup="menu"`,
    // in every capture of the finished bar); its labels, in the locales the
    // table knows, are a second signal.
    let finished_bar = dom.query_all(Some(turn), B_ACTIONS).iter().any(|bar| {
        !dom.within(bar, B_USER_UNIT)
            && dom.query_all(Some(bar), "button").iter().any(|b| {
                (dom.attr(b, "aria-haspopup").as_deref() == Some("menu") && enabled(dom, b))
                    || dom.attr(b, "aria-label").is_some_and(|label| B_FINISHED_LABELS.contains(&label.trim()))
            })
    });
    if finished_bar { Settled::Finished } else { Settled::Unproven }
}

/// The page's reading in one word: [`PageState::name`], or `ui_changed`
/// when the adapter refuses the page (`HOST_UI_CHANGED`).
pub fn reading<D: Dom>(dom: &D) -> &'static str {
    classify(dom).map_or("ui_changed", |s| s.state.name())
}
