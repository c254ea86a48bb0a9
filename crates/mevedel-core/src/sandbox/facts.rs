//! What a probe found out about this machine's confinement layers.
//!
//! The facts alone, so that the policy can decide from them without
//! depending on how they are found ([`super::probe`] finds them by
//! running bwrap and the helper).

use std::path::PathBuf;

use crate::datum::Datum;

/// The outcome of one probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub bwrap_path: Option<PathBuf>,
    /// Whether the helper ran inside bwrap with the launch namespaces.
    pub bwrap_works: bool,
    /// Why bwrap is unusable, when it is.
    pub bwrap_problem: Option<String>,
    /// The kernel's Landlock ABI version, when Landlock is enabled.
    pub landlock_abi: Option<u32>,
    pub landlock_problem: Option<String>,
    /// The helper binary that applies Landlock and starts commands.
    pub helper_path: Option<PathBuf>,
    pub helper_problem: Option<String>,
    /// Whether the helper managed to enforce a Landlock ruleset.
    pub landlock_enforced: bool,
}

impl Probe {
    /// bwrap can confine (the helper runs inside it).
    pub fn bwrap_usable(&self) -> Result<(), String> {
        if let Some(problem) = &self.helper_problem {
            return Err(problem.clone());
        }
        if self.bwrap_works {
            Ok(())
        } else {
            Err(self
                .bwrap_problem
                .clone()
                .unwrap_or_else(|| "bwrap does not work".into()))
        }
    }

    /// The helper can confine with Landlock; returns the ABI version.
    pub fn landlock_usable(&self) -> Result<u32, String> {
        if let Some(problem) = &self.helper_problem {
            return Err(problem.clone());
        }
        match self.landlock_abi {
            Some(abi) if self.landlock_enforced => Ok(abi),
            _ => Err(self
                .landlock_problem
                .clone()
                .unwrap_or_else(|| "Landlock could not be enforced".into())),
        }
    }

    pub fn to_datum(&self) -> Datum {
        let path =
            |p: &Option<PathBuf>| Datum::opt_str(p.as_ref().map(|p| p.display().to_string()));
        Datum::plist([
            ("bwrap-path", path(&self.bwrap_path)),
            ("bwrap-works", Datum::bool(self.bwrap_works)),
            ("bwrap-problem", Datum::opt_str(self.bwrap_problem.clone())),
            (
                "landlock-abi",
                self.landlock_abi
                    .map_or(Datum::Nil, |v| Datum::Int(v.into())),
            ),
            (
                "landlock-problem",
                Datum::opt_str(self.landlock_problem.clone()),
            ),
            ("landlock-enforced", Datum::bool(self.landlock_enforced)),
            ("helper-path", path(&self.helper_path)),
            (
                "helper-problem",
                Datum::opt_str(self.helper_problem.clone()),
            ),
        ])
    }
}
