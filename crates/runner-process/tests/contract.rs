//! The process runner against the `ProcessSpawner` contract suite of the test kit, on real
//! processes started with `sh -c`.

use std::collections::BTreeMap;
use std::sync::Arc;

use mcpgw_core::{LaunchSpec, ProcessSpawner};
use mcpgw_runner_process::{ProcessRunner, ProcessRunnerSettings};
use mcpgw_testkit::process_spawner_suite::ProcessSpawnerFixture;

struct LocalProcesses;

fn subprocess(command: &[&str]) -> LaunchSpec {
    LaunchSpec::Subprocess {
        command: command.iter().map(|word| (*word).to_owned()).collect(),
        env: BTreeMap::new(),
        cwd: None,
    }
}

impl ProcessSpawnerFixture for LocalProcesses {
    fn spawner(&self) -> Arc<dyn ProcessSpawner> {
        Arc::new(ProcessRunner::new(ProcessRunnerSettings::default()))
    }

    fn shell(&self, script: &str) -> LaunchSpec {
        subprocess(&["sh", "-c", script])
    }

    fn missing_program(&self) -> LaunchSpec {
        subprocess(&["/nonexistent/mcpgw-no-such-server", "--stdio"])
    }

    fn unsupported(&self) -> LaunchSpec {
        LaunchSpec::Remote {
            endpoint: "http://127.0.0.1:9/mcp".to_owned(),
            headers: BTreeMap::new(),
            token_exchange: None,
        }
    }
}

mcpgw_testkit::process_spawner_contract_suite!(LocalProcesses);
