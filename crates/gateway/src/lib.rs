//! The mcpgw application layer: use cases that wire the domain crates through their ports
