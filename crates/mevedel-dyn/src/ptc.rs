//! ToolCall programs: start a machine, feed it child results, run it to
//! its next requests. The machine is a `user-ptr` the ToolCall driver
//! holds for one program; the GC frees it with the driver's state.

use std::collections::HashSet;

use emacs::{Env, IntoLisp, Result, Value, defun};
use mevedel_core::ptc::{Budgets, Machine};

use crate::args::Plist;
use crate::convert::to_lisp;
use crate::guard::guarded;

/// Compile SOURCE into a machine. ARGS: `:tools` (the names the program
/// may call), `:standalone` (those that must be the whole program) and
/// the budgets `:steps`, `:depth`, `:value` and `:retained`. A program
/// that does not compile fails on its first `ptc-resume'.
#[defun(user_ptr, name = "ptc-start")]
fn ptc_start(env: &Env, source: String, args: Value<'_>) -> Result<Machine> {
    guarded(env, || {
        let mut args = Plist::new(env, "ptc-start", args)?;
        let tools: HashSet<String> = args.strings(":tools")?.into_iter().collect();
        let standalone: HashSet<String> = args.strings(":standalone")?.into_iter().collect();
        let budgets = Budgets::at_least_one(
            args.int(":steps")?,
            args.int(":depth")?,
            args.int(":value")?,
            args.int(":retained")?,
        );
        args.finish()?;
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
    guarded(env, || to_lisp(env, &machine.resume().to_datum()))
}
