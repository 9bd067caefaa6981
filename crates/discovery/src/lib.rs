//! Discovery of MCP servers from sources, with approval and quarantine (domain)
