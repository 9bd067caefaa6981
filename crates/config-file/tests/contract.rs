//! The file adapter against the `ConfigFile` contract suite of the test kit, polling at the
//! shortest interval it accepts so that the suite's waits cover several looks.

use std::path::Path;

use mcpgw_config_file::{FileConfig, MIN_WATCH_INTERVAL};

fn open(path: &Path) -> FileConfig {
    FileConfig::new(path).with_watch_interval(MIN_WATCH_INTERVAL)
}

mcpgw_testkit::config_file_contract_suite!(open);
