//! What `docs/executor-protocol.md` says about single frames, held to the
//! wire types: a sentence there that these types contradict fails here.
//! (What the daemon then does with a frame is held in
//! `server/tests/protocol_doc.rs`.)

use protocol::ErrorCode;
use protocol::executor::{ConversationState, ExecutorFrame, REQUEST_ID_MAX, valid_request_id};
use serde_json::json;

const WORKER: &str = "wrk_0191e0a0b0c0d0e0f000000000000002";
const CONVERSATION: &str = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f";

fn frame(value: serde_json::Value) -> ExecutorFrame {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{e}: {value}"))
}

/// The doc (`conversationState` row): `error` is required with
/// `state: "error"`, yet a frame without it is not refused; the daemon
/// records an error page with no code. The wire types are where a refusal
/// would live: if they start refusing it, the doc's sentence must change.
#[test]
fn a_conversation_state_error_without_its_code_is_not_refused_on_the_wire() {
    let bare = frame(json!({"type": "conversationState", "workerId": WORKER, "state": "error"}));
    let ExecutorFrame::ConversationState { state, error, .. } = &bare else { panic!("{bare:?}") };
    assert_eq!((*state, *error), (ConversationState::Error, None));
    assert_eq!(bare.validate(), Ok(()), "not refused: the doc says what the daemon does with it");
    let coded = frame(json!({"type": "conversationState", "workerId": WORKER, "state": "error",
        "error": "DELIVERY_TIMEOUT"}));
    assert_eq!(coded.validate(), Ok(()));
    // The report that the page is usable again carries no `error`, and
    // writes none back.
    let usable = frame(json!({"type": "conversationState", "workerId": WORKER, "state": "idle"}));
    assert_eq!(serde_json::to_value(&usable).unwrap().get("error"), None);
}

/// The doc (Field reference, `requestId`; Close reasons): 1-100 of
/// `[A-Za-z0-9_-]`, and a `callerSeen` outside it closes the session with
/// the documented reason.
#[test]
fn a_request_id_is_1_to_100_of_the_documented_characters_and_anything_else_is_refused() {
    assert_eq!(REQUEST_ID_MAX, 100);
    for good in ["wfr_0197c0ffee0000000000000000000001", "a", "A-Z_09", &"x".repeat(100)] {
        assert!(valid_request_id(good), "{good:?}");
    }
    for bad in ["", &"x".repeat(101), "wfr_1/yqy1", "wfr 1", "wfr.1", "wfr_é", "wfr_1\n"] {
        assert!(!valid_request_id(bad), "{bad:?}");
        let seen = frame(json!({"type": "callerSeen", "workerId": WORKER, "conversationId": CONVERSATION,
            "requestId": bad, "newest": true}));
        let refusal = seen.validate().expect_err(bad);
        assert_eq!(refusal.code, ErrorCode::InvalidArgument);
        assert_eq!(
            format!("{}: {}", refusal.code, refusal.detail),
            "INVALID_ARGUMENT: requestId must be 1-100 of [A-Za-z0-9_-]",
            "the close reason the doc's table gives"
        );
    }
}
