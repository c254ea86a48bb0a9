//! The interpreter: runs a compiled program until it needs tool results
//! it does not have, then stops and says which calls it needs.
//!
//! The guest machine is deterministic (tool results are its only input),
//! so resuming after results arrive is a replay from the start with the
//! known results answering their calls by number: no interpreter state
//! survives between runs except those results, and a replay can never
//! diverge from the run that asked.

use std::rc::Rc;

use smallvec::SmallVec;

use super::builtins::{self, Regexps};
use super::compile::{Expr, Program, ToolCall};
use super::names::{self, Op};
use super::value::{Closure, Scope, Value, bind, lookup};

/// Limits of one program.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    /// Expressions evaluated.
    pub steps: u64,
    /// Nesting of evaluation (expressions inside expressions, function
    /// calls inside function calls).
    pub depth: usize,
    /// Weight (about JSON length) of any one value, child results too.
    pub value: usize,
    /// Total weight of every child result the program keeps.
    pub retained: usize,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            steps: 100_000,
            depth: 64,
            value: 100_000,
            retained: 400_000,
        }
    }
}

impl Budgets {
    /// Budgets from limits as a caller gives them: each at least 1.
    pub fn at_least_one(steps: i64, depth: i64, value: i64, retained: i64) -> Budgets {
        let budget = |n: i64| usize::try_from(n.max(1)).unwrap_or(usize::MAX);
        Budgets {
            steps: budget(steps) as u64,
            depth: budget(depth),
            value: budget(value),
            retained: budget(retained),
        }
    }
}

/// Most calls one `parallel` or `parallel-map` join may make.
pub const MAX_JOIN: usize = 64;

/// A tool call the program waits for.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The call's number in the program: 1 for the first call made.
    pub n: usize,
    pub tool: Rc<str>,
    /// The arguments, a JSON object.
    pub args: String,
    /// The number of the join's first call when the call is one of a
    /// join of two or more, else `None`.
    pub batch: Option<usize>,
}

/// Why a run stopped before its end.
#[derive(Debug)]
pub enum Stop {
    Wait(Vec<Request>),
    Error(String),
}

impl From<String> for Stop {
    fn from(message: String) -> Stop {
        Stop::Error(message)
    }
}

/// The evaluated arguments of one operation: inline for the usual few,
/// so evaluating an operation allocates nothing of its own.
type Args = SmallVec<[Value; 4]>;

/// One run of a program over the results known so far.
pub struct Run<'a> {
    pub results: &'a [Option<Value>],
    pub budgets: Budgets,
    pub regexps: &'a mut Regexps,
    pub steps: u64,
    depth: usize,
    calls: usize,
}

impl<'a> Run<'a> {
    pub fn new(results: &'a [Option<Value>], budgets: Budgets, regexps: &'a mut Regexps) -> Self {
        Run {
            results,
            budgets,
            regexps,
            steps: 0,
            depth: 0,
            calls: 0,
        }
    }

    pub fn program(&mut self, program: &Program) -> Result<Value, Stop> {
        self.body(&program.body, &None)
    }

    fn body(&mut self, exprs: &[Expr], scope: &Scope) -> Result<Value, Stop> {
        let mut last = Value::Null;
        for e in exprs {
            last = self.eval(e, scope)?;
        }
        Ok(last)
    }

    fn check(&self, v: Value) -> Result<Value, Stop> {
        if v.weight() > self.budgets.value {
            return Err(Stop::Error(format!(
                "a value of about {} characters exceeds the value budget of {}; \
                 keep less (take, substring, get) or return it in pieces",
                v.weight(),
                self.budgets.value
            )));
        }
        Ok(v)
    }

    fn out_of_steps(&self) -> Stop {
        Stop::Error(format!(
            "the program used up its step budget of {} steps",
            self.budgets.steps
        ))
    }

    fn too_deep(&self) -> Stop {
        Stop::Error(format!(
            "evaluation is nested more than {} deep",
            self.budgets.depth
        ))
    }

    fn eval(&mut self, expr: &Expr, scope: &Scope) -> Result<Value, Stop> {
        self.steps += 1;
        if self.steps > self.budgets.steps {
            return Err(self.out_of_steps());
        }
        if self.depth >= self.budgets.depth {
            return Err(self.too_deep());
        }
        self.depth += 1;
        let out = self.eval_inner(expr, scope);
        self.depth -= 1;
        out
    }

    fn eval_inner(&mut self, expr: &Expr, scope: &Scope) -> Result<Value, Stop> {
        match expr {
            Expr::Const(literal) => Ok(Value::from(literal)),
            Expr::Var(name, pos) => lookup(scope, name)
                .ok_or_else(|| Stop::Error(format!("{pos}: `{name}` is not bound here"))),
            Expr::List(items) => {
                let vs = items
                    .iter()
                    .map(|e| self.eval(e, scope))
                    .collect::<Result<Vec<_>, _>>()?;
                self.check(Value::list(vs))
            }
            Expr::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                for (k, e) in entries {
                    let v = self.eval(e, scope)?;
                    out.retain(|(key, _): &(Rc<str>, Value)| key != k);
                    out.push((k.clone(), v));
                }
                self.check(Value::map(out))
            }
            Expr::Let(bindings, body) => {
                let mut inner = scope.clone();
                for (name, e) in bindings {
                    let v = self.eval(e, &inner)?;
                    inner = bind(&inner, name.clone(), v);
                }
                self.body(body, &inner)
            }
            Expr::If(test, then, other) => {
                if self.eval(test, scope)?.truthy() {
                    self.eval(then, scope)
                } else {
                    self.eval(other, scope)
                }
            }
            Expr::And(items) => {
                let mut last = Value::Bool(true);
                for e in items {
                    last = self.eval(e, scope)?;
                    if !last.truthy() {
                        break;
                    }
                }
                Ok(last)
            }
            Expr::Or(items) => {
                let mut last = Value::Null;
                for e in items {
                    last = self.eval(e, scope)?;
                    if last.truthy() {
                        break;
                    }
                }
                Ok(last)
            }
            Expr::Do(items) => self.body(items, scope),
            Expr::Fn(lambda) => Ok(Value::Fn(Rc::new(Closure {
                lambda: lambda.clone(),
                scope: scope.clone(),
            }))),
            Expr::Op(op, args, pos) => {
                let mut vs = Args::with_capacity(args.len());
                for e in args {
                    vs.push(self.eval(e, scope)?);
                }
                self.charge(*op, &vs)?;
                let v = self.apply(*op, &vs).map_err(|e| match e {
                    Stop::Error(m) => Stop::Error(format!("{pos}: {m}")),
                    wait => wait,
                })?;
                self.check(v)
            }
            Expr::Tool(call) => {
                let args = self.call_args(call, scope)?;
                self.join(vec![(call.name.clone(), args)], false)
                    .map(|mut vs| vs.pop().unwrap_or(Value::Null))
            }
            Expr::Parallel(calls, _) => {
                let mut entries = Vec::with_capacity(calls.len());
                for call in calls {
                    entries.push((call.name.clone(), self.call_args(call, scope)?));
                }
                let vs = self.join(entries, true)?;
                self.check(Value::list(vs))
            }
            Expr::ParallelMap(var, list, call, pos) => {
                let items = self.eval(list, scope)?;
                let items = builtins::as_list(Op::Map, &items)
                    .map_err(|m| Stop::Error(format!("{pos}: parallel-map: {m}")))?
                    .to_vec();
                if items.len() > MAX_JOIN {
                    return Err(Stop::Error(format!(
                        "{pos}: parallel-map over {} items; a join makes at most {MAX_JOIN} calls",
                        items.len()
                    )));
                }
                let mut entries = Vec::with_capacity(items.len());
                for item in items {
                    let inner = bind(scope, var.clone(), item);
                    entries.push((call.name.clone(), self.call_args(call, &inner)?));
                }
                let vs = self.join(entries, true)?;
                self.check(Value::list(vs))
            }
        }
    }

    /// Count the work OP does on ARGS against the step budget before it
    /// does it: one step per element, and per 64 bytes of text, that it
    /// reads (`distinct` compares pairs), so no single operation can run
    /// unbounded.
    fn charge(&mut self, op: Op, args: &[Value]) -> Result<(), Stop> {
        let mut cost: u64 = 0;
        for a in args {
            let n = match a {
                Value::List(s) => s.items.len() as u64,
                Value::Map(d) => d.entries.len() as u64,
                Value::Str(s) => s.len() as u64 / 64,
                _ => 0,
            };
            cost = cost.saturating_add(if op == Op::Distinct {
                n.saturating_mul(n) / 32
            } else {
                n
            });
        }
        self.steps = self.steps.saturating_add(cost);
        if self.steps > self.budgets.steps {
            return Err(self.out_of_steps());
        }
        Ok(())
    }

    fn call_args(&mut self, call: &ToolCall, scope: &Scope) -> Result<String, Stop> {
        let mut map = serde_json::Map::new();
        for (key, e) in &call.args {
            let v = self.eval(e, scope)?;
            let json = match &v {
                Value::Failure(f) => {
                    return Err(Stop::Error(format!(
                        "{}: :{key} of {} is the failure of {} ({}); check (failed? x) first",
                        call.pos, call.name, f.tool, f.message
                    )));
                }
                other => other.to_json().map_err(|m| {
                    Stop::Error(format!("{}: :{key} of {}: {m}", call.pos, call.name))
                })?,
            };
            map.insert(key.to_string(), json);
        }
        Ok(serde_json::Value::Object(map).to_string())
    }

    /// The results of ENTRIES (tool, JSON arguments), numbered in order;
    /// a run that lacks any of them stops and asks for those.
    fn join(
        &mut self,
        entries: Vec<(Rc<str>, String)>,
        parallel: bool,
    ) -> Result<Vec<Value>, Stop> {
        if entries.len() > MAX_JOIN {
            return Err(Stop::Error(format!(
                "a join of {} calls; at most {MAX_JOIN}",
                entries.len()
            )));
        }
        let first = self.calls + 1;
        let batch = (parallel && entries.len() > 1).then_some(first);
        let mut values = Vec::with_capacity(entries.len());
        let mut missing = Vec::new();
        for (tool, args) in entries {
            self.calls += 1;
            let n = self.calls;
            match self.results.get(n - 1).and_then(Option::as_ref) {
                Some(v) => values.push(v.clone()),
                None => missing.push(Request {
                    n,
                    tool,
                    args,
                    batch,
                }),
            }
        }
        if missing.is_empty() {
            Ok(values)
        } else {
            Err(Stop::Wait(missing))
        }
    }

    fn call_fn<const N: usize>(
        &mut self,
        f: &Value,
        args: [Value; N],
        op: Op,
    ) -> Result<Value, Stop> {
        let Value::Fn(closure) = f else {
            return Err(Stop::Error(format!(
                "{} expects a function (fn [x] ...), not a {}",
                names::name(op),
                f.type_name()
            )));
        };
        let lambda = &closure.lambda;
        if lambda.params.len() != args.len() {
            return Err(Stop::Error(format!(
                "{} calls its function with {} argument(s), but it takes {}",
                names::name(op),
                args.len(),
                lambda.params.len()
            )));
        }
        let mut scope = closure.scope.clone();
        for (p, a) in lambda.params.iter().zip(args) {
            scope = bind(&scope, p.clone(), a);
        }
        if self.depth >= self.budgets.depth {
            return Err(self.too_deep());
        }
        self.depth += 1;
        let out = self.body(&lambda.body, &scope);
        self.depth -= 1;
        out
    }

    fn apply(&mut self, op: Op, args: &[Value]) -> Result<Value, Stop> {
        let list = |i: usize| -> Result<&[Value], Stop> {
            Ok(builtins::as_list(op, args.get(i).unwrap_or(&Value::Null))?)
        };
        match op {
            Op::Map => {
                let items = list(1)?;
                let mut out = Vec::with_capacity(items.len());
                for x in items {
                    out.push(self.call_fn(&args[0], [x.clone()], op)?);
                }
                Ok(Value::list(out))
            }
            Op::Filter => {
                let mut out = Vec::new();
                for x in list(1)? {
                    if self.call_fn(&args[0], [x.clone()], op)?.truthy() {
                        out.push(x.clone());
                    }
                }
                Ok(Value::list(out))
            }
            Op::Reduce => {
                let mut acc = args[1].clone();
                for x in list(2)? {
                    let next = self.call_fn(&args[0], [acc, x.clone()], op)?;
                    acc = self.check(next)?;
                }
                Ok(acc)
            }
            Op::SortBy => {
                let mut keyed = Vec::new();
                for x in list(1)? {
                    keyed.push((self.call_fn(&args[0], [x.clone()], op)?, x.clone()));
                }
                let mut failure = None;
                keyed.sort_by(|a, b| {
                    builtins::order(op, &a.0, &b.0).unwrap_or_else(|e| {
                        failure.get_or_insert(e);
                        std::cmp::Ordering::Equal
                    })
                });
                if let Some(e) = failure {
                    return Err(Stop::Error(e));
                }
                Ok(Value::list(keyed.into_iter().map(|(_, x)| x).collect()))
            }
            Op::Some_ => {
                for x in list(1)? {
                    if self.call_fn(&args[0], [x.clone()], op)?.truthy() {
                        return Ok(x.clone());
                    }
                }
                Ok(Value::Null)
            }
            Op::Every => {
                for x in list(1)? {
                    if !self.call_fn(&args[0], [x.clone()], op)?.truthy() {
                        return Ok(Value::Bool(false));
                    }
                }
                Ok(Value::Bool(true))
            }
            _ => Ok(builtins::apply(op, args, self.regexps)?),
        }
    }
}
