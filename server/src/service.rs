//! `orchestrator service install|uninstall`: run the daemon, or the CDP host
//! agent, as the user's service, restarted on failure — a systemd user unit
//! on Linux, a launchd agent on macOS. The renderers are pure (tested on
//! every OS); where the file goes is per OS.

use std::path::{Path, PathBuf};

/// The service's name (systemd unit `chatgpt-orchestrator.service`).
pub const NAME: &str = "chatgpt-orchestrator";
/// The launchd label.
pub const LABEL: &str = "com.chatgpt-orchestrator";

/// What runs as the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// `orchestrator serve`.
    Daemon,
    /// `orchestrator carrier-agent` (the CDP host agent, on this or another host).
    CarrierAgent,
}

impl Service {
    /// The systemd unit's name.
    pub fn name(self) -> &'static str {
        match self {
            Service::Daemon => NAME,
            Service::CarrierAgent => "chatgpt-orchestrator-carrier",
        }
    }

    /// The launchd label.
    pub fn label(self) -> &'static str {
        match self {
            Service::Daemon => LABEL,
            Service::CarrierAgent => "com.chatgpt-orchestrator.carrier",
        }
    }

    /// The subcommand it runs.
    pub fn subcommand(self) -> &'static str {
        match self {
            Service::Daemon => "serve",
            Service::CarrierAgent => "carrier-agent",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Service::Daemon => "ChatGPT carrier pool orchestrator",
            Service::CarrierAgent => "ChatGPT orchestrator CDP host agent",
        }
    }

    /// The stem of its launchd log files.
    fn log_stem(self) -> &'static str {
        match self {
            Service::Daemon => "orchestrator",
            Service::CarrierAgent => "carrier-agent",
        }
    }
}

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

    /// Where the user's file for `service` goes, under `home`.
    pub fn path(self, service: Service, home: &Path) -> PathBuf {
        match self {
            Manager::Systemd => home.join(".config/systemd/user").join(format!("{}.service", service.name())),
            Manager::Launchd => home.join("Library/LaunchAgents").join(format!("{}.plist", service.label())),
        }
    }

    /// The file that runs `exe` with `args` (the subcommand's command line).
    pub fn render(self, service: Service, exe: &Path, args: &[String], log_dir: &Path) -> String {
        match self {
            Manager::Systemd => systemd_unit(service, exe, args),
            Manager::Launchd => launchd_plist(service, exe, args, log_dir),
        }
    }

    /// What to run after installing.
    pub fn enable_hint(self, service: Service) -> String {
        match self {
            Manager::Systemd => {
                format!("systemctl --user daemon-reload && systemctl --user enable --now {}", service.name())
            }
            Manager::Launchd => {
                format!("launchctl bootstrap gui/$(id -u) ~/Library/LaunchAgents/{}.plist", service.label())
            }
        }
    }

    /// What to run before uninstalling.
    pub fn disable_hint(self, service: Service) -> String {
        match self {
            Manager::Systemd => format!("systemctl --user disable --now {}", service.name()),
            Manager::Launchd => format!("launchctl bootout gui/$(id -u)/{}", service.label()),
        }
    }
}

/// A systemd user unit: restart on failure, logs to the journal (no colour:
/// stderr is not a terminal there).
pub fn systemd_unit(service: Service, exe: &Path, args: &[String]) -> String {
    let command: Vec<String> =
        std::iter::once(exe.display().to_string()).chain(args.iter().cloned()).map(|a| systemd_quote(&a)).collect();
    format!(
        "[Unit]\n\
         Description={}\n\
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
        service.description(),
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
pub fn launchd_plist(service: Service, exe: &Path, args: &[String], log_dir: &Path) -> String {
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
         \x20 <key>Label</key>\n  <string>{}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n{arguments}  </array>\n\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         \x20 <key>StandardOutPath</key>\n  <string>{}</string>\n\
         \x20 <key>StandardErrorPath</key>\n  <string>{}</string>\n\
         </dict>\n\
         </plist>\n",
        service.label(),
        log(&format!("{}.out.log", service.log_stem())),
        log(&format!("{}.err.log", service.log_stem())),
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
            Service::Daemon,
            Path::new("/opt/orch/orchestrator"),
            &["serve".into(), "--app-label".into(), "My Orch 100%".into()],
        );
        assert!(unit.contains("ExecStart=/opt/orch/orchestrator serve --app-label \"My Orch 100%%\"\n"), "{unit}");
        assert!(unit.contains("Restart=on-failure"));
    }

    #[test]
    fn the_plist_escapes_xml_and_names_each_argument() {
        let plist = launchd_plist(
            Service::Daemon,
            Path::new("/usr/local/bin/orchestrator"),
            &["--app-label".into(), "A&B".into()],
            Path::new("/tmp/l"),
        );
        assert!(plist.contains("<string>A&amp;B</string>"), "{plist}");
        assert!(plist.contains("<string>/tmp/l/orchestrator.err.log</string>"));
    }

    #[test]
    fn the_carrier_agent_is_a_service_of_its_own() {
        let args = ["carrier-agent".into(), "--cdp".into(), "--channel".into(), "chrome".into()];
        let unit = systemd_unit(Service::CarrierAgent, Path::new("/opt/orch/orchestrator"), &args);
        assert!(unit.contains("Description=ChatGPT orchestrator CDP host agent\n"), "{unit}");
        assert!(unit.contains("ExecStart=/opt/orch/orchestrator carrier-agent --cdp --channel chrome\n"), "{unit}");
        let plist = launchd_plist(Service::CarrierAgent, Path::new("/o"), &args, Path::new("/l"));
        assert!(plist.contains("<string>com.chatgpt-orchestrator.carrier</string>"), "{plist}");
        assert!(plist.contains("<string>/l/carrier-agent.err.log</string>"));
        let home = Path::new("/home/ada");
        assert_eq!(
            Manager::Systemd.path(Service::CarrierAgent, home),
            Path::new("/home/ada/.config/systemd/user/chatgpt-orchestrator-carrier.service")
        );
        assert_eq!(
            Manager::Launchd.path(Service::CarrierAgent, home),
            Path::new("/home/ada/Library/LaunchAgents/com.chatgpt-orchestrator.carrier.plist")
        );
    }
}
