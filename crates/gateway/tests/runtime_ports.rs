//! The gateway's runtime adapters keep the promises of their ports: tokio's clock and task
//! spawner, the operating system's secure random bytes, and the seeded generator of the
//! `random` strategy.

mod clock {
    mcpgw_testkit::clock_contract_suite!(mcpgw_testkit::runtime_suites::RealTime::new(
        mcpgw_gateway::TokioClock::default()
    ));
}

mod task_spawner {
    mcpgw_testkit::task_spawner_contract_suite!(mcpgw_gateway::TokioSpawner::current());
}

mod secret_source {
    mcpgw_testkit::secret_source_contract_suite!(mcpgw_gateway::OsSecrets);
}

mod random_source {
    mcpgw_testkit::random_source_contract_suite!(mcpgw_gateway::SeededRandom::from_entropy());
}

mod random_source_with_a_fixed_seed {
    mcpgw_testkit::random_source_contract_suite!(mcpgw_gateway::SeededRandom::with_seed(7));
}
