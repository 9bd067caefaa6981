//! SQLite implementations of the mcpgw store ports (adapter)
