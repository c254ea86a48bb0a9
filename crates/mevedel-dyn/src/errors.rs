//! The Lisp error tree: `mevedel-core-error` and one child per area.
//!
//! `lisp/mevedel-core.el` defines the root too (so loader errors exist
//! before the module does); defining it again here is harmless.

use emacs::{Env, IntoLisp, Result};
use mevedel_core::error::{Error, ErrorKind};

emacs::define_errors! {
    mevedel_core_error "mevedel core error" (error)
    mevedel_core_schema_error "mevedel schema error" (mevedel_core_error)
    mevedel_core_resource_error "mevedel resource error" (mevedel_core_error)
    mevedel_core_search_error "mevedel search error" (mevedel_core_error)
    mevedel_core_exec_error "mevedel execution error" (mevedel_core_error)
    mevedel_core_sandbox_error "mevedel sandbox error" (mevedel_core_error)
    mevedel_core_store_error "mevedel store error" (mevedel_core_error)
    mevedel_core_patch_error "mevedel patch error" (mevedel_core_error)
    mevedel_core_internal_error "mevedel internal error" (mevedel_core_error)
    mevedel_core_argument_error "mevedel module called with a bad argument" (mevedel_core_error wrong_type_argument)
}

/// Signal ERR in Lisp as `(mevedel-core-AREA-error MESSAGE)`.
pub fn signal<T>(env: &Env, err: Error) -> Result<T> {
    let symbol = match err.kind {
        ErrorKind::Schema => mevedel_core_schema_error,
        ErrorKind::Resource => mevedel_core_resource_error,
        ErrorKind::Search => mevedel_core_search_error,
        ErrorKind::Exec => mevedel_core_exec_error,
        ErrorKind::Sandbox => mevedel_core_sandbox_error,
        ErrorKind::Store => mevedel_core_store_error,
        ErrorKind::Patch => mevedel_core_patch_error,
        ErrorKind::Internal => mevedel_core_internal_error,
    };
    let message = err.message.into_lisp(env)?;
    env.signal(symbol, [message])
}

/// Extension for library results: `lib_call()?.or_signal(env)?`.
pub trait OrSignal<T> {
    fn or_signal(self, env: &Env) -> Result<T>;
}

impl<T> OrSignal<T> for mevedel_core::error::Result<T> {
    fn or_signal(self, env: &Env) -> Result<T> {
        self.or_else(|e| signal(env, e))
    }
}
