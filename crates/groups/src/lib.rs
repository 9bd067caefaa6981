//! Groups of MCP servers behind one id, and the strategies that pick a member for each call.
//!
//! This crate is where load balancing and rotation will be decided: which members are in
//! rotation, which one takes the next call, and whether the group as a whole is healthy. It is
//! a domain crate: it must never do I/O, read a clock or draw randomness itself; those arrive
//! through ports so that every strategy can be tested deterministically.
