//! Principals, roles, permissions, scopes, API-key records and tool access policies, and the
//! decision function that combines them.
//!
//! It is a domain crate: it must never hash with a slow function on the request path, read a
//! store, or call a policy engine itself; stores, token verifiers and external policy deciders
//! are ports that adapters implement.
