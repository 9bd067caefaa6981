//! Where a role assignment applies: everywhere, or within one tenant.

use std::fmt;

use mcpgw_core::bounded_for_message;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::AuthError;

/// The longest tenant id accepted, in bytes.
pub const TENANT_ID_MAX_BYTES: usize = 128;

/// A tenant, as the tenant claim of a token names it (`tenant_id` by default).
///
/// Any characters but whitespace and control characters, at most 128 bytes; compared exactly.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TenantId(String);

impl TenantId {
    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        let problem = if raw.is_empty() {
            "is empty"
        } else if raw.len() > TENANT_ID_MAX_BYTES {
            "is longer than 128 bytes"
        } else if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
            "contains whitespace or a control character"
        } else {
            return Ok(Self(raw.to_owned()));
        };
        Err(AuthError::InvalidScope {
            scope: bounded_for_message(&format!("tenant:{raw}")),
            problem: format!("the tenant id {problem}"),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for TenantId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TenantId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

/// The scope of a role assignment: `global`, or `tenant:<tenant_id>`, which applies only to
/// requests made within that tenant.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Scope {
    #[default]
    Global,
    Tenant(TenantId),
}

impl Scope {
    pub const GLOBAL: &'static str = "global";
    const TENANT_PREFIX: &'static str = "tenant:";

    pub fn parse(raw: &str) -> Result<Self, AuthError> {
        if raw == Self::GLOBAL {
            return Ok(Scope::Global);
        }
        if let Some(tenant) = raw.strip_prefix(Self::TENANT_PREFIX) {
            return TenantId::parse(tenant).map(Scope::Tenant);
        }
        Err(AuthError::InvalidScope {
            scope: bounded_for_message(raw),
            problem: "a scope is `global` or `tenant:<tenant_id>`".to_owned(),
        })
    }

    /// Whether an assignment in this scope applies to a request made in `request_tenant`
    /// (`None`: the request carries no tenant, so only global assignments apply).
    pub fn applies_within(&self, request_tenant: Option<&TenantId>) -> bool {
        match self {
            Scope::Global => true,
            Scope::Tenant(tenant) => request_tenant == Some(tenant),
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Global => f.write_str(Self::GLOBAL),
            Scope::Tenant(tenant) => write!(f, "{}{tenant}", Self::TENANT_PREFIX),
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = AuthError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::parse(raw)
    }
}

impl Serialize for Scope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Scope {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use mcpgw_core::ErrorKind;

    use super::*;

    fn tenant(raw: &str) -> TenantId {
        TenantId::parse(raw).unwrap()
    }

    #[test]
    fn parses_global_and_tenant_scopes() {
        assert_eq!(Scope::parse("global").unwrap(), Scope::Global);
        assert_eq!(Scope::default(), Scope::Global);
        assert_eq!(
            Scope::parse("tenant:acme").unwrap(),
            Scope::Tenant(tenant("acme"))
        );
        // A tenant id may itself hold a colon (URNs).
        assert_eq!(
            Scope::parse("tenant:urn:t:1").unwrap(),
            Scope::Tenant(tenant("urn:t:1"))
        );
        for raw in ["global", "tenant:acme", "tenant:9f1c-42"] {
            assert_eq!(Scope::parse(raw).unwrap().to_string(), raw);
        }
    }

    #[test]
    fn refuses_other_scopes_as_invalid_input() {
        let long_tenant = format!("tenant:{}", "t".repeat(TENANT_ID_MAX_BYTES + 1));
        for bad in [
            "",
            "Global",
            "GLOBAL",
            "tenant",
            "tenant:",
            "tenants:acme",
            "org:acme",
            "tenant:a b",
            "tenant:a\tb",
            long_tenant.as_str(),
        ] {
            let error = Scope::parse(bad).expect_err(bad);
            assert_eq!(error.kind(), ErrorKind::Invalid, "{bad}");
            assert!(error.to_string().starts_with("scope `"), "{error}");
        }
        assert_eq!(
            Scope::parse("org:acme").unwrap_err().to_string(),
            "scope `org:acme` is not valid: a scope is `global` or `tenant:<tenant_id>`"
        );
    }

    #[test]
    fn a_tenant_scope_applies_only_within_its_tenant() {
        let acme = tenant("acme");
        let beta = tenant("beta");
        let in_acme = Scope::Tenant(acme.clone());
        // (scope, request tenant, applies)
        let table = [
            (&Scope::Global, None, true),
            (&Scope::Global, Some(&acme), true),
            (&in_acme, Some(&acme), true),
            (&in_acme, Some(&beta), false),
            (&in_acme, None, false),
        ];
        for (scope, request_tenant, expected) in table {
            assert_eq!(
                scope.applies_within(request_tenant),
                expected,
                "{scope} in {request_tenant:?}"
            );
        }
        // Tenants compare exactly: no case folding.
        assert!(!in_acme.applies_within(Some(&tenant("ACME"))));
    }

    #[test]
    fn scopes_travel_as_strings() {
        let scope: Scope = serde_json::from_str("\"tenant:acme\"").unwrap();
        assert_eq!(serde_json::to_string(&scope).unwrap(), "\"tenant:acme\"");
        assert!(serde_json::from_str::<Scope>("\"everywhere\"").is_err());
    }
}
