//! The client side of `@modelcontextprotocol/conformance`:
//! `conformance client --command "CMD" --scenario S` runs `CMD URL` with
//! `MCP_CONFORMANCE_SCENARIO=S`, and judges what the client did to its
//! server. This drives the core's [`Registry`] over streamable HTTP the
//! way the product will, so the checks test our client, not a test one.
//!
//! Scenarios: `initialize` (connect, list tools) and `tools_call` (also
//! call every tool named `add_numbers` with two numbers).

use std::path::PathBuf;
use std::sync::Arc;

use mevedel_core::mcp::{CallOptions, Options, Registry, ServerConfig, Source, Transport};
use serde_json::json;

fn main() -> std::process::ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: mcp_conformance_client URL (scenario in $MCP_CONFORMANCE_SCENARIO)");
        return std::process::ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let runtime = match mevedel_core::runtime::get() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let config = ServerConfig {
        name: "conformance".into(),
        transport: Transport::Http {
            url,
            headers: Default::default(),
        },
        source: Source::CommandLine,
        file: PathBuf::from("conformance"),
    };
    let registry = Arc::new(Registry::new(vec![config], Options::default(), None));
    let outcome = runtime.block_on(async {
        let tools = registry.list_tools("conformance").await?;
        if scenario == "tools_call" {
            for tool in tools.iter().filter(|t| t.name == "add_numbers") {
                let result = registry
                    .call_tool(
                        "conformance",
                        &tool.name,
                        json!({"a": 5, "b": 3}),
                        CallOptions::default(),
                    )
                    .await?;
                println!("{}", result.text());
            }
        }
        registry.stop_all().await;
        Ok::<_, mevedel_core::Error>(tools.len())
    });
    match outcome {
        Ok(n) => {
            println!("{scenario}: {n} tools");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{scenario}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
