//! The agent's requests to the client, and who answers them.
//!
//! mevedel advertises the fs and terminal capabilities, so an agent may
//! ask it to read or write a file, run a command in a terminal, or ask
//! the user's permission for a tool call. The connection parses each
//! request into a [`Request`] and hands it to the caller's [`Delegate`]
//! with a [`Reply`]; the later Lisp seam implements the delegate (reads
//! that see unsaved buffers, writes through ApplyPatch's path, commands
//! in the sandbox, the permission policy). Requests of other methods are
//! answered "method not found" here.
//!
//! A permission request still unanswered when its session's turn is
//! cancelled is answered `cancelled` by the connection, as the protocol
//! requires; the delegate's later answer is then dropped.

use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

use agent_client_protocol::{Error as RpcError, ErrorCode, v1};
use serde::Serialize;
use serde_json::Value;

use super::child::lock;
use super::schema;

/// The responder of a request until it is answered.
pub(crate) type Slot = Mutex<Option<v1::Responder<Value>>>;

/// Whether SLOT's request is still unanswered.
pub(crate) fn unanswered(slot: &Slot) -> bool {
    lock(slot).is_some()
}

/// One request of the agent, with the reply that answers it.
///
/// Variants differ in size as the schema's requests do; one is made and
/// moved once per request of the agent, so boxing would buy nothing.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Request {
    ReadTextFile(
        schema::ReadTextFileRequest,
        Reply<schema::ReadTextFileResponse>,
    ),
    WriteTextFile(
        schema::WriteTextFileRequest,
        Reply<schema::WriteTextFileResponse>,
    ),
    CreateTerminal(
        schema::CreateTerminalRequest,
        Reply<schema::CreateTerminalResponse>,
    ),
    TerminalOutput(
        schema::TerminalOutputRequest,
        Reply<schema::TerminalOutputResponse>,
    ),
    WaitForTerminalExit(
        schema::WaitForTerminalExitRequest,
        Reply<schema::WaitForTerminalExitResponse>,
    ),
    KillTerminal(
        schema::KillTerminalRequest,
        Reply<schema::KillTerminalResponse>,
    ),
    ReleaseTerminal(
        schema::ReleaseTerminalRequest,
        Reply<schema::ReleaseTerminalResponse>,
    ),
    Permission(
        schema::RequestPermissionRequest,
        Reply<schema::RequestPermissionResponse>,
    ),
}

impl Request {
    /// The ACP method of the request.
    pub fn method(&self) -> &'static str {
        let names = &schema::CLIENT_METHOD_NAMES;
        match self {
            Request::ReadTextFile(..) => names.fs_read_text_file,
            Request::WriteTextFile(..) => names.fs_write_text_file,
            Request::CreateTerminal(..) => names.terminal_create,
            Request::TerminalOutput(..) => names.terminal_output,
            Request::WaitForTerminalExit(..) => names.terminal_wait_for_exit,
            Request::KillTerminal(..) => names.terminal_kill,
            Request::ReleaseTerminal(..) => names.terminal_release,
            Request::Permission(..) => names.session_request_permission,
        }
    }
}

/// Answers the agent's requests.
pub trait Delegate: Send + Sync + 'static {
    /// Handle REQUEST of agent AGENT. Called on the connection's dispatch
    /// loop, which waits for it: return at once and answer through the
    /// request's [`Reply`], from any thread, now or later. A reply
    /// dropped unanswered answers the agent with an internal error.
    fn request(&self, agent: &str, request: Request);
}

/// Where the answer to one request goes; answering twice is impossible
/// (each method takes the reply), answering after the connection closed
/// does nothing.
pub struct Reply<T> {
    slot: Arc<Slot>,
    answer: PhantomData<fn(T)>,
}

impl<T> std::fmt::Debug for Reply<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Reply")
    }
}

impl<T: Serialize> Reply<T> {
    /// A reply through RESPONDER, and the slot the connection keeps to
    /// answer it itself (a permission request on cancel).
    pub(crate) fn new(responder: v1::Responder<Value>) -> (Reply<T>, Arc<Slot>) {
        let slot = Arc::new(Mutex::new(Some(responder)));
        (
            Reply {
                slot: Arc::clone(&slot),
                answer: PhantomData,
            },
            slot,
        )
    }

    /// Answer with ANSWER.
    pub fn ok(self, answer: T) {
        let value = serde_json::to_value(answer);
        if let Some(responder) = lock(&self.slot).take() {
            let _ = match value {
                Ok(value) => responder.respond(value),
                Err(e) => responder.respond_with_internal_error(e),
            };
        }
    }

    /// Answer with an error: CODE is a JSON-RPC code (`ErrorCode::
    /// RESOURCE_NOT_FOUND` for a missing file, `INVALID_PARAMS`,
    /// `INTERNAL_ERROR`), MESSAGE what the agent and its model are told.
    pub fn fail(self, code: ErrorCode, message: impl Into<String>) {
        if let Some(responder) = lock(&self.slot).take() {
            let _ = responder.respond_with_error(RpcError::new(code, message));
        }
    }
}

/// Answer SLOT's request, if still unanswered, with the `cancelled`
/// permission outcome.
pub(crate) fn cancel_permission(slot: &Slot) {
    if let Some(responder) = lock(slot).take() {
        let answer =
            schema::RequestPermissionResponse::new(schema::RequestPermissionOutcome::Cancelled);
        let _ = match serde_json::to_value(answer) {
            Ok(value) => responder.respond(value),
            Err(e) => responder.respond_with_internal_error(e),
        };
    }
}

/// Parse PARAMS of METHOD into a [`Request`] answered through RESPONDER,
/// with the slot of its reply. A method no delegate handles is answered
/// "method not found" here, unparsable params "invalid params"; both
/// yield `None`.
pub(crate) fn parse(
    method: &str,
    params: Value,
    responder: v1::Responder<Value>,
) -> Option<(Request, Arc<Slot>)> {
    fn build<Q: serde::de::DeserializeOwned, T: Serialize>(
        params: Value,
        responder: v1::Responder<Value>,
        make: fn(Q, Reply<T>) -> Request,
    ) -> Option<(Request, Arc<Slot>)> {
        match serde_json::from_value::<Q>(params) {
            Ok(request) => {
                let (reply, slot) = Reply::new(responder);
                Some((make(request, reply), slot))
            }
            Err(e) => {
                let _ = responder.respond_with_error(RpcError::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("invalid params: {e}"),
                ));
                None
            }
        }
    }
    let names = &schema::CLIENT_METHOD_NAMES;
    match method {
        m if m == names.fs_read_text_file => build(params, responder, Request::ReadTextFile),
        m if m == names.fs_write_text_file => build(params, responder, Request::WriteTextFile),
        m if m == names.terminal_create => build(params, responder, Request::CreateTerminal),
        m if m == names.terminal_output => build(params, responder, Request::TerminalOutput),
        m if m == names.terminal_wait_for_exit => {
            build(params, responder, Request::WaitForTerminalExit)
        }
        m if m == names.terminal_kill => build(params, responder, Request::KillTerminal),
        m if m == names.terminal_release => build(params, responder, Request::ReleaseTerminal),
        m if m == names.session_request_permission => build(params, responder, Request::Permission),
        _ => {
            let _ = responder.respond_with_error(RpcError::method_not_found().data(method));
            None
        }
    }
}
