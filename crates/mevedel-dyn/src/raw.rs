//! The raw module API, for the seams whose cost is the module calls
//! themselves (ADR 0005).
//!
//! The `emacs` crate checks for a non-local exit after every module call
//! it makes. [`Raw`] makes the calls without that check: after a failed
//! call Emacs turns every further call of the same environment into a
//! no-op returning a null value, so a caller may build a whole result
//! and check once at the end ([`Raw::finish`]). The function pointers
//! are read from the environment once per `Raw`.
//!
//! Raw values never outlive the module call that made them (a `Raw`
//! borrows its `Env`), except global references, which their owners
//! keep for good.

use std::ffi::{CStr, c_char};

use emacs::raw::{emacs_env, emacs_value};
use emacs::{Env, Result, Value};
use mevedel_core::error::{Error, ErrorKind};

use crate::errors;

type Funcall =
    unsafe extern "C" fn(*mut emacs_env, emacs_value, isize, *mut emacs_value) -> emacs_value;
type Intern = unsafe extern "C" fn(*mut emacs_env, *const c_char) -> emacs_value;
type MakeString = unsafe extern "C" fn(*mut emacs_env, *const c_char, isize) -> emacs_value;
type MakeInteger = unsafe extern "C" fn(*mut emacs_env, i64) -> emacs_value;
type MakeFloat = unsafe extern "C" fn(*mut emacs_env, f64) -> emacs_value;
type MakeGlobalRef = unsafe extern "C" fn(*mut emacs_env, emacs_value) -> emacs_value;
type ExitCheck = unsafe extern "C" fn(*mut emacs_env) -> u32;

/// The module functions of the current call's environment.
pub(super) struct Raw<'e> {
    env: &'e Env,
    raw: *mut emacs_env,
    funcall_fn: Funcall,
    intern_fn: Intern,
    make_string_fn: MakeString,
    make_unibyte_fn: MakeString,
    make_integer_fn: MakeInteger,
    make_float_fn: MakeFloat,
    make_global_ref_fn: MakeGlobalRef,
    exit_check_fn: ExitCheck,
}

fn length(len: usize) -> isize {
    isize::try_from(len).unwrap_or(isize::MAX)
}

impl<'e> Raw<'e> {
    /// The functions of ENV, or a signal when its module API lacks one.
    pub fn new(env: &'e Env) -> Result<Self> {
        let raw = env.raw();
        // SAFETY: ENV is the live environment of the current module call.
        let table = unsafe { &*raw };
        let (
            Some(funcall_fn),
            Some(intern_fn),
            Some(make_string_fn),
            Some(make_unibyte_fn),
            Some(make_integer_fn),
            Some(make_float_fn),
            Some(make_global_ref_fn),
            Some(exit_check_fn),
        ) = (
            table.funcall,
            table.intern,
            table.make_string,
            table.make_unibyte_string,
            table.make_integer,
            table.make_float,
            table.make_global_ref,
            table.non_local_exit_check,
        )
        else {
            return errors::signal(
                env,
                Error::new(ErrorKind::Internal, "The module API lacks a function"),
            );
        };
        Ok(Raw {
            env,
            raw,
            funcall_fn,
            intern_fn,
            make_string_fn,
            make_unibyte_fn,
            make_integer_fn,
            make_float_fn,
            make_global_ref_fn,
            exit_check_fn,
        })
    }

    /// Call FUNC with ARGS (nothing is written to them).
    #[inline]
    pub fn funcall(&self, func: emacs_value, args: &mut [emacs_value]) -> emacs_value {
        // SAFETY: live environment; Emacs only reads the ARGS.
        unsafe { (self.funcall_fn)(self.raw, func, length(args.len()), args.as_mut_ptr()) }
    }

    /// The symbol named NAME (ASCII).
    #[inline]
    pub fn intern(&self, name: &CStr) -> emacs_value {
        // SAFETY: live environment; a NUL-terminated name.
        unsafe { (self.intern_fn)(self.raw, name.as_ptr()) }
    }

    /// A multibyte string decoded from UTF8 (Emacs makes anything not
    /// UTF-8 into raw bytes).
    #[inline]
    pub fn make_string(&self, utf8: &[u8]) -> emacs_value {
        // SAFETY: live environment; UTF8 has the length passed.
        unsafe { (self.make_string_fn)(self.raw, utf8.as_ptr().cast(), length(utf8.len())) }
    }

    /// A unibyte string of BYTES.
    #[inline]
    pub fn make_unibyte_string(&self, bytes: &[u8]) -> emacs_value {
        // SAFETY: live environment; BYTES has the length passed.
        unsafe { (self.make_unibyte_fn)(self.raw, bytes.as_ptr().cast(), length(bytes.len())) }
    }

    #[inline]
    pub fn make_integer(&self, n: i64) -> emacs_value {
        // SAFETY: live environment.
        unsafe { (self.make_integer_fn)(self.raw, n) }
    }

    #[inline]
    pub fn make_float(&self, x: f64) -> emacs_value {
        // SAFETY: live environment.
        unsafe { (self.make_float_fn)(self.raw, x) }
    }

    /// A global reference to VALUE, valid in every later module call
    /// (null when making it failed).
    #[inline]
    pub fn make_global_ref(&self, value: emacs_value) -> emacs_value {
        // SAFETY: live environment; VALUE was made in it.
        unsafe { (self.make_global_ref_fn)(self.raw, value) }
    }

    /// Whether no module call of this environment has failed.
    #[inline]
    pub fn ok(&self) -> bool {
        // SAFETY: plain query of the live environment.
        unsafe { (self.exit_check_fn)(self.raw) == 0 }
    }

    /// VALUE as a `Value` once no module call has failed; else the
    /// pending signal (which Emacs keeps over this one, saying WHAT
    /// failed).
    pub fn finish(&self, value: emacs_value, what: &str) -> Result<Value<'e>> {
        if !self.ok() {
            return errors::signal(self.env, Error::new(ErrorKind::Internal, what));
        }
        // SAFETY: VALUE was made in this environment, which is still live.
        Ok(unsafe { Value::new(value, self.env) })
    }
}
