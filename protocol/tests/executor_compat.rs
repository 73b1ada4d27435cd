//! The executor protocol on the wire (v1, and v2's `hello` with
//! `host.name` and `host.capacity`, `callerSeen`, `conversationBlock` and
//! `callerLookup`, v4's `host.release` and `welcome.release`, v5's
//! `pageInspect` and `pageInspected`): every frame type in
//! `fixtures/executor-v1.jsonl` keeps parsing and writes back the same
//! fields. Never edit a fixture line; add one when a frame grows.
//!
//! Which frames may grow: the daemon's (`welcome`, `command` and its ops) may
//! gain optional fields within v1, so executors must ignore fields they do
//! not know there. The executor's frames may not: the daemon refuses unknown
//! fields in them (a new field needs a new protocol version).

use protocol::executor::{DaemonFrame, ExecutorFrame};
use serde_json::Value;

fn lines() -> Vec<(String, Value)> {
    include_str!("fixtures/executor-v1.jsonl")
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            (v["direction"].as_str().unwrap().to_owned(), v["frame"].clone())
        })
        .collect()
}

fn round_trips<T: serde::Serialize + serde::de::DeserializeOwned>(frame: &Value) {
    let parsed: T = serde_json::from_value(frame.clone()).unwrap_or_else(|e| panic!("{e}: {frame}"));
    let again = serde_json::to_value(&parsed).unwrap();
    for (k, v) in frame.as_object().unwrap() {
        assert_eq!(again.get(k), Some(v), "{k} changed in {frame}");
    }
}

#[test]
fn every_v1_frame_still_parses_and_round_trips() {
    let (mut executor, mut daemon) = (std::collections::BTreeSet::new(), std::collections::BTreeSet::new());
    for (direction, frame) in lines() {
        let kind = format!(
            "{}{}",
            frame["type"].as_str().unwrap(),
            frame["op"]["kind"].as_str().map(|k| format!("/{k}")).unwrap_or_default()
        );
        match direction.as_str() {
            "executor" => {
                round_trips::<ExecutorFrame>(&frame);
                let parsed: ExecutorFrame = serde_json::from_value(frame.clone()).unwrap();
                assert_eq!(parsed.validate(), Ok(()), "{frame}");
                executor.insert(kind);
            }
            _ => {
                round_trips::<DaemonFrame>(&frame);
                daemon.insert(kind);
            }
        }
    }
    assert_eq!(executor.len(), 12, "every executor frame type (result twice): {executor:?}");
    assert_eq!(daemon.len(), 9, "welcome, callerLookup, pageInspect and every command op: {daemon:?}");
}

#[test]
fn executor_frames_refuse_unknown_fields_and_daemon_frames_may_grow() {
    for (direction, mut frame) in lines() {
        frame.as_object_mut().unwrap().insert("futureField".into(), Value::Bool(true));
        match direction.as_str() {
            "executor" => {
                let err = serde_json::from_value::<ExecutorFrame>(frame.clone()).unwrap_err();
                assert!(err.to_string().contains("unknown field"), "{frame}: {err}");
            }
            _ => {
                serde_json::from_value::<DaemonFrame>(frame.clone())
                    .unwrap_or_else(|e| panic!("daemon frames may grow: {e}: {frame}"));
            }
        }
    }
}
