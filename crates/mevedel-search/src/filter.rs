//! Which files a search scope shows: every file, or a resource
//! scope's own selection (Markdown docs, journal entries, logs).

use crate::{gzlog, journal};

/// Which files of a scope are visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    Any,
    /// Packaged documentation: Markdown files only.
    Markdown,
    /// Journal entries: well-formed, recallable, no nesting.
    Journal {
        now: u64,
        recall_days: u64,
    },
    /// Persisted output: compressed files and temporaries are hidden.
    Artifact,
    /// Execution logs: like [`Filter::Artifact`], but a retired log kept
    /// as `RUN.log.gz` is visible under its logical name `RUN.log`.
    ExecutionLogs,
}

impl Filter {
    /// Whether a file called NAME at DEPTH (1 = directly in the scope
    /// root) is visible.
    pub fn admits(&self, name: &str, depth: usize) -> bool {
        match self {
            Filter::Any => true,
            Filter::Markdown => name.ends_with(".md"),
            Filter::Journal { now, recall_days } => {
                depth == 1 && journal::recallable(name, *now, *recall_days)
            }
            Filter::Artifact => !name.ends_with(".gz") && !name.starts_with('.'),
            Filter::ExecutionLogs => {
                (gzlog::logical_name(name).is_some() || !name.ends_with(".gz"))
                    && !name.starts_with('.')
            }
        }
    }

    /// Whether this scope shows compressed logs under logical names.
    pub fn maps_compressed(&self) -> bool {
        matches!(self, Filter::ExecutionLogs)
    }
}
