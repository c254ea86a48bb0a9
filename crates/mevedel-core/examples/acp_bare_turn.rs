//! The peer of `BENCH acp-turn-overhead` (test/bench/acp-bench.el): a
//! bare client of the ACP SDK, as a program that wants text turns from
//! one agent and nothing else would write it. It starts the agent its
//! command line names (with the environment it inherits), initializes
//! it, opens a session in the current directory with the built-in tools
//! mevedel switches off switched off too, runs WARMUP turns, then N
//! turns one after the other, each the prompt "Say hi.", and prints the
//! median of those N turns in milliseconds. No mevedel code is on its
//! path: what the product adds to a turn is its figure minus this one,
//! against the same agent and model server.
//!
//! The agent runs in a process group of its own, killed whole at the end.
//!
//! Usage: acp_bare_turn WARMUP N COMMAND [ARG...]

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

use agent_client_protocol::{self as sdk, ByteStreams, UntypedMessage, v1};
use serde_json::{Value, json};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

mod peer;
use peer::Failure;

fn main() -> ExitCode {
    peer::main("acp_bare_turn", run)
}

/// Send METHOD with PARAMS over CX and wait for its answer.
async fn call(
    cx: &v1::ConnectionTo<sdk::Agent>,
    method: &str,
    params: Value,
) -> Result<Value, Failure> {
    let message = UntypedMessage::new(method, params)?;
    Ok(cx.send_request(message).block_task().await?)
}

#[tokio::main]
async fn run(warmup: usize, n: usize, command: &str, args: &[String]) -> Result<f64, Failure> {
    let (mut child, writer, reader) =
        peer::spawn(Command::new(command).args(args).process_group(0))?;
    let transport = ByteStreams::new(writer.compat_write(), reader.compat());
    let cwd = std::env::current_dir()?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let _ = sdk::Client
        .v1()
        .name("acp-bare-turn")
        .on_receive_notification(
            async move |_message: UntypedMessage, _cx| Ok(()),
            sdk::on_receive_notification!(),
        )
        .connect_with(transport, async move |cx: v1::ConnectionTo<sdk::Agent>| {
            let outcome = async {
                call(
                    &cx,
                    "initialize",
                    json!({"protocolVersion": 1, "clientCapabilities": {}}),
                )
                .await?;
                let session = call(
                    &cx,
                    "session/new",
                    json!({"cwd": cwd, "mcpServers": [], "_meta": {"claudeCode": {"options": {
                        "disallowedTools": ["Read", "Write", "Edit", "MultiEdit",
                                            "NotebookEdit", "Bash", "BashOutput",
                                            "KillShell"]}}}}),
                )
                .await?;
                let Some(id) = session.get("sessionId").and_then(Value::as_str) else {
                    return Err::<f64, Failure>(format!("no sessionId in {session}").into());
                };
                let prompt =
                    json!({"sessionId": id, "prompt": [{"type": "text", "text": "Say hi."}]});
                let (cx, prompt) = (&cx, &prompt);
                peer::median_ms(warmup, n, move || async move {
                    let end = call(cx, "session/prompt", prompt.clone()).await?;
                    match end.get("stopReason").and_then(Value::as_str) {
                        Some("end_turn") => Ok(()),
                        _ => Err(format!("the turn ended so: {end}").into()),
                    }
                })
                .await
            }
            .await;
            let _ = tx.send(outcome);
            Ok(())
        })
        .await;
    // The agent's own children (Claude Code's CLI) share its group.
    if let Ok(group) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on a process group this program started.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    }
    let _ = child.wait();
    rx.await
        .map_err(|_| Failure::from("the ACP connection ended before the turns"))?
}
