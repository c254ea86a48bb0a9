//! Stdio servers inside the sandbox that Bash commands run in, for the
//! servers the user asks to confine (`mevedel-mcp-sandbox`).
//!
//! Stdio servers are the user's own programs and run directly by
//! default. A confined one is launched by the same launcher as a Bash
//! command ([`launch::prepare`]): bwrap around the `mevedel-sandbox`
//! helper around the server, or the helper alone, under the policy Lisp
//! builds for Bash (the workspace writable except its `.git`, dir-locals
//! and `.mevedel`; everything else read-only; home secrets and the Emacs
//! and MCP socket directories unreadable; a private `/tmp`; network
//! denied unless granted per server). Unlike a command, a server the user
//! asked to confine never runs unconfined: where no layer works, or the
//! sandbox mode is `off`, it fails to start and says why.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use crate::error::{Error, ErrorKind, Result};
use crate::sandbox::launch::{self, Request};
use crate::sandbox::policy::Boundary;

/// Some of a session's servers, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Only(Vec<String>),
}

impl Selection {
    pub fn contains(&self, name: &str) -> bool {
        match self {
            Selection::All => true,
            Selection::Only(names) => names.iter().any(|n| n == name),
        }
    }
}

/// Which stdio servers run confined, and how.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// Bash's sandbox request without a command: mode, backend, the
    /// workspace as the writable root, the protected and masked paths,
    /// and the (filtered) environment confined servers start from.
    pub request: Request,
    /// The servers to confine.
    pub servers: Selection,
    /// The confined servers that keep network access.
    pub network: Selection,
}

impl Confinement {
    /// The sandbox request of server NAME, or `None` when it runs
    /// directly.
    pub fn request_for(&self, name: &str) -> Option<Request> {
        self.servers.contains(name).then(|| {
            let mut request = self.request.clone();
            request.network = self.network.contains(name);
            request
        })
    }
}

/// A confined server's launch, ready for the process owner.
pub(crate) struct Confined {
    /// The whole command line: bwrap and/or the helper, then the server.
    pub(crate) argv: Vec<OsString>,
    pub(crate) env: Option<Vec<(OsString, OsString)>>,
    pub(crate) cwd: PathBuf,
    /// The helper's start-marker pipe (reader, writer): the child gets
    /// the writer as [`launch::START_FD`].
    pub(crate) marker: (OwnedFd, OwnedFd),
    pub(crate) sandbox: Sandboxed,
}

/// What a confined server keeps while it runs.
pub(crate) struct Sandboxed {
    pub(crate) boundary: Boundary,
    /// The launch's private scratch directory, removed on drop.
    _keep: launch::Keep,
    /// Read end of the start-marker pipe, set once the server started.
    marker: Option<OwnedFd>,
}

impl Sandboxed {
    pub(crate) fn set_marker(&mut self, reader: OwnedFd) {
        self.marker = Some(reader);
    }

    /// Why the server never ran when the sandbox failed to start it or
    /// could not execute it; SAID is its stderr, STATUS how it exited.
    pub(crate) fn start_problem(&self, said: &str, status: &str) -> Option<String> {
        let markers = launch::read_markers(self.marker.as_ref()?);
        launch::start_of(&markers, said, status).problem()
    }
}

fn refused(message: String) -> Error {
    Error::new(ErrorKind::Sandbox, message)
}

/// Prepare the confined launch of ARGV in CWD with the complete
/// environment ENV under REQUEST; refuse it when the policy would not
/// confine it. Probes (bounded) when no probe is cached: call it off the
/// runtime's workers.
pub(crate) fn prepare(
    mut request: Request,
    argv: &[OsString],
    cwd: PathBuf,
    env: &[(OsString, OsString)],
) -> Result<Confined> {
    request.command = argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    request.cwd = Some(cwd);
    request.env = Some(
        env.iter()
            .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
            .collect(),
    );
    let parts = launch::prepare(&request)?.into_parts();
    let boundary = parts
        .facts
        .as_ref()
        .map_or(Boundary::Refused, |f| f.boundary);
    if let Some(why) = parts.refusal {
        return Err(refused(format!("the sandbox refused to start it: {why}")));
    }
    let Some(marker) = parts.marker else {
        let why = parts
            .facts
            .and_then(|f| f.disclosure)
            .unwrap_or_else(|| "no sandbox layer confines it".into());
        return Err(refused(format!(
            "it is to run confined (mevedel-mcp-sandbox) but would run unconfined: {why}"
        )));
    };
    Ok(Confined {
        argv: parts.argv,
        env: parts.env,
        cwd: parts.cwd,
        marker,
        sandbox: Sandboxed {
            boundary,
            _keep: parts.keep,
            marker: None,
        },
    })
}
