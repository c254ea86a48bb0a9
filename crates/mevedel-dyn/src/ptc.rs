//! ToolCall programs: start a machine, feed it child results, run it to
//! its next requests. The machine is a `user-ptr` the ToolCall driver
//! holds for one program; the GC frees it with the driver's state.

use std::collections::HashSet;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::datum::Datum;
use mevedel_core::ptc::{Action, Budgets, Machine};

use crate::convert::{strings, to_lisp};
use crate::guard::guarded;

fn budget(n: i64) -> usize {
    usize::try_from(n.max(1)).unwrap_or(usize::MAX)
}

/// Compile SOURCE for a caller who may call TOOLS (names), of which
/// STANDALONE must be the whole program, under the budgets STEPS, DEPTH,
/// VALUE and RETAINED. A program that does not compile fails on its
/// first `ptc-resume'.
#[defun(user_ptr, name = "ptc-start")]
#[allow(clippy::too_many_arguments)]
fn ptc_start(
    env: &Env,
    source: String,
    tools: Value<'_>,
    standalone: Value<'_>,
    steps: i64,
    depth: i64,
    value: i64,
    retained: i64,
) -> Result<Machine> {
    guarded(env, || {
        let tools: HashSet<String> = strings(tools)?.into_iter().collect();
        let standalone: HashSet<String> = strings(standalone)?.into_iter().collect();
        let budgets = Budgets {
            steps: budget(steps) as u64,
            depth: budget(depth),
            value: budget(value),
            retained: budget(retained),
        };
        Ok(Machine::new(&source, &tools, &standalone, budgets))
    })
}

/// The tool of MACHINE's program when it is one direct call, else nil.
#[defun(name = "ptc-direct")]
fn ptc_direct<'e>(env: &'e Env, machine: &mut Machine) -> Result<Value<'e>> {
    guarded(env, || match machine.direct() {
        Some(name) => name.into_lisp(env),
        None => ().into_lisp(env),
    })
}

/// Give MACHINE call N's result TEXT; OK nil says the call failed.
#[defun(name = "ptc-feed")]
fn ptc_feed(env: &Env, machine: &mut Machine, n: i64, ok: Value<'_>, text: String) -> Result<()> {
    guarded(env, || {
        machine.feed(usize::try_from(n).unwrap_or(0), ok.is_not_nil(), &text);
        Ok(())
    })
}

/// Run MACHINE to its next requests. Return (calls ((N TOOL ARGS-JSON
/// BATCH) ...)), (done TEXT STEPS) or (failed MESSAGE STEPS); BATCH is
/// the number of a join's first call, or nil outside a join.
#[defun(name = "ptc-resume")]
fn ptc_resume<'e>(env: &'e Env, machine: &mut Machine) -> Result<Value<'e>> {
    guarded(env, || {
        let datum = match machine.resume() {
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
            Action::Done { text, steps } => Datum::List(vec![
                Datum::Symbol("done".into()),
                Datum::Str(text),
                Datum::Int(steps as i64),
            ]),
            Action::Failed { message, steps } => Datum::List(vec![
                Datum::Symbol("failed".into()),
                Datum::Str(message),
                Datum::Int(steps as i64),
            ]),
        };
        to_lisp(env, &datum)
    })
}
