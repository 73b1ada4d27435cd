//! Where an authorized browser session says how to reach it. Chrome and
//! Chromium write `DevToolsActivePort` into their user-data directory once
//! remote debugging is allowed (chrome://inspect/#remote-debugging for an
//! existing session, or `--remote-debugging-port=0`): line 1 the port,
//! line 2 the browser's WebSocket path. `/json/version` may answer 404 on
//! the existing-session path, so the WebSocket URL is built from the file.
//! Pure: the OS, the home directory and the environment come in.

use std::path::{Path, PathBuf};

/// The browser channels whose default user-data directory we know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// Google Chrome (stable).
    Chrome,
    /// Google Chrome Beta.
    ChromeBeta,
    /// Chromium.
    Chromium,
}

impl Channel {
    /// Every channel, in the order an operator most likely runs them.
    pub const ALL: [Channel; 3] = [Channel::Chrome, Channel::ChromeBeta, Channel::Chromium];

    /// Parses `chrome`, `chrome-beta` or `chromium`.
    pub fn parse(text: &str) -> Option<Channel> {
        match text {
            "chrome" => Some(Channel::Chrome),
            "chrome-beta" => Some(Channel::ChromeBeta),
            "chromium" => Some(Channel::Chromium),
            _ => None,
        }
    }
}

/// The operating systems the agent runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// macOS.
    MacOs,
    /// Linux (and other XDG desktops).
    Linux,
}

impl Os {
    /// This machine's, if the agent knows it.
    pub fn current() -> Option<Os> {
        match std::env::consts::OS {
            "macos" => Some(Os::MacOs),
            "linux" => Some(Os::Linux),
            _ => None,
        }
    }
}

/// The default user-data directory of `channel` on `os`, for a user whose
/// home is `home`. On Linux, `config_home` is `$XDG_CONFIG_HOME` when set
/// (Chrome follows it), else `~/.config`.
pub fn user_data_dir(os: Os, channel: Channel, home: &Path, config_home: Option<&Path>) -> PathBuf {
    match os {
        Os::MacOs => {
            let support = home.join("Library/Application Support");
            match channel {
                Channel::Chrome => support.join("Google/Chrome"),
                Channel::ChromeBeta => support.join("Google/Chrome Beta"),
                Channel::Chromium => support.join("Chromium"),
            }
        }
        Os::Linux => {
            let config = config_home.filter(|p| p.is_absolute()).map_or_else(|| home.join(".config"), Path::to_owned);
            match channel {
                Channel::Chrome => config.join("google-chrome"),
                Channel::ChromeBeta => config.join("google-chrome-beta"),
                Channel::Chromium => config.join("chromium"),
            }
        }
    }
}

/// The file a browser with user-data directory `dir` writes.
pub fn active_port_file(dir: &Path) -> PathBuf {
    dir.join("DevToolsActivePort")
}

/// Why a `DevToolsActivePort` file says nothing usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Line 1 is not a port from 1 to 65535.
    #[error("line 1 is not a port: {0:?}")]
    Port(String),
    /// Line 2 is not `/devtools/browser/<id>`.
    #[error("line 2 is not a /devtools/browser/ path: {0:?}")]
    Path(String),
}

/// The browser's DevTools WebSocket URL on loopback, from the file's text.
/// Only the browser endpoint is accepted, never a page's, and the path may
/// hold nothing but the id's characters (it becomes part of a URL).
pub fn parse_active_port(text: &str) -> Result<String, ParseError> {
    let mut lines = text.lines().map(str::trim);
    let port = lines.next().unwrap_or_default();
    let port: u16 = port.parse().ok().filter(|p| *p != 0).ok_or_else(|| ParseError::Port(cut(port)))?;
    let path = lines.next().unwrap_or_default();
    let id = path.strip_prefix("/devtools/browser/").unwrap_or_default();
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(ParseError::Path(cut(path)));
    }
    Ok(format!("ws://127.0.0.1:{port}{path}"))
}

fn cut(text: &str) -> String {
    text.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_has_its_directory_per_os() {
        let home = Path::new("/Users/ada");
        let mac = |c| user_data_dir(Os::MacOs, c, home, None);
        assert_eq!(mac(Channel::Chrome), Path::new("/Users/ada/Library/Application Support/Google/Chrome"));
        assert_eq!(mac(Channel::ChromeBeta), Path::new("/Users/ada/Library/Application Support/Google/Chrome Beta"));
        assert_eq!(mac(Channel::Chromium), Path::new("/Users/ada/Library/Application Support/Chromium"));
        let home = Path::new("/home/ada");
        let linux = |c, xdg: Option<&str>| user_data_dir(Os::Linux, c, home, xdg.map(Path::new));
        assert_eq!(linux(Channel::Chrome, None), Path::new("/home/ada/.config/google-chrome"));
        assert_eq!(linux(Channel::ChromeBeta, None), Path::new("/home/ada/.config/google-chrome-beta"));
        assert_eq!(linux(Channel::Chromium, None), Path::new("/home/ada/.config/chromium"));
        assert_eq!(linux(Channel::Chromium, Some("/xdg")), Path::new("/xdg/chromium"), "XDG_CONFIG_HOME wins");
        assert_eq!(
            linux(Channel::Chrome, Some("rel")),
            Path::new("/home/ada/.config/google-chrome"),
            "unless relative"
        );
        assert_eq!(active_port_file(Path::new("/p")), Path::new("/p/DevToolsActivePort"));
    }

    #[test]
    fn the_active_port_file_gives_the_browser_socket_on_loopback_only() {
        let text = "9222\n/devtools/browser/4b6c0f5e-9a1d-4c1e-8d3a-2f7e3b9c1d20\n";
        assert_eq!(
            parse_active_port(text).unwrap(),
            "ws://127.0.0.1:9222/devtools/browser/4b6c0f5e-9a1d-4c1e-8d3a-2f7e3b9c1d20"
        );
        assert!(matches!(parse_active_port(""), Err(ParseError::Port(_))));
        assert!(matches!(parse_active_port("0\n/devtools/browser/x"), Err(ParseError::Port(_))));
        assert!(matches!(parse_active_port("70000\n/devtools/browser/x"), Err(ParseError::Port(_))));
        assert!(
            matches!(parse_active_port("9222\n/devtools/page/x"), Err(ParseError::Path(_))),
            "a page, not the browser"
        );
        assert!(matches!(parse_active_port("9222\n/devtools/browser/a@evil.com/x"), Err(ParseError::Path(_))));
        assert!(matches!(parse_active_port("9222"), Err(ParseError::Path(_))));
        assert_eq!(Channel::parse("chrome-beta"), Some(Channel::ChromeBeta));
        assert_eq!(Channel::parse("edge"), None);
    }
}
