//! What the bare bench peers (`acp_bare_turn`, `mcp_bare_echo`) share:
//! their command line, the child they talk to over its pipes, and the
//! median they print. Each keeps only its own protocol's client, so
//! that what a peer times is that client and nothing of mevedel's.

use std::future::Future;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

use tokio::net::unix::pipe;

pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Run the peer NAME: RUN gets `WARMUP N COMMAND [ARG...]` from the
/// command line and returns the median in milliseconds, printed.
pub fn main(
    name: &str,
    run: fn(usize, usize, &str, &[String]) -> Result<f64, Failure>,
) -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(warmup), Some(n), Some(command)) = (
        args.first().and_then(|w| w.parse::<usize>().ok()),
        args.get(1)
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0),
        args.get(2),
    ) else {
        eprintln!("usage: {name} WARMUP N COMMAND [ARG...]");
        return ExitCode::from(2);
    };
    match run(warmup, n, command, &args[3..]) {
        Ok(ms) => {
            println!("{ms:.4}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Start COMMAND with its stdin and stdout piped and its stderr
/// dropped; return it with the async ends of those pipes. Call on a
/// tokio runtime.
pub fn spawn(command: &mut Command) -> Result<(Child, pipe::Sender, pipe::Receiver), Failure> {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("the child's pipes are missing".into());
    };
    let writer = pipe::Sender::from_owned_fd(OwnedFd::from(stdin))?;
    let reader = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))?;
    Ok((child, writer, reader))
}

/// Await CALL WARMUP times, then N times one after the other, and
/// return the median of those N in milliseconds: a median, so that a
/// call the shared machine preempted does not decide it.
pub async fn median_ms<F, Fut>(warmup: usize, n: usize, mut call: F) -> Result<f64, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    for _ in 0..warmup {
        call().await?;
    }
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        call().await?;
        samples.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}
