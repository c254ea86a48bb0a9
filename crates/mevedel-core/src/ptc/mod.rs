//! ToolCall: a closed dialect for programs that call tools.
//!
//! A program is read ([`syntax`]), checked against the caller's catalog
//! and compiled ([`compile`]), then run by [`Machine`]: each run goes
//! until the program needs tool results it does not have and returns
//! those requests; the host runs them (through its own pipeline, with
//! its own permissions) and feeds the results back. The guest reaches
//! nothing but tool calls and the pure operations named in [`names`] and
//! implemented in [`builtins`]. The dialect is documented for models in
//! docs/ptc-dialect.md.

pub mod builtins;
pub mod compile;
pub mod eval;
pub mod names;
pub mod syntax;
pub mod value;

#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::rc::Rc;

use crate::datum::Datum;

pub use eval::{Budgets, MAX_JOIN, Request};

use builtins::Regexps;
use compile::{Catalog, Program};
use eval::{Run, Stop};
use value::{Failure, Value};

/// What a run of the machine asks of the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run these calls and feed their results.
    Calls(Vec<Request>),
    /// The program returned TEXT (a string as itself, other values as
    /// JSON) after STEPS steps.
    Done { text: String, steps: u64 },
    /// The program failed: a static or runtime error, a budget, or a
    /// failed tool result it returned.
    Failed { message: String, steps: u64 },
}

impl Action {
    /// `(calls ((N TOOL ARGS-JSON BATCH) ...))`, `(done TEXT STEPS)` or
    /// `(failed MESSAGE STEPS)`; BATCH is nil outside a join.
    pub fn to_datum(self) -> Datum {
        let steps = |n: u64| Datum::Int(i64::try_from(n).unwrap_or(i64::MAX));
        match self {
            Action::Calls(requests) => Datum::List(vec![
                Datum::Symbol("calls".into()),
                Datum::List(
                    requests
                        .into_iter()
                        .map(|r| {
                            Datum::List(vec![
                                Datum::Int(r.n as i64),
                                Datum::str(&*r.tool),
                                Datum::Str(r.args),
                                r.batch.map_or(Datum::Nil, |b| Datum::Int(b as i64)),
                            ])
                        })
                        .collect(),
                ),
            ]),
            Action::Done { text, steps: n } => Datum::List(vec![
                Datum::Symbol("done".into()),
                Datum::Str(text),
                steps(n),
            ]),
            Action::Failed { message, steps: n } => Datum::List(vec![
                Datum::Symbol("failed".into()),
                Datum::Str(message),
                steps(n),
            ]),
        }
    }
}

/// One program and the child results it has been given.
pub struct Machine {
    program: Result<Program, String>,
    budgets: Budgets,
    results: Vec<Option<Value>>,
    /// Tool of each call number that was requested.
    requested: Vec<Option<Rc<str>>>,
    retained: usize,
    regexps: Regexps,
}

impl Machine {
    /// Read and compile SOURCE for a caller who may call TOOLS, of which
    /// STANDALONE must be the whole program. A program that does not
    /// compile fails on its first [`Machine::resume`].
    pub fn new(
        source: &str,
        tools: &HashSet<String>,
        standalone: &HashSet<String>,
        budgets: Budgets,
    ) -> Machine {
        let program = syntax::read(source, budgets.depth)
            .and_then(|forms| compile::compile(&forms, &Catalog { tools, standalone }));
        Machine {
            program,
            budgets,
            results: Vec::new(),
            requested: Vec::new(),
            retained: 0,
            regexps: Regexps::default(),
        }
    }

    /// The tool of a program that is one direct call, `(Tool ...)`.
    pub fn direct(&self) -> Option<&str> {
        self.program.as_ref().ok().and_then(|p| p.direct.as_deref())
    }

    /// Give call N's result: TEXT, or the failure TEXT when OK is false.
    /// A result heavier than the value budget becomes a failure the
    /// program sees; results beyond the retained budget fail the program.
    pub fn feed(&mut self, n: usize, ok: bool, text: &str) {
        if n == 0 {
            return;
        }
        let tool: Rc<str> = self
            .requested
            .get(n - 1)
            .cloned()
            .flatten()
            .unwrap_or_else(|| Rc::from("tool"));
        let value = if text.len() + 2 > self.budgets.value {
            failure(
                &tool,
                &format!(
                    "the result of {} characters exceeds the value budget of {}; \
                     ask for less (a narrower path, pattern, range or limit)",
                    text.chars().count(),
                    self.budgets.value
                ),
            )
        } else if ok {
            Value::str(text)
        } else {
            failure(&tool, text)
        };
        self.retained = self.retained.saturating_add(value.weight());
        if self.results.len() < n {
            self.results.resize(n, None);
        }
        self.results[n - 1] = Some(value);
    }

    /// Run the program over the results so far.
    pub fn resume(&mut self) -> Action {
        let program = match &self.program {
            Ok(p) => p,
            Err(message) => {
                return Action::Failed {
                    message: message.clone(),
                    steps: 0,
                };
            }
        };
        if self.retained > self.budgets.retained {
            return Action::Failed {
                message: format!(
                    "the child results kept so far (about {} characters) exceed the retained \
                     budget of {}; have each call return less",
                    self.retained, self.budgets.retained
                ),
                steps: 0,
            };
        }
        let mut run = Run::new(&self.results, self.budgets, &mut self.regexps);
        let outcome = run.program(program);
        let steps = run.steps;
        match outcome {
            Ok(Value::Failure(f)) => Action::Failed {
                message: if program.direct.is_some() {
                    f.message.to_string()
                } else {
                    format!(
                        "the program returned the failure of {}: {}",
                        f.tool, f.message
                    )
                },
                steps,
            },
            Ok(v) => Action::Done {
                text: v.to_text(),
                steps,
            },
            Err(Stop::Error(message)) => Action::Failed { message, steps },
            Err(Stop::Wait(requests)) => {
                for r in &requests {
                    if self.requested.len() < r.n {
                        self.requested.resize(r.n, None);
                    }
                    self.requested[r.n - 1] = Some(r.tool.clone());
                }
                Action::Calls(requests)
            }
        }
    }
}

fn failure(tool: &Rc<str>, message: &str) -> Value {
    Value::Failure(Rc::new(Failure {
        tool: tool.clone(),
        message: Rc::from(message),
    }))
}
