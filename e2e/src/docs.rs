//! What the docs show a person to type, read as a person reads it: the
//! commands of a page's fenced `sh` blocks, and one command's words as a
//! POSIX shell splits them (quotes, no expansion).

/// The commands in a page's fenced `sh` blocks: continuation lines joined,
/// comments dropped.
pub fn sh_commands(markdown: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in markdown.lines() {
        let fence = line.trim_start();
        if fence.starts_with("```") {
            in_sh = !in_sh && fence.trim_start_matches('`').trim() == "sh";
            pending.clear();
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = strip_comment(line);
        match code.trim_end().strip_suffix('\\') {
            Some(head) => {
                pending.push_str(head);
                pending.push(' ');
            }
            None => {
                pending.push_str(code.trim_end());
                let command = std::mem::take(&mut pending).split_whitespace().collect::<Vec<_>>().join(" ");
                if !command.is_empty() {
                    out.push(command);
                }
            }
        }
    }
    out
}

/// `line` up to a `#` that starts a shell comment (outside quotes).
fn strip_comment(line: &str) -> &str {
    let (mut single, mut double) = (false, false);
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && (i == 0 || line[..i].ends_with(char::is_whitespace)) => return &line[..i],
            _ => {}
        }
    }
    line
}

/// `command`'s words as a shell splits them: whitespace between words,
/// `'…'` and `"…"` quote (no escapes, variables or globs: the docs use none).
pub fn shell_words(command: &str) -> anyhow::Result<Vec<String>> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => (quote, started) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    anyhow::ensure!(quote.is_none(), "an unclosed quote in `{command}`");
    if started {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the block reader on a made-up page.
    #[test]
    fn the_block_reader_joins_continuations_and_drops_comments() {
        let page = "text\n```sh\norchestrator a --x \\\n    --y   # why\n# only a comment\norchestrator b \"#not\" # c\n```\n```text\norchestrator c\n```\n";
        assert_eq!(sh_commands(page), vec!["orchestrator a --x --y", "orchestrator b \"#not\""]);
    }

    #[test]
    fn words_split_as_a_shell_splits_them() {
        let words =
            shell_words(r#"orchestrator canary deploy --app-label "Orchestrator Canary" -- --x 'a b' """#).unwrap();
        assert_eq!(
            words,
            ["orchestrator", "canary", "deploy", "--app-label", "Orchestrator Canary", "--", "--x", "a b", ""]
        );
        assert!(shell_words("a \"b").is_err());
    }
}
