//! Lisp-shaped data built by Rust code that has no access to Emacs.
//!
//! Background threads cannot create Lisp values (only the main thread may
//! touch the module environment), so they describe results as a [`Datum`];
//! the seam (`mevedel-dyn`, `convert.rs`) converts it on the main thread.

/// A Lisp value described in plain Rust.
#[derive(Debug, Clone, PartialEq)]
pub enum Datum {
    Nil,
    T,
    Int(i64),
    Float(f64),
    Str(String),
    /// An interned symbol; keywords include their leading colon.
    Symbol(String),
    List(Vec<Datum>),
}

impl Datum {
    /// A property list from keyword/value pairs, e.g. `(:id 3 :name "x")`.
    pub fn plist<I, K>(pairs: I) -> Datum
    where
        I: IntoIterator<Item = (K, Datum)>,
        K: Into<String>,
    {
        let mut items = Vec::new();
        for (key, value) in pairs {
            let key = key.into();
            let key = if key.starts_with(':') {
                key
            } else {
                format!(":{key}")
            };
            items.push(Datum::Symbol(key));
            items.push(value);
        }
        Datum::List(items)
    }

    pub fn bool(value: bool) -> Datum {
        if value { Datum::T } else { Datum::Nil }
    }

    pub fn str(value: impl Into<String>) -> Datum {
        Datum::Str(value.into())
    }

    /// `nil` for `None`, the string otherwise.
    pub fn opt_str(value: Option<impl Into<String>>) -> Datum {
        value.map_or(Datum::Nil, |v| Datum::Str(v.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plist_adds_colons_once() {
        let p = Datum::plist([("a", Datum::Int(1)), (":b", Datum::Nil)]);
        assert_eq!(
            p,
            Datum::List(vec![
                Datum::Symbol(":a".into()),
                Datum::Int(1),
                Datum::Symbol(":b".into()),
                Datum::Nil,
            ])
        );
    }

    #[test]
    fn bool_and_option_helpers() {
        assert_eq!(Datum::bool(true), Datum::T);
        assert_eq!(Datum::bool(false), Datum::Nil);
        assert_eq!(Datum::opt_str(None::<String>), Datum::Nil);
        assert_eq!(Datum::opt_str(Some("x")), Datum::Str("x".into()));
    }
}
