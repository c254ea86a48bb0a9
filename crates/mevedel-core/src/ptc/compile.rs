//! From read forms to the expression tree the interpreter runs, with
//! every static rule checked first: known operations and tools, arity,
//! binding shapes, joins of direct tool calls only, standalone-only tools
//! alone.

use std::collections::HashSet;
use std::rc::Rc;

use super::names::{Op, lookup};
use super::syntax::{Pos, Sexp};

/// A constant the program writes. Code holds these, not guest values,
/// so that the compiler does not depend on what values are.
#[derive(Debug, Clone)]
pub enum Literal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
}

/// A compiled expression.
#[derive(Debug)]
pub enum Expr {
    Const(Literal),
    Var(Rc<str>, Pos),
    List(Vec<Expr>),
    Map(Vec<(Rc<str>, Expr)>),
    Let(Vec<(Rc<str>, Expr)>, Vec<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Do(Vec<Expr>),
    Fn(Rc<Lambda>),
    Op(Op, Vec<Expr>, Pos),
    Tool(ToolCall),
    Parallel(Vec<ToolCall>, Pos),
    ParallelMap(Rc<str>, Box<Expr>, ToolCall, Pos),
}

#[derive(Debug)]
pub struct Lambda {
    pub params: Vec<Rc<str>>,
    pub body: Vec<Expr>,
}

/// One direct tool call: `(Name :arg expr ...)`.
#[derive(Debug)]
pub struct ToolCall {
    pub name: Rc<str>,
    pub args: Vec<(Rc<str>, Expr)>,
    pub pos: Pos,
}

/// What a program may call.
pub struct Catalog<'a> {
    pub tools: &'a HashSet<String>,
    pub standalone: &'a HashSet<String>,
}

/// A compiled program: its body and, when the whole program is one
/// tool call, that tool's name.
#[derive(Debug)]
pub struct Program {
    pub body: Vec<Expr>,
    pub direct: Option<Rc<str>>,
}

const SPECIAL: &[&str] = &[
    "let",
    "if",
    "when",
    "and",
    "or",
    "do",
    "fn",
    "parallel",
    "parallel-map",
];

pub fn compile(forms: &[Sexp], catalog: &Catalog<'_>) -> Result<Program, String> {
    if forms.is_empty() {
        return Err(
            "the program is empty; write one expression, e.g. (Read :file_path \"x\")".into(),
        );
    }
    let mut c = Compiler {
        catalog,
        tool_count: 0,
        standalone: None,
    };
    let body = forms
        .iter()
        .map(|f| c.expr(f))
        .collect::<Result<Vec<_>, _>>()?;
    let direct = match body.as_slice() {
        [Expr::Tool(call)] => Some(call.name.clone()),
        _ => None,
    };
    if let Some((name, pos)) = c.standalone
        && (direct.is_none() || c.tool_count != 1)
    {
        return Err(format!(
            "{pos}: {name} is standalone only: the whole program must be the one call ({name} ...)"
        ));
    }
    Ok(Program { body, direct })
}

struct Compiler<'a, 'b> {
    catalog: &'a Catalog<'b>,
    tool_count: usize,
    standalone: Option<(String, Pos)>,
}

fn symbol_name(s: &Sexp) -> Option<&str> {
    match s {
        Sexp::Symbol(n, _) => Some(n),
        _ => None,
    }
}

impl Compiler<'_, '_> {
    fn exprs(&mut self, forms: &[Sexp]) -> Result<Vec<Expr>, String> {
        forms.iter().map(|f| self.expr(f)).collect()
    }

    fn expr(&mut self, form: &Sexp) -> Result<Expr, String> {
        Ok(match form {
            Sexp::Int(n, _) => Expr::Const(Literal::Int(*n)),
            Sexp::Float(x, _) => Expr::Const(Literal::Float(*x)),
            Sexp::Str(s, _) => Expr::Const(Literal::Str(Rc::from(s.as_str()))),
            Sexp::Keyword(k, _) => Expr::Const(Literal::Str(Rc::from(k.as_str()))),
            Sexp::Symbol(name, pos) => match name.as_str() {
                "null" | "nil" => Expr::Const(Literal::Null),
                "true" => Expr::Const(Literal::Bool(true)),
                "false" => Expr::Const(Literal::Bool(false)),
                _ => Expr::Var(Rc::from(name.as_str()), *pos),
            },
            Sexp::List(items, _) => Expr::List(self.exprs(items)?),
            Sexp::Map(items, pos) => {
                if items.len() % 2 != 0 {
                    return Err(format!("{pos}: a map needs key/value pairs"));
                }
                let mut entries = Vec::new();
                for pair in items.chunks(2) {
                    let key = match &pair[0] {
                        Sexp::Keyword(k, _) | Sexp::Str(k, _) => Rc::from(k.as_str()),
                        other => {
                            return Err(format!(
                                "{}: a map key must be a :keyword or a string",
                                other.pos()
                            ));
                        }
                    };
                    entries.push((key, self.expr(&pair[1])?));
                }
                Expr::Map(entries)
            }
            Sexp::Form(items, pos) => self.form(items, *pos)?,
        })
    }

    fn form(&mut self, items: &[Sexp], pos: Pos) -> Result<Expr, String> {
        let Some(head) = items.first() else {
            return Err(format!(
                "{pos}: `()` is not an expression; use [] for a list"
            ));
        };
        let Some(name) = symbol_name(head) else {
            return Err(format!(
                "{pos}: a form starts with an operation or tool name, not {}",
                describe(head)
            ));
        };
        let args = &items[1..];
        match name {
            "let" => self.let_form(args, pos),
            "if" => {
                if !(2..=3).contains(&args.len()) {
                    return Err(format!("{pos}: (if TEST THEN [ELSE])"));
                }
                let test = self.expr(&args[0])?;
                let then = self.expr(&args[1])?;
                let other = match args.get(2) {
                    Some(e) => self.expr(e)?,
                    None => Expr::Const(Literal::Null),
                };
                Ok(Expr::If(Box::new(test), Box::new(then), Box::new(other)))
            }
            "when" => {
                if args.is_empty() {
                    return Err(format!("{pos}: (when TEST BODY...)"));
                }
                let test = self.expr(&args[0])?;
                let body = Expr::Do(self.exprs(&args[1..])?);
                Ok(Expr::If(
                    Box::new(test),
                    Box::new(body),
                    Box::new(Expr::Const(Literal::Null)),
                ))
            }
            "and" => Ok(Expr::And(self.exprs(args)?)),
            "or" => Ok(Expr::Or(self.exprs(args)?)),
            "do" => Ok(Expr::Do(self.exprs(args)?)),
            "fn" => {
                let Some(Sexp::List(params, _)) = args.first() else {
                    return Err(format!("{pos}: (fn [PARAM...] BODY...)"));
                };
                let params = params
                    .iter()
                    .map(binding_name)
                    .collect::<Result<Vec<_>, _>>()?;
                if args.len() < 2 {
                    return Err(format!("{pos}: the function has no body"));
                }
                let body = self.exprs(&args[1..])?;
                Ok(Expr::Fn(Rc::new(Lambda { params, body })))
            }
            "parallel" => {
                if args.is_empty() {
                    return Err(format!("{pos}: (parallel (Tool ...) (Tool ...) ...)"));
                }
                let calls = args
                    .iter()
                    .map(|a| self.join_entry(a, "parallel"))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Expr::Parallel(calls, pos))
            }
            "parallel-map" => {
                let [Sexp::List(binding, _), entry] = args else {
                    return Err(format!("{pos}: (parallel-map [NAME LIST] (Tool ...))"));
                };
                let [var, list] = binding.as_slice() else {
                    return Err(format!("{pos}: (parallel-map [NAME LIST] (Tool ...))"));
                };
                let var = binding_name(var)?;
                let list = self.expr(list)?;
                let call = self.join_entry(entry, "parallel-map")?;
                Ok(Expr::ParallelMap(var, Box::new(list), call, pos))
            }
            _ if self.catalog.tools.contains(name) => {
                Ok(Expr::Tool(self.tool_call(name, args, pos)?))
            }
            _ => match lookup(name) {
                Some((op, min, max)) => {
                    if args.len() < min || max.is_some_and(|m| args.len() > m) {
                        return Err(format!(
                            "{pos}: {name} takes {}, not {}",
                            arity_text(min, max),
                            args.len()
                        ));
                    }
                    Ok(Expr::Op(op, self.exprs(args)?, pos))
                }
                None => Err(format!(
                    "{pos}: `{name}` is neither an operation of the dialect nor a tool you can call \
                     (tool names are case-sensitive; ToolSearch finds tools, \
                     mevedel://ptc-dialect.md lists the operations)"
                )),
            },
        }
    }

    fn let_form(&mut self, args: &[Sexp], pos: Pos) -> Result<Expr, String> {
        let Some(Sexp::List(bindings, _)) = args.first() else {
            return Err(format!("{pos}: (let [NAME EXPR ...] BODY...)"));
        };
        if bindings.len() % 2 != 0 {
            return Err(format!("{pos}: let bindings come in NAME EXPR pairs"));
        }
        let mut out = Vec::new();
        for pair in bindings.chunks(2) {
            out.push((binding_name(&pair[0])?, self.expr(&pair[1])?));
        }
        if args.len() < 2 {
            return Err(format!("{pos}: the let has no body"));
        }
        Ok(Expr::Let(out, self.exprs(&args[1..])?))
    }

    fn join_entry(&mut self, form: &Sexp, join: &str) -> Result<ToolCall, String> {
        if let Sexp::Form(items, pos) = form
            && let Some(name) = items.first().and_then(symbol_name)
            && self.catalog.tools.contains(name)
        {
            return self.tool_call(name, &items[1..], *pos);
        }
        Err(format!(
            "{}: each entry of {join} must be one direct tool call (Tool :arg ...)",
            form.pos()
        ))
    }

    fn tool_call(&mut self, name: &str, args: &[Sexp], pos: Pos) -> Result<ToolCall, String> {
        self.tool_count += 1;
        if self.catalog.standalone.contains(name) && self.standalone.is_none() {
            self.standalone = Some((name.to_string(), pos));
        }
        if !args.len().is_multiple_of(2) {
            return Err(format!(
                "{pos}: arguments of {name} come in :name value pairs"
            ));
        }
        let mut out: Vec<(Rc<str>, Expr)> = Vec::new();
        for pair in args.chunks(2) {
            let Sexp::Keyword(key, kpos) = &pair[0] else {
                return Err(format!(
                    "{}: arguments of {name} are named, :name value; found {}",
                    pair[0].pos(),
                    describe(&pair[0])
                ));
            };
            if out.iter().any(|(k, _)| &**k == key) {
                return Err(format!("{kpos}: :{key} is given twice"));
            }
            out.push((Rc::from(key.as_str()), self.expr(&pair[1])?));
        }
        Ok(ToolCall {
            name: Rc::from(name),
            args: out,
            pos,
        })
    }
}

fn binding_name(form: &Sexp) -> Result<Rc<str>, String> {
    match form {
        Sexp::Symbol(n, pos) => {
            if SPECIAL.contains(&n.as_str())
                || lookup(n).is_some()
                || matches!(n.as_str(), "null" | "nil" | "true" | "false")
            {
                Err(format!("{pos}: `{n}` is reserved and cannot be bound"))
            } else {
                Ok(Rc::from(n.as_str()))
            }
        }
        other => Err(format!(
            "{}: expected a name, found {}",
            other.pos(),
            describe(other)
        )),
    }
}

fn describe(form: &Sexp) -> String {
    match form {
        Sexp::Int(n, _) => format!("the number {n}"),
        Sexp::Float(x, _) => format!("the number {x}"),
        Sexp::Str(_, _) => "a string".into(),
        Sexp::Keyword(k, _) => format!(":{k}"),
        Sexp::Symbol(s, _) => format!("`{s}`"),
        Sexp::Form(_, _) => "a form".into(),
        Sexp::List(_, _) => "a [list]".into(),
        Sexp::Map(_, _) => "a {map}".into(),
    }
}

fn arity_text(min: usize, max: Option<usize>) -> String {
    match max {
        Some(m) if m == min => format!("{min} argument{}", if min == 1 { "" } else { "s" }),
        Some(m) => format!("{min} to {m} arguments"),
        None => format!("at least {min} argument{}", if min == 1 { "" } else { "s" }),
    }
}
