//! The model-visible definition of a tool.

use serde::{Deserialize, Serialize};

/// What the model sees of a tool: its name, description and JSON Schema for arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// Unique name the model calls the tool by.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}
