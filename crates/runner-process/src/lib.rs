//! Runs MCP servers as local processes in their own process groups (adapter)
