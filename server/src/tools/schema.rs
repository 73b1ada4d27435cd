//! Lean, portable tool schemas. Every worker conversation pays for the
//! catalogue in context, and clients differ in what JSON Schema they take.
//! One pass over each generated schema:
//!
//! - an enum of documented strings (`oneOf` of `const`s) becomes a plain
//!   `enum` of its values: the names say what they mean, and the per-value
//!   prose was most of the catalogue's bytes;
//! - Rust's integer formats (`uint32`, `uint64`, `int64`…) go: they are not
//!   JSON Schema formats, and `minimum: 0` already says unsigned;
//! - an optional property says its one type: `type: [T, "null"]` becomes
//!   `type: T` and `anyOf: [X, {type: null}]` becomes `X`. Absent already
//!   means none (serde reads a missing `Option` as `None`), outputs omit a
//!   `None` rather than write `null`, and single-type dialects (the OpenAPI
//!   subset behind Gemini function declarations; the MCP Inspector warns)
//!   reject a type array.

use serde_json::{Map, Value};

/// The schema keywords an output keeps: its shape (types, fields, values).
const SHAPE: &[&str] = &["type", "properties", "items", "enum", "const", "$defs", "$ref", "anyOf", "oneOf", "allOf"];

/// An output schema reduced to its shape: what a result holds, typed, with
/// the names that say what each field is. Field prose, defaults, id
/// patterns, bounds, `required` and `additionalProperties` go: a model
/// reads the result itself (every result is also its JSON as text), and
/// these were seven tenths of the catalogue every worker conversation
/// carries. A client validating a result against it still can.
pub fn outline(mut schema: Map<String, Value>) -> Map<String, Value> {
    shape(&mut schema);
    schema
}

fn shape(object: &mut Map<String, Value>) {
    object.retain(|key, _| SHAPE.contains(&key.as_str()));
    for (key, child) in object.iter_mut() {
        match (key.as_str(), child) {
            // Names, each with a schema.
            ("properties" | "$defs", Value::Object(named)) => {
                for schema in named.values_mut() {
                    if let Value::Object(schema) = schema {
                        shape(schema);
                    }
                }
            }
            ("items", Value::Object(schema)) => shape(schema),
            ("anyOf" | "oneOf" | "allOf", Value::Array(schemas)) => {
                for schema in schemas.iter_mut().filter_map(Value::as_object_mut) {
                    shape(schema);
                }
            }
            _ => {}
        }
    }
}

/// `schema` with every `$ref` into its `$defs` replaced by the definition
/// itself (the referring object's own keys, such as its description, win),
/// and `$defs` gone once nothing refers to it. For arguments: clients build
/// a call from each property's own schema, and one that does not follow a
/// bare `$ref` sends an object argument as a string.
pub fn inline_definitions(mut schema: Map<String, Value>) -> Map<String, Value> {
    let Some(Value::Object(definitions)) = schema.remove("$defs") else { return schema };
    for value in schema.values_mut() {
        inline(value, &definitions, 0);
    }
    if serde_json::to_string(&schema).is_ok_and(|text| text.contains("\"$ref\"")) {
        schema.insert("$defs".into(), Value::Object(definitions));
    }
    schema
}

/// Deep enough for any argument; a self-referring definition stays a `$ref`.
const MAX_INLINE_DEPTH: usize = 8;

fn inline(value: &mut Value, definitions: &Map<String, Value>, depth: usize) {
    match value {
        Value::Object(object) => {
            let target = object.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/"));
            if let (Some(Value::Object(definition)), true) =
                (target.and_then(|name| definitions.get(name)), depth < MAX_INLINE_DEPTH)
            {
                object.remove("$ref");
                for (key, child) in definition {
                    object.entry(key.clone()).or_insert_with(|| child.clone());
                }
                for child in object.values_mut() {
                    inline(child, definitions, depth + 1);
                }
                return;
            }
            for (key, child) in object.iter_mut() {
                if !["const", "default", "examples", "enum"].contains(&key.as_str()) {
                    inline(child, definitions, depth);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| inline(item, definitions, depth)),
        _ => {}
    }
}

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
    if let Some(Value::Object(properties)) = object.get("properties") {
        let required: Vec<Value> = match object.get("required") {
            Some(Value::Array(names)) => names.clone(),
            _ => Vec::new(),
        };
        let mut properties = properties.clone();
        for (name, property) in properties.iter_mut() {
            if let (false, Value::Object(property)) = (required.contains(&Value::from(name.as_str())), property) {
                drop_null(property);
            }
        }
        object.insert("properties".into(), Value::Object(properties));
    }
}

/// An optional property's schema without its `null` alternative.
fn drop_null(property: &mut Map<String, Value>) {
    if property.get("default") == Some(&Value::Null) {
        property.remove("default");
    }
    if let Some(Value::Array(types)) = property.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            property.insert("type".into(), only);
        }
        return;
    }
    let null = serde_json::json!({"type": "null"});
    let Some(Value::Array(branches)) = property.get("anyOf") else { return };
    let [a, b] = branches.as_slice() else { return };
    let other = match (a == &null, b == &null) {
        (false, true) => a.clone(),
        (true, false) => b.clone(),
        _ => return,
    };
    let Value::Object(other) = other else { return };
    property.remove("anyOf");
    for (key, value) in other {
        property.entry(key).or_insert(value);
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
    fn definitions_are_inlined_where_they_are_used() {
        let schema = json!({
            "type": "object",
            "properties": {
                "assignment": {"$ref": "#/$defs/Assignment", "description": "The task."},
                "loop": {"$ref": "#/$defs/Loop"}
            },
            "$defs": {
                "Assignment": {"type": "object", "description": "Generic.", "properties": {"scope": {"$ref": "#/$defs/Scope"}}},
                "Scope": {"type": "object", "properties": {"allowed": {"type": "array", "items": {"type": "string"}}}},
                "Loop": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Loop"}}}
            }
        });
        let Value::Object(schema) = schema else { unreachable!() };
        let inlined = Value::Object(inline_definitions(schema));
        let assignment = &inlined["properties"]["assignment"];
        assert_eq!(assignment["description"], "The task.", "the referring object's own keys win");
        assert_eq!(assignment["type"], "object");
        assert_eq!(assignment["properties"]["scope"]["properties"]["allowed"]["type"], "array");
        assert!(inlined["$defs"]["Loop"].is_object(), "a self-referring definition keeps its $defs");
        let Value::Object(flat) =
            json!({"properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"type": "string"}}})
        else {
            unreachable!()
        };
        assert_eq!(Value::Object(inline_definitions(flat)), json!({"properties": {"a": {"type": "string"}}}));
    }

    #[test]
    fn documented_enums_rust_formats_and_optional_nulls_are_made_lean() {
        let schema = json!({
            "type": "object",
            "properties": {
                "state": {"description": "The state.", "oneOf": [
                    {"const": "a", "type": "string", "description": "A."},
                    {"const": "b", "type": "string", "description": "B."}
                ]},
                "count": {"type": "integer", "format": "uint32", "minimum": 0},
                "maybe": {"type": ["integer", "null"], "format": "uint64"},
                "maybe_ref": {"anyOf": [{"$ref": "#/$defs/Id"}, {"type": "null"}], "default": null, "description": "An id."},
                "nullable": {"type": ["string", "null"]},
                "fixed": {"const": {"oneOf": []}},
                "mixed": {"oneOf": [{"const": "a", "type": "string"}, {"type": "object"}]}
            },
            "required": ["nullable"]
        });
        let Value::Object(schema) = schema else { unreachable!() };
        let lean = Value::Object(lean(schema));
        assert_eq!(
            lean["properties"]["state"],
            json!({"description": "The state.", "type": "string", "enum": ["a", "b"]})
        );
        assert_eq!(lean["properties"]["count"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(lean["properties"]["maybe"], json!({"type": "integer"}), "optional: absent means none");
        assert_eq!(lean["properties"]["maybe_ref"], json!({"$ref": "#/$defs/Id", "description": "An id."}));
        assert_eq!(lean["properties"]["nullable"], json!({"type": ["string", "null"]}), "a required null stays");
        assert_eq!(lean["properties"]["fixed"], json!({"const": {"oneOf": []}}), "values are not schemas");
        assert!(lean["properties"]["mixed"]["oneOf"].is_array(), "a union of other shapes is left alone");
    }
}
