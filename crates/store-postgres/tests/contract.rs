//! The PostgreSQL store against every contract suite of the state ports, on a real PostgreSQL
//! server: one server for this test binary, a new database for each case.

use mcpgw_store_postgres::{PostgresSettings, PostgresStore};
use mcpgw_testkit::postgres::TempPostgres;

/// A store on a new, empty database of the shared server.
async fn fresh_store() -> PostgresStore {
    let url = TempPostgres::shared().fresh_database();
    PostgresStore::connect(PostgresSettings::new(url))
        .await
        .unwrap_or_else(|error| panic!("connecting to a fresh database failed: {error}"))
}

mod servers {
    mcpgw_testkit::server_repository_contract_suite!(super::fresh_store().await);
}

mod groups {
    mcpgw_testkit::group_repository_contract_suite!(super::fresh_store().await);
}

mod tool_lists {
    use mcpgw_store_postgres::PostgresToolListStore;

    mcpgw_testkit::tool_list_store_contract_suite!(PostgresToolListStore::new(
        super::fresh_store().await
    ));
}

mod tool_pins {
    use mcpgw_store_postgres::PostgresToolPinStore;

    mcpgw_testkit::tool_pin_store_contract_suite!(PostgresToolPinStore::new(
        super::fresh_store().await
    ));
}

mod endpoints {
    use mcpgw_store_postgres::PostgresEndpointRepository;

    mcpgw_testkit::endpoint_repository_contract_suite!(PostgresEndpointRepository::new(
        super::fresh_store().await
    ));
}

mod discovery {
    use mcpgw_store_postgres::PostgresDiscoveryStore;

    mcpgw_testkit::discovery_store_contract_suite!(PostgresDiscoveryStore::new(
        super::fresh_store().await
    ));
}

mod users {
    mcpgw_testkit::user_store_contract_suite!(super::fresh_store().await);
}

mod auth {
    mcpgw_testkit::auth_store_contract_suite!(super::fresh_store().await);
}
