//! `mcp-dataplane`: the programs that run in the Pods mcp-operator renders, as subcommands of
//! one binary (one image, one build, one server side).

mod adapter;
mod auth;
mod bridge;
mod capabilities;
mod era;
mod hosts;
mod http;
mod jsonrpc;
mod legacy;
mod param_headers;
mod rounds;
mod sessions;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "mcp-dataplane", version, about = "The data plane of mcp-operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start, never moved around
enum Command {
    /// Serve one stdio MCP server to many HTTP clients of both protocol eras.
    Adapter(adapter::config::AdapterConfig),
    /// Serve one governed MCP endpoint to an agent, in front of the run's MCP servers.
    Bridge(bridge::config::BridgeArgs),
}

fn init_logs(level: &str) {
    let level = match level {
        "warning" => "warn",
        other => other,
    };
    let filter = tracing_subscriber::EnvFilter::try_new(format!("mcp_dataplane={level}"))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("mcp_dataplane=info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("mcp-dataplane: cannot start the runtime: {error}");
            std::process::exit(2);
        }
    };
    let code = match cli.command {
        Command::Adapter(config) => {
            init_logs(&config.log_level);
            runtime.block_on(adapter::run(config))
        }
        Command::Bridge(args) => {
            init_logs(&args.log_level.to_ascii_lowercase());
            runtime.block_on(bridge::run(args))
        }
    };
    std::process::exit(code);
}
