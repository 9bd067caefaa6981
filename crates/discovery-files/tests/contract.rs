//! The `filesystem` source against the `DiscoverySource` contract suite of the test kit: the
//! place is a temporary directory, a server is a definitions file in it, and the source polls
//! at its shortest interval so that the suite's waits cover several looks.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use mcpgw_discovery::{DiscoverySourceFactory, SourceDefinition};
use mcpgw_discovery_files::{FilesystemSourceFactory, MIN_WATCH_INTERVAL, SOURCE_TYPE};
use mcpgw_testkit::discovery_source_suite::{
    DiscoverySourceFixture, sample_invalid_definition, sample_server_definition, source_definition,
};
use serde_json::{Map, Value, json};
use tempfile::TempDir;

struct DirectoryFixture {
    directory: TempDir,
}

impl DirectoryFixture {
    fn new() -> Self {
        Self {
            directory: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.directory.path().join(format!("{name}.yaml"))
    }

    fn config_at(&self, path: &std::path::Path) -> Value {
        json!({
            "path": path.display().to_string(),
            "watch_interval_ms": MIN_WATCH_INTERVAL.as_millis() as u64,
        })
    }

    /// Writes `definition` as the single-server shape of a definitions file named after the
    /// server.
    fn write(&self, name: &str, definition: &Map<String, Value>) {
        let text = serde_json::to_string(definition).expect("a definition serialises");
        // JSON is YAML: the file is read with the YAML reader.
        std::fs::write(self.file(name), text).expect("writing a definitions file");
    }
}

#[async_trait]
impl DiscoverySourceFixture for DirectoryFixture {
    fn factory(&self) -> Arc<dyn DiscoverySourceFactory> {
        Arc::new(FilesystemSourceFactory::new())
    }

    fn definition(&self) -> SourceDefinition {
        source_definition(
            "filesystem-0",
            SOURCE_TYPE,
            self.config_at(self.directory.path()),
        )
    }

    fn unreadable_definition(&self) -> SourceDefinition {
        source_definition(
            "filesystem-1",
            SOURCE_TYPE,
            self.config_at(&self.directory.path().join("absent")),
        )
    }

    fn invalid_definitions(&self) -> Vec<(SourceDefinition, String)> {
        let path = self.directory.path().display().to_string();
        vec![
            (
                source_definition("f-2", SOURCE_TYPE, json!({})),
                "path".to_owned(),
            ),
            (
                source_definition("f-3", SOURCE_TYPE, json!({"path": "relative/dir"})),
                "path".to_owned(),
            ),
            (
                source_definition(
                    "f-4",
                    SOURCE_TYPE,
                    json!({"path": path, "watch_interval_ms": 5}),
                ),
                "watch_interval_ms".to_owned(),
            ),
            (
                source_definition("f-5", SOURCE_TYPE, json!({"path": path, "colour": "red"})),
                "colour".to_owned(),
            ),
        ]
    }

    async fn add_server(&self, name: &str) -> Map<String, Value> {
        let definition = sample_server_definition(name);
        self.write(name, &definition);
        definition
    }

    async fn add_invalid_server(&self, name: &str) -> Map<String, Value> {
        let definition = sample_invalid_definition();
        self.write(name, &definition);
        definition
    }

    async fn add_unreadable_server(&self, name: &str) {
        std::fs::write(self.file(name), "mode: [subprocess\n").expect("writing a broken file");
    }

    async fn remove_server(&self, name: &str) {
        std::fs::remove_file(self.file(name)).expect("removing a definitions file");
    }

    fn reports_changes(&self) -> bool {
        true
    }
}

mcpgw_testkit::discovery_source_contract_suite!(DirectoryFixture::new());
