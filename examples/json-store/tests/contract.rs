//! The JSON file repository passes the suite of tests every `ServerRepository` must pass.

use mcpgw_example_json_store::JsonFileRepository;
use mcpgw_testkit::repository_suite::RepositoryWithGuard;

fn temporary_repository() -> RepositoryWithGuard<JsonFileRepository, tempfile::TempDir> {
    let directory = tempfile::tempdir().unwrap();
    let repository = JsonFileRepository::new(directory.path().join("servers.json"));
    RepositoryWithGuard::new(repository, directory)
}

mcpgw_testkit::server_repository_contract_suite!(temporary_repository());
