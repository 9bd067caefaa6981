//! Reading the configuration file the gateway starts with.

use std::path::{Path, PathBuf};

use mcpgw_config::GatewayConfig;
use mcpgw_gateway::Environment;
use mcpgw_gateway::discovery_domain::DiscoverySourceFactory;

use crate::StartError;

/// Reads and validates the configuration file at `path`, expanding `${VAR}` from
/// `environment`. The settings of each discovery source belong to its type, which the
/// configuration crate does not know: `sources` checks them (without connecting or reading).
/// Servers may name `launch_modes` besides the built-in modes.
///
/// The error names the file, and for content errors every line and key at fault.
pub fn load_config_file(
    path: &Path,
    environment: &Environment,
    sources: &dyn DiscoverySourceFactory,
    launch_modes: &[mcpgw_core::LaunchMode],
) -> Result<GatewayConfig, StartError> {
    read_config_file(path, environment, sources, launch_modes).map(|(config, _)| config)
}

/// [`load_config_file`], answering the text it parsed too: what reloads and diffs compare
/// against, from the same read.
pub(crate) fn read_config_file(
    path: &Path,
    environment: &Environment,
    sources: &dyn DiscoverySourceFactory,
    launch_modes: &[mcpgw_core::LaunchMode],
) -> Result<(GatewayConfig, String), StartError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|error| {
        StartError::new(format!(
            "{name}: cannot read the configuration file: {error}"
        ))
    })?;
    let options = mcpgw_config::ParseOptions::with_discovery_source_types(sources.source_types())
        .with_launch_modes(launch_modes.iter().cloned());
    let config = mcpgw_config::parse_with(
        &name,
        &text,
        &|variable: &str| environment(variable),
        &options,
    )
    .map_err(|errors| {
        StartError::new(format!("{name}: the configuration is invalid:\n{errors}"))
    })?;
    if let Some(section) = &config.discovery {
        let problems: Vec<String> = mcpgw_gateway::discovery_sources_from_config(section)
            .iter()
            .enumerate()
            .filter_map(|(index, source)| {
                source
                    .validate_common()
                    .and_then(|()| sources.build(source).map(drop))
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
            return Err(StartError::new(format!(
                "{name}: the configuration is invalid:\n{}",
                problems.join("\n")
            )));
        }
    }
    Ok((config, text))
}

/// The file to start with: `explicit` when given, else `./gateway.yaml` when it exists, else
/// none (an empty registry).
pub fn default_config_path(explicit: Option<&Path>) -> Option<PathBuf> {
    match explicit {
        Some(path) => Some(path.to_owned()),
        None => Some(PathBuf::from("gateway.yaml")).filter(|default| default.is_file()),
    }
}
