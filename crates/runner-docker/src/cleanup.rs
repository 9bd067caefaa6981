//! Removing the containers an earlier run of this gateway left behind.
//!
//! A gateway that was killed outright cannot remove its containers, so at start it removes
//! every container that carries its own instance id in [`OWNER_LABEL`], and nothing else.

use std::collections::HashMap;

use bollard::query_parameters::{
    KillContainerOptions, ListContainersOptions, RemoveContainerOptions,
};
use mcpgw_core::ContainerCli;

use crate::api::{engine_message, status_code};
use crate::cli::{last_line, run_client};
use crate::container_spec::OWNER_LABEL;
use crate::engine::{EngineAddress, connect_engine};
use crate::runner::DefaultEngine;

/// Removes, by force, every container (running or not) labelled
/// `mcp.gateway.owner=<instance_id>` on `engine`, and answers how many it removed. Containers
/// of any other owner are never touched.
pub async fn remove_leftover_containers(
    engine: &DefaultEngine,
    instance_id: &str,
) -> Result<usize, String> {
    // An empty id would select the containers labelled with an empty owner, which are not
    // this gateway's.
    if instance_id.trim().is_empty() {
        return Err(
            "the gateway's instance id is empty; give the gateway an instance id".to_owned(),
        );
    }
    let owner_filter = format!("{OWNER_LABEL}={instance_id}");
    match engine {
        DefaultEngine::EngineApi(address) => {
            remove_with_api(address, instance_id, &owner_filter).await
        }
        DefaultEngine::Cli(cli) => remove_with_cli(*cli, &owner_filter).await,
    }
}

async fn remove_with_api(
    address: &EngineAddress,
    instance_id: &str,
    owner_filter: &str,
) -> Result<usize, String> {
    let client = connect_engine(address).await?;
    let options = ListContainersOptions {
        all: true,
        filters: Some(HashMap::from([(
            "label".to_owned(),
            vec![owner_filter.to_owned()],
        )])),
        ..Default::default()
    };
    let containers = list_with_retries(&client, options).await.map_err(|error| {
        format!(
            "the container engine at {address} could not list the containers labelled \
                 {owner_filter}: {}",
            engine_message(&error)
        )
    })?;
    let mut removed = 0;
    let mut failures = Vec::new();
    for container in containers {
        let Some(id) = container.id else { continue };
        // The filter runs on the engine; checking again here means a filter an engine ignored
        // can never cost another owner its containers.
        let labelled_ours = container
            .labels
            .as_ref()
            .is_some_and(|labels| labels.get(OWNER_LABEL).map(String::as_str) == Some(instance_id));
        if !labelled_ours {
            continue;
        }
        let kill = KillContainerOptions {
            signal: "SIGKILL".to_owned(),
        };
        // A kill first, so that the forced removal does not wait out the stop timeout of a
        // process that ignores SIGTERM; a container that no longer runs refuses it harmlessly.
        let _ = client.kill_container(&id, Some(kill)).await;
        let options = RemoveContainerOptions {
            force: true,
            ..Default::default()
        };
        match client.remove_container(&id, Some(options)).await {
            Ok(()) => removed += 1,
            Err(error) if status_code(&error) == Some(404) => {}
            Err(error) => failures.push(format!("{id}: {}", engine_message(&error))),
        }
    }
    if failures.is_empty() {
        Ok(removed)
    } else {
        Err(format!(
            "could not remove {} leftover container(s) on {address} ({}); remove them by hand \
             with `docker rm -f`",
            failures.len(),
            failures.join("; ")
        ))
    }
}

/// How often a listing is tried while the engine reports a state the client cannot read.
const LIST_ATTEMPTS: u32 = 5;

/// Lists containers, trying again when the answer could not be read: podman reports a
/// container that is being stopped in a state (`stopped`) the Engine API does not define, which
/// fails the whole listing until the stop has finished.
pub(crate) async fn list_with_retries(
    client: &bollard::Docker,
    options: ListContainersOptions,
) -> Result<Vec<bollard::models::ContainerSummary>, bollard::errors::Error> {
    let mut attempt = 1;
    loop {
        match client.list_containers(Some(options.clone())).await {
            Err(bollard::errors::Error::JsonDataError { .. }) if attempt < LIST_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            other => return other,
        }
    }
}

async fn remove_with_cli(cli: ContainerCli, owner_filter: &str) -> Result<usize, String> {
    let program = cli.program();
    let not_run = |error: std::io::Error| format!("could not run `{program}`: {error}");
    let label_filter = format!("label={owner_filter}");
    let listed = run_client(cli, &["ps", "-aq", "--filter", &label_filter])
        .await
        .map_err(not_run)?;
    if !listed.status.success() {
        return Err(format!(
            "`{program} ps` could not list the containers labelled {owner_filter}: {}",
            last_line(&listed.stderr).unwrap_or("no error message")
        ));
    }
    let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let mut args = vec!["rm", "-f"];
    // docker's forced removal kills at once; podman's waits out the stop timeout unless told
    // not to, which a process ignoring SIGTERM would make last 10 s per container.
    if cli == ContainerCli::Podman {
        args.extend(["--time", "0"]);
    }
    args.extend(ids.iter().map(String::as_str));
    let removed = run_client(cli, &args).await.map_err(not_run)?;
    if !removed.status.success() {
        return Err(format!(
            "`{program} rm -f` could not remove the leftover containers {}: {}; remove them by \
             hand",
            ids.join(" "),
            last_line(&removed.stderr).unwrap_or("no error message")
        ));
    }
    Ok(ids.len())
}
