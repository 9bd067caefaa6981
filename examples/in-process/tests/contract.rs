//! The in-process launcher proves itself with the launcher port's suite, as any adapter of a
//! downstream crate would: one line, with a fixture that names the servers to launch.

use std::sync::Arc;

use mcpgw_core::{CustomLaunch, LaunchSpec, ServerId, ServerLauncher, ServerSpec};
use mcpgw_example_in_process::InProcessLauncher;
use mcpgw_testkit::server_launcher_suite::ServerLauncherFixture;
use serde_json::json;

struct Greeters;

fn greeter(settings: serde_json::Value) -> ServerSpec {
    let serde_json::Value::Object(settings) = settings else {
        unreachable!("the settings are written as objects")
    };
    let mut spec = ServerSpec::subprocess(ServerId::parse("greeter").unwrap(), Vec::new());
    spec.launch = LaunchSpec::Custom(CustomLaunch::new("in_process", settings).unwrap());
    spec
}

impl ServerLauncherFixture for Greeters {
    fn launcher(&self) -> Arc<dyn ServerLauncher> {
        Arc::new(InProcessLauncher)
    }

    fn working(&self) -> ServerSpec {
        greeter(json!({"greeting": "Hello"}))
    }

    /// Settings the mode refuses (a stored definition written under other rules).
    fn failing(&self) -> ServerSpec {
        greeter(json!({"greeting": 7}))
    }

    fn unsupported(&self) -> ServerSpec {
        ServerSpec::subprocess(ServerId::parse("local").unwrap(), vec!["true".into()])
    }
}

mcpgw_testkit::server_launcher_contract_suite!(Greeters);
