//! Load generation and percentiles.

use std::time::{Duration, Instant};

use anyhow::bail;

use crate::http::Client;

pub struct LoadResult {
    pub count: usize,
    pub requests_per_second: f64,
    pub p50: Duration,
    pub p99: Duration,
}

pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

pub fn median(samples: &mut [Duration]) -> Duration {
    percentile(samples, 0.5)
}

pub fn percentile(samples: &mut [Duration], quantile: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((samples.len() as f64 - 1.0) * quantile).round() as usize;
    samples[rank.min(samples.len() - 1)]
}

/// `concurrency` clients, each on its own keep-alive connection, each sending `per_client`
/// requests back to back.
pub fn run_load(
    address: &str,
    path: &str,
    concurrency: usize,
    per_client: usize,
) -> anyhow::Result<LoadResult> {
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let address = address.to_owned();
            let path = path.to_owned();
            std::thread::spawn(move || -> anyhow::Result<Vec<Duration>> {
                let mut client = Client::connect(&address)?;
                let mut latencies = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    let sent = Instant::now();
                    let (status, _) = client.get(&path)?;
                    if status != 200 {
                        bail!("{path} answered {status}");
                    }
                    latencies.push(sent.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for worker in workers {
        match worker.join() {
            Ok(result) => latencies.extend(result?),
            Err(_) => bail!("a load worker panicked"),
        }
    }
    let elapsed = started.elapsed();
    let count = latencies.len();
    Ok(LoadResult {
        count,
        requests_per_second: count as f64 / elapsed.as_secs_f64(),
        p50: percentile(&mut latencies, 0.5),
        p99: percentile(&mut latencies, 0.99),
    })
}
