//! Tool contracts: argument DSL lowering, JSON Schema validation, the
//! repair catalogue and ToolSearch matching.
//!
//! A tool is compiled once at registration into a [`CompiledTool`] (its
//! parsed declaration, provider schema and cached validator); Lisp keeps
//! it behind a handle and every model call is checked against it.

pub mod check;
pub mod dsl;
pub mod lower;
pub mod repair;
pub mod tool_search;

use jsonschema::Validator;
use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
pub use check::Issue;
pub use repair::{Repair, Rule};

/// One registered tool, compiled.
pub struct CompiledTool {
    pub spec: dsl::ToolSpec,
    /// The provider JSON Schema, as text.
    pub provider_schema: String,
    /// gptel's `:args` (see [`lower::gptel_args`]), as text.
    pub gptel_args: String,
    /// `(Name :arg type [:opt type])`.
    pub shape: String,
    validator: Validator,
    /// Its words for ToolSearch, lowercased once here.
    pub(crate) key: tool_search::Key,
}

/// What checking one call's arguments found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Valid as sent; nothing was rewritten.
    Valid,
    /// Invalid, repaired, and the repaired arguments validate.
    Repaired {
        arguments: Value,
        repairs: Vec<Repair>,
        note: String,
    },
    /// Invalid and no rule applied (or repair was off).
    Invalid {
        issues: Vec<Issue>,
        guidance: String,
    },
    /// Rules applied but the candidate still failed: nothing committed.
    Abandoned {
        issues: Vec<Issue>,
        repairs: Vec<Repair>,
        guidance: String,
    },
}

impl CompiledTool {
    /// Parse, lower and compile the tool DESCRIPTOR (JSON text).
    pub fn compile(descriptor: &str) -> Result<CompiledTool> {
        let spec = dsl::parse_tool(descriptor)?;
        let (validator, provider_schema) = match &spec.input_schema {
            Some(raw) => (check::compile(raw)?, raw.to_string()),
            None => (
                check::compile(&lower::validation_schema(&spec))?,
                lower::provider_schema(&spec).to_string(),
            ),
        };
        let gptel_args = lower::gptel_args(&spec).to_string();
        let shape = lower::calling_shape(&spec);
        let key = tool_search::Key::of(&spec);
        Ok(CompiledTool {
            key,
            spec,
            provider_schema,
            gptel_args,
            shape,
            validator,
        })
    }

    /// Whether ARGUMENTS validate as they are.
    pub fn is_valid(&self, arguments: &Value) -> bool {
        self.validator.is_valid(arguments)
    }

    /// Validate ARGUMENTS (JSON text); when invalid and REPAIR is set,
    /// try the catalogue once.
    pub fn check_json(&self, arguments: &str, repair: bool) -> Result<Outcome> {
        let value: Value = serde_json::from_str(arguments).map_err(|e| {
            Error::new(
                ErrorKind::Schema,
                format!("arguments for {} are not valid JSON: {e}", self.spec.name),
            )
        })?;
        Ok(self.check(value, repair))
    }

    /// Validate ARGUMENTS; when invalid and REPAIR is set, try the
    /// catalogue once and commit only a candidate that validates.
    pub fn check(&self, arguments: Value, repair: bool) -> Outcome {
        if self.validator.is_valid(&arguments) {
            return Outcome::Valid;
        }
        let name = &self.spec.identity;
        if !repair {
            let issues = check::issues(&self.validator, &arguments);
            let guidance = check::guidance(name, &self.shape, &issues, false);
            return Outcome::Invalid { issues, guidance };
        }
        let mut candidate = arguments.clone();
        match repair::run(&self.spec.root, &mut candidate) {
            Ok(repairs) if !repairs.is_empty() && self.validator.is_valid(&candidate) => {
                Outcome::Repaired {
                    note: repair::note(name, &repairs),
                    arguments: candidate,
                    repairs,
                }
            }
            result => {
                // Guidance always describes the call as sent.
                let issues = check::issues(&self.validator, &arguments);
                match result {
                    Ok(repairs) if repairs.is_empty() => {
                        let guidance = check::guidance(name, &self.shape, &issues, false);
                        Outcome::Invalid { issues, guidance }
                    }
                    Ok(repairs) | Err(repairs) => Outcome::Abandoned {
                        guidance: check::guidance(name, &self.shape, &issues, true),
                        issues,
                        repairs,
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
