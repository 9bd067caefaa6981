//! What one container must look like, read once from a `LaunchSpec::Docker` and shared by the
//! Engine API and the command-line backends, so both run the same hardened container.

use std::collections::BTreeMap;
use std::io::Read;

use mcpgw_core::{LaunchError, LaunchSpec, ServerId};

/// The label every container this crate runs carries, with the gateway instance id as value:
/// it is how a restarted gateway finds (and removes) what an earlier run left behind.
pub const OWNER_LABEL: &str = "mcp.gateway.owner";
/// The label naming the server a container runs for, so an operator can tell them apart.
pub const SERVER_LABEL: &str = "mcp.gateway.server";

/// The network a container joins when the spec names none: no network at all.
const DEFAULT_NETWORK: &str = "none";

/// A validated, engine-neutral description of the container to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ContainerSpec {
    pub(crate) name: String,
    pub(crate) image: String,
    /// Replaces the image's default command when not empty.
    pub(crate) args: Vec<String>,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) network: String,
    /// The text as written (the CLIs parse it themselves) and its value in bytes.
    pub(crate) memory: Option<(String, i64)>,
    /// The text as written and its value in billionths of a CPU.
    pub(crate) cpus: Option<(String, i64)>,
    pub(crate) read_only: bool,
    pub(crate) volumes: Vec<String>,
}

impl ContainerSpec {
    /// Reads a docker launch spec; anything else, or a malformed `memory`/`cpus`, is refused.
    ///
    /// `client` names what runs the container (`docker`, `podman`) in error messages.
    pub(crate) fn from_launch(
        server_id: &ServerId,
        instance_id: &str,
        launch: &LaunchSpec,
        client: &str,
    ) -> Result<Self, LaunchError> {
        let LaunchSpec::Docker {
            image,
            args,
            env,
            network,
            memory,
            cpus,
            read_only,
            volumes,
            engine: _,
        } = launch
        else {
            return Err(LaunchError::UnsupportedMode(launch.mode().to_owned()));
        };
        let refuse = |reason: String| LaunchError::SpawnFailed {
            command: format!("{client} run {image}"),
            reason,
        };
        if image.trim().is_empty() {
            return Err(refuse(
                "the image is empty; set `image` to the image to run".to_owned(),
            ));
        }
        // A command-line client would read a leading dash as one of its own options.
        if image.starts_with('-') {
            return Err(refuse(
                "an image name cannot start with `-`; check `image`".to_owned(),
            ));
        }
        let memory = match memory.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some((text.to_owned(), parse_memory(text).map_err(refuse)?)),
        };
        let cpus = match cpus.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => Some((text.to_owned(), parse_cpus(text).map_err(refuse)?)),
        };
        let network = match network.trim() {
            "" => DEFAULT_NETWORK.to_owned(),
            named => named.to_owned(),
        };
        let labels = BTreeMap::from([
            (OWNER_LABEL.to_owned(), instance_id.to_owned()),
            (SERVER_LABEL.to_owned(), server_id.as_str().to_owned()),
        ]);
        Ok(Self {
            name: container_name(server_id),
            image: image.clone(),
            args: args.clone(),
            env: env.clone(),
            labels,
            network,
            memory,
            cpus,
            read_only: *read_only,
            volumes: volumes.clone(),
        })
    }
}

/// `mcpgw-<server id>-<8 random hex digits>`: readable in `docker ps`, and unique, so that a
/// restart never collides with a container the previous run of the server has not yet lost.
/// Server ids only hold characters a container name accepts.
pub(crate) fn container_name(server_id: &ServerId) -> String {
    format!("mcpgw-{}-{:08x}", server_id.as_str(), random_u32())
}

fn random_u32() -> u32 {
    let mut bytes = [0u8; 4];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut source| source.read_exact(&mut bytes))
        .is_ok()
    {
        return u32::from_ne_bytes(bytes);
    }
    // Without /dev/urandom, the per-process random hash keys plus the time still make a
    // collision between two live containers of one server very unlikely.
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    if let Ok(since_epoch) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(since_epoch.as_nanos());
    }
    hasher.finish() as u32
}

/// Reads a size the way `docker run --memory` does: a number, optionally with a fraction,
/// then an optional binary unit `b`, `k`, `m`, `g`, `t` or `p` (any case, optionally followed by
/// `b` or `ib`: `512m`, `1g`, `1.5GiB`, `100k`, `1048576`). Answers the size in bytes.
pub(crate) fn parse_memory(text: &str) -> Result<i64, String> {
    let invalid = || {
        format!(
            "`{text}` is not a memory size; write a number of bytes or a number with a unit \
             (k, m, g), like 512m or 1g"
        )
    };
    let trimmed = text.trim();
    let number_end = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(number_end);
    if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
        return Err(invalid());
    }
    let value: f64 = number.parse().map_err(|_| invalid())?;
    let unit = unit.trim_start().to_ascii_lowercase();
    let power = match unit.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 1,
        "m" | "mb" | "mib" => 2,
        "g" | "gb" | "gib" => 3,
        "t" | "tb" | "tib" => 4,
        "p" | "pb" | "pib" => 5,
        _ => return Err(invalid()),
    };
    let bytes = value * 1024f64.powi(power);
    if bytes < 1.0 {
        return Err(format!(
            "the memory limit `{text}` is zero; give a positive size like 512m, or leave \
             `memory` out for no limit"
        ));
    }
    if bytes >= i64::MAX as f64 {
        return Err(format!(
            "the memory limit `{text}` is too large; give a size like 512m or 4g"
        ));
    }
    Ok(bytes as i64)
}

/// Reads a CPU share the way `docker run --cpus` does (`1`, `0.5`, `1.5`) into billionths of a
/// CPU, exactly (no floating point), so `1.5` is 1_500_000_000.
pub(crate) fn parse_cpus(text: &str) -> Result<i64, String> {
    let invalid = || {
        format!("`{text}` is not a number of CPUs; write a positive decimal number like 1 or 0.5")
    };
    let trimmed = text.trim();
    let (whole, fraction) = trimmed.split_once('.').unwrap_or((trimmed, ""));
    let all_digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !all_digits(whole) || !all_digits(fraction) {
        return Err(invalid());
    }
    if fraction.len() > 9 {
        return Err(format!(
            "`{text}` has more than nine decimal places; round the number of CPUs"
        ));
    }
    let too_large = || format!("`{text}` CPUs is more than any machine has; give a smaller number");
    let whole: i64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_large())?
    };
    let mut fraction_nanos: i64 = 0;
    for (position, digit) in fraction.bytes().enumerate() {
        let place = 10i64.pow(8 - position as u32);
        fraction_nanos += i64::from(digit - b'0') * place;
    }
    let nanos = whole
        .checked_mul(1_000_000_000)
        .and_then(|nanos| nanos.checked_add(fraction_nanos))
        .ok_or_else(too_large)?;
    if nanos == 0 {
        return Err(format!(
            "`{text}` CPUs is zero; give a positive number like 0.5, or leave `cpus` out for no \
             limit"
        ));
    }
    Ok(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_read_like_docker_run() {
        assert_eq!(parse_memory("1048576"), Ok(1_048_576));
        assert_eq!(parse_memory("100k"), Ok(102_400));
        assert_eq!(parse_memory("512m"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_memory("512M"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_memory("1g"), Ok(1024 * 1024 * 1024));
        assert_eq!(parse_memory("1GiB"), Ok(1024 * 1024 * 1024));
        assert_eq!(parse_memory("2mb"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_memory("1.5g"), Ok(1536 * 1024 * 1024));
        assert_eq!(parse_memory("64b"), Ok(64));
    }

    #[test]
    fn malformed_or_zero_memory_sizes_are_refused_with_an_example() {
        for bad in ["", "m", "12q", "1..5m", ".5g", "-1m", "1 g b", "ten"] {
            let error = parse_memory(bad).unwrap_err();
            assert!(error.contains("512m"), "{bad}: {error}");
        }
        assert!(parse_memory("0").unwrap_err().contains("zero"));
        assert!(parse_memory("99999999p").unwrap_err().contains("too large"));
    }

    #[test]
    fn cpus_become_exact_billionths() {
        assert_eq!(parse_cpus("1"), Ok(1_000_000_000));
        assert_eq!(parse_cpus("1.5"), Ok(1_500_000_000));
        assert_eq!(parse_cpus("0.25"), Ok(250_000_000));
        assert_eq!(parse_cpus(".5"), Ok(500_000_000));
        assert_eq!(parse_cpus("2."), Ok(2_000_000_000));
        assert_eq!(parse_cpus("0.000000001"), Ok(1));
        // Binary floating point would make this 299_999_999.
        assert_eq!(parse_cpus("0.3"), Ok(300_000_000));
    }

    #[test]
    fn malformed_or_zero_cpus_are_refused() {
        for bad in ["", ".", "one", "1,5", "-1", "1.5.1", "1e3"] {
            assert!(
                parse_cpus(bad)
                    .unwrap_err()
                    .contains("not a number of CPUs"),
                "{bad}"
            );
        }
        assert!(parse_cpus("0.0").unwrap_err().contains("zero"));
        assert!(parse_cpus("0.0000000001").unwrap_err().contains("nine"));
        assert!(
            parse_cpus("99999999999999999999")
                .unwrap_err()
                .contains("smaller")
        );
    }

    fn docker_launch() -> LaunchSpec {
        LaunchSpec::Docker {
            image: "repo/img:tag".to_owned(),
            args: vec!["--flag".to_owned()],
            env: BTreeMap::from([("KEY".to_owned(), "value".to_owned())]),
            network: String::new(),
            memory: Some("512m".to_owned()),
            cpus: Some("1.5".to_owned()),
            read_only: true,
            volumes: vec!["/data:/data:ro".to_owned()],
            engine: mcpgw_core::ContainerEngine::Default,
        }
    }

    #[test]
    fn a_launch_spec_becomes_a_labelled_container_without_network_by_default() {
        let server = ServerId::parse("math_1").unwrap();
        let spec = ContainerSpec::from_launch(&server, "gw-7", &docker_launch(), "docker").unwrap();
        assert_eq!(spec.network, "none");
        assert_eq!(spec.labels[OWNER_LABEL], "gw-7");
        assert_eq!(spec.labels[SERVER_LABEL], "math_1");
        assert_eq!(spec.memory, Some(("512m".to_owned(), 512 * 1024 * 1024)));
        assert_eq!(spec.cpus, Some(("1.5".to_owned(), 1_500_000_000)));
        let suffix = spec.name.strip_prefix("mcpgw-math_1-").unwrap();
        assert_eq!(suffix.len(), 8);
        assert!(suffix.bytes().all(|byte| byte.is_ascii_hexdigit()));
        let again =
            ContainerSpec::from_launch(&server, "gw-7", &docker_launch(), "docker").unwrap();
        assert_ne!(spec.name, again.name);
    }

    #[test]
    fn a_malformed_limit_fails_the_launch_naming_the_image() {
        let mut launch = docker_launch();
        if let LaunchSpec::Docker { memory, .. } = &mut launch {
            *memory = Some("lots".to_owned());
        }
        let server = ServerId::parse("s").unwrap();
        let error = ContainerSpec::from_launch(&server, "gw", &launch, "docker").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("docker run repo/img:tag") && text.contains("`lots`"),
            "{text}"
        );
        let subprocess = LaunchSpec::Subprocess {
            command: vec!["x".to_owned()],
            env: BTreeMap::new(),
            cwd: None,
        };
        assert!(matches!(
            ContainerSpec::from_launch(&server, "gw", &subprocess, "docker"),
            Err(LaunchError::UnsupportedMode(ref mode)) if mode == "subprocess"
        ));
    }
}
