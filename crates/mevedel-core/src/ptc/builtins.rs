//! The fixed pure operations of the dialect. Nothing here reaches the
//! host: no files, processes, time or randomness, only values in and a
//! value (or an error message) out.

use std::collections::HashMap;
use std::rc::Rc;

use regex::{Regex, RegexBuilder};

use super::names::{Op, name};
use super::value::Value;

/// Compiled regexps of one run, by pattern.
#[derive(Default)]
pub struct Regexps {
    cache: HashMap<String, Rc<Regex>>,
}

/// Most regexps one run compiles.
const MAX_REGEXPS: usize = 64;

impl Regexps {
    fn get(&mut self, pattern: &str) -> Result<Rc<Regex>, String> {
        if let Some(re) = self.cache.get(pattern) {
            return Ok(re.clone());
        }
        if self.cache.len() >= MAX_REGEXPS {
            return Err(format!(
                "a program may use at most {MAX_REGEXPS} distinct regexps"
            ));
        }
        let re = RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .dfa_size_limit(1 << 20)
            .build()
            .map_err(|e| format!("invalid regexp {pattern:?}: {e}"))?;
        let re = Rc::new(re);
        self.cache.insert(pattern.to_string(), re.clone());
        Ok(re)
    }
}

fn type_error(op: Op, want: &str, got: &Value) -> String {
    format!(
        "{} expects {want}, not {} {}",
        name(op),
        article(got),
        got.type_name()
    )
}

fn article(v: &Value) -> &'static str {
    match v {
        Value::Int(_) | Value::Failure(_) => "an",
        _ => "a",
    }
}

fn as_str(op: Op, v: &Value) -> Result<&str, String> {
    match v {
        Value::Str(s) => Ok(s),
        other => Err(type_error(op, "a string", other)),
    }
}

fn as_int(op: Op, v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(n) => Ok(*n),
        Value::Float(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Ok(*x as i64),
        other => Err(type_error(op, "an integer", other)),
    }
}

pub fn as_list(op: Op, v: &Value) -> Result<&[Value], String> {
    match v {
        Value::List(s) => Ok(&s.items),
        Value::Null => Ok(&[]),
        other => Err(type_error(op, "a list", other)),
    }
}

fn num(op: Op, v: &Value) -> Result<f64, String> {
    match v {
        Value::Int(n) => Ok(*n as f64),
        Value::Float(x) => Ok(*x),
        other => Err(type_error(op, "a number", other)),
    }
}

fn float(x: f64) -> Result<Value, String> {
    if x.is_finite() {
        Ok(Value::Float(x))
    } else {
        Err("arithmetic overflow".into())
    }
}

fn arith(op: Op, args: &[Value]) -> Result<Value, String> {
    let all_int = args.iter().all(|a| matches!(a, Value::Int(_)));
    if all_int {
        let mut ints = args.iter().map(|a| match a {
            Value::Int(i) => *i,
            _ => 0,
        });
        let r = match op {
            Op::Add => ints.try_fold(0i64, i64::checked_add),
            Op::Mul => ints.try_fold(1i64, i64::checked_mul),
            _ => match (ints.next(), args.len()) {
                (Some(first), 1) => first.checked_neg(),
                (Some(first), _) => ints.try_fold(first, i64::checked_sub),
                (None, _) => Some(0),
            },
        };
        return r
            .map(Value::Int)
            .ok_or_else(|| "integer overflow".to_string());
    }
    let xs: Vec<f64> = args.iter().map(|a| num(op, a)).collect::<Result<_, _>>()?;
    float(match op {
        Op::Add => xs.iter().sum(),
        Op::Mul => xs.iter().product(),
        _ if xs.len() == 1 => -xs[0],
        _ => xs[1..].iter().fold(xs[0], |a, b| a - b),
    })
}

fn compare(op: Op, a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Ok(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Ok(x.cmp(y)),
        _ => {
            let (x, y) = (num(op, a)?, num(op, b)?);
            x.partial_cmp(&y)
                .ok_or_else(|| "cannot compare these numbers".to_string())
        }
    }
}

/// Order for `sort` and `sort-by`: numbers and strings, each among
/// their own kind.
pub fn order(op: Op, a: &Value, b: &Value) -> Result<std::cmp::Ordering, String> {
    compare(op, a, b)
}

fn index(op: Op, len: usize, i: i64) -> Result<Option<usize>, String> {
    let _ = op;
    if i < 0 {
        Ok(None)
    } else {
        let i = usize::try_from(i).map_err(|_| "index out of range".to_string())?;
        Ok((i < len).then_some(i))
    }
}

fn char_slice(s: &str, start: i64, end: Option<i64>) -> Result<String, String> {
    let count = s.chars().count() as i64;
    let fix = |i: i64| if i < 0 { count + i } else { i };
    let (a, b) = (fix(start), end.map_or(count, fix));
    if a < 0 || b > count || a > b {
        return Err(format!(
            "substring {start}..{} is outside the string of {count} characters",
            end.map_or("end".to_string(), |e| e.to_string())
        ));
    }
    Ok(s.chars().skip(a as usize).take((b - a) as usize).collect())
}

fn get_key(coll: &Value, key: &Value) -> Option<Value> {
    match (coll, key) {
        (Value::Map(d), Value::Str(k)) => d
            .entries
            .iter()
            .find(|(name, _)| **name == **k)
            .map(|(_, v)| v.clone()),
        (Value::List(s), Value::Int(i)) if *i >= 0 => s.items.get(*i as usize).cloned(),
        _ => None,
    }
}

fn match_value(caps: &regex::Captures<'_>) -> Value {
    if caps.len() == 1 {
        Value::str(caps.get(0).map_or("", |m| m.as_str()))
    } else {
        Value::list(
            caps.iter()
                .map(|m| m.map_or(Value::Null, |m| Value::str(m.as_str())))
                .collect(),
        )
    }
}

/// Apply the first-order operation OP to ARGS. Higher-order operations
/// are the interpreter's (they call back into guest functions).
pub fn apply(op: Op, args: &[Value], regexps: &mut Regexps) -> Result<Value, String> {
    let arg = |i: usize| args.get(i).unwrap_or(&Value::Null);
    Ok(match op {
        Op::Add | Op::Sub | Op::Mul => arith(op, args)?,
        Op::Div => {
            let (a, b) = (num(op, arg(0))?, num(op, arg(1))?);
            if b == 0.0 {
                return Err("division by zero".into());
            }
            match (arg(0), arg(1)) {
                (Value::Int(x), Value::Int(y)) if x % y == 0 => {
                    Value::Int(x.checked_div(*y).ok_or("integer overflow")?)
                }
                _ => float(a / b)?,
            }
        }
        Op::Mod => {
            let (a, b) = (as_int(op, arg(0))?, as_int(op, arg(1))?);
            if b == 0 {
                return Err("division by zero".into());
            }
            Value::Int(a.checked_rem_euclid(b).ok_or("integer overflow")?)
        }
        Op::Lt => Value::Bool(compare(op, arg(0), arg(1))?.is_lt()),
        Op::Le => Value::Bool(compare(op, arg(0), arg(1))?.is_le()),
        Op::Gt => Value::Bool(compare(op, arg(0), arg(1))?.is_gt()),
        Op::Ge => Value::Bool(compare(op, arg(0), arg(1))?.is_ge()),
        Op::Eq => Value::Bool(arg(0) == arg(1)),
        Op::Ne => Value::Bool(arg(0) != arg(1)),
        Op::Min | Op::Max => {
            let mut best = arg(0).clone();
            num(op, &best)?;
            for v in &args[1..] {
                let ord = compare(op, v, &best)?;
                if (op == Op::Min && ord.is_lt()) || (op == Op::Max && ord.is_gt()) {
                    best = v.clone();
                }
            }
            best
        }
        Op::Abs => match arg(0) {
            Value::Int(n) => Value::Int(n.checked_abs().ok_or("integer overflow")?),
            v => Value::Float(num(op, v)?.abs()),
        },
        Op::Not => Value::Bool(!arg(0).truthy()),
        Op::Number => match arg(0) {
            v @ (Value::Int(_) | Value::Float(_)) => v.clone(),
            Value::Str(s) => {
                let t = s.trim();
                if let Ok(n) = t.parse::<i64>() {
                    Value::Int(n)
                } else {
                    match t.parse::<f64>() {
                        Ok(x) if x.is_finite() => Value::Float(x),
                        _ => Value::Null,
                    }
                }
            }
            other => return Err(type_error(op, "a string or number", other)),
        },
        Op::Str => {
            let mut out = String::new();
            for a in args {
                match a {
                    Value::Null => {}
                    Value::Failure(f) => out.push_str(&format!("{} failed: {}", f.tool, f.message)),
                    other => out.push_str(&other.to_text()),
                }
            }
            Value::str(&out)
        }
        Op::Count => Value::Int(match arg(0) {
            Value::Str(s) => s.chars().count() as i64,
            Value::List(s) => s.items.len() as i64,
            Value::Map(d) => d.entries.len() as i64,
            Value::Null => 0,
            other => return Err(type_error(op, "a string, list or map", other)),
        }),
        Op::Substring => {
            let end = match args.get(2) {
                Some(v) => Some(as_int(op, v)?),
                None => None,
            };
            Value::str(&char_slice(as_str(op, arg(0))?, as_int(op, arg(1))?, end)?)
        }
        Op::Split => {
            let (s, sep) = (as_str(op, arg(0))?, as_str(op, arg(1))?);
            if sep.is_empty() {
                Value::list(
                    s.chars()
                        .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
                        .collect(),
                )
            } else {
                Value::list(s.split(sep).map(Value::str).collect())
            }
        }
        Op::Join => {
            let sep = match args.get(1) {
                Some(v) => as_str(op, v)?,
                None => "",
            };
            let parts: Vec<String> = as_list(op, arg(0))?.iter().map(|v| v.to_text()).collect();
            Value::str(&parts.join(sep))
        }
        Op::Lines => Value::list(as_str(op, arg(0))?.lines().map(Value::str).collect()),
        Op::Trim => Value::str(as_str(op, arg(0))?.trim()),
        Op::Upper => Value::str(&as_str(op, arg(0))?.to_uppercase()),
        Op::Lower => Value::str(&as_str(op, arg(0))?.to_lowercase()),
        Op::Contains => Value::Bool(match (arg(0), arg(1)) {
            (Value::Str(s), Value::Str(sub)) => s.contains(&**sub),
            (Value::List(s), v) => s.items.contains(v),
            (Value::Map(d), Value::Str(k)) => d.entries.iter().any(|(n, _)| **n == **k),
            (Value::Null, _) => false,
            (other, _) => return Err(type_error(op, "a string, list or map", other)),
        }),
        Op::StartsWith => Value::Bool(as_str(op, arg(0))?.starts_with(as_str(op, arg(1))?)),
        Op::EndsWith => Value::Bool(as_str(op, arg(0))?.ends_with(as_str(op, arg(1))?)),
        Op::Replace => {
            Value::str(&as_str(op, arg(0))?.replace(as_str(op, arg(1))?, as_str(op, arg(2))?))
        }
        Op::ReFind => {
            let re = regexps.get(as_str(op, arg(0))?)?;
            re.captures(as_str(op, arg(1))?)
                .map_or(Value::Null, |c| match_value(&c))
        }
        Op::ReAll => {
            let re = regexps.get(as_str(op, arg(0))?)?;
            Value::list(
                re.captures_iter(as_str(op, arg(1))?)
                    .map(|c| match_value(&c))
                    .collect(),
            )
        }
        Op::ReMatch => {
            let re = regexps.get(as_str(op, arg(0))?)?;
            Value::Bool(re.is_match(as_str(op, arg(1))?))
        }
        Op::List => Value::list(args.to_vec()),
        Op::First => as_list(op, arg(0))?.first().cloned().unwrap_or(Value::Null),
        Op::Last => as_list(op, arg(0))?.last().cloned().unwrap_or(Value::Null),
        Op::Rest => Value::list(as_list(op, arg(0))?.iter().skip(1).cloned().collect()),
        Op::Nth => {
            let items = as_list(op, arg(0))?;
            match index(op, items.len(), as_int(op, arg(1))?)? {
                Some(i) => items[i].clone(),
                None => match args.get(2) {
                    Some(d) => d.clone(),
                    None => {
                        return Err(format!(
                            "nth {} is outside the list of {} items",
                            as_int(op, arg(1))?,
                            items.len()
                        ));
                    }
                },
            }
        }
        Op::Take | Op::Drop => {
            let n = usize::try_from(as_int(op, arg(1))?.max(0)).unwrap_or(usize::MAX);
            let items = as_list(op, arg(0))?;
            let n = n.min(items.len());
            Value::list(if op == Op::Take {
                items[..n].to_vec()
            } else {
                items[n..].to_vec()
            })
        }
        Op::Concat => {
            if args.iter().all(|a| matches!(a, Value::Str(_))) && !args.is_empty() {
                let mut s = String::new();
                for a in args {
                    s.push_str(as_str(op, a)?);
                }
                Value::str(&s)
            } else {
                let mut out = Vec::new();
                for a in args {
                    out.extend_from_slice(as_list(op, a)?);
                }
                Value::list(out)
            }
        }
        Op::Reverse => match arg(0) {
            Value::Str(s) => Value::str(&s.chars().rev().collect::<String>()),
            v => Value::list(as_list(op, v)?.iter().rev().cloned().collect()),
        },
        Op::Sort => {
            let mut items = as_list(op, arg(0))?.to_vec();
            let mut failure = None;
            items.sort_by(|a, b| {
                order(op, a, b).unwrap_or_else(|e| {
                    failure.get_or_insert(e);
                    std::cmp::Ordering::Equal
                })
            });
            if let Some(e) = failure {
                return Err(e);
            }
            Value::list(items)
        }
        Op::Distinct => {
            let mut out: Vec<Value> = Vec::new();
            for v in as_list(op, arg(0))? {
                if !out.contains(v) {
                    out.push(v.clone());
                }
            }
            Value::list(out)
        }
        Op::Flatten => {
            let mut out = Vec::new();
            for v in as_list(op, arg(0))? {
                match v {
                    Value::List(s) => out.extend_from_slice(&s.items),
                    other => out.push(other.clone()),
                }
            }
            Value::list(out)
        }
        Op::Get => get_key(arg(0), arg(1)).unwrap_or_else(|| arg(2).clone()),
        Op::GetIn => {
            let mut at = arg(0).clone();
            for key in as_list(op, arg(1))? {
                match get_key(&at, key) {
                    Some(v) => at = v,
                    None => return Ok(arg(2).clone()),
                }
            }
            at
        }
        Op::Keys | Op::Vals => match arg(0) {
            Value::Map(d) => Value::list(
                d.entries
                    .iter()
                    .map(|(k, v)| {
                        if op == Op::Keys {
                            Value::Str(k.clone())
                        } else {
                            v.clone()
                        }
                    })
                    .collect(),
            ),
            Value::Null => Value::list(Vec::new()),
            other => return Err(type_error(op, "a map", other)),
        },
        Op::Assoc | Op::Dissoc => {
            let mut entries = match arg(0) {
                Value::Map(d) => d.entries.clone(),
                Value::Null => Vec::new(),
                other => return Err(type_error(op, "a map", other)),
            };
            if op == Op::Assoc {
                if args.len().is_multiple_of(2) {
                    return Err("assoc takes a map and key/value pairs".into());
                }
                for pair in args[1..].chunks(2) {
                    let key: Rc<str> = Rc::from(as_str(op, &pair[0])?);
                    match entries.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = pair[1].clone(),
                        None => entries.push((key, pair[1].clone())),
                    }
                }
            } else {
                for key in &args[1..] {
                    let key = as_str(op, key)?;
                    entries.retain(|(k, _)| &**k != key);
                }
            }
            Value::map(entries)
        }
        Op::Merge => {
            let mut entries: Vec<(Rc<str>, Value)> = Vec::new();
            for a in args {
                match a {
                    Value::Map(d) => {
                        for (k, v) in &d.entries {
                            match entries.iter_mut().find(|(n, _)| n == k) {
                                Some(slot) => slot.1 = v.clone(),
                                None => entries.push((k.clone(), v.clone())),
                            }
                        }
                    }
                    Value::Null => {}
                    other => return Err(type_error(op, "maps", other)),
                }
            }
            Value::map(entries)
        }
        Op::JsonParse => {
            let s = as_str(op, arg(0))?;
            let json: serde_json::Value =
                serde_json::from_str(s).map_err(|e| format!("json-parse: {e}"))?;
            Value::from_json(&json)
        }
        Op::JsonStr => Value::str(&arg(0).to_json()?.to_string()),
        Op::Type => Value::str(arg(0).type_name()),
        Op::IsNull => Value::Bool(matches!(arg(0), Value::Null)),
        Op::IsFailed => Value::Bool(matches!(arg(0), Value::Failure(_))),
        Op::ErrorMessage => match arg(0) {
            Value::Failure(f) => Value::Str(f.message.clone()),
            _ => Value::Null,
        },
        Op::Range => {
            let ints: Vec<i64> = args
                .iter()
                .map(|a| as_int(op, a))
                .collect::<Result<_, _>>()?;
            let (start, end, step) = match ints.as_slice() {
                [end] => (0, *end, 1),
                [start, end] => (*start, *end, 1),
                [start, end, step] => (*start, *end, *step),
                _ => return Err("range takes 1 to 3 integers".into()),
            };
            if step == 0 {
                return Err("range: the step is zero".into());
            }
            let span = if step > 0 {
                end.saturating_sub(start)
            } else {
                start.saturating_sub(end)
            };
            let len = if span <= 0 {
                0
            } else {
                (span - 1) / step.saturating_abs() + 1
            };
            if len > RANGE_LIMIT {
                return Err(format!("range of {len} integers; at most {RANGE_LIMIT}"));
            }
            let mut out = Vec::with_capacity(len as usize);
            let mut x = start;
            for _ in 0..len {
                out.push(Value::Int(x));
                x = x.saturating_add(step);
            }
            Value::list(out)
        }
        Op::Fail => return Err(format!("the program failed: {}", arg(0).to_text())),
        Op::Map | Op::Filter | Op::Reduce | Op::SortBy | Op::Some_ | Op::Every => {
            return Err(format!("{} is applied by the interpreter", name(op)));
        }
    })
}

/// Longest list `range` builds.
pub const RANGE_LIMIT: i64 = 100_000;
