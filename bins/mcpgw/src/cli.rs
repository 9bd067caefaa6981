//! The command line: global options and subcommands.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

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

    /// Over stdio, serve the curated endpoint NAME (its tools, names and overrides) instead
    /// of every tool.
    #[arg(long, global = true, value_name = "NAME")]
    pub endpoint: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with configuration files.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Manage authentication from the command line (the first admin key, the first user).
    #[command(subcommand)]
    Auth(AuthCommand),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate a configuration file; exits non-zero and prints every error when it is invalid.
    Check,
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Make an API key in the store under --data-dir. The raw key is printed alone on the first
    /// line of stdout, and only this once; exits 2 when an option is invalid.
    CreateKey(CreateKey),
    /// Make a local user in the store under --data-dir, who signs in to the web console as
    /// `user:NAME`. The password is read from stdin (one line, its line break removed) and must
    /// be 12 to 1024 bytes long; exits 2 when it is refused, when a role does not exist or when
    /// the name is taken.
    CreateUser(CreateUser),
    /// Give an existing local user a new password, read from stdin (one line); exits 2 when it
    /// is refused or when there is no such user.
    SetPassword(SetPassword),
}

#[derive(Debug, clap::Args)]
pub struct CreateUser {
    /// The user's name: 1 to 64 of A-Z a-z 0-9 . _ @ -, not starting with `.` or `-`.
    #[arg(long)]
    pub name: String,
    /// A role to assign to `user:NAME` in the global scope (`admin` for the first user); give
    /// it once per role.
    #[arg(long = "role", value_name = "ROLE")]
    pub roles: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct SetPassword {
    /// The user's name.
    #[arg(long)]
    pub name: String,
}

#[derive(Debug, clap::Args)]
pub struct CreateKey {
    /// Who the key authenticates: `user:NAME`, `service:NAME` or `group:NAME`.
    #[arg(long)]
    pub principal: String,
    /// A name for the key, such as the client that will use it.
    #[arg(long)]
    pub name: String,
    /// A role the key itself carries (`admin` for the first key).
    #[arg(long)]
    pub role: Option<String>,
    /// Days until the key expires (1 to 3650); without it the key never expires.
    #[arg(long, value_name = "DAYS", allow_negative_numbers = true)]
    pub expires_in_days: Option<i64>,
}
