//! Backward compatibility of persisted and wire formats: fixtures written by
//! earlier versions must keep parsing, and parse to the same JSON again.
//! Never edit a fixture; add a new one when a format grows.

use protocol::Event;

#[test]
fn events_v1_fixture_still_parses_and_round_trips() {
    let text = include_str!("fixtures/events-v1.jsonl");
    let mut kinds = std::collections::BTreeSet::new();
    for line in text.lines() {
        let event: Event = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        kinds.insert(event.body.kind());
        let original: serde_json::Value = serde_json::from_str(line).unwrap();
        let again = serde_json::to_value(&event).unwrap();
        // Fields added later with defaults may appear on output; v1 fields must be unchanged.
        for (k, v) in original.as_object().unwrap() {
            assert_eq!(again.get(k), Some(v), "{k} changed in {line}");
        }
    }
    assert_eq!(kinds.len(), 11, "the fixture covers every v1 event type: {kinds:?}");
}
