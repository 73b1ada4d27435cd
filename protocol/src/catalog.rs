//! The catalog stamp. ChatGPT caches an app's tool list, so a daemon upgraded
//! under it may be called with an older catalog. The daemon writes a short
//! hash of its catalog into the attach tools' descriptions; a caller reads
//! it from its own tool list and passes it back as `catalog`, and a stale
//! app shows an old stamp. Written by [`stamp_description`] and read by
//! [`stamp_in_tools`], here in one place, so the two never drift.

/// The tools whose descriptions carry the stamp.
pub const STAMPED_TOOLS: [&str; 2] = ["worker_attach", "runtime_bootstrap"];

const MARK: &str = " Catalog ";

/// `description` with `stamp` appended as the daemon shows it.
pub fn stamp_description(description: &str, stamp: &str) -> String {
    format!("{description}{MARK}{stamp}: pass it as catalog.")
}

/// The stamp in a `tools/list` result (from `worker_attach`'s description), if any.
pub fn stamp_in_tools(tools: &[serde_json::Value]) -> Option<String> {
    let attach = tools.iter().find(|t| t["name"] == STAMPED_TOOLS[0])?;
    let description = attach["description"].as_str()?;
    // The mark is appended last, so the last one is the stamp.
    let rest = &description[description.rfind(MARK.trim_start())? + MARK.trim_start().len()..];
    let stamp: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    (!stamp.is_empty()).then_some(stamp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let tools =
            [serde_json::json!({"name": "worker_attach", "description": stamp_description("Attach.", "0123abcd")})];
        assert_eq!(stamp_in_tools(&tools).as_deref(), Some("0123abcd"));
        assert_eq!(stamp_in_tools(&[serde_json::json!({"name": "worker_attach", "description": "Attach."})]), None);
    }
}
