//! MCP protocol sessions for mcpgw on rmcp, the official Rust SDK (adapter)
