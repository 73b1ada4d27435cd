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

/// Largest assignment, serialized as JSON, in bytes: each field within its
/// own bound is not enough (nine fields at their bounds make 1.6 MB).
pub const ASSIGNMENT_MAX: usize = 64 * 1024;
/// Largest event, serialized as JSON, in bytes: a command whose events would
/// be larger is refused (`TOO_LARGE`), so every event fits in a response.
pub const EVENT_MAX: usize = 96 * 1024;
/// Largest structured result of one tool call, serialized, in bytes. MCP
/// servers send it twice (structured, and as escaped text), and clients
/// refuse messages over 1 MiB (the Python SDK's SSE limit): 3 × 256 KiB plus
/// the envelope stays under it. Pages stop before this; they always hold at
/// least one event, which `EVENT_MAX` keeps under it, so paging progresses.
pub const RESPONSE_MAX: usize = 256 * 1024;
/// Longest progress or outcome text in a list of workers, in bytes (cut at a
/// character boundary); the full text is in the worker's events.
pub const PREVIEW_MAX: usize = 256;

/// Longest app (connector) label accepted, in characters.
pub const APP_LABEL_MAX: usize = 64;

/// Longest model label accepted, in characters.
pub const MODEL_LABEL_MAX: usize = 64;

/// Whether `label` can name a ChatGPT model as its picker shows it
/// ("GPT-5.5", "o3"): 1-64 characters, no control characters, no leading
/// or trailing whitespace.
pub fn valid_model_label(label: &str) -> bool {
    let count = label.chars().count();
    (1..=MODEL_LABEL_MAX).contains(&count) && label.trim() == label && !label.chars().any(char::is_control)
}

/// Whether `label` can name a ChatGPT app: 1-64 characters, no control
/// characters, no leading or trailing whitespace.
pub fn valid_app_label(label: &str) -> bool {
    let count = label.chars().count();
    (1..=APP_LABEL_MAX).contains(&count) && label.trim() == label && !label.chars().any(char::is_control)
}
