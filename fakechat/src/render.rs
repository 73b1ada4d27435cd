//! The page as ChatGPT's frontend would render it, from a [`View`]. Pure: the
//! same function serves the live page, its live updates and the fixtures in
//! `chatgpt-dom/fixtures/`, so adapter unit tests and browser tests see one DOM.
//!
//! Facts and their sources: `fakechat/README.md`. Two UI generations (A: the
//! 2025–mid-2026 composer with test ids; B: the 2026-09 redesign without them),
//! two editors (ProseMirror, Lexical), two locales (English, German), and a
//! deliberately broken variant (elements missing or duplicated).

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
    /// German.
    De,
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
    /// A bot challenge interstitial.
    Challenge,
}

/// An error shown inside the last assistant turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnError {
    /// "Message delivery timed out. Please try again." with Retry.
    DeliveryTimeout,
    /// "Something went wrong. Please try again." with Retry.
    SomethingWentWrong,
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
    /// "Our systems are thinking a bit more…", outside the turn.
    pub deferral: bool,
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
    /// An open app popover.
    pub menu: Option<Menu>,
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
    textbox: &'static str,
    copy: &'static str,
    retry: &'static str,
    delivery_timeout: &'static str,
    went_wrong: &'static str,
    deferral: &'static str,
    too_many: &'static str,
    too_quickly: &'static str,
    got_it: &'static str,
    log_in: &'static str,
    sign_up: &'static str,
    get_started: &'static str,
    verify: &'static str,
}

fn labels(locale: Locale, generation: Generation) -> Labels {
    match (locale, generation) {
        (Locale::En, g) => Labels {
            send: if g == Generation::A { "Send prompt" } else { "Send" },
            stop: if g == Generation::A { "Stop streaming" } else { "Stop" },
            textbox: if g == Generation::A { "Message ChatGPT" } else { "Ask ChatGPT" },
            copy: "Copy",
            retry: "Retry",
            delivery_timeout: "Message delivery timed out. Please try again.",
            went_wrong: "Something went wrong. Please try again.",
            deferral: "Our systems are thinking a bit more…",
            too_many: "Too many requests",
            too_quickly: "You're making requests too quickly. We've temporarily limited access to your conversations.",
            got_it: "Got it",
            log_in: "Log in",
            sign_up: "Sign up for free",
            get_started: "Get started",
            verify: "Verify you are human by completing the action below.",
        },
        (Locale::De, g) => Labels {
            send: if g == Generation::A { "Prompt senden" } else { "Senden" },
            stop: if g == Generation::A { "Streaming stoppen" } else { "Stoppen" },
            textbox: if g == Generation::A { "Nachricht an ChatGPT" } else { "Frag ChatGPT" },
            copy: "Kopieren",
            retry: "Erneut versuchen",
            delivery_timeout: "Zeitüberschreitung bei der Nachrichtenzustellung. Bitte versuche es erneut.",
            went_wrong: "Etwas ist schiefgelaufen. Bitte versuche es erneut.",
            deferral: "Unsere Systeme denken etwas länger nach …",
            too_many: "Zu viele Anfragen",
            too_quickly: "Du sendest Anfragen zu schnell. Wir haben den Zugriff vorübergehend eingeschränkt.",
            got_it: "Verstanden",
            log_in: "Anmelden",
            sign_up: "Kostenlos registrieren",
            get_started: "Los geht's",
            verify: "Bestätige, dass du ein Mensch bist, indem du die folgende Aktion ausführst.",
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

/// The whole document.
pub fn page(view: &View) -> String {
    let lang = match view.locale {
        Locale::En => "en",
        Locale::De => "de",
    };
    let generation = match view.generation {
        Generation::A => "a",
        Generation::B => "b",
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"{lang}\">\n<head>\n<meta charset=\"utf-8\">\n<title>ChatGPT</title>\n{STYLE}\n\
         <script nonce=\"{nonce}\" src=\"/_fakechat/app.js\" defer></script>\n</head>\n\
         <body data-fakechat-generation=\"{generation}\" data-fakechat-conversation=\"{conv}\" \
         data-fakechat-project=\"{project}\" data-fakechat-version=\"{version}\" data-fakechat-layout=\"{layout}\">\n",
        nonce = escape(&view.nonce),
        conv = escape(view.conversation.as_deref().unwrap_or("")),
        project = escape(view.project.as_deref().unwrap_or("")),
        version = view.version,
        layout = escape(&view.layout()),
    );
    match view.screen {
        Screen::Chat => {
            out.push_str("<div id=\"__next\"><main id=\"main\">\n");
            out.push_str(&thread(view));
            out.push_str(&composer(view));
            out.push_str("</main></div>\n");
            if view.rate_limited {
                out.push_str(&rate_limit_dialog(view));
            }
        }
        Screen::Loading => {
            out.push_str("<div id=\"__next\"><main id=\"main\" aria-busy=\"true\"><div class=\"fakechat-skeleton\" data-fakechat-loading=\"true\"></div></main></div>\n");
        }
        Screen::SignedOut => {
            let l = labels(view.locale, view.generation);
            let _ = writeln!(
                out,
                "<div id=\"__next\"><div data-testid=\"login-screen\"><h1>{}</h1>\
                 <button data-testid=\"login-button\">{}</button>\
                 <button data-testid=\"signup-button\">{}</button></div></div>",
                l.get_started, l.log_in, l.sign_up
            );
        }
        Screen::Challenge => {
            let l = labels(view.locale, view.generation);
            let _ = writeln!(
                out,
                "<div id=\"challenge-stage\" data-fakechat-challenge=\"true\"><h1>chatgpt.com</h1><p>{}</p>\
                 <div class=\"cf-turnstile\" title=\"Widget containing a Cloudflare security challenge\"></div></div>",
                l.verify
            );
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// The thread region (replaced on every update).
pub fn thread(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let mut out = String::from("<div id=\"thread-region\"><div id=\"thread\" role=\"presentation\">\n");
    for (i, turn) in view.turns.iter().enumerate() {
        let n = i + 1;
        let role = match turn.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let _ = write!(
            out,
            "<article data-testid=\"conversation-turn-{n}\" data-turn=\"{role}\" data-turn-id=\"turn-{n}\">\
             <div data-message-author-role=\"{role}\" data-message-id=\"msg-{n}\">\
             <div class=\"markdown\">{}</div></div>",
            escape(&turn.text)
        );
        if let Some(error) = turn.error {
            let text = match error {
                TurnError::DeliveryTimeout => l.delivery_timeout,
                TurnError::SomethingWentWrong => l.went_wrong,
            };
            let _ = write!(
                out,
                "<div class=\"text-token-text-error\">{text}</div>\
                 <button data-testid=\"regenerate-thread-error-button\" class=\"btn\">{}</button>",
                l.retry
            );
        } else if turn.finished && turn.role == Role::Assistant {
            let _ = write!(
                out,
                "<div class=\"turn-actions\"><button data-testid=\"copy-turn-action-button\" aria-label=\"{}\"></button></div>",
                l.copy
            );
        }
        out.push_str("</article>\n");
    }
    out.push_str("</div>\n");
    if view.deferral {
        let _ = write!(out, "<div class=\"fakechat-deferral\" role=\"status\">{}</div>", l.deferral);
    }
    out.push_str("</div>\n");
    out
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

fn app_row(view: &View, app: &App, mention: bool) -> String {
    let label = escape(&app.label);
    let status = match (app.state, view.locale) {
        (AppState::Enabled, _) => String::new(),
        (AppState::Disabled, Locale::En) => "<span class=\"badge\">Disabled</span>".into(),
        (AppState::Disabled, Locale::De) => "<span class=\"badge\">Deaktiviert</span>".into(),
        // An assumption (no public capture shows it): a stale connector is
        // marked in the list until the operator refreshes it.
        (AppState::Stale, Locale::En) => "<span data-app-status=\"needs-refresh\">Refresh needed</span>".into(),
        (AppState::Stale, Locale::De) => "<span data-app-status=\"needs-refresh\">Aktualisieren</span>".into(),
    };
    let disabled = if app.state == AppState::Disabled { " aria-disabled=\"true\"" } else { "" };
    let id = escape(&app.id);
    match (mention, view.generation) {
        (true, _) => format!(
            "<div data-list-navigation-item=\"true\" tabindex=\"0\" data-fakechat-app=\"{id}\"{disabled}><span>{label}</span>{status}</div>"
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
    let de = view.locale == Locale::De;
    let nav = |id: &str, en: &str, german: &str| {
        format!(
            "<div tabindex=\"0\" role=\"menuitem\" data-composer-plugin-impression-id=\"{id}\" data-fakechat-nav=\"{id}\"><span>{}</span></div>",
            if de { german } else { en }
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
            return format!("<div data-mention-list-scroll-area=\"\" role=\"listbox\">{rows}</div>");
        }
        (Menu::Root, Generation::A) => [
            nav("files", "Add photos &amp; files", "Fotos &amp; Dateien hinzufügen"),
            nav("deep_research", "Deep research", "Deep Research"),
            nav("more", "More", "Mehr"),
        ]
        .concat(),
        (Menu::More, Generation::A) => {
            [nav("canvas", "Canvas", "Canvas"), nav("developer_mode", "Developer mode", "Entwicklermodus")].concat()
        }
        (Menu::Apps, Generation::A) => view.apps.iter().map(|a| app_row(view, a, false)).collect(),
        // The redesign lists apps directly in the "add context" list.
        (_, Generation::B) => {
            let files = if de { "Fotos &amp; Dateien hinzufügen" } else { "Add photos &amp; files" };
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

/// The composer's action area (send or stop), replaced on every update.
pub fn actions(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let button = match (view.generation, view.generating) {
        (Generation::A, false) => format!(
            "<button id=\"composer-submit-button\" data-testid=\"send-button\" aria-label=\"{}\" disabled></button>",
            l.send
        ),
        (Generation::A, true) => {
            format!("<button data-testid=\"stop-button\" aria-label=\"{}\" type=\"button\"></button>", l.stop)
        }
        (Generation::B, false) => format!("<button type=\"submit\" aria-label=\"{}\" disabled></button>", l.send),
        (Generation::B, true) => {
            format!("<button type=\"submit\" aria-label=\"{}\" data-state=\"stop\"></button>", l.stop)
        }
    };
    let count = match view.integrity {
        Integrity::Intact => 1,
        Integrity::Missing => 0,
        Integrity::Duplicated => 2,
    };
    format!("<div id=\"composer-actions\">{}</div>", button.repeat(count))
}

fn composer(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    let editor = match (view.generation, view.editor) {
        (Generation::A, Editor::ProseMirror) => format!(
            "<div id=\"prompt-textarea\" class=\"ProseMirror\" contenteditable=\"true\" data-testid=\"prompt-textarea\" \
             role=\"textbox\" translate=\"no\" aria-label=\"{}\"><p></p></div>",
            l.textbox
        ),
        (Generation::A, Editor::Lexical) => format!(
            "<div contenteditable=\"true\" data-lexical-editor=\"true\" role=\"textbox\" aria-label=\"{}\"><p></p></div>",
            l.textbox
        ),
        (Generation::B, _) => {
            format!("<div contenteditable=\"true\" role=\"textbox\" aria-label=\"{}\"><p></p></div>", l.textbox)
        }
    };
    let count = match view.integrity {
        Integrity::Intact => 1,
        Integrity::Missing => 0,
        Integrity::Duplicated => 2,
    };
    let editors = editor.repeat(count);
    let form_open = match view.generation {
        Generation::A => "<form data-type=\"unified-composer\" class=\"composer\">",
        Generation::B => "<form data-chatgpt-composer=\"\" class=\"composer\">",
    };
    let fallback = match view.generation {
        Generation::A => "<textarea name=\"prompt-textarea\" class=\"hidden\" hidden></textarea>",
        Generation::B => "",
    };
    let plus = match view.generation {
        Generation::A => "<button type=\"button\" data-testid=\"composer-plus-btn\" aria-haspopup=\"menu\"",
        Generation::B => {
            "<button type=\"button\" data-composer-navigation-target=\"add-context\" aria-haspopup=\"menu\""
        }
    };
    let plus_label = if view.locale == Locale::De { "Dateien und mehr hinzufügen" } else { "Add files and more" };
    let expanded = matches!(view.menu, Some(Menu::Root | Menu::More | Menu::Apps));
    format!(
        "<div id=\"composer-region\">{form_open}{apps}{plus} aria-expanded=\"{expanded}\" aria-label=\"{plus_label}\" class=\"btn\">+</button>\
         {editors}{fallback}{}</form><div id=\"composer-popover\">{}</div></div>\n",
        actions(view),
        menu(view),
        apps = apps(view),
    )
}

fn rate_limit_dialog(view: &View) -> String {
    let l = labels(view.locale, view.generation);
    format!(
        "<div role=\"dialog\" aria-modal=\"true\" data-fakechat-dialog=\"rate-limit\"><h2>{}</h2><p>{}</p>\
         <button class=\"btn\" data-fakechat-dismiss=\"true\">{}</button></div>\n",
        l.too_many, l.too_quickly, l.got_it
    )
}
