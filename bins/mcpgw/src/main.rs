//! `mcpgw`: the bundled mcpgw server.
//!
//! It parses the command line and hands over to `mcpgw-server`, whose `GatewayBuilder` owns the
//! wiring; nothing here is needed by a service that embeds the gateway.

// A command-line tool answers on stdout.
#![allow(clippy::print_stdout)]

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{AuthCommand, Cli, Command, ConfigCommand};
use mcpgw_server::{GatewayBuilder, Listen, StartError};

fn main() -> ExitCode {
    mcpgw_server::limit_allocator_arenas();
    let cli = Cli::parse();
    init_tracing();
    let outcome = match &cli.command {
        Some(Command::Config(ConfigCommand::Check)) => config_check(&cli),
        Some(Command::Auth(AuthCommand::CreateKey(request))) => create_key(&cli, request),
        Some(Command::Auth(AuthCommand::CreateUser(request))) => create_user(&cli, request),
        Some(Command::Auth(AuthCommand::SetPassword(request))) => set_password(&cli, request),
        None => serve(&cli),
    };
    outcome.unwrap_or_else(|error| {
        eprintln!("mcpgw: {error}");
        ExitCode::from(1)
    })
}

fn serve(cli: &Cli) -> Result<ExitCode, StartError> {
    let environment = mcpgw_server::process_environment();
    // The data directory's databases are opened while the configuration file is read and
    // checked: neither needs the other, and each takes milliseconds. Should the file be
    // refused, a data directory this start created is removed again.
    let opening = mcpgw_server::OpeningDataDir::start(&cli.data_dir)?;
    let builder = GatewayBuilder::for_config_file(cli.config.as_deref(), environment.clone())?
        .opening_data_dir(opening);
    let listen = Listen::new(&cli.host, cli.port, cli.unsafe_no_auth);
    let runtime = mcpgw_server::core_runtime(&environment)?;
    if cli.http {
        listen.refuse_unsafe(builder.configuration(), &environment)?;
        // Before anything runs, so that the starts and events of the boot count too.
        mcpgw_server::install_metrics()?;
    }
    let tracing = runtime
        .block_on(async { mcpgw_server::start_tracing(builder.configuration(), &environment) })?;
    let running = runtime.block_on(builder.build())?;
    let outcome = if cli.http {
        listen
            .bind()
            .and_then(|listener| running.serve_http(listener))
    } else {
        match &cli.endpoint {
            Some(name) => runtime.block_on(running.serve_stdio_endpoint(name)),
            None => runtime.block_on(running.serve_stdio()),
        }
    };
    // Every managed server is stopped before the process ends, so nothing is left behind.
    runtime.block_on(running.shutdown());
    if let Some(tracing) = tracing {
        // Exports the spans still queued, the shutdown's own among them; the runtime still
        // runs, for a gRPC exporter's connection.
        tracing.shutdown(std::time::Duration::from_secs(5));
    }
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    outcome.map(|()| ExitCode::SUCCESS)
}

fn config_check(cli: &Cli) -> Result<ExitCode, StartError> {
    let Some(path) = &cli.config else {
        return Err(StartError::new(
            "config check needs --config FILE (or MCP_CONFIG)",
        ));
    };
    let sources = mcpgw_server::default_discovery_sources();
    let environment = mcpgw_server::process_environment();
    match mcpgw_server::load_config_file(path, &environment, &sources, &[]) {
        Ok(config) => {
            for warning in config.warnings() {
                eprintln!("warning: {warning}");
            }
            let servers = config.mcp_servers.len();
            println!("{}: ok ({servers} mcp servers)", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("{error}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Where the auth commands write: the shared store the configuration file names, else the
/// SQLite store under `--data-dir`.
fn store_location(cli: &Cli) -> Result<mcpgw_server::StoreLocation, StartError> {
    mcpgw_server::StoreLocation::for_gateway(
        &cli.data_dir,
        cli.config.as_deref(),
        &mcpgw_server::process_environment(),
    )
}

/// Prints the raw key alone on stdout's first line (the only time it is shown); what was made
/// goes to stderr. A request that is wrong exits 2.
fn create_key(cli: &Cli, request: &cli::CreateKey) -> Result<ExitCode, StartError> {
    let request = mcpgw_server::keys::KeyRequest {
        principal: &request.principal,
        name: &request.name,
        role: request.role.as_deref(),
        expires_in_days: request.expires_in_days,
    };
    let issued = match mcpgw_server::keys::create_key(&store_location(cli)?, request)? {
        Ok(issued) => issued,
        Err(error) => {
            eprintln!("mcpgw: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    println!("{}", issued.raw_key.expose());
    eprintln!("{}", mcpgw_server::keys::describe(&issued));
    Ok(ExitCode::SUCCESS)
}

/// Makes a local user whose password is the first line of stdin; what was made goes to
/// stderr. A request that is wrong exits 2.
fn create_user(cli: &Cli, request: &cli::CreateUser) -> Result<ExitCode, StartError> {
    let Some(password) = password_from_stdin(&request.name)? else {
        return Ok(ExitCode::from(2));
    };
    let outcome = mcpgw_server::users::create_user(
        &store_location(cli)?,
        &request.name,
        &password,
        &request.roles,
    )?;
    Ok(match outcome {
        Ok(created) => {
            eprintln!("{}", mcpgw_server::users::describe(&created));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("mcpgw: {error}");
            ExitCode::from(2)
        }
    })
}

/// Sets a local user's password to the first line of stdin. A request that is wrong exits 2.
fn set_password(cli: &Cli, request: &cli::SetPassword) -> Result<ExitCode, StartError> {
    let Some(password) = password_from_stdin(&request.name)? else {
        return Ok(ExitCode::from(2));
    };
    Ok(
        match mcpgw_server::users::set_password(&store_location(cli)?, &request.name, &password)? {
            Ok(user) => {
                eprintln!("set a new password for user {}", user.name);
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("mcpgw: {error}");
                ExitCode::from(2)
            }
        },
    )
}

/// The password on stdin's first line; `None` (after saying why on stderr) when it is refused.
fn password_from_stdin(name: &str) -> Result<Option<String>, StartError> {
    let stdin = std::io::stdin();
    if std::io::IsTerminal::is_terminal(&stdin) {
        eprintln!(
            "password for user {name} (one line; it shows as it is typed, pipe it in to keep it              off the screen):"
        );
    }
    match mcpgw_server::users::read_password(stdin.lock()) {
        Ok(password) => Ok(Some(password)),
        Err(mcpgw_server::users::ReadPasswordError::Refused(error)) => {
            eprintln!("mcpgw: {error}");
            Ok(None)
        }
        Err(error) => Err(StartError::new(error.to_string())),
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rmcp=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        // Reporting a failed write to stderr on stderr would panic once stderr is closed.
        .log_internal_errors(false)
        .with_writer(std::io::stderr)
        .init();
}
