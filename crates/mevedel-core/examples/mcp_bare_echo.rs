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

use std::os::fd::OwnedFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

type Failure = Box<dyn std::error::Error>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(warmup), Some(n), Some(command)) = (
        args.first().and_then(|w| w.parse::<usize>().ok()),
        args.get(1)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0),
        args.get(2),
    ) else {
        eprintln!("usage: mcp_bare_echo WARMUP N COMMAND [ARG...]");
        return ExitCode::from(2);
    };
    match run(warmup, n, command, &args[3..]) {
        Ok(ms) => {
            println!("{ms:.4}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp_bare_echo: {e}");
            ExitCode::FAILURE
        }
    }
}

#[tokio::main]
async fn run(warmup: usize, n: usize, command: &str, args: &[String]) -> Result<f64, Failure> {
    let mut child = Command::new(command)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the server's pipes are missing".into());
    };
    let writer = tokio::net::unix::pipe::Sender::from_owned_fd(OwnedFd::from(stdin))?;
    let reader = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))?;
    let client = ().serve((reader, writer)).await?;
    let echo = || {
        let arguments = json!({"message": "hi"});
        let params = CallToolRequestParams::new("echo")
            .with_arguments(arguments.as_object().cloned().unwrap_or_default());
        client.call_tool(params)
    };
    for _ in 0..warmup {
        echo().await?;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        let result = echo().await?;
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
        if result.is_error == Some(true) {
            return Err(format!("echo failed: {result:?}").into());
        }
    }
    client.cancel().await?;
    let _ = child.kill();
    let _ = child.wait();
    samples.sort_by(f64::total_cmp);
    Ok(samples[n / 2])
}
