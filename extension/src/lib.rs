//! The WebExtension executor: the primary carrier. Rust compiled to wasm32;
//! the JavaScript in `static/` only loads the module and forwards browser
//! events to it.
//!
//! # Layout
//! - The judgement (idempotency journal with phases, the plan per command,
//!   the worker ↔ tab ↔ conversation registry, page reports turned into
//!   executor frames) is `executor_core`, shared with every carrier; tabs
//!   are its handles here.
//! - [`messages`]: the typed background ↔ content-script operations.
//! - [`operator`]: what the popup and the overlay show from the daemon's
//!   `operatorView`, and when a person is notified.
//! - [`pairing`]: what a pairing may hold (a loopback endpoint as the URL
//!   parser reads it, a credential of `orchestrator pair`'s form).
//! - `web` (wasm32 only): the browser glue. `background` keeps the daemon
//!   connection (hello, heartbeats, jittered reconnect, state in
//!   `storage.local`, `alarms` to wake up) and routes commands; `content`
//!   runs the shared `chatgpt-dom` adapter in chatgpt.com pages with a
//!   mutation-driven observer; `pages` drives the options page and popup.

pub mod messages;
pub mod operator;
pub mod pairing;

#[cfg(target_arch = "wasm32")]
mod web;

/// The browser's word for its machine's OS (`runtime.getPlatformInfo`'s
/// `os`, MDN `runtime.PlatformOs`) in the daemon's words
/// (`std::env::consts::OS`), for the hello's host facts: `mac` is `macos`,
/// `win` is `windows`, `cros` is `chromeos`; `linux`, `android`, `openbsd`
/// and `fuchsia` stay; anything else is not said (`""`).
pub fn machine_os(platform_os: &str) -> &'static str {
    match platform_os {
        "mac" => "macos",
        "win" => "windows",
        "cros" => "chromeos",
        "linux" => "linux",
        "android" => "android",
        "openbsd" => "openbsd",
        "fuchsia" => "fuchsia",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_browsers_os_words_become_the_daemons() {
        assert_eq!(super::machine_os("mac"), "macos");
        assert_eq!(super::machine_os("linux"), "linux");
        assert_eq!(super::machine_os("win"), "windows");
        assert_eq!(super::machine_os("macos\n"), "", "only the browser's own words");
    }
}
