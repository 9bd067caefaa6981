//! `/metrics` in the OpenMetrics text format, for scrapers that ask for it: the Prometheus text
//! the exporter renders, rewritten line by line, with the exemplars of sampled tool calls on
//! the bucket lines of `mcpgw_tool_call_duration_seconds`.
//!
//! What differs from the Prometheus text: a counter's family (`# HELP`, `# TYPE`) is named
//! without `_total` while its samples keep it; `untyped` is `unknown`; help texts escape double
//! quotes too; there are no blank lines; exemplars follow their bucket's value as
//! ` # {trace_id="...",span_id="..."} VALUE TIMESTAMP`; and the text ends with `# EOF`.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use actix_web::http::header::HeaderValue;
use mcpgw_gateway::metrics::{
    SeriesExemplars, TOOL_CALL_DURATION_BUCKETS, TOOL_CALL_DURATION_SECONDS,
};

/// The content type of an OpenMetrics answer.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Exemplars by server label and tool label, as `ToolCallExemplars::snapshot` reads them.
pub(crate) type Exemplars = HashMap<String, HashMap<String, Box<SeriesExemplars>>>;

/// Whether an `Accept` header prefers OpenMetrics to the Prometheus text: it names
/// `application/openmetrics-text` with a quality above 0 and at least that of the best range
/// that covers `text/plain` (`text/plain`, `text/*`, `*/*`). Without the header, or with one
/// that cannot be read, the answer is the Prometheus text.
pub(crate) fn wants_openmetrics(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|value| value.to_str().ok()) else {
        return false;
    };
    let (mut openmetrics, mut text) = (0.0_f64, 0.0_f64);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let quality = parts
            .filter_map(|parameter| parameter.split_once('='))
            .find(|(key, _)| key.trim().eq_ignore_ascii_case("q"))
            .map_or(Some(1.0), |(_, value)| value.trim().parse::<f64>().ok())
            .filter(|quality| (0.0..=1.0).contains(quality))
            .unwrap_or(0.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(quality),
            "text/plain" | "text/*" | "*/*" => text = text.max(quality),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// Rewrites the exporter's Prometheus text as OpenMetrics (see the module documentation).
pub(crate) fn render(prometheus: &str, exemplars: &Exemplars) -> String {
    let counters: HashSet<&str> = prometheus
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split_once(' '))
        .filter(|(_, kind)| kind.trim() == "counter")
        .map(|(name, _)| name)
        .collect();
    // A counter's family is its name without `_total`; one whose name lacks the suffix cannot
    // be an OpenMetrics counter (its samples would have to be renamed) and is `unknown`.
    let family = |name: &str| -> (String, bool) {
        match name.strip_suffix("_total") {
            Some(base) if counters.contains(name) => (base.to_owned(), true),
            _ => (name.to_owned(), false),
        }
    };
    let bucket_line = format!("{TOOL_CALL_DURATION_SECONDS}_bucket{{");
    let mut out = String::with_capacity(prometheus.len() + prometheus.len() / 8 + 8);
    for line in prometheus.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            let (name, _) = family(name);
            let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, counter) = family(name);
            let kind = match kind.trim() {
                "counter" if !counter => "unknown",
                "untyped" => "unknown",
                other => other,
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
        } else if line.starts_with('#') {
            // Other comments have no place in OpenMetrics.
        } else {
            out.push_str(line);
            if line.starts_with(&bucket_line)
                && let Some(exemplar) = exemplar_of(line, exemplars)
            {
                out.push_str(&exemplar);
            }
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// The exemplar for a bucket line of the tool call histogram, written as it follows the value.
fn exemplar_of(line: &str, exemplars: &Exemplars) -> Option<String> {
    let open = line.find('{')?;
    let labels = read_labels(&line[open + 1..])?;
    let label = |key: &str| {
        labels
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| value.as_str())
    };
    let le = label("le")?;
    let bucket = if le == "+Inf" {
        TOOL_CALL_DURATION_BUCKETS.len()
    } else {
        let bound: f64 = le.parse().ok()?;
        TOOL_CALL_DURATION_BUCKETS
            .iter()
            .position(|known| *known == bound)?
    };
    let exemplar = exemplars
        .get(label("mcp_server_id")?)?
        .get(label("tool")?)?
        .get(bucket)
        .copied()
        .flatten()?;
    let micros = exemplar.at.unix_micros();
    Some(format!(
        " # {{trace_id=\"{}\",span_id=\"{}\"}} {} {}.{:06}",
        exemplar.trace.trace_id,
        exemplar.trace.span_id,
        exemplar.value,
        micros.div_euclid(1_000_000),
        micros.rem_euclid(1_000_000),
    ))
}

/// The labels of a sample line, from just after its `{`: names and unescaped values; `None`
/// when the block is malformed.
fn read_labels(block: &str) -> Option<Vec<(&str, String)>> {
    let mut labels = Vec::new();
    let mut rest = block;
    loop {
        rest = rest.trim_start_matches(',');
        if let Some(after) = rest.strip_prefix('}') {
            let _ = after;
            return Some(labels);
        }
        let (name, after_name) = rest.split_once("=\"")?;
        let mut value = String::new();
        let mut chars = after_name.char_indices();
        let end = loop {
            let (index, c) = chars.next()?;
            match c {
                '"' => break index,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                other => value.push(other),
            }
        };
        labels.push((name.trim(), value));
        rest = &after_name[end + 1..];
    }
}

/// A Prometheus help text (which escapes backslashes and line feeds) escaped for OpenMetrics
/// (which escapes double quotes too).
fn escape_help(help: &str) -> String {
    let mut out = String::with_capacity(help.len());
    let mut chars = help.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('n') => out.push_str("\\n"),
                Some('\\') | None => out.push_str("\\\\"),
                Some(other) => {
                    out.push_str("\\\\");
                    out.push(other);
                }
            },
            '"' => out.push_str("\\\""),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use mcpgw_core::Timestamp;
    use mcpgw_core::trace::{SpanId, TraceId};
    use mcpgw_gateway::metrics::{CallTrace, Exemplar, tool_call_bucket};

    use super::*;

    const PROMETHEUS: &str = "\
# HELP mcpgw_tool_calls_total Finished tool calls, \"by\" status\\\\path\\nsecond line
# TYPE mcpgw_tool_calls_total counter
mcpgw_tool_calls_total{mcp_server_id=\"fx\",tool=\"echo\",status=\"success\"} 3

# HELP mcpgw_uptime_seconds Seconds since the gateway started
# TYPE mcpgw_uptime_seconds gauge
mcpgw_uptime_seconds 12.5

# TYPE mcpgw_odd_count counter
mcpgw_odd_count 1

# TYPE mcpgw_tool_call_duration_seconds histogram
mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.0025\"} 2
mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.005\"} 2
mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"+Inf\"} 3
mcpgw_tool_call_duration_seconds_sum{mcp_server_id=\"fx\",tool=\"echo\"} 61.004
mcpgw_tool_call_duration_seconds_count{mcp_server_id=\"fx\",tool=\"echo\"} 3
mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"a\\\"b\",tool=\"echo\",le=\"0.0025\"} 1
";

    fn exemplars() -> Exemplars {
        let mut slots: Box<SeriesExemplars> =
            Box::new([None; TOOL_CALL_DURATION_BUCKETS.len() + 1]);
        let exemplar = |value: f64, byte: u8| Exemplar {
            trace: CallTrace {
                trace_id: TraceId([byte; 16]),
                span_id: SpanId([byte; 8]),
            },
            value,
            at: Timestamp::from_unix_micros(1_700_000_000_250_000),
        };
        slots[tool_call_bucket(0.002)] = Some(exemplar(0.002, 0xab));
        slots[tool_call_bucket(61.0)] = Some(exemplar(61.0, 0xcd));
        let mut quoted: Box<SeriesExemplars> =
            Box::new([None; TOOL_CALL_DURATION_BUCKETS.len() + 1]);
        quoted[tool_call_bucket(0.002)] = Some(exemplar(0.001, 0xef));
        HashMap::from([
            ("fx".to_owned(), HashMap::from([("echo".to_owned(), slots)])),
            (
                "a\"b".to_owned(),
                HashMap::from([("echo".to_owned(), quoted)]),
            ),
        ])
    }

    #[test]
    fn families_are_renamed_exemplars_attached_and_the_text_ends_with_eof() {
        let rendered = render(PROMETHEUS, &exemplars());
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "# HELP mcpgw_tool_calls Finished tool calls, \\\"by\\\" status\\\\path\\nsecond line",
                "# TYPE mcpgw_tool_calls counter",
                "mcpgw_tool_calls_total{mcp_server_id=\"fx\",tool=\"echo\",status=\"success\"} 3",
            ]
        );
        assert!(lines.contains(&"# TYPE mcpgw_uptime_seconds gauge"));
        // A counter without the suffix cannot be an OpenMetrics counter.
        assert!(lines.contains(&"# TYPE mcpgw_odd_count unknown"));
        assert!(!lines.iter().any(|line| line.is_empty()), "{rendered}");
        assert_eq!(lines.last(), Some(&"# EOF"));

        let trace = |byte: &str| (byte.repeat(16), byte.repeat(8));
        let (ab_trace, ab_span) = trace("ab");
        assert!(
            lines.contains(&format!(
                "mcpgw_tool_call_duration_seconds_bucket{{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.0025\"}} 2 \
                 # {{trace_id=\"{ab_trace}\",span_id=\"{ab_span}\"}} 0.002 1700000000.250000"
            )
            .as_str()),
            "{rendered}"
        );
        let (cd_trace, _) = trace("cd");
        assert!(rendered.contains(&format!("le=\"+Inf\"}} 3 # {{trace_id=\"{cd_trace}\"")));
        // A bucket without an exemplar is left as it was.
        assert!(lines.contains(
            &"mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.005\"} 2"
        ));
        // Label values are read unescaped.
        assert!(rendered.contains(&format!("trace_id=\"{}\"", "ef".repeat(16))));
    }

    #[test]
    fn malformed_bucket_lines_get_no_exemplar_and_no_panic() {
        // Bad input tried: an unterminated label block, a value without its closing quote, an
        // `le` that is not a number, an `le` that is no bucket of ours, no `le` at all.
        let exemplars = exemplars();
        for line in [
            "mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.0025\" 2",
            "mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx,tool=echo} 2",
            "mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"soon\"} 2",
            "mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\",le=\"0.003\"} 2",
            "mcpgw_tool_call_duration_seconds_bucket{mcp_server_id=\"fx\",tool=\"echo\"} 2",
        ] {
            assert_eq!(exemplar_of(line, &exemplars), None, "{line}");
            assert!(!render(line, &exemplars).contains("trace_id"));
        }
    }

    #[test]
    fn openmetrics_is_answered_only_to_those_who_prefer_it() {
        let accept = |value: &str| wants_openmetrics(Some(&HeaderValue::from_str(value).unwrap()));
        assert!(accept("application/openmetrics-text"));
        assert!(accept(
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;\
             version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2"
        ));
        assert!(accept("Application/OpenMetrics-Text; version=1.0.0"));
        assert!(!wants_openmetrics(None));
        // Bad input tried: no preference for it, a zero or unreadable quality, a quality out
        // of range, a header that is not text, nonsense.
        assert!(!accept("text/plain"));
        assert!(!accept("*/*"));
        assert!(!accept("text/plain, application/openmetrics-text;q=0.9"));
        assert!(!accept("application/openmetrics-text;q=0"));
        assert!(!accept("application/openmetrics-text;q=high"));
        assert!(!accept("application/openmetrics-text;q=7"));
        assert!(!accept(";;,,=;q"));
        assert!(!wants_openmetrics(Some(
            &HeaderValue::from_bytes(b"application/openmetrics-text\xff").unwrap()
        )));
    }
}
