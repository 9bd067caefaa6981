//! placeholder
pub const OWNER_LABEL: &str = "mcp.gateway.owner";
pub struct DockerRunner;
pub struct DockerRunnerSettings;
