//! Conversation identity from the page URL: `/c/<uuid>`, and project chats
//! `/g/g-p-<32hex>[-slug]/c/<uuid>`. The UUID is the durable identity; the
//! slug is cosmetic and ignored.

use protocol::ConversationId;

/// What a URL says about the conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRef {
    /// The conversation, if the URL names one (absent on a new chat).
    pub conversation: Option<ConversationId>,
    /// The project's 32-hex id, if inside a project.
    pub project: Option<String>,
}

/// Parses a chatgpt.com URL or path; `None` for anything that is not a chat page.
pub fn parse_url(url: &str) -> Option<ConversationRef> {
    let path = match url.split_once("://") {
        Some((_, rest)) => {
            let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
            if host != "chatgpt.com" && !host.starts_with("chatgpt.com:") {
                return None;
            }
            format!("/{path}")
        }
        None => url.to_owned(),
    };
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let project_id = |segment: &str| -> Option<String> {
        let hex = segment.strip_prefix("g-p-")?.get(..32)?;
        hex.bytes().all(|b| b.is_ascii_hexdigit()).then(|| hex.to_ascii_lowercase())
    };
    match segments.as_slice() {
        [] => Some(ConversationRef { conversation: None, project: None }),
        ["c", id] => Some(ConversationRef { conversation: Some(id.parse().ok()?), project: None }),
        ["g", p, "project"] => Some(ConversationRef { conversation: None, project: Some(project_id(p)?) }),
        ["g", p, "c", id] => {
            Some(ConversationRef { conversation: Some(id.parse().ok()?), project: Some(project_id(p)?) })
        }
        _ => None,
    }
}

/// Whether `url` is exactly a Project page, `https://chatgpt.com/g/g-p-<32 hex>[-slug]/project`
/// (no query, fragment or port): where new worker conversations may be created.
pub fn is_project_page(url: &str) -> bool {
    let Some(segment) = url.strip_prefix("https://chatgpt.com/g/").and_then(|r| r.strip_suffix("/project")) else {
        return false;
    };
    let Some((hex, slug)) = segment.strip_prefix("g-p-").and_then(|h| h.split_at_checked(32)) else { return false };
    let slug_ok = slug.is_empty()
        || slug
            .strip_prefix('-')
            .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    hex.bytes().all(|b| b.is_ascii_hexdigit()) && slug_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0196b2c4-8e1f-7a3b-9c2d-4e5f60718293";
    const HEX: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn urls_give_exact_identities_or_nothing() {
        assert_eq!(parse_url("https://chatgpt.com/").unwrap().conversation, None);
        assert_eq!(
            parse_url(&format!("https://chatgpt.com/c/{ID}?model=x")).unwrap().conversation.unwrap().as_str(),
            ID
        );
        let p = parse_url(&format!("https://chatgpt.com/g/g-p-{HEX}-workers/c/{ID}")).unwrap();
        assert_eq!((p.conversation.unwrap().as_str(), p.project.as_deref()), (ID, Some(HEX)));
        assert_eq!(parse_url(&format!("/g/g-p-{HEX}/project")).unwrap().project.as_deref(), Some(HEX));
        for bad in [
            format!("https://evil.example/c/{ID}"),
            "https://chatgpt.com/c/not-a-uuid".to_owned(),
            "https://chatgpt.com/gpts".to_owned(),
            format!("https://chatgpt.com/g/g-p-123/c/{ID}"),
        ] {
            assert_eq!(parse_url(&bad), None, "{bad}");
        }
    }

    #[test]
    fn only_exact_project_pages_are_project_pages() {
        assert!(is_project_page(&format!("https://chatgpt.com/g/g-p-{HEX}/project")));
        assert!(is_project_page(&format!("https://chatgpt.com/g/g-p-{HEX}-my-workers/project")));
        for bad in [
            format!("https://chatgpt.com/g/g-p-{HEX}-/project"),
            format!("https://chatgpt.com/g/g-p-{HEX}/project?x=1"),
            format!("https://chatgpt.com/g/g-p-{HEX}/c/{ID}"),
            format!("http://chatgpt.com/g/g-p-{HEX}/project"),
            format!("https://evil.example/g/g-p-{HEX}/project"),
            "https://chatgpt.com/g/g-p-123/project".to_owned(),
        ] {
            assert!(!is_project_page(&bad), "{bad}");
        }
    }
}
