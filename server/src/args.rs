//! Tool arguments. rmcp's own `Parameters` reports a bad argument as free
//! text; ours hands the handler either the arguments or the error text
//! `{"code": "INVALID_ARGUMENT", "message": ...}`, which the handler returns
//! as a tool error like every other, so callers branch on one format.
//! (The name matters: rmcp's `#[tool]` macro finds the input schema by it.)

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// Deserialized tool arguments, or the typed error text saying why not.
pub struct Parameters<T>(pub Result<T, String>);

impl<T: JsonSchema> JsonSchema for Parameters<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

impl<S, T: DeserializeOwned> FromContextPart<ToolCallContext<'_, S>> for Parameters<T> {
    fn from_context_part(context: &mut ToolCallContext<'_, S>) -> Result<Self, rmcp::ErrorData> {
        let arguments = context.arguments.take().unwrap_or_default();
        Ok(Parameters(serde_json::from_value(serde_json::Value::Object(arguments)).map_err(|e| {
            let code = protocol::ErrorCode::InvalidArgument.as_str();
            serde_json::json!({ "code": code, "message": e.to_string() }).to_string()
        })))
    }
}
