//! A configuration as it may be shown: secrets replaced by a mask.

use crate::schema::GatewayConfig;

/// What a secret value is shown as.
pub const SECRET_MASK: &str = "***";

/// `config` as JSON with every secret replaced by [`SECRET_MASK`].
pub fn sanitized(config: &GatewayConfig) -> serde_json::Value {
    let _ = config;
    todo!("written with the configuration view")
}
