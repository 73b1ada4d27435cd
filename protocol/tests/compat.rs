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
        let original = without_nulls(serde_json::from_str(line).unwrap());
        let again = serde_json::to_value(&event).unwrap();
        // Fields added later with defaults may appear on output; v1 fields must be unchanged.
        // An optional field that is none is now omitted rather than written as null (one
        // type per property in the tool schemas), so v1's nulls compare as absent.
        for (k, v) in original.as_object().unwrap() {
            assert_eq!(again.get(k), Some(v), "{k} changed in {line}");
        }
    }
    assert_eq!(kinds.len(), 11, "the fixture covers every v1 event type: {kinds:?}");
}

/// The value with every null-valued object member removed, at any depth.
fn without_nulls(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, without_nulls(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}
