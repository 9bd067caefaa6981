//! placeholder
pub struct DockerDiscoverySource;
pub struct DockerSourceFactory;
