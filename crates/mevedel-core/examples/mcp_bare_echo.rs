//! The peer of `BENCH mcp-call-overhead` (test/bench/mcp-bench.el): a
//! bare `rmcp` client, as a program that wants one tool of one MCP
//! server and nothing else would write it. It starts the stdio server
//! its command line names, calls the server's `echo` tool WARMUP times,
//! then N times one after the other, and prints the median of those N
//! calls in milliseconds (a median, so that a call the shared machine
//! preempted does not decide it). No mevedel code is on its path: what
//! the product adds to a call is its figure minus this one, against the
//! same server.
//!
//! Usage: mcp_bare_echo WARMUP N COMMAND [ARG...]

use std::process::{Command, ExitCode};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

mod peer;
use peer::Failure;

fn main() -> ExitCode {
    peer::main("mcp_bare_echo", run)
}

#[tokio::main]
async fn run(warmup: usize, n: usize, command: &str, args: &[String]) -> Result<f64, Failure> {
    let (mut child, writer, reader) = peer::spawn(Command::new(command).args(args))?;
    let client = ().serve((reader, writer)).await?;
    let calls = &client;
    let median = peer::median_ms(warmup, n, move || async move {
        let arguments = json!({"message": "hi"});
        let params = CallToolRequestParams::new("echo")
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        let result = calls.call_tool(params).await?;
        match result.is_error {
            Some(true) => Err(format!("echo failed: {result:?}").into()),
            _ => Ok(()),
        }
    })
    .await?;
    client.cancel().await?;
    let _ = child.kill();
    let _ = child.wait();
    Ok(median)
}
