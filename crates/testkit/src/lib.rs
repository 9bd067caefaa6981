//! Fakes of every mcpgw port, contract suites for adapters, and a fixture MCP server
