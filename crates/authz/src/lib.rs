//! Principals, roles, permissions and tool access policies (domain)
