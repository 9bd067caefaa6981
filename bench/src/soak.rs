//! The `soak [SECONDS] [RUNNING] [REGISTERED]` scenario: the command line around the testkit's
//! soak driver ([`mcpgw_fixtures::soak`]), run against the release binaries beside the harness.
//!
//! Unlike the other scenarios it asserts: the driver checks its resource bounds (no leaked
//! processes, fds back near their baseline, bounded RSS growth, a clean exit on SIGTERM) and the
//! harness exits non-zero when one is broken or a failure the injected chaos does not explain
//! occurred.

use std::time::Duration;

use anyhow::{Context, bail};
use mcpgw_fixtures::soak::{SoakOptions, run};

pub fn run_scenario() -> anyhow::Result<()> {
    let argument = |index: usize, default: u64, name: &str| -> anyhow::Result<u64> {
        match std::env::args().nth(index) {
            Some(text) => text
                .parse()
                .with_context(|| format!("{name} must be a whole number, got `{text}`")),
            None => Ok(default),
        }
    };
    let seconds = argument(2, 600, "SECONDS")?;
    let running = usize::try_from(argument(3, 200, "RUNNING")?)?;
    let registered = usize::try_from(argument(4, 1000, "REGISTERED")?)?;
    if running == 0 || registered < running {
        bail!("RUNNING must be at least 1 and REGISTERED at least RUNNING");
    }
    let options = SoakOptions::new(
        crate::sibling_binary("mcpgw")?,
        crate::sibling_binary("mcpgw-fixture-server")?,
        Duration::from_secs(seconds),
        running,
        registered,
    )
    .verbose(true);
    let report = run(&options).map_err(|error| anyhow::anyhow!("{error}"))?;
    if report.unexpected_errors() > 0 {
        bail!(
            "{} failures that the injected crashes and stops do not explain (see `unexpected:` above)",
            report.unexpected_errors()
        );
    }
    Ok(())
}
