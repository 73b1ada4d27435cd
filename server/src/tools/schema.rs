//! Lean, portable tool schemas. Every worker conversation pays for the
//! catalogue in context, and clients differ in what JSON Schema they take.
//! One pass over each generated schema:
//!
//! - an enum of documented strings (`oneOf` of `const`s) becomes a plain
//!   `enum` of its values: the names say what they mean, and the per-value
//!   prose was most of the catalogue's bytes;
//! - Rust's integer formats (`uint32`, `uint64`, `int64`…) go: they are not
//!   JSON Schema formats, and `minimum: 0` already says unsigned.

use serde_json::{Map, Value};

/// The lean form of `schema` (see the module doc).
pub fn lean(mut schema: Map<String, Value>) -> Map<String, Value> {
    for value in schema.values_mut() {
        walk(value);
    }
    tidy(&mut schema);
    schema
}

fn walk(value: &mut Value) {
    match value {
        Value::Object(object) => {
            // Values, not schemas, live under these: leave them as they are.
            for (key, child) in object.iter_mut() {
                if !["const", "default", "examples", "enum"].contains(&key.as_str()) {
                    walk(child);
                }
            }
            tidy(object);
        }
        Value::Array(items) => items.iter_mut().for_each(walk),
        _ => {}
    }
}

fn tidy(object: &mut Map<String, Value>) {
    if let Some(values) = documented_strings(object) {
        object.remove("oneOf");
        object.insert("type".into(), "string".into());
        object.insert("enum".into(), Value::Array(values));
    }
    let integer = match object.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(types)) => types.iter().any(|t| t == "integer"),
        _ => false,
    };
    if integer {
        object.remove("format");
    }
}

/// The values of a `oneOf` whose every branch is a documented string `const`.
fn documented_strings(object: &Map<String, Value>) -> Option<Vec<Value>> {
    let branches = object.get("oneOf")?.as_array().filter(|b| !b.is_empty())?;
    branches
        .iter()
        .map(|b| {
            let b = b.as_object()?;
            let only_doc = b.keys().all(|k| ["const", "type", "description"].contains(&k.as_str()));
            (only_doc && b.get("type").and_then(Value::as_str) == Some("string")).then(|| b.get("const").cloned())?
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn documented_enums_and_rust_formats_are_made_lean() {
        let schema = json!({
            "type": "object",
            "properties": {
                "state": {"description": "The state.", "oneOf": [
                    {"const": "a", "type": "string", "description": "A."},
                    {"const": "b", "type": "string", "description": "B."}
                ]},
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
                "maybe": {"type": ["integer", "null"], "format": "uint64"},
                "fixed": {"const": {"oneOf": []}},
                "mixed": {"oneOf": [{"const": "a", "type": "string"}, {"type": "object"}]}
            }
        });
        let Value::Object(schema) = schema else { unreachable!() };
        let lean = Value::Object(lean(schema));
        assert_eq!(
            lean["properties"]["state"],
            json!({"description": "The state.", "type": "string", "enum": ["a", "b"]})
        );
        assert_eq!(lean["properties"]["count"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(lean["properties"]["maybe"], json!({"type": ["integer", "null"]}));
        assert_eq!(lean["properties"]["fixed"], json!({"const": {"oneOf": []}}), "values are not schemas");
        assert!(lean["properties"]["mixed"]["oneOf"].is_array(), "a union of other shapes is left alone");
    }
}
