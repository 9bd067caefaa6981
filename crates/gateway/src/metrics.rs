//! Names of the gateway's Prometheus metrics that the application layer records, through the
//! `metrics` facade (the HTTP adapter installs the exporter and records the HTTP ones).
//!
//! Label values come only from bounded sets: server and group ids (the registry), tool names
//! from the catalogue (never the name a caller sent), event types, states, result words.

pub const MCP_SERVER_UP: &str = "mcpgw_mcp_server_up";
pub const MCP_SERVER_STATE: &str = "mcpgw_mcp_server_state";
pub const MCP_SERVER_STARTS_TOTAL: &str = "mcpgw_mcp_server_starts_total";
pub const MCP_SERVER_STOPS_TOTAL: &str = "mcpgw_mcp_server_stops_total";
pub const MCP_SERVER_START_DURATION_SECONDS: &str = "mcpgw_mcp_server_start_duration_seconds";
pub const TOOL_CALLS_TOTAL: &str = "mcpgw_tool_calls_total";
pub const TOOL_CALL_DURATION_SECONDS: &str = "mcpgw_tool_call_duration_seconds";
pub const HEALTH_CHECKS_TOTAL: &str = "mcpgw_health_checks_total";
pub const RATE_LIMIT_HITS_TOTAL: &str = "mcpgw_rate_limit_hits_total";
pub const RATE_LIMIT_BUCKETS: &str = "mcpgw_rate_limit_buckets";
pub const AUTH_DECISIONS_TOTAL: &str = "mcpgw_auth_decisions_total";
pub const WEBSOCKET_CLIENTS: &str = "mcpgw_websocket_clients";
pub const EVENTS_PUBLISHED_TOTAL: &str = "mcpgw_events_published_total";
pub const EVENT_LOG_EVENTS: &str = "mcpgw_event_log_events";
pub const EVENT_LOG_DROPPED_TOTAL: &str = "mcpgw_event_log_dropped_total";
pub const EVENT_LOG_COMPACTIONS_TOTAL: &str = "mcpgw_event_log_compactions_total";
