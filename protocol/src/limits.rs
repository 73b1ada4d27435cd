//! Size bounds. Everything a caller sends is checked against these before it
//! reaches the store, so one oversized call cannot bloat the log or a prompt.

/// Longest run title, in bytes.
pub const TITLE_MAX: usize = 256;
/// Longest worker name segment (the last part of `/root/<name>`), in bytes.
pub const NAME_MAX: usize = 64;
/// Longest free-text field (objective, message body, summary), in bytes.
pub const TEXT_MAX: usize = 32 * 1024;
/// Longest item of a list field (a constraint, an artifact ref), in bytes.
pub const ITEM_MAX: usize = 4 * 1024;
/// Most items in one list field.
pub const LIST_MAX: usize = 64;
/// Longest idempotency key, in bytes.
pub const IDEMPOTENCY_KEY_MAX: usize = 128;
/// Most workers in one run, root included.
pub const WORKERS_PER_RUN_MAX: usize = 256;
/// Longest `events_wait` a caller may ask for; hosts time tool calls out at ~60 s.
pub const WAIT_MAX_MS: u64 = 50_000;
/// Most events returned by one list or wait.
pub const EVENTS_PAGE_MAX: usize = 500;

/// Longest app (connector) label accepted, in characters.
pub const APP_LABEL_MAX: usize = 64;

/// Whether `label` can name a ChatGPT app: 1-64 characters, no control
/// characters, no leading or trailing whitespace.
pub fn valid_app_label(label: &str) -> bool {
    let count = label.chars().count();
    (1..=APP_LABEL_MAX).contains(&count) && label.trim() == label && !label.chars().any(char::is_control)
}
