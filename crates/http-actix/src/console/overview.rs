//! The overview: servers by state, calls per second, error rate and latency over the last
//! hour as small charts, and the servers that are failing now.
//!
//! The charts are drawn from samples of the gateway's call counters taken in the background,
//! one every [`SAMPLE_EVERY`] with an hour of them kept, from the moment the console is
//! mounted: an operator who opens the overview sees the hour before, whether or not anyone was
//! watching. A sample reads the counters the gateway keeps for its system summary and nothing
//! else, so a tool call pays nothing for it. Sampling runs on the HTTP server's runtime and ends
//! with it (or as soon as the gateway starts shutting down); with the console off, nothing is
//! sampled.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_core::ServerState;
use mcpgw_gateway::{CallStats, CallStatsSnapshot, Gateway};
use serde::Deserialize;

use super::page::encode_component;
use super::{Chrome, Problem, render, visitor};
use crate::state::ApiState;

/// The time between two samples.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept: an hour at one per [`SAMPLE_EVERY`].
const SAMPLES_KEPT: usize = 720;

#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Instant,
    calls: u64,
    failures: u64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Sample {
    fn of(stats: &CallStatsSnapshot, at: Instant) -> Self {
        Self {
            at,
            calls: stats.calls,
            failures: stats.failures,
            p50_ms: stats.p50_ms.unwrap_or(0.0),
            p99_ms: stats.p99_ms.unwrap_or(0.0),
        }
    }
}

/// The latest samples, at most `capacity` of them: a new one pushes the oldest out. The room
/// for all of them is taken at the first sample, so sampling allocates nothing after it.
#[derive(Debug)]
struct Ring {
    kept: VecDeque<Sample>,
    capacity: usize,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        Self {
            kept: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    fn push(&mut self, sample: Sample) {
        if self.kept.capacity() < self.capacity {
            self.kept.reserve_exact(self.capacity - self.kept.len());
        }
        if self.kept.len() >= self.capacity {
            self.kept.pop_front();
        }
        self.kept.push_back(sample);
    }
}

/// The samples behind the charts, and whether a task is taking them.
pub(crate) struct Samples {
    ring: Mutex<Ring>,
    sampling: AtomicBool,
}

impl Default for Samples {
    fn default() -> Self {
        Self {
            ring: Mutex::new(Ring::new(SAMPLES_KEPT)),
            sampling: AtomicBool::new(false),
        }
    }
}

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Samples")
    }
}

impl Samples {
    fn record(&self, sample: Sample) {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sample);
    }
}

/// Marks the end of a sampling task however it ends (returned, or dropped with its runtime),
/// so that the next mount or overview starts another.
struct SamplingTask(Weak<Samples>);

impl Drop for SamplingTask {
    fn drop(&mut self) {
        if let Some(samples) = self.0.upgrade() {
            samples.sampling.store(false, Ordering::Release);
        }
    }
}

/// Starts sampling the call counters for the charts of `state`'s console, unless a task already
/// does. Nothing happens when the console is off, when the gateway keeps no call counters, or
/// outside a tokio runtime. The task runs on the calling thread's runtime (an HTTP worker's,
/// when the console is mounted) and ends with it, when the gateway starts shutting down, or when
/// the console is gone; the next mount, or the next look at the overview, starts another.
pub(crate) fn start_sampling(state: &ApiState) {
    let Some(console) = state.console() else {
        return;
    };
    let Some(stats) = state.gateway().call_stats() else {
        return;
    };
    let samples = &console.samples;
    if samples.sampling.load(Ordering::Acquire) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if samples.sampling.swap(true, Ordering::AcqRel) {
        return;
    }
    let task = SamplingTask(Arc::downgrade(samples));
    runtime.spawn(sample(
        task,
        Arc::clone(stats),
        state.gateway().clone(),
        SAMPLE_EVERY,
    ));
}

/// Takes a sample every `period`, the first at once, until the gateway shuts down or the samples
/// are dropped.
async fn sample(task: SamplingTask, stats: Arc<CallStats>, gateway: Gateway, period: Duration) {
    let mut ticks = tokio::time::interval(period);
    // A runtime that was busy takes the missed sample late, not a burst of them.
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if gateway.shutting_down() {
            return;
        }
        let Some(samples) = task.0.upgrade() else {
            return;
        };
        samples.record(Sample::of(&stats.snapshot(), Instant::now()));
    }
}

/// One small chart: an SVG polyline's points, scaled to a 300×48 box.
pub(crate) struct Chart {
    pub label: &'static str,
    pub now: String,
    pub points: String,
}

fn chart(label: &'static str, values: &[f64], unit: &str) -> Chart {
    let max = values.iter().copied().fold(0.0_f64, f64::max).max(1e-9);
    let step = if values.len() > 1 {
        300.0 / (values.len() - 1) as f64
    } else {
        0.0
    };
    let points = values
        .iter()
        .enumerate()
        .map(|(index, value)| {
            format!(
                "{:.1},{:.1}",
                index as f64 * step,
                46.0 - value / max * 44.0
            )
        })
        .collect::<Vec<_>>()
        .join(" ");
    Chart {
        label,
        now: values.last().map_or_else(
            || "no data yet".to_owned(),
            |value| format!("{value:.2} {unit}"),
        ),
        points,
    }
}

pub(crate) struct Failing {
    pub id: String,
    pub href: String,
    pub state: &'static str,
    pub failures: u32,
    pub last_error: String,
}

pub(crate) struct Live {
    pub by_state: Vec<(&'static str, usize)>,
    pub total: usize,
    pub calls: u64,
    pub failures: u64,
    pub charts: Vec<Chart>,
    pub failing: Vec<Failing>,
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewPage {
    chrome: Chrome,
    live: Live,
}

#[derive(Template)]
#[template(path = "overview_live.html")]
struct LiveFragment {
    live: Live,
}

#[derive(Debug, Deserialize)]
pub(crate) struct Query {
    done: Option<String>,
}

fn live_of(state: &ApiState, samples: &Samples) -> Live {
    let gateway = state.gateway();
    let snapshots = gateway.servers().list(None);
    let mut counts = [0_usize; 5];
    let order = [
        ServerState::Ready,
        ServerState::Degraded,
        ServerState::Initializing,
        ServerState::Cold,
        ServerState::Dead,
    ];
    let mut failing = Vec::new();
    for snapshot in &snapshots {
        if let Some(slot) = order.iter().position(|state| *state == snapshot.state) {
            counts[slot] += 1;
        }
        if (snapshot.consecutive_failures > 0
            || matches!(snapshot.state, ServerState::Dead | ServerState::Degraded))
            && failing.len() < 20
        {
            let id = snapshot.id().to_string();
            failing.push(Failing {
                href: format!("/ui/servers/{}", encode_component(&id)),
                id,
                state: snapshot.state.as_str(),
                failures: snapshot.consecutive_failures,
                last_error: snapshot.last_error.clone().unwrap_or_default(),
            });
        }
    }
    let stats = gateway.call_stats().map(|stats| stats.snapshot());
    let ring = samples.ring.lock().unwrap_or_else(PoisonError::into_inner);
    let kept = &ring.kept;
    let pairs = || kept.iter().zip(kept.iter().skip(1));
    let rate: Vec<f64> = pairs()
        .map(|(a, b)| {
            let seconds = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
            b.calls.saturating_sub(a.calls) as f64 / seconds
        })
        .collect();
    let errors: Vec<f64> = pairs()
        .map(|(a, b)| {
            let calls = b.calls.saturating_sub(a.calls);
            if calls == 0 {
                0.0
            } else {
                b.failures.saturating_sub(a.failures) as f64 / calls as f64 * 100.0
            }
        })
        .collect();
    let p50: Vec<f64> = kept.iter().map(|sample| sample.p50_ms).collect();
    let p99: Vec<f64> = kept.iter().map(|sample| sample.p99_ms).collect();
    drop(ring);
    Live {
        by_state: order
            .iter()
            .zip(counts)
            .map(|(state, count)| (state.as_str(), count))
            .collect(),
        total: snapshots.len(),
        calls: stats.as_ref().map_or(0, |stats| stats.calls),
        failures: stats.as_ref().map_or(0, |stats| stats.failures),
        charts: vec![
            chart("Calls per second", &rate, "/s"),
            chart("Failed calls", &errors, "%"),
            chart("Median latency", &p50, "ms"),
            chart("99th percentile latency", &p99, "ms"),
        ],
        failing,
    }
}

/// `GET /ui/`.
pub(crate) async fn page(
    request: HttpRequest,
    state: web::Data<ApiState>,
    query: web::Query<Query>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    if !visitor.may("GET", "/api/system") {
        // Someone who may not read the metrics starts at the first section they may read.
        return match super::page::first_section(&visitor) {
            Some(href) => Ok(super::see_other(href)),
            None => Err(Problem::forbidden()),
        };
    }
    visitor.require("GET", "/api/system").await?;
    let console = super::console_of(&state)?;
    start_sampling(&state);
    let page = OverviewPage {
        chrome: Chrome::new(&visitor, "Overview", "overview", query.done.as_deref()),
        live: live_of(&state, &console.samples),
    };
    render(StatusCode::OK, &page)
}

/// `GET /ui/overview/live`: the overview's figures alone, for their refresh.
pub(crate) async fn live(
    request: HttpRequest,
    state: web::Data<ApiState>,
) -> Result<HttpResponse, Problem> {
    let visitor = visitor(&request, &state).await?;
    visitor.require("GET", "/api/system").await?;
    let console = super::console_of(&state)?;
    start_sampling(&state);
    render(
        StatusCode::OK,
        &LiveFragment {
            live: live_of(&state, &console.samples),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::HttpSettings;

    fn sample(calls: u64) -> Sample {
        Sample {
            at: Instant::now(),
            calls,
            failures: 0,
            p50_ms: 0.0,
            p99_ms: 0.0,
        }
    }

    fn calls_kept(samples: &Samples) -> Vec<u64> {
        let ring = samples.ring.lock().unwrap();
        ring.kept.iter().map(|sample| sample.calls).collect()
    }

    /// A gateway over fakes whose calls `stats` counts, with its console unless `console` is
    /// false.
    fn state(stats: &Arc<CallStats>, console: bool) -> ApiState {
        let base = crate::rate_limit::store_fake::state_with(None);
        let gateway = base.gateway().clone().with_call_stats(Arc::clone(stats));
        let state = ApiState::new(gateway, base.metrics().clone(), HttpSettings::default());
        if console {
            state
        } else {
            state.without_console()
        }
    }

    /// Waits (bounded) until `check` holds.
    async fn eventually(what: &str, check: impl Fn() -> bool) {
        for _ in 0..400 {
            if check() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("never happened: {what}");
    }

    #[test]
    fn the_ring_keeps_the_latest_samples_and_never_grows_past_its_bound() {
        let mut ring = Ring::new(3);
        ring.push(sample(0));
        let room = ring.kept.capacity();
        assert!(room >= 3, "the room for every sample is taken at once");
        for calls in 1..10 {
            ring.push(sample(calls));
        }
        let kept: Vec<u64> = ring.kept.iter().map(|sample| sample.calls).collect();
        assert_eq!(kept, [7, 8, 9]);
        assert_eq!(
            ring.kept.capacity(),
            room,
            "no allocation after the first sample"
        );
        // Bad input: a bound of zero still keeps the latest sample.
        let mut ring = Ring::new(0);
        ring.push(sample(1));
        ring.push(sample(2));
        let kept: Vec<u64> = ring.kept.iter().map(|sample| sample.calls).collect();
        assert_eq!(kept, [2]);
        assert_eq!(Ring::new(SAMPLES_KEPT).capacity, 720);
    }

    #[tokio::test]
    async fn the_console_samples_in_the_background_once_however_often_it_is_started() {
        let stats = Arc::new(CallStats::new());
        for _ in 0..3 {
            stats.record(2.0, false, false);
        }
        let state = state(&stats, true);
        let samples = Arc::clone(&state.console().unwrap().samples);
        start_sampling(&state);
        // The first sample is taken at once, without anyone looking at the overview.
        eventually("a first sample", || calls_kept(&samples) == [3]).await;
        // Starting again (every HTTP worker mounts the console) starts no second task, whose
        // own first sample would show at once.
        start_sampling(&state);
        start_sampling(&state);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(calls_kept(&samples), [3]);
        assert!(samples.sampling.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn sampling_ends_when_the_gateway_shuts_down_or_the_console_is_gone() {
        let stats = Arc::new(CallStats::new());
        let state = state(&stats, true);
        let samples = Arc::clone(&state.console().unwrap().samples);
        samples.sampling.store(true, Ordering::Release);
        let task = tokio::spawn(super::sample(
            SamplingTask(Arc::downgrade(&samples)),
            Arc::clone(&stats),
            state.gateway().clone(),
            Duration::from_millis(10),
        ));
        eventually("three samples", || calls_kept(&samples).len() >= 3).await;
        stats.record(1.0, true, false);
        eventually("a sample of the new call", || {
            calls_kept(&samples).last() == Some(&1)
        })
        .await;
        state.gateway().mark_shutting_down();
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .expect("the task ends with the gateway")
            .unwrap();
        assert!(
            !samples.sampling.load(Ordering::Acquire),
            "the next mount may start sampling again"
        );

        // Samples nobody holds any more end their task too.
        let orphan = Arc::new(Samples::default());
        let task = tokio::spawn(super::sample(
            SamplingTask(Arc::downgrade(&orphan)),
            stats,
            self::state(&Arc::new(CallStats::new()), true)
                .gateway()
                .clone(),
            Duration::from_millis(10),
        ));
        drop(orphan);
        tokio::time::timeout(Duration::from_secs(2), task)
            .await
            .expect("the task ends with its samples")
            .unwrap();
    }

    #[tokio::test]
    async fn nothing_is_sampled_when_the_console_is_off() {
        let stats = Arc::new(CallStats::new());
        let off = state(&stats, false);
        let on = state(&stats, true);
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        start_sampling(&off);
        assert_eq!(
            metrics.num_alive_tasks(),
            before,
            "no task without a console"
        );
        start_sampling(&on);
        assert_eq!(metrics.num_alive_tasks(), before + 1, "one task with it");
    }
}
