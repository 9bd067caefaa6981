//! Reads, backs up and watches the configuration file: the adapter of `mcpgw_config::ConfigFile`.
