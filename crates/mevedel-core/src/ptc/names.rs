//! The dialect's operations by name: what a program may call besides
//! tools, and how many arguments each takes. The compiler resolves names
//! here; [`super::builtins`] implements them.

macro_rules! ops {
    ($($variant:ident $name:literal $min:literal $max:expr;)*) => {
        /// An operation, resolved by name at compile time.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Op { $($variant),* }

        /// Every operation: name, least and most arguments.
        pub const TABLE: &[(&str, Op, usize, Option<usize>)] = &[
            $(($name, Op::$variant, $min, $max)),*
        ];
    };
}

ops! {
    Add "+" 0 None;
    Sub "-" 1 None;
    Mul "*" 0 None;
    Div "/" 2 Some(2);
    Mod "mod" 2 Some(2);
    Lt "<" 2 Some(2);
    Le "<=" 2 Some(2);
    Gt ">" 2 Some(2);
    Ge ">=" 2 Some(2);
    Eq "=" 2 Some(2);
    Ne "not=" 2 Some(2);
    Min "min" 1 None;
    Max "max" 1 None;
    Abs "abs" 1 Some(1);
    Not "not" 1 Some(1);
    Number "number" 1 Some(1);
    Str "str" 0 None;
    Count "count" 1 Some(1);
    Substring "substring" 2 Some(3);
    Split "split" 2 Some(2);
    Join "join" 1 Some(2);
    Lines "lines" 1 Some(1);
    Trim "trim" 1 Some(1);
    Upper "upper" 1 Some(1);
    Lower "lower" 1 Some(1);
    Contains "contains?" 2 Some(2);
    StartsWith "starts-with?" 2 Some(2);
    EndsWith "ends-with?" 2 Some(2);
    Replace "replace" 3 Some(3);
    ReFind "re-find" 2 Some(2);
    ReAll "re-all" 2 Some(2);
    ReMatch "re-match?" 2 Some(2);
    List "list" 0 None;
    First "first" 1 Some(1);
    Rest "rest" 1 Some(1);
    Last "last" 1 Some(1);
    Nth "nth" 2 Some(3);
    Take "take" 2 Some(2);
    Drop "drop" 2 Some(2);
    Concat "concat" 0 None;
    Reverse "reverse" 1 Some(1);
    Sort "sort" 1 Some(1);
    Distinct "distinct" 1 Some(1);
    Flatten "flatten" 1 Some(1);
    Range "range" 1 Some(3);
    Map "map" 2 Some(2);
    Filter "filter" 2 Some(2);
    Reduce "reduce" 3 Some(3);
    SortBy "sort-by" 2 Some(2);
    Some_ "some" 2 Some(2);
    Every "every?" 2 Some(2);
    Get "get" 2 Some(3);
    GetIn "get-in" 2 Some(3);
    Keys "keys" 1 Some(1);
    Vals "vals" 1 Some(1);
    Assoc "assoc" 3 None;
    Dissoc "dissoc" 2 None;
    Merge "merge" 0 None;
    JsonParse "json-parse" 1 Some(1);
    JsonStr "json-str" 1 Some(1);
    Type "type" 1 Some(1);
    IsNull "null?" 1 Some(1);
    IsFailed "failed?" 1 Some(1);
    ErrorMessage "error-message" 1 Some(1);
    Fail "fail" 1 Some(1);
}

/// The operation called NAME, with its arity.
pub fn lookup(name: &str) -> Option<(Op, usize, Option<usize>)> {
    TABLE
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|&(_, op, min, max)| (op, min, max))
}

pub fn name(op: Op) -> &'static str {
    TABLE
        .iter()
        .find(|(_, o, ..)| *o == op)
        .map_or("?", |(n, ..)| n)
}
