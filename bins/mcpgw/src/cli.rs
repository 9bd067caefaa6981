//! The command line: global options, subcommands, and loading the configuration file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use mcpgw_config::GatewayConfig;

#[derive(Debug, Parser)]
#[command(name = "mcpgw", version, about = "A gateway in front of MCP servers")]
pub struct Cli {
    /// The YAML configuration file. Without it, `./gateway.yaml` is used when present, else the
    /// gateway starts with an empty registry.
    #[arg(long, global = true, env = "MCP_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Serve the REST API, MCP over Streamable HTTP, probes and metrics over HTTP.
    #[arg(long, global = true)]
    pub http: bool,

    /// The address to listen on.
    #[arg(
        long,
        global = true,
        env = "MCP_HTTP_HOST",
        default_value = "127.0.0.1"
    )]
    pub host: String,

    /// Listen on an address other machines can reach although authentication is off. Without
    /// it the gateway refuses: anyone who reaches it could start and call every MCP server.
    #[arg(long, global = true, env = "MCP_UNSAFE_NO_AUTH")]
    pub unsafe_no_auth: bool,

    /// The port to listen on; 0 picks a free one (the bound address is printed on stderr).
    #[arg(long, global = true, env = "MCP_HTTP_PORT", default_value_t = 8000)]
    pub port: u16,

    /// Where the gateway keeps its SQLite database.
    #[arg(
        long,
        global = true,
        env = "MCP_DATA_DIR",
        default_value = "./data",
        value_name = "DIR"
    )]
    pub data_dir: PathBuf,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Manage authentication from the command line (the first admin key).
    #[command(subcommand)]
    Auth(AuthCommand),
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Make an API key in the store under --data-dir. The raw key is printed alone on the first
    /// line of stdout, and only this once; exits 2 when an option is invalid.
    CreateKey {
        /// Who the key authenticates: `user:NAME`, `service:NAME` or `group:NAME`.
        #[arg(long)]
        principal: String,
        /// A name for the key, such as the client that will use it.
        #[arg(long)]
        name: String,
        /// A role the key itself carries (`admin` for the first key).
        #[arg(long)]
        role: Option<String>,
        /// Days until the key expires (1 to 3650); without it the key never expires.
        #[arg(long, value_name = "DAYS", allow_negative_numbers = true)]
        expires_in_days: Option<i64>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file; exits non-zero and prints every error when it is invalid.
    Check,
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match &cli.command {
        Some(Command::Config(ConfigCommand::Check)) => config_check(&cli),
        Some(Command::Auth(AuthCommand::CreateKey {
            principal,
            name,
            role,
            expires_in_days,
        })) => crate::keys::create_key(
            &cli.data_dir,
            &crate::keys::CreateKey {
                principal,
                name,
                role: role.as_deref(),
                expires_in_days: *expires_in_days,
            },
        ),
        None => crate::serve::serve(&cli),
    }
}

fn config_check(cli: &Cli) -> anyhow::Result<ExitCode> {
    let Some(path) = &cli.config else {
        anyhow::bail!("config check needs --config FILE (or MCP_CONFIG)");
    };
    match load_config_file(path) {
        Ok(config) => {
            #[allow(clippy::print_stdout)]
            {
                println!(
                    "{}: ok ({} mcp servers)",
                    path.display(),
                    config.mcp_servers.len()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("{error}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Reads and validates a configuration file. The error names the file, and for content errors
/// every line and key at fault.
pub fn load_config_file(path: &Path) -> Result<GatewayConfig, ConfigLoadError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| {
        ConfigLoadError(format!(
            "{name}: cannot read the configuration file: {error}"
        ))
    })?;
    let environment = |variable: &str| std::env::var(variable).ok();
    let config = mcpgw_config::parse(&name, &text, &environment).map_err(|errors| {
        ConfigLoadError(format!("{name}: the configuration is invalid:\n{errors}"))
    })?;
    // The settings of each discovery source belong to its type, which the configuration crate
    // does not know: the adapters' factories check them (without connecting or reading).
    if let Some(section) = &config.discovery {
        use mcpgw_gateway::discovery_domain::DiscoverySourceFactory as _;
        let factory = crate::serve::discovery_source_factory();
        let problems: Vec<String> = mcpgw_gateway::discovery_sources_from_config(section)
            .iter()
            .enumerate()
            .filter_map(|(index, source)| {
                source
                    .validate_common()
                    .and_then(|()| factory.build(source).map(drop))
                    .err()
                    .map(|reason| {
                        format!(
                            "  discovery.sources[{index}] (`{}`): {reason}",
                            source.source_id
                        )
                    })
            })
            .collect();
        if !problems.is_empty() {
            return Err(ConfigLoadError(format!(
                "{name}: the configuration is invalid:\n{}",
                problems.join("\n")
            )));
        }
    }
    Ok(config)
}

/// The configuration to start with: `--config`, else `./gateway.yaml`, else none.
pub fn startup_config(cli: &Cli) -> anyhow::Result<(GatewayConfig, Option<PathBuf>)> {
    let path = match &cli.config {
        Some(path) => Some(path.clone()),
        None => Some(PathBuf::from("gateway.yaml")).filter(|default| default.is_file()),
    };
    match path {
        Some(path) => {
            let config = load_config_file(&path).context("the gateway cannot start")?;
            Ok((config, Some(path)))
        }
        None => Ok((GatewayConfig::default(), None)),
    }
}

#[derive(Debug)]
pub struct ConfigLoadError(String);

impl std::fmt::Display for ConfigLoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigLoadError {}
