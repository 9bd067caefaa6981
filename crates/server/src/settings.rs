//! What the environment and the listener decide: rate limits, CORS, thread counts, and the
//! refusal to serve an open gateway where others can reach it.

use mcpgw_config::GatewayConfig;
use mcpgw_gateway::Environment;
use mcpgw_gateway::authz::RateLimitPolicy;

use crate::StartError;

/// A variable of `environment` that is set to something other than blanks.
pub(crate) fn non_empty(environment: &Environment, name: &str) -> Option<String> {
    environment(name).filter(|value| !value.trim().is_empty())
}

/// The rate-limit policy: the `rate_limit` section, with `MCP_RATE_LIMIT_RPS` and
/// `MCP_RATE_LIMIT_BURST` winning over it. A value that is not a number stops the start with
/// the reason rather than running with limits nobody asked for.
pub(crate) fn rate_limit_policy(
    config: &GatewayConfig,
    environment: &Environment,
) -> Result<RateLimitPolicy, StartError> {
    let mut policy = RateLimitPolicy {
        requests_per_second: config.rate_limit.rps,
        burst: config.rate_limit.burst,
    };
    if let Some(raw) = non_empty(environment, "MCP_RATE_LIMIT_RPS") {
        policy.requests_per_second = raw
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|rps| rps.is_finite() && *rps >= 0.0)
            .ok_or_else(|| {
                StartError::new(format!(
                    "MCP_RATE_LIMIT_RPS must be a number of requests per second, 0 or more \
                     (0 turns rate limiting off), got `{raw}`"
                ))
            })?;
    }
    if let Some(raw) = non_empty(environment, "MCP_RATE_LIMIT_BURST") {
        policy.burst = raw
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|burst| *burst >= 1)
            .ok_or_else(|| {
                StartError::new(format!(
                    "MCP_RATE_LIMIT_BURST must be a whole number, 1 or more, got `{raw}`"
                ))
            })?;
    }
    if policy.is_enabled() {
        tracing::info!(
            rps = policy.requests_per_second,
            burst = policy.burst,
            "rate limiting is on"
        );
    } else {
        tracing::info!("rate limiting is off");
    }
    Ok(policy)
}

/// CORS from `MCP_CORS_ORIGINS`, `MCP_CORS_METHODS` and `MCP_CORS_HEADERS`; off while
/// `MCP_CORS_ORIGINS` is unset or empty. A bad value stops the start with the reason.
pub(crate) fn cors_settings(
    environment: &Environment,
) -> Result<Option<mcpgw_http_actix::CorsSettings>, StartError> {
    let Some(origins) = non_empty(environment, "MCP_CORS_ORIGINS") else {
        return Ok(None);
    };
    let methods = non_empty(environment, "MCP_CORS_METHODS");
    let headers = non_empty(environment, "MCP_CORS_HEADERS");
    let settings =
        mcpgw_http_actix::CorsSettings::parse(&origins, methods.as_deref(), headers.as_deref())
            .map_err(|error| StartError::new(format!("invalid CORS settings: {error}")))?;
    tracing::info!(origins = %origins, "CORS is on");
    Ok(Some(settings))
}

/// A thread count from the variable `name` of `environment` (a positive integer), else
/// `default`. A value that is not one is logged and the default used.
pub fn thread_count(environment: &Environment, name: &str, default: usize) -> usize {
    match environment(name) {
        Some(raw) => match raw.trim().parse::<usize>() {
            Ok(count) if count > 0 => count,
            _ => {
                tracing::warn!(variable = name, value = %raw, default, "not a positive integer; using the default");
                default
            }
        },
        None => default,
    }
}

/// Where the HTTP listener goes, and whether the operator accepted an open gateway there.
#[derive(Debug, Clone)]
pub struct Listen {
    /// The address or name to listen on (`127.0.0.1` by default).
    pub host: String,
    /// The port; 0 picks a free one.
    pub port: u16,
    /// Listen on an address others can reach although authentication is off.
    pub unsafe_no_auth: bool,
}

impl Listen {
    /// Listening on `host` and `port`; `unsafe_no_auth` accepts an open gateway where others
    /// can reach it.
    pub fn new(host: &str, port: u16, unsafe_no_auth: bool) -> Self {
        Self {
            host: host.to_owned(),
            port,
            unsafe_no_auth,
        }
    }

    /// Whether every address `host` resolves to is a loopback address. A name that does not
    /// resolve counts as open.
    pub fn is_loopback_only(&self) -> bool {
        std::net::ToSocketAddrs::to_socket_addrs(&(self.host.as_str(), self.port))
            .map(|mut addresses| addresses.all(|address| address.ip().is_loopback()))
            .unwrap_or(false)
    }

    /// Binds the listener.
    pub fn bind(&self) -> Result<std::net::TcpListener, StartError> {
        std::net::TcpListener::bind((self.host.as_str(), self.port)).map_err(|error| {
            StartError::new(format!(
                "cannot listen on {}:{}: {error}",
                self.host, self.port
            ))
        })
    }

    /// Refuses the combinations that would hand the gateway to strangers:
    ///
    /// - With authentication off, the gateway listens only where nobody else can reach it (a
    ///   loopback address) unless the operator said `unsafe_no_auth`: an open gateway lets
    ///   anyone who reaches it start, stop and call every MCP server.
    /// - `MCP_CORS_ORIGINS=*` lets every web page read and change what it can reach. With
    ///   authentication off on a non-loopback address that is anyone's gateway from any page,
    ///   so it is refused, `unsafe_no_auth` or not; on loopback the operator's own browser is
    ///   the only one, and it is logged as a warning.
    pub fn refuse_unsafe(
        &self,
        config: &GatewayConfig,
        environment: &Environment,
    ) -> Result<(), StartError> {
        if config.auth.enabled {
            return Ok(());
        }
        let loopback = self.is_loopback_only();
        // A value that does not parse stops the start later, with its own message.
        let any_origin = non_empty(environment, "MCP_CORS_ORIGINS").is_some_and(|origins| {
            mcpgw_http_actix::CorsSettings::parse(&origins, None, None)
                .is_ok_and(|cors| cors.allows_any_origin())
        });
        if any_origin {
            if !loopback {
                return Err(StartError::new(format!(
                    "refusing MCP_CORS_ORIGINS=* on {} with authentication off: any web page \
                     anywhere could start, stop and call every MCP server; list the origins \
                     that need access in MCP_CORS_ORIGINS, or turn authentication on \
                     (auth.enabled: true)",
                    self.host
                )));
            }
            tracing::warn!(
                "MCP_CORS_ORIGINS=* with authentication off: every web page this machine's \
                 browsers show can drive the gateway; list the origins that need it instead"
            );
        }
        if loopback {
            return Ok(());
        }
        if self.unsafe_no_auth {
            tracing::warn!(
                host = %self.host,
                "listening on a non-loopback address with authentication off (--unsafe-no-auth): \
                 anyone who reaches this address can start, stop and call every MCP server"
            );
            return Ok(());
        }
        Err(StartError::new(format!(
            "refusing to listen on {} with authentication off: anyone who reaches it could \
             start, stop and call every MCP server; turn authentication on (auth.enabled: \
             true), listen on 127.0.0.1, or pass --unsafe-no-auth (MCP_UNSAFE_NO_AUTH=1) to do \
             it anyway",
            self.host
        )))
    }
}

/// The environment variable that gives the fleet's shared secret.
pub(crate) const CLUSTER_SECRET_VARIABLE: &str = "MCP_CLUSTER_SECRET";
/// Its older name, from when it signed only input-required request states.
pub(crate) const REQUEST_STATE_SECRET_VARIABLE: &str = "MCP_REQUEST_STATE_SECRET";
/// The shortest shared secret accepted, in characters: anyone holding one signed session id can
/// try secrets offline, so a short one would soon be found.
const MIN_SECRET_CHARS: usize = 32;

/// The secret every replica shares: `cluster.secret_file`'s content (without a trailing
/// newline), else `MCP_CLUSTER_SECRET`, else `MCP_REQUEST_STATE_SECRET`. A file that cannot be
/// read, or a secret shorter than 32 characters, stops the start with the reason.
pub(crate) fn fleet_secret(
    config: &GatewayConfig,
    environment: &Environment,
) -> Result<Option<String>, StartError> {
    let (secret, from) = match &config.cluster.secret_file {
        Some(file) => {
            let text = std::fs::read_to_string(file).map_err(|error| {
                StartError::new(format!(
                    "cannot read cluster.secret_file {file}: {error}; mount the secret there or \
                     leave the key out"
                ))
            })?;
            (
                Some(text.trim_end_matches(['\n', '\r']).to_owned()),
                "cluster.secret_file".to_owned(),
            )
        }
        None => match non_empty(environment, CLUSTER_SECRET_VARIABLE) {
            Some(secret) => (Some(secret), CLUSTER_SECRET_VARIABLE.to_owned()),
            None => (
                non_empty(environment, REQUEST_STATE_SECRET_VARIABLE),
                REQUEST_STATE_SECRET_VARIABLE.to_owned(),
            ),
        },
    };
    match secret {
        Some(secret) if secret.chars().count() < MIN_SECRET_CHARS => Err(StartError::new(format!(
            "the secret of {from} is {} characters long; use at least {MIN_SECRET_CHARS} random \
             characters (for example `openssl rand -hex 32`)",
            secret.chars().count()
        ))),
        secret => Ok(secret),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;

    fn environment(pairs: &[(&str, &str)]) -> Environment {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Arc::new(move |name| map.get(name).cloned())
    }

    fn listen(host: &str, unsafe_no_auth: bool) -> Listen {
        Listen {
            host: host.to_owned(),
            port: 0,
            unsafe_no_auth,
        }
    }

    #[test]
    fn the_environment_wins_over_the_file_and_bad_numbers_stop_the_start() {
        let config = GatewayConfig::default();
        let policy = rate_limit_policy(
            &config,
            &environment(&[("MCP_RATE_LIMIT_RPS", "2.5"), ("MCP_RATE_LIMIT_BURST", "7")]),
        )
        .unwrap();
        assert_eq!((policy.requests_per_second, policy.burst), (2.5, 7));
        // Bad input: a negative rate, a word, a zero burst.
        for (name, value) in [
            ("MCP_RATE_LIMIT_RPS", "-1"),
            ("MCP_RATE_LIMIT_RPS", "fast"),
            ("MCP_RATE_LIMIT_BURST", "0"),
        ] {
            let error = rate_limit_policy(&config, &environment(&[(name, value)])).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
            assert!(error.to_string().contains(value), "{error}");
        }
    }

    #[test]
    fn a_thread_count_that_is_not_a_positive_integer_falls_back_to_the_default() {
        assert_eq!(thread_count(&environment(&[("N", "3")]), "N", 2), 3);
        assert_eq!(thread_count(&environment(&[("N", "0")]), "N", 2), 2);
        assert_eq!(thread_count(&environment(&[("N", "many")]), "N", 2), 2);
        assert_eq!(thread_count(&environment(&[]), "N", 2), 2);
    }

    #[test]
    fn an_open_listener_without_auth_is_refused_unless_the_operator_insists() {
        let config = GatewayConfig::default();
        let quiet = environment(&[]);
        assert!(
            listen("127.0.0.1", false)
                .refuse_unsafe(&config, &quiet)
                .is_ok()
        );
        let refused = listen("0.0.0.0", false)
            .refuse_unsafe(&config, &quiet)
            .unwrap_err();
        assert!(
            refused.to_string().contains("--unsafe-no-auth"),
            "{refused}"
        );
        assert!(
            listen("0.0.0.0", true)
                .refuse_unsafe(&config, &quiet)
                .is_ok()
        );
        // Any origin on an open listener is refused even when the operator insists.
        let any = environment(&[("MCP_CORS_ORIGINS", "*")]);
        assert!(
            listen("0.0.0.0", true)
                .refuse_unsafe(&config, &any)
                .is_err()
        );
        assert!(
            listen("127.0.0.1", false)
                .refuse_unsafe(&config, &any)
                .is_ok()
        );
        let mut with_auth = GatewayConfig::default();
        with_auth.auth.enabled = true;
        assert!(
            listen("0.0.0.0", false)
                .refuse_unsafe(&with_auth, &any)
                .is_ok()
        );
    }

    #[test]
    fn the_fleet_secret_comes_from_the_file_then_the_environment_and_must_be_long() {
        let long = "0123456789abcdef0123456789abcdef";
        let config = GatewayConfig::default();
        assert_eq!(fleet_secret(&config, &environment(&[])).unwrap(), None);
        assert_eq!(
            fleet_secret(
                &config,
                &environment(&[
                    (
                        "MCP_REQUEST_STATE_SECRET",
                        "0123456789abcdef0123456789abcdef-old"
                    ),
                    ("MCP_CLUSTER_SECRET", "0123456789abcdef0123456789abcdef"),
                ])
            )
            .unwrap()
            .as_deref(),
            Some(long),
            "MCP_CLUSTER_SECRET wins over its older name"
        );
        let directory = tempfile::tempdir().unwrap();
        let file = directory.path().join("secret");
        std::fs::write(&file, format!("{long}-from-the-file\n")).unwrap();
        let mut config = GatewayConfig::default();
        config.cluster.secret_file = Some(file.display().to_string());
        assert_eq!(
            fleet_secret(
                &config,
                &environment(&[("MCP_CLUSTER_SECRET", "0123456789abcdef0123456789abcdef")])
            )
            .unwrap(),
            Some(format!("{long}-from-the-file")),
            "the file wins, without its newline"
        );

        // Bad input: a secret too short to resist guessing, and a file that is not there.
        let error = fleet_secret(
            &GatewayConfig::default(),
            &environment(&[("MCP_CLUSTER_SECRET", "short")]),
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("MCP_CLUSTER_SECRET is 5 characters"),
            "{error}"
        );
        config.cluster.secret_file = Some(directory.path().join("missing").display().to_string());
        let error = fleet_secret(&config, &environment(&[])).unwrap_err();
        assert!(error.to_string().contains("cluster.secret_file"), "{error}");
    }
}
