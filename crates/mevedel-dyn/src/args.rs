//! The one decoder of structured arguments: a keyword plist
//! `(:key VALUE ...)` (see the crate docs for when a defun takes one).
//!
//! [`Plist::new`] reads the keys once; typed getters take them out
//! ([`Plist::string`], [`Plist::opt_int`], ...), a nil value counting as
//! absent; [`Plist::finish`] then rejects every key no getter asked for,
//! so a misspelt key in Lisp fails at once instead of being ignored.
//! [`Plist::deserialize`] hands the keys left to a serde type of core
//! (the execution spec, the sandbox request), whose own attributes say
//! which keys it knows and their defaults; its failures are that area's
//! errors. Every other failure signals `mevedel-core-argument-error` (a
//! `wrong-type-argument`) with a message naming the function, the key
//! and what it expected: such an error is a bug in
//! `lisp/mevedel-core.el`, not something a user or model did.

use std::cell::RefCell;
use std::collections::HashMap;

use emacs::{Env, GlobalRef, IntoLisp, Result, Value, Vector};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IntoDeserializer, MapAccess, Visitor};
use serde_json::{Map, Value as Json};

use mevedel_core::error::{Error, ErrorKind};

use crate::errors::{OrSignal, mevedel_core_argument_error};

emacs::use_symbols! {
    string integer float symbol cons vector
    json_false => ":false"
    json_null => ":null"
}

emacs::use_functions! {
    symbol_name => "symbol-name"
    vconcat
}

/// A decoded keyword plist of one call of the module function `function`.
pub struct Plist<'e> {
    env: &'e Env,
    function: &'static str,
    /// Keys and non-nil values not taken yet. Keys are compared as
    /// symbols (`eq`); their names are read only for messages.
    entries: Vec<(Value<'e>, Value<'e>)>,
    /// Every key a getter asked for, for the unknown-key message.
    known: Vec<&'static str>,
    /// How messages name a key: empty, or the outer key and a space.
    prefix: String,
}

/// Signal `mevedel-core-argument-error` for FUNCTION with MESSAGE.
pub fn fail<T>(env: &Env, function: &str, message: impl std::fmt::Display) -> Result<T> {
    let text = format!("mevedel-core--{function}: {message}").into_lisp(env)?;
    env.signal(mevedel_core_argument_error, [text])
}

thread_local! {
    /// The keywords getters asked for, interned once per thread and
    /// never freed (there are a few dozen).
    static KEYWORDS: RefCell<HashMap<&'static str, &'static GlobalRef>> =
        RefCell::new(HashMap::new());
}

/// The keyword KEY (its name, colon included).
fn keyword<'e>(env: &'e Env, key: &'static str) -> Result<Value<'e>> {
    KEYWORDS.with(|cell| {
        let known = cell.borrow().get(key).copied();
        if let Some(known) = known {
            return Ok(known.bind(env));
        }
        let made = env.intern(key)?;
        cell.borrow_mut()
            .insert(key, Box::leak(Box::new(made.make_global_ref())));
        Ok(made)
    })
}

/// How a message names the key KEY: a symbol's name, else its printed form.
fn key_name(env: &Env, key: Value<'_>) -> String {
    let name = if env.type_of(key).is_ok_and(|t| t == *symbol) {
        env.call(symbol_name, [key])
    } else {
        env.call("prin1-to-string", [key])
    };
    name.and_then(|n| n.into_rust())
        .unwrap_or_else(|_| "a key".into())
}

/// The Lisp type name of V, for messages.
fn type_name(env: &Env, v: Value<'_>) -> String {
    env.type_of(v)
        .and_then(|t| env.call(symbol_name, [t]))
        .and_then(|n| n.into_rust())
        .unwrap_or_else(|_| "unknown".into())
}

impl<'e> Plist<'e> {
    /// Decode PLIST, an argument of FUNCTION: keys alternating with
    /// values. Keys whose value is nil are absent. An improper list
    /// signals `wrong-type-argument`; a key that is not a keyword, or one
    /// given twice, is reported by [`Plist::finish`].
    pub fn new(env: &'e Env, function: &'static str, plist: Value<'e>) -> Result<Plist<'e>> {
        // One call copies the list into a vector, whose items are read
        // without calling Lisp again (`car`/`cdr` would be two calls each).
        let items: Vector = env.call(vconcat, [plist])?.into_rust()?;
        let n = items.len();
        if n % 2 == 1 {
            let name = key_name(env, items.get(n - 1)?);
            return fail(env, function, format_args!("{name} has no value"));
        }
        let mut entries: Vec<(Value<'e>, Value<'e>)> = Vec::with_capacity(n / 2);
        for i in (0..n).step_by(2) {
            let value: Value = items.get(i + 1)?;
            if value.is_not_nil() {
                entries.push((items.get(i)?, value));
            }
        }
        Ok(Plist {
            env,
            function,
            entries,
            known: Vec::new(),
            prefix: String::new(),
        })
    }

    /// Signal that KEY is not what the caller should pass (EXPECTED).
    fn wrong<T>(&self, key: &str, expected: &str, got: Option<Value<'e>>) -> Result<T> {
        let key = format!("{}{key}", self.prefix);
        match got {
            None => fail(
                self.env,
                self.function,
                format_args!("{key} is required ({expected})"),
            ),
            Some(v) => fail(
                self.env,
                self.function,
                format_args!("{key} must be {expected}, not a {}", type_name(self.env, v)),
            ),
        }
    }

    /// Take KEY's value out: None when absent or nil.
    pub fn value(&mut self, key: &'static str) -> Result<Option<Value<'e>>> {
        self.known.push(key);
        if self.entries.is_empty() {
            return Ok(None);
        }
        let wanted = keyword(self.env, key)?;
        Ok(self
            .entries
            .iter()
            .position(|(k, _)| *k == wanted)
            .map(|i| self.entries.swap_remove(i).1))
    }

    /// KEY's value, which must be there (EXPECTED says what it is).
    pub fn required(&mut self, key: &'static str, expected: &str) -> Result<Value<'e>> {
        match self.value(key)? {
            Some(v) => Ok(v),
            None => self.wrong(key, expected, None),
        }
    }

    /// KEY's value when it has the type TY (EXPECTED, for the message).
    fn typed(
        &mut self,
        key: &'static str,
        ty: &emacs::OnceGlobalRef,
        expected: &str,
    ) -> Result<Option<Value<'e>>> {
        match self.value(key)? {
            None => Ok(None),
            Some(v) if self.env.type_of(v)? == *ty => Ok(Some(v)),
            Some(v) => self.wrong(key, expected, Some(v)),
        }
    }

    /// KEY's string, which must be there.
    pub fn string(&mut self, key: &'static str) -> Result<String> {
        match self.opt_string(key)? {
            Some(s) => Ok(s),
            None => self.wrong(key, "a string", None),
        }
    }

    /// KEY's string, or None.
    pub fn opt_string(&mut self, key: &'static str) -> Result<Option<String>> {
        self.typed(key, string, "a string")?
            .map(|v| v.into_rust())
            .transpose()
    }

    /// KEY's integer, which must be there.
    pub fn int(&mut self, key: &'static str) -> Result<i64> {
        match self.opt_int(key)? {
            Some(n) => Ok(n),
            None => self.wrong(key, "an integer", None),
        }
    }

    /// KEY's integer, or None.
    pub fn opt_int(&mut self, key: &'static str) -> Result<Option<i64>> {
        self.typed(key, integer, "an integer")?
            .map(|v| v.into_rust())
            .transpose()
    }

    /// Whether KEY is there with a value other than nil and `:false`.
    pub fn bool(&mut self, key: &'static str) -> Result<bool> {
        Ok(self.value(key)?.is_some_and(|v| v != *json_false))
    }

    /// The elements of KEY's list (none when absent).
    pub fn list(&mut self, key: &'static str) -> Result<Vec<Value<'e>>> {
        let Some(list) = self.value(key)? else {
            return Ok(Vec::new());
        };
        if self.env.type_of(list)? != *cons {
            return self.wrong(key, "a list", Some(list));
        }
        crate::convert::list_items(list)
    }

    /// KEY's list of strings (empty when absent).
    pub fn strings(&mut self, key: &'static str) -> Result<Vec<String>> {
        let items = self.list(key)?;
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            if self.env.type_of(item)? != *string {
                return self.wrong(key, "a list of strings", Some(item));
            }
            out.push(item.into_rust()?);
        }
        Ok(out)
    }

    /// KEY's value as a plist of its own (empty when absent), decoded on
    /// behalf of the same function; `finish` it too.
    pub fn plist(&mut self, key: &'static str) -> Result<Plist<'e>> {
        let value = match self.value(key)? {
            Some(v) => v,
            None => ().into_lisp(self.env)?,
        };
        let mut nested = Plist::new(self.env, self.function, value)?;
        nested.prefix = format!("{}{key} ", self.prefix);
        Ok(nested)
    }

    /// Reject the keys no getter asked for.
    pub fn finish(self) -> Result<()> {
        let Some(&(key, _)) = self.entries.first() else {
            return Ok(());
        };
        let name = key_name(self.env, key);
        if self.known.contains(&name.as_str()) {
            return fail(
                self.env,
                self.function,
                format_args!("{}{name} is given twice", self.prefix),
            );
        }
        let key = name;
        let known = self.known.join(" ");
        fail(
            self.env,
            self.function,
            format_args!("unknown key {}{key} (known: {known})", self.prefix),
        )
    }

    /// The keys left, decoded as T, a serde type of core that rejects
    /// unknown fields: keys lose their colon, strings, numbers and lists
    /// keep their shape, t is true, `:false` and `:null` are false and
    /// null (as `json-serialize` has them), other symbols are their
    /// names, a plist is an object. T's shape is its area's contract (a
    /// request may carry user settings), so a mismatch signals the area's
    /// error KIND, "WHAT: " then serde's message, which names the key
    /// (`:sandbox :mode ...` for a nested one).
    pub fn deserialize<T: DeserializeOwned>(mut self, kind: ErrorKind, what: &str) -> Result<T> {
        let entries = std::mem::take(&mut self.entries);
        let map = self.object(entries)?;
        T::deserialize(Keyed(Json::Object(map)))
            .map_err(|e| Error::new(kind, format!("{what}: {e}")))
            .or_signal(self.env)
    }

    /// ENTRIES as a JSON object whose keys are the keywords' names
    /// without their colon.
    fn object(&self, entries: Vec<(Value<'e>, Value<'e>)>) -> Result<Map<String, Json>> {
        let mut map = Map::new();
        for (key, value) in entries {
            let name = key_name(self.env, key);
            let Some(bare) = name.strip_prefix(':') else {
                return fail(
                    self.env,
                    self.function,
                    format_args!("{}{name} is not a keyword", self.prefix),
                );
            };
            let json = self.json(&name, value)?;
            map.insert(bare.to_string(), json);
        }
        Ok(map)
    }

    /// V (the value of KEY) as JSON, per [`Plist::deserialize`].
    fn json(&self, key: &str, v: Value<'e>) -> Result<Json> {
        let env = self.env;
        let ty = env.type_of(v)?;
        if ty == *string {
            return Ok(Json::String(v.into_rust()?));
        }
        if ty == *integer {
            return Ok(Json::from(v.into_rust::<i64>()?));
        }
        if ty == *float {
            return Ok(Json::from(v.into_rust::<f64>()?));
        }
        if ty == *symbol {
            if !v.is_not_nil() || v == *json_null {
                return Ok(Json::Null);
            }
            if v == *json_false {
                return Ok(Json::Bool(false));
            }
            let name: String = env.call(symbol_name, [v])?.into_rust()?;
            return Ok(if name == "t" {
                Json::Bool(true)
            } else {
                Json::String(name.trim_start_matches(':').to_string())
            });
        }
        if ty == *vector {
            let n: usize = env
                .call("length", [v])?
                .into_rust::<i64>()?
                .try_into()
                .unwrap_or(0);
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let item = env.call("aref", (v, i as i64))?;
                out.push(self.json(key, item)?);
            }
            return Ok(Json::Array(out));
        }
        if ty == *cons {
            let head: Value = v.car()?;
            let is_plist = env.type_of(head)? == *symbol
                && env
                    .call(symbol_name, [head])?
                    .into_rust::<String>()?
                    .starts_with(':');
            if is_plist {
                let nested = Plist::new(env, self.function, v)?;
                return self.object(nested.entries).map(Json::Object);
            }
            let mut out = Vec::new();
            for item in crate::convert::list_items(v)? {
                out.push(self.json(key, item)?);
            }
            return Ok(Json::Array(out));
        }
        self.wrong(key, "a string, number, symbol, list or vector", Some(v))
    }
}

/// A JSON value whose objects prefix their values' errors with the key.
struct Keyed(Json);

/// The entries of an object, for [`Keyed`].
struct Entries {
    iter: serde_json::map::IntoIter,
    pending: Option<(String, Json)>,
}

impl<'de> MapAccess<'de> for Entries {
    type Error = serde_json::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> std::result::Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.iter.next() else {
            return Ok(None);
        };
        let de: de::value::StrDeserializer<'_, Self::Error> = key.as_str().into_deserializer();
        let k = seed.deserialize(de)?;
        self.pending = Some((key, value));
        Ok(Some(k))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        let (key, value) = self
            .pending
            .take()
            .ok_or_else(|| de::Error::custom("a value without a key"))?;
        seed.deserialize(Keyed(value))
            .map_err(|e| de::Error::custom(format_args!(":{key} {e}")))
    }
}

impl<'de> de::Deserializer<'de> for Keyed {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        match self.0 {
            Json::Object(map) => visitor.visit_map(Entries {
                iter: map.into_iter(),
                pending: None,
            }),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(
        self,
        visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        match self.0 {
            Json::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, Self::Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}
