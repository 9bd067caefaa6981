//! The REST API, probes and metrics of mcpgw, on actix-web (adapter)
