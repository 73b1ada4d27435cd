//! The state fixtures: every page state fakechat can show, rendered by the
//! same code that serves the live site, saved as static HTML under
//! `chatgpt-dom/fixtures/` so the DOM adapter's unit tests and the browser
//! tests see one DOM. Sanitized by construction: synthetic text, a fixed
//! nonce, no ids from a real account. `fakechat fixtures` regenerates them;
//! a test fails when they are stale.

use std::path::Path;

use crate::render::{
    self, App, AppState, Editor, Generation, Integrity, Locale, Menu, Model, Picker, Role, Screen, Turn, TurnError,
    View,
};

const CONVERSATION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";

fn turn(role: Role, text: &str, finished: bool) -> Turn {
    Turn { role, text: text.into(), finished, error: None, calls: Vec::new() }
}

fn chat(generation: Generation) -> View {
    View {
        generation,
        conversation: Some(CONVERSATION.into()),
        nonce: "fixture".into(),
        turns: vec![turn(Role::User, "Summarize the plan.", true), turn(Role::Assistant, "Here is the plan.", true)],
        version: 1,
        ..View::default()
    }
}

fn app(id: &str, label: &str, state: AppState) -> App {
    App { id: id.into(), label: label.into(), state }
}

/// The app list the binding fixtures show: the configured app among
/// similarly named ones and a disabled one.
pub fn apps(orchestrator: AppState) -> Vec<App> {
    vec![
        app("connector-1", "Orchestrator Dev", AppState::Enabled),
        app("connector-0", "Orchestrator", orchestrator),
        app("connector-2", "orchestrator", AppState::Enabled),
        app("connector-3", "Orchestrator Legacy", AppState::Disabled),
    ]
}

/// The binding fixtures of one generation: menus open, the mention popover, pills.
fn binding(g: &str, generation: Generation, out: &mut Vec<(String, View)>) {
    let new_chat = View { generation, nonce: "fixture".into(), apps: apps(AppState::Enabled), ..View::default() };
    let with = |menu: Option<Menu>| View { menu, ..new_chat.clone() };
    out.push((format!("{g}-apps-plus-menu"), with(Some(Menu::Root))));
    if generation == Generation::A {
        out.push((format!("{g}-apps-more"), with(Some(Menu::More))));
        out.push((format!("{g}-apps-developer-mode"), with(Some(Menu::Apps))));
        let stale = View { apps: apps(AppState::Stale), ..with(Some(Menu::Apps)) };
        out.push((format!("{g}-apps-developer-mode-stale"), stale));
    }
    out.push((format!("{g}-apps-mention"), with(Some(Menu::Mention("orch".into())))));
    if generation == Generation::B {
        let picked = View { mention: Some(app("connector-0", "Orchestrator", AppState::Enabled)), ..new_chat.clone() };
        out.push((format!("{g}-apps-mention-picked"), picked));
    }
    let stale = View { apps: apps(AppState::Stale), ..with(Some(Menu::Mention("orch".into()))) };
    out.push((format!("{g}-apps-mention-stale"), stale));
    let disabled = View { apps: apps(AppState::Disabled), ..with(Some(Menu::Mention("orch".into()))) };
    out.push((format!("{g}-apps-mention-disabled"), disabled));
    let bound = View { pill: Some(app("connector-0", "Orchestrator", AppState::Enabled)), ..chat(generation) };
    out.push((format!("{g}-apps-bound"), bound));
    let other = View { pill: Some(app("connector-1", "Orchestrator Dev", AppState::Enabled)), ..new_chat.clone() };
    out.push((format!("{g}-apps-other-bound"), other));
}

/// Every fixture: its file stem and its view.
pub fn all() -> Vec<(String, View)> {
    let mut out = Vec::new();
    for (g, generation) in [("a", Generation::A), ("b", Generation::B)] {
        let new_chat = View { generation, nonce: "fixture".into(), ..View::default() };
        out.push((format!("{g}-ready-new-chat"), new_chat.clone()));
        out.push((format!("{g}-idle"), chat(generation)));
        let mut generating = chat(generation);
        generating.turns[1] = turn(Role::Assistant, "Here is the pl", false);
        generating.generating = true;
        out.push((format!("{g}-generating"), generating.clone()));
        let mut deferral = generating.clone();
        deferral.deferral = true;
        out.push((format!("{g}-generating-deferral"), deferral));
        for (name, error) in [
            ("delivery-timeout", TurnError::DeliveryTimeout),
            ("something-went-wrong", TurnError::SomethingWentWrong),
            ("too-long", TurnError::TooLong),
        ] {
            let mut v = chat(generation);
            v.turns[1] = Turn {
                role: Role::Assistant,
                text: String::new(),
                finished: false,
                error: Some(error),
                calls: Vec::new(),
            };
            out.push((format!("{g}-error-{name}"), v));
        }
        let mut limited = chat(generation);
        limited.rate_limited = true;
        out.push((format!("{g}-rate-limited"), limited));
        for (name, screen) in
            [("loading", Screen::Loading), ("signed-out", Screen::SignedOut), ("challenge", Screen::Challenge)]
        {
            out.push((format!("{g}-{name}"), View { screen, generation, nonce: "fixture".into(), ..View::default() }));
        }
        for (name, integrity) in [("ui-missing", Integrity::Missing), ("ui-duplicated", Integrity::Duplicated)] {
            let mut v = chat(generation);
            v.integrity = integrity;
            out.push((format!("{g}-{name}"), v));
        }
        let mut japanese = chat(generation);
        japanese.locale = Locale::Ja;
        let mut japanese_timeout = japanese.clone();
        out.push((format!("{g}-idle-ja"), japanese));
        japanese_timeout.turns[1] = Turn {
            role: Role::Assistant,
            text: String::new(),
            finished: false,
            error: Some(TurnError::DeliveryTimeout),
            calls: Vec::new(),
        };
        out.push((format!("{g}-error-delivery-timeout-ja"), japanese_timeout));
        let mut draft = chat(generation);
        draft.screen = Screen::LoggedOutChat;
        out.push((format!("{g}-logged-out-chat"), draft));
        let prehydration =
            View { screen: Screen::PreHydration, generation, nonce: "fixture".into(), ..View::default() };
        out.push((format!("{g}-pre-hydration"), prehydration));
        binding(g, generation, &mut out);
        pickers(g, generation, &mut out);
    }
    let mut lexical = chat(Generation::A);
    lexical.editor = Editor::Lexical;
    out.push(("a-idle-lexical".into(), lexical));
    out
}

/// The models the picker fixtures offer: a current one, one whose label
/// begins with it, a legacy one and a disabled legacy one.
pub fn models() -> Vec<Model> {
    let model =
        |label: &str, slug: &str, legacy, disabled| Model { label: label.into(), slug: slug.into(), legacy, disabled };
    vec![
        model("GPT-5.5", "gpt-5-5", false, false),
        model("GPT-5.5 Pro", "gpt-5-5-pro", false, false),
        model("o3", "o3", true, false),
        model("GPT-4o", "gpt-4o", true, true),
    ]
}

/// The model picker's states (`render::picker`): closed, open, A's legacy
/// submenu, B's advanced view and model submenu, each showing GPT-5.5 or o3
/// as the current model.
fn pickers(g: &str, generation: Generation, out: &mut Vec<(String, View)>) {
    let levels: &[(&str, Option<Picker>)] = match generation {
        Generation::A => &[("closed", None), ("open", Some(Picker::Open)), ("legacy", Some(Picker::Submenu))],
        Generation::B => &[
            ("closed", None),
            ("open", Some(Picker::Open)),
            ("advanced", Some(Picker::Advanced)),
            ("submenu", Some(Picker::Submenu)),
        ],
    };
    for current in ["GPT-5.5", "o3"] {
        for (level, picker) in levels {
            let mut v = chat(generation);
            v.models = models();
            v.model = Some(current.into());
            v.picker = *picker;
            let suffix = if current == "o3" { "-o3" } else { "" };
            out.push((format!("{g}-model-{level}{suffix}"), v));
        }
    }
}

/// Writes every fixture into `dir` and removes stale `.html` files there.
pub fn write(dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let fixtures = all();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let known = path.file_stem().and_then(|s| s.to_str()).is_some_and(|s| fixtures.iter().any(|(n, _)| n == s));
        if path.extension().is_some_and(|e| e == "html") && !known {
            std::fs::remove_file(path)?;
        }
    }
    for (name, view) in &fixtures {
        std::fs::write(dir.join(format!("{name}.html")), render::page(view))?;
    }
    Ok(fixtures.len())
}

/// The fixtures in `dir` that are missing, stale or unknown.
pub fn stale(dir: &Path) -> Vec<String> {
    let fixtures = all();
    let mut out: Vec<String> = fixtures
        .iter()
        .filter(|(name, view)| {
            std::fs::read_to_string(dir.join(format!("{name}.html"))).ok().as_deref()
                != Some(render::page(view).as_str())
        })
        .map(|(name, _)| name.clone())
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let stem = entry.path().file_stem().and_then(|s| s.to_str()).map(str::to_owned).unwrap_or_default();
            if entry.path().extension().is_some_and(|e| e == "html") && !fixtures.iter().any(|(n, _)| *n == stem) {
                out.push(stem);
            }
        }
    }
    out
}

/// The view fakechat renders for a corpus structure (`fakechat:` in the
/// header of a file in `chatgpt-dom/fixtures/corpus/`): control fields
/// (`screen`, `generation`, `locale`, `generating`, `deferral`,
/// `rate_limited`, `turn_error`) applied to a finished two-turn chat, or to
/// a new chat with `new_chat`. The corpus freshness test renders it and
/// asks the adapter for the same reading as the real structure's.
pub fn corpus_view(control: &str) -> Result<View, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CorpusView {
        #[serde(default)]
        screen: Screen,
        #[serde(default)]
        generation: Generation,
        #[serde(default)]
        locale: Locale,
        #[serde(default)]
        generating: bool,
        #[serde(default)]
        deferral: bool,
        #[serde(default)]
        rate_limited: bool,
        turn_error: Option<TurnError>,
        #[serde(default)]
        new_chat: bool,
    }
    let c: CorpusView = serde_json::from_str(control).map_err(|e| format!("{control}: {e}"))?;
    let mut view = if c.new_chat {
        View { generation: c.generation, nonce: "fixture".into(), ..View::default() }
    } else {
        chat(c.generation)
    };
    view.screen = c.screen;
    view.locale = c.locale;
    view.deferral = c.deferral;
    view.rate_limited = c.rate_limited;
    if c.generating {
        view.generating = true;
        view.turns[1] = turn(Role::Assistant, "Here is the pl", false);
    }
    if let Some(error) = c.turn_error {
        view.turns[1] =
            Turn { role: Role::Assistant, text: String::new(), finished: false, error: Some(error), calls: Vec::new() };
    }
    Ok(view)
}
