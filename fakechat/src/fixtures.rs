//! The state fixtures: every page state fakechat can show, rendered by the
//! same code that serves the live site, saved as static HTML under
//! `chatgpt-dom/fixtures/` so the DOM adapter's unit tests and the browser
//! tests see one DOM. Sanitized by construction: synthetic text, a fixed
//! nonce, no ids from a real account. `fakechat fixtures` regenerates them;
//! a test fails when they are stale.

use std::path::Path;

use crate::render::{self, Editor, Generation, Integrity, Locale, Role, Screen, Turn, TurnError, View};

const CONVERSATION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";

fn turn(role: Role, text: &str, finished: bool) -> Turn {
    Turn { role, text: text.into(), finished, error: None }
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
        for (name, error) in
            [("delivery-timeout", TurnError::DeliveryTimeout), ("something-went-wrong", TurnError::SomethingWentWrong)]
        {
            let mut v = chat(generation);
            v.turns[1] = Turn { role: Role::Assistant, text: String::new(), finished: false, error: Some(error) };
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
        let mut german = chat(generation);
        german.locale = Locale::De;
        out.push((format!("{g}-idle-de"), german));
    }
    let mut lexical = chat(Generation::A);
    lexical.editor = Editor::Lexical;
    out.push(("a-idle-lexical".into(), lexical));
    out
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
