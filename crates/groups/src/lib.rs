//! Groups of MCP servers and their selection strategies (domain)
