//! What the exporter does: the `telemetry.traces` section with the standard `OTEL_*`
//! environment variables laid over it (a variable that is set wins, as in every OpenTelemetry
//! SDK). Resolution is a pure function of the section and a variable lookup, so it is tested
//! without touching the process environment.

use std::collections::BTreeMap;
use std::time::Duration;

use mcpgw_config::{OtlpProtocol, SamplerName, TracesConfig};

/// The resolved settings of trace export.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    pub enabled: bool,
    /// The full URL spans are sent to: `.../v1/traces` for OTLP/HTTP, the collector's address
    /// for gRPC.
    pub endpoint: String,
    pub protocol: OtlpProtocol,
    pub headers: BTreeMap<String, String>,
    pub sampler: SamplerName,
    pub ratio: f64,
    pub service_name: String,
    pub timeout: Duration,
}

/// A variable whose value the exporter cannot use: a startup error that names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{variable}={value:?} cannot be used: {reason}")]
pub struct SettingsError {
    pub variable: &'static str,
    pub value: String,
    pub reason: String,
}

pub(crate) fn invalid(
    variable: &'static str,
    value: &str,
    reason: impl Into<String>,
) -> SettingsError {
    SettingsError {
        variable,
        value: value.to_owned(),
        reason: reason.into(),
    }
}

/// The first of `names` that is set (and not blank), with its name.
fn first_set(
    env: &dyn Fn(&str) -> Option<String>,
    names: &[&'static str],
) -> Option<(&'static str, String)> {
    names.iter().find_map(|name| {
        env(name)
            .filter(|value| !value.trim().is_empty())
            .map(|value| (*name, value))
    })
}

impl TraceSettings {
    /// The section's settings with the variables `env` finds laid over it.
    pub fn resolve(
        config: &TracesConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let mut enabled = config.enabled;
        if let Some((name, value)) = first_set(env, &["OTEL_TRACES_EXPORTER"]) {
            enabled = match value.trim() {
                "otlp" => true,
                "none" => false,
                _ => {
                    return Err(invalid(
                        name,
                        &value,
                        "the gateway exports traces over OTLP only: set `otlp`, or `none` to \
                         turn tracing off",
                    ));
                }
            };
        }
        if let Some((name, value)) = first_set(env, &["OTEL_SDK_DISABLED"]) {
            match value.trim().to_ascii_lowercase().as_str() {
                "true" => enabled = false,
                "false" => {}
                _ => return Err(invalid(name, &value, "must be `true` or `false`")),
            }
        }

        let protocol = match first_set(
            env,
            &[
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ],
        ) {
            Some((name, value)) => OtlpProtocol::parse(&value).ok_or_else(|| {
                invalid(
                    name,
                    &value,
                    "the gateway exports `http/protobuf` or `grpc`",
                )
            })?,
            None => config.protocol,
        };

        // A signal's own endpoint is used as it is; the general one is a base URL to which
        // OTLP/HTTP appends the signal's path (as is the section's `endpoint`).
        let endpoint = match first_set(env, &["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]) {
            Some((name, value)) => checked_url(name, value.trim())?.to_owned(),
            None => {
                let base = match first_set(env, &["OTEL_EXPORTER_OTLP_ENDPOINT"]) {
                    Some((name, value)) => checked_url(name, value.trim())?.to_owned(),
                    None => config
                        .endpoint
                        .clone()
                        .unwrap_or_else(|| protocol.default_endpoint().to_owned()),
                };
                match protocol {
                    OtlpProtocol::HttpProtobuf => {
                        format!("{}/v1/traces", base.trim_end_matches('/'))
                    }
                    OtlpProtocol::Grpc => base,
                }
            }
        };

        let mut headers = config.headers.clone();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            if let Some((name, value)) = first_set(env, &[name]) {
                for (key, header) in parse_headers(name, &value)? {
                    headers.insert(key, header);
                }
            }
        }

        let timeout = match first_set(
            env,
            &[
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ],
        ) {
            Some((name, value)) => {
                let millis: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(name, &value, "must be a whole number of milliseconds"))?;
                if millis == 0 {
                    return Err(invalid(name, &value, "must be at least 1 millisecond"));
                }
                Duration::from_millis(millis)
            }
            None => Duration::from_secs(config.timeout_s),
        };

        let sampler = match first_set(env, &["OTEL_TRACES_SAMPLER"]) {
            Some((name, value)) => SamplerName::parse(&value).ok_or_else(|| {
                invalid(
                    name,
                    &value,
                    format!("must be one of {}", SamplerName::NAMES.join(", ")),
                )
            })?,
            None => config.sampler,
        };
        let ratio = match first_set(env, &["OTEL_TRACES_SAMPLER_ARG"]) {
            Some((name, value)) => {
                let ratio: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(name, &value, "must be a ratio such as 0.01"))?;
                if !(0.0..=1.0).contains(&ratio) {
                    return Err(invalid(name, &value, "must be between 0.0 and 1.0"));
                }
                ratio
            }
            None => config.sampler_arg,
        };

        let service_name = match first_set(env, &["OTEL_SERVICE_NAME"]) {
            Some((_, value)) => value.trim().to_owned(),
            None => env("OTEL_RESOURCE_ATTRIBUTES")
                .and_then(|attributes| service_name_attribute(&attributes))
                .unwrap_or_else(|| config.service_name.clone()),
        };

        Ok(Self {
            enabled,
            endpoint,
            protocol,
            headers,
            sampler,
            ratio,
            service_name,
            timeout,
        })
    }
}

fn checked_url<'a>(variable: &'static str, value: &'a str) -> Result<&'a str, SettingsError> {
    if value.starts_with("http://") || value.starts_with("https://") {
        Ok(value)
    } else {
        Err(invalid(
            variable,
            value,
            "must be an http:// or https:// URL, such as http://localhost:4318",
        ))
    }
}

/// `key=value,key2=value2`, values percent-decoded, as the OTLP exporter variables write them.
pub(crate) fn parse_headers(
    variable: &'static str,
    value: &str,
) -> Result<Vec<(String, String)>, SettingsError> {
    let mut headers = Vec::new();
    for pair in value.split(',').filter(|pair| !pair.trim().is_empty()) {
        let Some((key, header)) = pair.split_once('=') else {
            return Err(invalid(
                variable,
                "(not shown)",
                format!(
                    "entry {} has no `=`; write key=value pairs separated by commas",
                    headers.len() + 1
                ),
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(invalid(
                variable,
                "(not shown)",
                "an entry has an empty key",
            ));
        }
        let decoded = percent_decode(header.trim()).ok_or_else(|| {
            invalid(
                variable,
                "(not shown)",
                format!("the value of `{key}` has a broken %-escape"),
            )
        })?;
        headers.push((key.to_ascii_lowercase(), decoded));
    }
    Ok(headers)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The `service.name` of an `OTEL_RESOURCE_ATTRIBUTES` value, if it names one.
fn service_name_attribute(attributes: &str) -> Option<String> {
    attributes.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key.trim() == "service.name")
            .then(|| percent_decode(value.trim()))
            .flatten()
            .filter(|name| !name.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn resolve(config: &TracesConfig, vars: &[(&str, &str)]) -> Result<TraceSettings, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
            .collect();
        TraceSettings::resolve(config, &|name| vars.get(name).cloned())
            .map_err(|error| error.to_string())
    }

    #[test]
    fn the_section_alone_decides_without_variables() {
        let settings = resolve(&TracesConfig::default(), &[]).expect("valid");
        assert!(!settings.enabled);
        assert_eq!(settings.endpoint, "http://localhost:4318/v1/traces");
        assert_eq!(settings.sampler, SamplerName::ParentbasedAlwaysOn);
        assert_eq!(settings.service_name, "mcpgw");
        assert_eq!(settings.timeout, Duration::from_secs(10));

        let config = TracesConfig {
            enabled: true,
            endpoint: Some("http://collector:4317".into()),
            protocol: OtlpProtocol::Grpc,
            ..TracesConfig::default()
        };
        let settings = resolve(&config, &[]).expect("valid");
        assert!(settings.enabled);
        assert_eq!(settings.endpoint, "http://collector:4317");
    }

    #[test]
    fn the_exporter_variable_alone_turns_tracing_on_and_variables_win() {
        let settings = resolve(
            &TracesConfig::default(),
            &[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key=a%20b,Tenant=t1"),
                ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "tenant=t2"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
                ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
                (
                    "OTEL_RESOURCE_ATTRIBUTES",
                    "deployment.environment=prod,service.name=edge",
                ),
            ],
        )
        .expect("valid");
        assert!(settings.enabled);
        assert_eq!(settings.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(settings.headers["x-api-key"], "a b");
        assert_eq!(settings.headers["tenant"], "t2");
        assert_eq!(settings.timeout, Duration::from_millis(2500));
        assert_eq!(settings.sampler, SamplerName::ParentbasedTraceidratio);
        assert!((settings.ratio - 0.01).abs() < f64::EPSILON);
        assert_eq!(settings.service_name, "edge");

        let settings = resolve(
            &TracesConfig {
                enabled: true,
                ..TracesConfig::default()
            },
            &[
                ("OTEL_TRACES_EXPORTER", "none"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ("OTEL_SERVICE_NAME", "gw"),
            ],
        )
        .expect("valid");
        assert!(!settings.enabled);
        assert_eq!(settings.endpoint, "http://c:4318/custom");
        assert_eq!(settings.protocol, OtlpProtocol::Grpc);
        assert_eq!(settings.service_name, "gw");

        let disabled = resolve(
            &TracesConfig::default(),
            &[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_SDK_DISABLED", "true"),
            ],
        )
        .expect("valid");
        assert!(!disabled.enabled);
    }

    #[test]
    fn unusable_variables_are_errors_that_name_them() {
        // Bad input tried: another exporter, an unknown protocol, a sampler name that does
        // not exist, a ratio out of range and one that is no number, an endpoint without a
        // scheme, a timeout that is no number, a header entry without `=`, a broken escape.
        for (variable, value) in [
            ("OTEL_TRACES_EXPORTER", "zipkin"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_TRACES_SAMPLER", "sometimes"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_TRACES_SAMPLER_ARG", "half"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "k=%zz"),
            ("OTEL_SDK_DISABLED", "maybe"),
        ] {
            let error = resolve(&TracesConfig::default(), &[(variable, value)])
                .expect_err(&format!("{variable}={value} must be refused"));
            assert!(error.starts_with(variable), "{error}");
        }
        // A header's value is a credential: an error never shows it.
        let error = resolve(
            &TracesConfig::default(),
            &[("OTEL_EXPORTER_OTLP_HEADERS", "authorization=%zzsecret")],
        )
        .expect_err("a broken escape");
        assert!(!error.contains("secret"), "{error}");
    }
}
