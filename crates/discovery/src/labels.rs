//! A container's `mcp.gateway.*` labels, read as a discovery candidate.
