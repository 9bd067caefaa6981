//! The in-memory observers of the domain and of this kit against the `EventObserver` suite.

mod invocation_history {
    mcpgw_testkit::event_observer_contract_suite!(std::sync::Arc::new(
        mcpgw_core::InMemoryInvocationHistory::new(100)
    ));
}

mod in_memory_event_log {
    mcpgw_testkit::event_observer_contract_suite!(std::sync::Arc::new(
        mcpgw_testkit::event_log::InMemoryEventLog::new()
    ));
}
