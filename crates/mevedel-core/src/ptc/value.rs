//! Guest values: JSON-shaped data plus functions and failures.
//!
//! Collections are shared (`Rc`) and carry their weight, the size the
//! value budget counts, computed once when they are built so checking a
//! budget never walks a value again.

use std::rc::Rc;

use serde_json::Value as Json;

use super::compile::{Lambda, Literal};

/// A guest value.
#[derive(Debug, Clone)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    List(Rc<Seq>),
    Map(Rc<Dict>),
    Fn(Rc<Closure>),
    /// A tool call that failed: the program may inspect it.
    Failure(Rc<Failure>),
}

#[derive(Debug)]
pub struct Seq {
    pub items: Vec<Value>,
    pub weight: usize,
}

/// A map with string keys, in insertion order.
#[derive(Debug)]
pub struct Dict {
    pub entries: Vec<(Rc<str>, Value)>,
    pub weight: usize,
}

#[derive(Debug)]
pub struct Closure {
    pub lambda: Rc<Lambda>,
    pub scope: Scope,
}

#[derive(Debug)]
pub struct Failure {
    pub tool: Rc<str>,
    pub message: Rc<str>,
}

impl Value {
    pub fn str(s: &str) -> Value {
        Value::Str(Rc::from(s))
    }

    pub fn list(items: Vec<Value>) -> Value {
        let weight = 2 + items.iter().map(Value::weight).sum::<usize>();
        Value::List(Rc::new(Seq { items, weight }))
    }

    pub fn map(entries: Vec<(Rc<str>, Value)>) -> Value {
        let weight = 2 + entries
            .iter()
            .map(|(k, v)| k.len() + 3 + v.weight())
            .sum::<usize>();
        Value::Map(Rc::new(Dict { entries, weight }))
    }

    /// The size the value budget counts: about the length of the value
    /// written as JSON.
    pub fn weight(&self) -> usize {
        match self {
            Value::Null | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Fn(_) => 4,
            Value::Str(s) => s.len() + 2,
            Value::List(s) => s.weight,
            Value::Map(d) => d.weight,
            Value::Failure(f) => f.message.len() + f.tool.len() + 16,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Int(_) => "integer",
            Value::Float(_) => "number",
            Value::Str(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Fn(_) => "function",
            Value::Failure(_) => "failure",
        }
    }

    /// Null and false are false; everything else (failures too) is true.
    pub fn truthy(&self) -> bool {
        !matches!(self, Value::Null | Value::Bool(false))
    }

    /// The value as JSON; functions and failures have no JSON form.
    pub fn to_json(&self) -> Result<Json, String> {
        Ok(match self {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Int(n) => Json::from(*n),
            Value::Float(x) => serde_json::Number::from_f64(*x).map_or(Json::Null, Json::Number),
            Value::Str(s) => Json::String(s.to_string()),
            Value::List(s) => Json::Array(
                s.items
                    .iter()
                    .map(Value::to_json)
                    .collect::<Result<_, _>>()?,
            ),
            Value::Map(d) => {
                let mut m = serde_json::Map::new();
                for (k, v) in &d.entries {
                    m.insert(k.to_string(), v.to_json()?);
                }
                Json::Object(m)
            }
            Value::Fn(_) => return Err("a function has no JSON form".into()),
            Value::Failure(f) => {
                let mut m = serde_json::Map::new();
                m.insert("tool".into(), Json::String(f.tool.to_string()));
                m.insert("error".into(), Json::String(f.message.to_string()));
                Json::Object(m)
            }
        })
    }

    /// JSON as a guest value.
    pub fn from_json(json: &Json) -> Value {
        match json {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            Json::String(s) => Value::str(s),
            Json::Array(items) => Value::list(items.iter().map(Value::from_json).collect()),
            Json::Object(m) => Value::map(
                m.iter()
                    .map(|(k, v)| (Rc::from(k.as_str()), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// The text a program's value is returned as: a string as itself,
    /// anything else as JSON.
    pub fn to_text(&self) -> String {
        match self {
            Value::Str(s) => s.to_string(),
            Value::Fn(_) => "<function>".into(),
            other => other.to_json().map(|j| j.to_string()).unwrap_or_default(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Null, Value::Null) => true,
            (Value::Bool(a), Value::Bool(b)) => a == b,
            (Value::Int(a), Value::Int(b)) => a == b,
            (Value::Float(a), Value::Float(b)) => a == b,
            (Value::Int(a), Value::Float(b)) | (Value::Float(b), Value::Int(a)) => {
                (*a as f64) == *b
            }
            (Value::Str(a), Value::Str(b)) => a == b,
            (Value::List(a), Value::List(b)) => a.items == b.items,
            (Value::Map(a), Value::Map(b)) => {
                a.entries.len() == b.entries.len()
                    && a.entries
                        .iter()
                        .all(|(k, v)| b.entries.iter().any(|(k2, v2)| k == k2 && v == v2))
            }
            (Value::Fn(a), Value::Fn(b)) => Rc::ptr_eq(a, b),
            (Value::Failure(a), Value::Failure(b)) => a.tool == b.tool && a.message == b.message,
            _ => false,
        }
    }
}

impl From<&Literal> for Value {
    fn from(literal: &Literal) -> Value {
        match literal {
            Literal::Null => Value::Null,
            Literal::Bool(b) => Value::Bool(*b),
            Literal::Int(n) => Value::Int(*n),
            Literal::Float(x) => Value::Float(*x),
            Literal::Str(s) => Value::Str(s.clone()),
        }
    }
}

/// The bindings a closure sees: a shared chain, innermost first.
pub type Scope = Option<Rc<Frame>>;

#[derive(Debug)]
pub struct Frame {
    name: Rc<str>,
    value: Value,
    next: Scope,
}

pub fn bind(scope: &Scope, name: Rc<str>, value: Value) -> Scope {
    Some(Rc::new(Frame {
        name,
        value,
        next: scope.clone(),
    }))
}

pub fn lookup(scope: &Scope, name: &str) -> Option<Value> {
    let mut at = scope.as_ref();
    while let Some(frame) = at {
        if &*frame.name == name {
            return Some(frame.value.clone());
        }
        at = frame.next.as_ref();
    }
    None
}
