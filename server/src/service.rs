//! `orchestrator service install|uninstall`: run the daemon as the user's
//! service, restarted on failure — a systemd user unit on Linux, a launchd
//! agent on macOS. The renderers are pure (tested on every OS); where the
//! file goes is per OS.

use std::path::{Path, PathBuf};

/// The service's name (systemd unit `chatgpt-orchestrator.service`).
pub const NAME: &str = "chatgpt-orchestrator";
/// The launchd label.
pub const LABEL: &str = "com.chatgpt-orchestrator";

/// Which service manager a file is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    /// A systemd user unit (Linux).
    Systemd,
    /// A launchd agent (macOS).
    Launchd,
}

impl Manager {
    /// This machine's manager.
    pub fn here() -> Manager {
        if cfg!(target_os = "macos") { Manager::Launchd } else { Manager::Systemd }
    }

    /// Where the user's service file goes, under `home`.
    pub fn path(self, home: &Path) -> PathBuf {
        match self {
            Manager::Systemd => home.join(".config/systemd/user").join(format!("{NAME}.service")),
            Manager::Launchd => home.join("Library/LaunchAgents").join(format!("{LABEL}.plist")),
        }
    }

    /// The file that runs `exe` with `args` (the `serve` command line).
    pub fn render(self, exe: &Path, args: &[String], log_dir: &Path) -> String {
        match self {
            Manager::Systemd => systemd_unit(exe, args),
            Manager::Launchd => launchd_plist(exe, args, log_dir),
        }
    }

    /// What to run after installing.
    pub fn enable_hint(self) -> String {
        match self {
            Manager::Systemd => format!("systemctl --user daemon-reload && systemctl --user enable --now {NAME}"),
            Manager::Launchd => format!("launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/{LABEL}.plist"),
        }
    }

    /// What to run before uninstalling.
    pub fn disable_hint(self) -> String {
        match self {
            Manager::Systemd => format!("systemctl --user disable --now {NAME}"),
            Manager::Launchd => format!("launchctl bootout gui/$(id -u)/{LABEL}"),
        }
    }
}

/// A systemd user unit: restart on failure, logs to the journal (no colour:
/// stderr is not a terminal there).
pub fn systemd_unit(exe: &Path, args: &[String]) -> String {
    let command: Vec<String> =
        std::iter::once(exe.display().to_string()).chain(args.iter().cloned()).map(|a| systemd_quote(&a)).collect();
    format!(
        "[Unit]\n\
         Description=ChatGPT carrier pool orchestrator\n\
         After=network.target\n\
         \n\
         [Service]\n\
         Type=simple\n\
         ExecStart={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        command.join(" ")
    )
}

/// One ExecStart word: quoted when it holds spaces or quotes, `%` and `\`
/// and `"` escaped (systemd.service(5), "Command lines").
fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('\\', "\\\\").replace('"', "\\\"").replace('%', "%%").replace('$', "$$");
    if word.is_empty() || word.contains([' ', '\t', '"', '\'', ';']) { format!("\"{escaped}\"") } else { escaped }
}

/// A launchd agent: run at load, kept alive when it exits with a failure,
/// stdout and stderr into `log_dir`.
pub fn launchd_plist(exe: &Path, args: &[String], log_dir: &Path) -> String {
    let arguments: String = std::iter::once(exe.display().to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("    <string>{}</string>\n", xml_escape(&a)))
        .collect();
    let log = |name: &str| xml_escape(&log_dir.join(name).display().to_string());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <plist version=\"1.0\">\n\
         <dict>\n\
         \x20 <key>Label</key>\n  <string>{LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n{arguments}  </array>\n\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         \x20 <key>StandardOutPath</key>\n  <string>{}</string>\n\
         \x20 <key>StandardErrorPath</key>\n  <string>{}</string>\n\
         </dict>\n\
         </plist>\n",
        log("orchestrator.out.log"),
        log("orchestrator.err.log"),
    )
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_quotes_what_systemd_would_split_or_expand() {
        let unit = systemd_unit(
            Path::new("/opt/orch/orchestrator"),
            &["serve".into(), "--app-label".into(), "My Orch 100%".into()],
        );
        assert!(unit.contains("ExecStart=/opt/orch/orchestrator serve --app-label \"My Orch 100%%\"\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure"));
    }

    #[test]
    fn the_plist_escapes_xml_and_names_each_argument() {
        let plist = launchd_plist(
            Path::new("/usr/local/bin/orchestrator"),
            &["--app-label".into(), "A&B".into()],
            Path::new("/tmp/l"),
        );
        assert!(plist.contains("<string>A&amp;B</string>"), "{plist}");
        assert!(plist.contains("<string>/tmp/l/orchestrator.err.log</string>"));
    }
}
