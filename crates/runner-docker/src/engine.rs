//! Reaching a Docker Engine API (Docker's, or podman's compatible one).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::Docker;

/// Where a Docker Engine API listens: a unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EngineAddress {
    socket: PathBuf,
}

impl EngineAddress {
    /// Reads `unix:///path` or a bare absolute path.
    pub fn parse(text: &str) -> Result<Self, String> {
        let path = text.strip_prefix("unix://").unwrap_or(text);
        if !path.starts_with('/') {
            return Err(format!(
                "`{text}` is not a unix socket; write unix:///path/to/docker.sock or an absolute \
                 socket path"
            ));
        }
        Ok(Self {
            socket: PathBuf::from(path),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl std::fmt::Display for EngineAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unix://{}", self.socket.display())
    }
}

/// The engine the environment names: `DOCKER_HOST` when it is a unix socket, else
/// `/var/run/docker.sock`.
pub fn default_engine_address() -> EngineAddress {
    std::env::var("DOCKER_HOST")
        .ok()
        .and_then(|host| EngineAddress::parse(&host).ok())
        .unwrap_or_else(|| EngineAddress {
            socket: PathBuf::from("/var/run/docker.sock"),
        })
}

/// How long one Engine API request may take before it counts as unanswered.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// A client for the engine at `address`, speaking the highest API version both sides know.
/// Fails with a message naming the socket when nothing answers there.
pub async fn connect_engine(address: &EngineAddress) -> Result<Docker, String> {
    let socket = address.socket();
    if !socket.exists() {
        return Err(format!(
            "no container engine socket at {}; start the engine (dockerd, or `podman system \
             service`) or point the gateway at its socket",
            socket.display()
        ));
    }
    let client = Docker::connect_with_unix(
        &socket.to_string_lossy(),
        REQUEST_TIMEOUT.as_secs(),
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|error| {
        format!(
            "cannot open the engine socket {}: {error}",
            socket.display()
        )
    })?;
    tokio::time::timeout(Duration::from_secs(5), client.negotiate_version())
        .await
        .map_err(|_| {
            format!(
                "the container engine at {} did not answer within 5 s",
                socket.display()
            )
        })?
        .map_err(|error| {
            format!(
                "the container engine at {} did not answer: {error}",
                socket.display()
            )
        })
}
