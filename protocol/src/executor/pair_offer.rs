//! Pairing a browser without pasting (`orchestrator setup`, issue 46): on
//! `/executor/pair`, the extension's pairing page asks for a credential
//! and shows a code; `orchestrator setup` shows the same code and the
//! person accepts there. The credential goes from the daemon to the
//! extension over that one socket: it is never printed, never on a command
//! line, never in a file `status` reads.
//!
//! The daemon takes requests only while a setup has opened a window
//! ([`WINDOW_MOST_MS`] at most), holds at most [`PENDING_MOST`] of them,
//! and answers each one exactly once: [`PairAnswer`].

use serde::{Deserialize, Serialize};

/// The path beside `/executor` where a pairing page asks.
pub const PATH: &str = "/executor/pair";

/// The longest window one setup opens for requests.
pub const WINDOW_MOST_MS: u64 = 600_000;

/// Requests held at once; one more is refused `BUSY`.
pub const PENDING_MOST: usize = 4;

/// How long a page may take to send its request once connected.
pub const REQUEST_WITHIN_MS: u64 = 10_000;

/// The bound on a request's `browser` and `release` strings, in bytes.
pub const NAME_MAX: usize = 128;

/// What the pairing page sends first (and only):
/// `{"type":"pairRequest","code","browser","release"}`, nothing more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Tagged", from = "Tagged")]
pub struct PairRequest {
    /// The code the page shows, [`valid_code`]'s form.
    pub code: String,
    /// The browser, as the page can tell (shown to the person).
    pub browser: String,
    /// The extension's build version (shown; a setup refuses an
    /// extension the daemon cannot speak with once it connects).
    pub release: String,
}

/// [`PairRequest`] on the wire: serde refuses unknown fields beside a
/// struct's own tag, so the tag is an enum's.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum Tagged {
    PairRequest { code: String, browser: String, release: String },
}

impl From<Tagged> for PairRequest {
    fn from(Tagged::PairRequest { code, browser, release }: Tagged) -> Self {
        PairRequest { code, browser, release }
    }
}

impl From<PairRequest> for Tagged {
    fn from(PairRequest { code, browser, release }: PairRequest) -> Self {
        Tagged::PairRequest { code, browser, release }
    }
}

/// The daemon's one answer, then it closes the socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum PairAnswer {
    /// Accepted: the credential for `executor_id`, to dial `/executor` with.
    #[serde(rename_all = "camelCase")]
    Paired { executor_id: String, credential: String },
    /// Not paired, and why.
    #[serde(rename_all = "camelCase")]
    Refused { reason: PairRefusal, detail: String },
}

/// Why a request was not paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PairRefusal {
    /// No `orchestrator setup` is waiting: the page asks again later.
    NoSetupWaiting,
    /// [`PENDING_MOST`] requests are waiting already.
    Busy,
    /// The person declined it at the setup.
    Declined,
    /// The setup's window ended before anyone accepted.
    Expired,
    /// The request was not of the form above.
    Invalid,
}

/// A pairing code: two groups of four from an alphabet without look-alikes
/// (`ABCDEFGHJKMNPQRSTUVWXYZ23456789`), `XXXX-XXXX`: about 39 bits, shown
/// on both sides for the person to compare.
pub fn valid_code(code: &str) -> bool {
    let b = code.as_bytes();
    b.len() == 9 && b[4] == b'-' && b.iter().enumerate().all(|(i, c)| i == 4 || CODE_ALPHABET.contains(c))
}

/// The letters a code is made of.
pub const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// A code from 8 random bytes (each taken modulo the alphabet: the bias is
/// below 1 %, and the code is compared by a person, not guessed blind).
pub fn code_from(random: [u8; 8]) -> String {
    let letters: String = random.iter().map(|b| CODE_ALPHABET[*b as usize % CODE_ALPHABET.len()] as char).collect();
    format!("{}-{}", &letters[..4], &letters[4..])
}

impl PairRequest {
    /// The request's fields within their bounds and free of control and
    /// bidirectional characters (each is shown to a person at a terminal).
    pub fn check(&self) -> Result<(), &'static str> {
        if !valid_code(&self.code) {
            return Err("code: XXXX-XXXX from the pairing alphabet");
        }
        for text in [&self.browser, &self.release] {
            if text.len() > NAME_MAX {
                return Err("browser and release: at most 128 bytes");
            }
            if text.chars().any(|c| c.is_control() || crate::ownership::bidi(c)) {
                return Err("browser and release: no control or bidirectional characters");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_made_and_read_in_one_form() {
        let code = code_from([0, 1, 2, 3, 30, 31, 200, 255]);
        assert!(valid_code(&code), "{code}");
        for bad in ["ABCD-EFG", "ABCDEFGHJ", "ABCD-EFGI", "abcd-efgh", "ABCD_EFGH", "ABCD-EFGH "] {
            assert!(!valid_code(bad), "{bad}");
        }
    }

    #[test]
    fn a_request_reads_as_the_doc_writes_it_and_is_bounded() {
        let text = r#"{"type":"pairRequest","code":"K7QM-2XPA","browser":"Chromium 156","release":"0.1.0"}"#;
        let request: PairRequest = serde_json::from_str(text).unwrap();
        assert_eq!(request.check(), Ok(()));
        assert!(serde_json::from_str::<PairRequest>(&text.replace("}", r#","extra":1}"#)).is_err());
        assert!(serde_json::from_str::<PairRequest>(&text.replace("pairRequest", "hello")).is_err());
        assert_eq!(serde_json::to_string(&request).unwrap(), text);
        let long = PairRequest { browser: "x".repeat(NAME_MAX + 1), ..request.clone() };
        assert!(long.check().is_err());
        let bidi = PairRequest { browser: "Chromium\u{202e}".into(), ..request.clone() };
        assert!(bidi.check().is_err());
        let answer = PairAnswer::Refused { reason: PairRefusal::NoSetupWaiting, detail: "run setup".into() };
        assert_eq!(
            serde_json::to_string(&answer).unwrap(),
            r#"{"type":"refused","reason":"NO_SETUP_WAITING","detail":"run setup"}"#
        );
        let paired = PairAnswer::Paired { executor_id: "exec-1".into(), credential: "exc1.x".into() };
        assert_eq!(
            serde_json::to_string(&paired).unwrap(),
            r#"{"type":"paired","executorId":"exec-1","credential":"exc1.x"}"#
        );
    }
}
