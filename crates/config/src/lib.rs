//! The mcpgw configuration schema: parse, validate and expand from text (domain)
