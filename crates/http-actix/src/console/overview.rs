//! The overview: servers by state, calls per second, error rate and latency over the last
//! hour as small charts, and the servers that are failing now.
//!
//! The charts are drawn from samples of the gateway's call counters that the console takes
//! when the overview is shown (at most one per [`SAMPLE_EVERY`], an hour of them kept): they
//! cover the time someone had the overview open, and cost nothing otherwise.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use mcpgw_core::ServerState;
use serde::Deserialize;

use super::page::encode_component;
use super::{Chrome, Problem, render, visitor};
use crate::state::ApiState;

/// The shortest time between two samples.
pub(crate) const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Samples kept: an hour at one per [`SAMPLE_EVERY`].
const SAMPLES_KEPT: usize = 720;

#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    calls: u64,
    failures: u64,
    p50_ms: f64,
    p99_ms: f64,
}

/// The samples behind the charts.
#[derive(Default)]
pub(crate) struct Samples(Mutex<VecDeque<Sample>>);

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Samples")
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
    let now = Instant::now();
    let mut kept = samples.0.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(stats) = &stats
        && kept
            .back()
            .is_none_or(|last| now.duration_since(last.at) >= SAMPLE_EVERY)
    {
        if kept.len() >= SAMPLES_KEPT {
            kept.pop_front();
        }
        kept.push_back(Sample {
            at: now,
            calls: stats.calls,
            failures: stats.failures,
            p50_ms: stats.p50_ms.unwrap_or(0.0),
            p99_ms: stats.p99_ms.unwrap_or(0.0),
        });
    }
    let pairs: Vec<(Sample, Sample)> = kept
        .iter()
        .zip(kept.iter().skip(1))
        .map(|(a, b)| (*a, *b))
        .collect();
    let rate: Vec<f64> = pairs
        .iter()
        .map(|(a, b)| {
            let seconds = b.at.duration_since(a.at).as_secs_f64().max(1e-3);
            b.calls.saturating_sub(a.calls) as f64 / seconds
        })
        .collect();
    let errors: Vec<f64> = pairs
        .iter()
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
    drop(kept);
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
    render(
        StatusCode::OK,
        &LiveFragment {
            live: live_of(&state, &console.samples),
        },
    )
}
