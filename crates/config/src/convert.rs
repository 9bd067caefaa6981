//! From schema definitions to the domain's types (applying the defaults that depend on a
//! server's mode) and back, for export.

use std::time::Duration;

use mcpgw_core::{
    ContainerCli, ContainerEngine, CustomLaunch, LaunchSpec, ServerId, ServerOrigin, ServerSpec,
};

use crate::schema::{
    ContainerRuntime, GatewayConfig, GroupMemberDefinition, GroupStrategy, ServerDefinition,
    ServerMode,
};

/// A group as the groups domain needs it, with every default applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDefinition {
    pub id: ServerId,
    pub description: Option<String>,
    pub strategy: GroupStrategy,
    pub min_healthy: u32,
    pub members: Vec<GroupMember>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub id: ServerId,
    pub weight: u32,
    pub priority: u32,
}

impl GroupDefinition {
    pub const DEFAULT_MIN_HEALTHY: u32 = 1;
}

impl GroupMember {
    pub const DEFAULT_WEIGHT: u32 = 1;
    pub const DEFAULT_PRIORITY: u32 = 0;
}

/// Docker's defaults that keep a container contained unless the operator says otherwise.
pub const DEFAULT_DOCKER_NETWORK: &str = "none";
pub const DEFAULT_DOCKER_READ_ONLY: bool = true;

impl ServerDefinition {
    /// The server this definition describes, with defaults applied; `None` for a group or a
    /// definition without `mode`. Meant for definitions that passed validation (everything
    /// [`crate::parse`] and [`crate::server_definition_from_json`] return): a missing required
    /// key becomes an empty value here, not an error.
    pub fn to_server_spec(&self, id: ServerId, origin: ServerOrigin) -> Option<ServerSpec> {
        let env = self.env.clone().unwrap_or_default();
        let launch = match self.mode.as_ref()? {
            ServerMode::Subprocess => LaunchSpec::Subprocess {
                command: self.command.clone().unwrap_or_default(),
                env,
                cwd: self.cwd.clone(),
            },
            ServerMode::Docker => LaunchSpec::Docker {
                image: self.image.clone().unwrap_or_default(),
                args: self
                    .args
                    .clone()
                    .or_else(|| self.command.clone())
                    .unwrap_or_default(),
                env,
                network: self
                    .network
                    .clone()
                    .unwrap_or_else(|| DEFAULT_DOCKER_NETWORK.to_owned()),
                memory: self.memory.clone(),
                cpus: self.cpus.clone(),
                read_only: self.read_only.unwrap_or(DEFAULT_DOCKER_READ_ONLY),
                volumes: self.volumes.clone().unwrap_or_default(),
                engine: match (&self.docker_host, self.runtime) {
                    (Some(host), _) => ContainerEngine::Host(host.clone()),
                    (None, Some(ContainerRuntime::Docker)) => {
                        ContainerEngine::Cli(ContainerCli::Docker)
                    }
                    (None, Some(ContainerRuntime::Podman)) => {
                        ContainerEngine::Cli(ContainerCli::Podman)
                    }
                    (None, None) => ContainerEngine::Default,
                },
            },
            ServerMode::Remote => LaunchSpec::Remote {
                endpoint: self.endpoint.clone().unwrap_or_default(),
                headers: self.headers.clone().unwrap_or_default(),
                token_exchange: self.token_exchange.clone(),
            },
            ServerMode::Registered(name) => LaunchSpec::Custom(
                CustomLaunch::new(name.clone(), self.settings.clone().unwrap_or_default()).ok()?,
            ),
            ServerMode::Group => return None,
        };
        Some(ServerSpec {
            id,
            description: self.description.clone(),
            launch,
            idle_ttl: self
                .idle_ttl_s
                .map_or(ServerSpec::DEFAULT_IDLE_TTL, Duration::from_secs),
            health_check_interval: self.health_check_interval_s.map_or(
                ServerSpec::DEFAULT_HEALTH_CHECK_INTERVAL,
                Duration::from_secs,
            ),
            max_consecutive_failures: self
                .max_consecutive_failures
                .unwrap_or(ServerSpec::DEFAULT_MAX_CONSECUTIVE_FAILURES),
            predefined_tools: self.tools.clone().unwrap_or_default(),
            origin,
            caller_meta: self.caller_meta.clone().map(std::sync::Arc::new),
            tool_pinning: self.tool_pinning,
        })
    }

    /// The group this definition describes, with defaults applied; `None` unless the mode is
    /// `group`. Members whose ids are not valid server ids are left out (validation reports
    /// them).
    pub fn to_group_definition(&self, id: ServerId) -> Option<GroupDefinition> {
        if self.mode != Some(ServerMode::Group) {
            return None;
        }
        let members = self
            .members
            .iter()
            .flatten()
            .filter_map(|member| {
                Some(GroupMember {
                    id: ServerId::parse(&member.id).ok()?,
                    weight: member.weight.unwrap_or(GroupMember::DEFAULT_WEIGHT),
                    priority: member.priority.unwrap_or(GroupMember::DEFAULT_PRIORITY),
                })
            })
            .collect();
        Some(GroupDefinition {
            id,
            description: self.description.clone(),
            strategy: self.strategy.unwrap_or_default(),
            min_healthy: self
                .min_healthy
                .unwrap_or(GroupDefinition::DEFAULT_MIN_HEALTHY),
            members,
        })
    }

    /// The definition that yields `spec` again, leaving out values equal to their defaults so
    /// that an export reads like a hand-written file. `None` for a launch kind this schema
    /// cannot express.
    pub fn from_server_spec(spec: &ServerSpec) -> Option<Self> {
        let mut definition = ServerDefinition {
            description: spec.description.clone(),
            idle_ttl_s: Some(spec.idle_ttl.as_secs())
                .filter(|_| spec.idle_ttl != ServerSpec::DEFAULT_IDLE_TTL),
            health_check_interval_s: Some(spec.health_check_interval.as_secs()).filter(|_| {
                spec.health_check_interval != ServerSpec::DEFAULT_HEALTH_CHECK_INTERVAL
            }),
            max_consecutive_failures: Some(spec.max_consecutive_failures)
                .filter(|count| *count != ServerSpec::DEFAULT_MAX_CONSECUTIVE_FAILURES),
            tools: Some(spec.predefined_tools.clone()).filter(|tools| !tools.is_empty()),
            caller_meta: spec.caller_meta.as_deref().cloned(),
            tool_pinning: spec.tool_pinning,
            ..ServerDefinition::default()
        };
        match &spec.launch {
            LaunchSpec::Subprocess { command, env, cwd } => {
                definition.mode = Some(ServerMode::Subprocess);
                definition.command = Some(command.clone());
                definition.env = Some(env.clone()).filter(|env| !env.is_empty());
                definition.cwd = cwd.clone();
            }
            LaunchSpec::Docker {
                image,
                args,
                env,
                network,
                memory,
                cpus,
                read_only,
                volumes,
                engine,
            } => {
                definition.mode = Some(ServerMode::Docker);
                definition.image = Some(image.clone());
                definition.args = Some(args.clone()).filter(|args| !args.is_empty());
                definition.env = Some(env.clone()).filter(|env| !env.is_empty());
                definition.network =
                    Some(network.clone()).filter(|network| network != DEFAULT_DOCKER_NETWORK);
                definition.memory = memory.clone();
                definition.cpus = cpus.clone();
                definition.read_only =
                    Some(*read_only).filter(|read_only| *read_only != DEFAULT_DOCKER_READ_ONLY);
                definition.volumes = Some(volumes.clone()).filter(|volumes| !volumes.is_empty());
                match engine {
                    ContainerEngine::Host(host) => definition.docker_host = Some(host.clone()),
                    ContainerEngine::Cli(ContainerCli::Docker) => {
                        definition.runtime = Some(ContainerRuntime::Docker);
                    }
                    ContainerEngine::Cli(ContainerCli::Podman) => {
                        definition.runtime = Some(ContainerRuntime::Podman);
                    }
                    _ => {}
                }
            }
            LaunchSpec::Remote {
                endpoint,
                headers,
                token_exchange,
            } => {
                definition.mode = Some(ServerMode::Remote);
                definition.endpoint = Some(endpoint.clone());
                definition.headers = Some(headers.clone()).filter(|headers| !headers.is_empty());
                definition.token_exchange.clone_from(token_exchange);
            }
            LaunchSpec::Custom(custom) => {
                definition.mode = Some(ServerMode::Registered(custom.mode().to_owned()));
                definition.settings =
                    Some(custom.settings().clone()).filter(|settings| !settings.is_empty());
            }
            _ => return None,
        }
        Some(definition)
    }

    /// The definition that yields `group` again, leaving out default values.
    pub fn from_group_definition(group: &GroupDefinition) -> Self {
        ServerDefinition {
            mode: Some(ServerMode::Group),
            description: group.description.clone(),
            strategy: Some(group.strategy),
            min_healthy: Some(group.min_healthy)
                .filter(|count| *count != GroupDefinition::DEFAULT_MIN_HEALTHY),
            members: Some(
                group
                    .members
                    .iter()
                    .map(|member| GroupMemberDefinition {
                        id: member.id.to_string(),
                        weight: Some(member.weight)
                            .filter(|weight| *weight != GroupMember::DEFAULT_WEIGHT),
                        priority: Some(member.priority)
                            .filter(|priority| *priority != GroupMember::DEFAULT_PRIORITY),
                    })
                    .collect(),
            ),
            ..ServerDefinition::default()
        }
    }
}

impl GatewayConfig {
    /// Every server (not group) of the file, with defaults applied and origin
    /// [`ServerOrigin::Config`], ordered by id.
    pub fn server_specs(&self) -> Vec<ServerSpec> {
        self.mcp_servers
            .iter()
            .filter_map(|(id, definition)| {
                definition.to_server_spec(ServerId::parse(id).ok()?, ServerOrigin::Config)
            })
            .collect()
    }

    /// Every group of the file, with defaults applied, ordered by id.
    pub fn groups(&self) -> Vec<GroupDefinition> {
        self.mcp_servers
            .iter()
            .filter_map(|(id, definition)| {
                definition.to_group_definition(ServerId::parse(id).ok()?)
            })
            .collect()
    }

    /// The configuration as YAML, in the schema's own shape: parsing it again gives an equal
    /// configuration. Values are written as they are, secrets included; sanitize first for
    /// display.
    pub fn to_yaml(&self) -> String {
        serde_yaml::to_string(self)
            .expect("the configuration schema has string keys only, so it always serializes")
    }
}
