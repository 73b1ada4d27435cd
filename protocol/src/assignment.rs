//! The assignment: a worker's authoritative context. It lives in the control
//! plane and is fetched over MCP by `worker_attach`; it never enters a prompt.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What a worker must do and how it must report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Assignment {
    /// The goal, in one or a few sentences.
    pub objective: String,
    /// Rules the worker must keep.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// How root will judge the work done.
    #[serde(default)]
    pub acceptance_criteria: Vec<String>,
    /// What must exist or finish before (or while) this work proceeds.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// What the worker may and may not touch.
    #[serde(default)]
    pub scope: Scope,
    /// References to inputs (paths, URLs, commit ids).
    #[serde(default)]
    pub artifact_refs: Vec<String>,
    /// Whom to talk to and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communication_policy: Option<String>,
    /// What "done" must include when calling `worker_complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_protocol: Option<String>,
}

impl Assignment {
    /// An assignment that is its objective alone: no lists, no policies.
    pub fn from_objective(objective: impl Into<String>) -> Self {
        Self {
            objective: objective.into(),
            constraints: Vec::new(),
            acceptance_criteria: Vec::new(),
            dependencies: Vec::new(),
            scope: Scope::default(),
            artifact_refs: Vec::new(),
            communication_policy: None,
            completion_protocol: None,
        }
    }
}

/// Allowed and forbidden areas of work.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scope {
    /// Paths or areas the worker may change.
    #[serde(default)]
    pub allowed: Vec<String>,
    /// Paths or areas the worker must not change.
    #[serde(default)]
    pub forbidden: Vec<String>,
}

impl Assignment {
    /// Every free-text field, for size checks.
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.objective.as_str())
            .chain(self.communication_policy.as_deref())
            .chain(self.completion_protocol.as_deref())
    }

    /// Every list field, for length and item-size checks.
    pub fn lists(&self) -> [&[String]; 6] {
        [
            &self.constraints,
            &self.acceptance_criteria,
            &self.dependencies,
            &self.scope.allowed,
            &self.scope.forbidden,
            &self.artifact_refs,
        ]
    }
}
