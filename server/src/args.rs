//! Tool arguments. rmcp's own `Parameters` reports a bad argument as free
//! text; ours hands the handler either the arguments or a `ToolError`
//! (`INVALID_ARGUMENT`), which the handler returns like every other refusal,
//! so callers branch on one format.
//! (The name matters: rmcp's `#[tool]` macro finds the input schema by it.)

use rmcp::handler::server::common::FromContextPart;
use rmcp::handler::server::tool::ToolCallContext;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::tools::ToolError;

/// Deserialized tool arguments, or the refusal saying why not.
pub struct Parameters<T>(pub Result<T, ToolError>);

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
        let parsed = serde_json::from_value(serde_json::Value::Object(arguments));
        Ok(Parameters(parsed.map_err(|e| ToolError::new(protocol::ErrorCode::InvalidArgument, e.to_string()))))
    }
}
