//! Which operation each address family accepts.
//!
//! Refusals here are "unsupported operation" errors, distinct from
//! malformed addresses, and name the operations the form does accept.

use super::address::{HistoryRef, Locator, MemoryRef, SharedPart, SharedRef, SkillRef, WorkRef};
use crate::error::{Error, ErrorKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Read,
    Glob,
    Grep,
    ApplyPatch,
}

impl Operation {
    pub const ALL: [Operation; 4] = [
        Operation::Read,
        Operation::Glob,
        Operation::Grep,
        Operation::ApplyPatch,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "Read",
            Operation::Glob => "Glob",
            Operation::Grep => "Grep",
            Operation::ApplyPatch => "ApplyPatch",
        }
    }

    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(name))
    }

    /// The operation NAME names, or an error saying it is unknown.
    pub fn parse(name: &str) -> Result<Operation, Error> {
        Operation::from_name(name)
            .ok_or_else(|| Error::new(ErrorKind::Resource, format!("unknown operation `{name}`")))
    }

    pub fn writes(self) -> bool {
        self == Operation::ApplyPatch
    }
}

use Operation::{ApplyPatch, Glob, Grep, Read};

/// The operations LOCATOR's form accepts.
pub fn allowed(locator: &Locator) -> &'static [Operation] {
    const RGG: &[Operation] = &[Read, Glob, Grep];
    const ALL: &[Operation] = &[Read, Glob, Grep, ApplyPatch];
    const R: &[Operation] = &[Read];
    const RG: &[Operation] = &[Read, Grep];
    match locator {
        Locator::Work(WorkRef::Local(_)) => ALL,
        Locator::Work(WorkRef::Shared(p)) if !p.is_empty() => ALL,
        Locator::Work(_) => RGG,
        Locator::Artifact(_) | Locator::Docs(_) => RGG,
        Locator::Skill(SkillRef::Listing) => R,
        Locator::Skill(_) => RGG,
        Locator::Agent { .. } | Locator::Mcp { .. } => R,
        Locator::History(HistoryRef::Listing) => R,
        Locator::History(HistoryRef::Root(_)) => RG,
        Locator::History(HistoryRef::Saved { .. }) => RGG,
        Locator::Memory(MemoryRef::Keyed { path, .. }) if !path.is_empty() => ALL,
        Locator::Memory(_) => RGG,
        Locator::Shared(SharedRef::Listing)
        | Locator::Shared(SharedRef::Library { sheet: true, .. })
        | Locator::Shared(SharedRef::Item {
            part: Some(SharedPart::View | SharedPart::Image(_)),
            ..
        }) => R,
        Locator::Shared(_) => RG,
    }
}

/// `Ok` when LOCATOR accepts OP; otherwise an unsupported-operation
/// error naming AUTHORED.
pub fn check(locator: &Locator, op: Operation, authored: &str) -> Result<(), Error> {
    let ok = allowed(locator);
    if ok.contains(&op) {
        return Ok(());
    }
    let accepted = ok.iter().map(|o| o.name()).collect::<Vec<_>>().join(", ");
    let hint = match (locator, op) {
        (Locator::Work(_) | Locator::Memory(_), ApplyPatch) => {
            " ApplyPatch needs an explicit file below the root."
        }
        (Locator::Skill(SkillRef::Listing), _) => {
            " Pick a skill from Read skill:// and search inside it."
        }
        _ => "",
    };
    Err(Error::new(
        ErrorKind::Resource,
        format!(
            "Unsupported operation: {} does not accept `{authored}` ({}:// addresses of this form \
             support {accepted}).{hint}",
            op.name(),
            locator.scheme()
        ),
    ))
}
