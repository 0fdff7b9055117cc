//! `GET /metrics` of a gateway with the demo server over stdio: after a known set of calls, the
//! exposition parses strictly as the Prometheus text format and its numbers are exactly the calls
//! made, the server's state, the catalogue's size and the workflow run.

mod common;

use std::collections::BTreeMap;

use common::{Harness, demo_stdio, envelope, eventually, fast_supervision, text};
use muster::core::{config::MusterConfig, crd::Workflow};
use muster::gateway::Gateway;
use serde_json::{Value, json};

/// One sample of an exposition.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A parsed exposition: the type of each family and every sample.
#[derive(Debug, Default)]
struct Exposition {
    types: BTreeMap<String, String>,
    samples: Vec<Sample>,
}

impl Exposition {
    /// The value of the series `name{labels}` (labels given in any order, all of them).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let wanted: BTreeMap<String, String> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == wanted)
            .map(|s| s.value)
    }

    /// Every sample of `name`.
    fn all(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ => text.parse::<f64>().map_err(|e| format!("bad value {text:?}: {e}")),
    }
}

/// `{a="x",b="y"}` at the start of `rest`: the labels and what follows.
fn parse_labels(rest: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = rest.strip_prefix('{').ok_or("labels must open with {")?;
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Ok((labels, after));
        }
        let eq = rest.find('=').ok_or("a label without =")?;
        let name = &rest[..eq];
        if !is_label_name(name) {
            return Err(format!("bad label name {name:?}"));
        }
        rest = rest[eq + 1..].strip_prefix('"').ok_or("a label value must be quoted")?;
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("an unterminated label value".into()),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((_, '\n')) => return Err("a raw newline in a label value".into()),
                Some((_, c)) => value.push(c),
            }
        };
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label {name} given twice"));
        }
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// The family a sample name belongs to, given the declared types: the name itself, or for a
/// histogram its `_bucket`, `_sum` and `_count` series.
fn family_of<'a>(name: &'a str, types: &BTreeMap<String, String>) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        name.strip_suffix(suffix)
            .filter(|family| types.get(*family).is_some_and(|t| t == "histogram"))
    })
}

/// Parses `text` strictly as the Prometheus text format 0.0.4: every line is a `# HELP`, a
/// `# TYPE` (once per family; a sample before its family's TYPE is refused) or a sample of a declared family; no series
/// appears twice; histogram buckets are cumulative and end at `+Inf` with the count.
fn parse(text: &str) -> Result<Exposition, String> {
    if !text.ends_with('\n') {
        return Err("the exposition must end with a newline".into());
    }
    let mut exposition = Exposition::default();
    let mut helped = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if let Some(comment) = line.strip_prefix("# ") {
            let (keyword, rest) = comment.split_once(' ').ok_or_else(|| at("a bare comment".into()))?;
            let (name, rest) = rest
                .split_once(' ')
                .ok_or_else(|| at("no text after the name".into()))?;
            if !is_metric_name(name) {
                return Err(at(format!("bad metric name {name:?}")));
            }
            match keyword {
                "HELP" => {
                    if helped.insert(name.to_owned(), rest.to_owned()).is_some() {
                        return Err(at("HELP given twice".into()));
                    }
                }
                "TYPE" => {
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&rest) {
                        return Err(at(format!("unknown type {rest:?}")));
                    }
                    if exposition.types.insert(name.to_owned(), rest.to_owned()).is_some() {
                        return Err(at("TYPE given twice".into()));
                    }
                }
                other => return Err(at(format!("unexpected comment {other:?}"))),
            }
            continue;
        }
        let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..name_end];
        if !is_metric_name(name) {
            return Err(at(format!("bad metric name {name:?}")));
        }
        let (labels, rest) = if line[name_end..].starts_with('{') {
            parse_labels(&line[name_end..]).map_err(at)?
        } else {
            (BTreeMap::new(), &line[name_end..])
        };
        let fields: Vec<&str> = rest
            .strip_prefix(' ')
            .ok_or_else(|| at("no space before the value".into()))?
            .split(' ')
            .collect();
        let value = match fields.as_slice() {
            [value] => parse_value(value).map_err(at)?,
            [value, timestamp] => {
                timestamp
                    .parse::<i64>()
                    .map_err(|e| at(format!("bad timestamp: {e}")))?;
                parse_value(value).map_err(at)?
            }
            _ => return Err(at("more than a value and a timestamp".into())),
        };
        let family = family_of(name, &exposition.types).ok_or_else(|| at(format!("{name} has no TYPE")))?;
        if name.ends_with("_bucket") && family != name && !labels.contains_key("le") {
            return Err(at("a bucket without le".into()));
        }
        let sample = Sample {
            name: name.to_owned(),
            labels,
            value,
        };
        if exposition
            .samples
            .iter()
            .any(|s| s.name == sample.name && s.labels == sample.labels)
        {
            return Err(at("a series given twice".into()));
        }
        exposition.samples.push(sample);
    }
    check_histograms(&exposition)?;
    Ok(exposition)
}

/// Every histogram series: buckets non-decreasing in `le`, the `+Inf` bucket equal to the count.
fn check_histograms(exposition: &Exposition) -> Result<(), String> {
    for (family, kind) in &exposition.types {
        if kind != "histogram" {
            continue;
        }
        for count in exposition.all(&format!("{family}_count")) {
            let mut buckets: Vec<(f64, f64)> = exposition
                .all(&format!("{family}_bucket"))
                .into_iter()
                .filter(|b| {
                    let mut labels = b.labels.clone();
                    labels.remove("le");
                    labels == count.labels
                })
                .map(|b| (parse_value(&b.labels["le"]).unwrap_or(f64::NAN), b.value))
                .collect();
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
                return Err(format!("{family}{:?}: buckets are not cumulative", count.labels));
            }
            match buckets.last() {
                Some((le, n)) if le.is_infinite() && *n == count.value => {}
                other => {
                    return Err(format!(
                        "{family}{:?}: +Inf bucket {other:?} != count {}",
                        count.labels, count.value
                    ));
                }
            }
        }
    }
    Ok(())
}

fn workflow(name: &str, spec: Value) -> Workflow {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("a workflow")
}

async fn serve_with_greet() -> Harness {
    let greet = workflow(
        "greet",
        json!({
            "args": {"who": {"type": "string", "default": "you"}},
            "steps": [{"id": "hello", "tool": "x_demo_echo", "args": {"message": "hello {{ .input.who }}"}}]
        }),
    );
    let gateway = Gateway::with_supervision(
        MusterConfig::default(),
        vec![demo_stdio("demo")],
        vec![greet],
        fast_supervision(),
    )
    .expect("valid configuration");
    Harness::serve(gateway).await
}

async fn scrape(h: &Harness, accept: Option<&str>) -> (String, String) {
    let url = h.url.replace("/mcp", "/metrics");
    let mut request = reqwest::Client::new().get(&url);
    if let Some(accept) = accept {
        request = request.header("accept", accept);
    }
    let response = request.send().await.expect("GET /metrics");
    assert_eq!(response.status(), 200);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (content_type, response.text().await.expect("the body"))
}

fn calls(tool: &str, server: &str, kind: &str, outcome: &str) -> [(&'static str, String); 4] {
    [
        ("tool", tool.to_owned()),
        ("server", server.to_owned()),
        ("kind", kind.to_owned()),
        ("outcome", outcome.to_owned()),
    ]
}

fn value_of(exposition: &Exposition, name: &str, labels: &[(&'static str, String)]) -> Option<f64> {
    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
    exposition.value(name, &labels)
}

#[tokio::test]
async fn metrics_count_exactly_the_calls_made_and_show_the_gateways_state() {
    let h = serve_with_greet().await;

    let ok = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_echo", "arguments": {"message": "hi"}}),
        )
        .await;
    assert_eq!(envelope(&ok)["isError"], false, "{}", text(&ok));
    let failed = h
        .meta(
            "call_tool",
            json!({"name": "x_demo_fail", "arguments": {"reason": "boom"}}),
        )
        .await;
    assert_eq!(envelope(&failed)["isError"], true, "{}", text(&failed));
    let unknown = h.meta("call_tool", json!({"name": "x_demo_no_such_tool"})).await;
    assert!(text(&unknown).contains("not found"), "{}", text(&unknown));
    let run = h
        .meta(
            "call_tool",
            json!({"name": "workflow_greet", "arguments": {"who": "ann"}}),
        )
        .await;
    assert_eq!(envelope(&run)["isError"], false, "{}", text(&run));
    let listed = h.meta_json("list_tools", json!({})).await;
    let total = listed["total"].as_f64().expect("list_tools answers a total");

    let (content_type, body) = scrape(&h, None).await;
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    let m = parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    let calls_total = "muster_tool_calls_total";

    // Downstream calls: the direct echo and the workflow's step, the failing tool.
    assert_eq!(
        value_of(&m, calls_total, &calls("x_demo_echo", "demo", "tool", "ok")),
        Some(2.0),
        "{body}"
    );
    assert_eq!(
        value_of(&m, calls_total, &calls("x_demo_fail", "demo", "tool", "tool_error")),
        Some(1.0)
    );
    // The unknown name is counted without its name.
    assert_eq!(
        value_of(&m, calls_total, &calls("unknown", "unknown", "unknown", "not_found")),
        Some(1.0)
    );
    assert!(
        !body.contains("x_demo_no_such_tool"),
        "an unknown name must not become a label"
    );
    assert_eq!(
        value_of(&m, calls_total, &calls("workflow_greet", "muster", "workflow", "ok")),
        Some(1.0)
    );
    // The meta-tools: four call_tool (two answered an error), one list_tools.
    assert_eq!(
        value_of(&m, calls_total, &calls("call_tool", "muster", "meta", "ok")),
        Some(2.0)
    );
    assert_eq!(
        value_of(&m, calls_total, &calls("call_tool", "muster", "meta", "tool_error")),
        Some(2.0)
    );
    assert_eq!(
        value_of(&m, calls_total, &calls("list_tools", "muster", "meta", "ok")),
        Some(1.0)
    );
    let counted: f64 = m.all(calls_total).iter().map(|s| s.value).sum();
    assert_eq!(counted, 10.0, "no other call was counted: {body}");

    // The histogram counts the same calls by server and kind.
    let durations = "muster_tool_call_duration_seconds_count";
    for (server, kind, n) in [
        ("demo", "tool", 3.0),
        ("muster", "meta", 5.0),
        ("muster", "workflow", 1.0),
        ("unknown", "unknown", 1.0),
    ] {
        assert_eq!(
            m.value(durations, &[("server", server), ("kind", kind)]),
            Some(n),
            "{server}/{kind}: {body}"
        );
    }
    assert_eq!(m.all(durations).len(), 4);

    // The demo server runs (stdio), in that state only.
    assert_eq!(
        m.value("muster_upstream_state", &[("server", "demo"), ("state", "Running")]),
        Some(1.0)
    );
    let states: f64 = m.all("muster_upstream_state").iter().map(|s| s.value).sum();
    assert_eq!(states, 1.0, "one current state per server");
    assert!(m.all("muster_upstream_reconnects_total").is_empty(), "no reconnect yet");

    // The catalogue's size is what list_tools counts; one MCP session is connected.
    assert_eq!(m.value("muster_catalog_tools", &[]), Some(total));
    assert!(total > 6.0, "the demo tools, the core tools and the workflow: {total}");
    assert_eq!(m.value("muster_sessions", &[]), Some(1.0));

    // The workflow run, by muster's names.
    assert_eq!(
        m.value(
            "muster_workflow_executions_total",
            &[("workflow", "greet"), ("status", "completed")]
        ),
        Some(1.0)
    );
    assert_eq!(
        m.value(
            "muster_workflow_execution_duration_seconds_count",
            &[("workflow", "greet")]
        ),
        Some(1.0)
    );
    assert_eq!(m.value("muster_workflow_execution_store_errors_total", &[]), Some(0.0));

    // OpenMetrics when asked for.
    let (content_type, open) = scrape(&h, Some("application/openmetrics-text; version=1.0.0")).await;
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(open.ends_with("# EOF\n"), "{open}");

    h.stop().await;
}

#[tokio::test]
async fn a_restarted_server_counts_a_reconnect_and_shows_its_state_again() {
    let h = serve_with_greet().await;
    let restarted = h
        .meta(
            "call_tool",
            json!({"name": "core_service_restart", "arguments": {"name": "demo"}}),
        )
        .await;
    assert_eq!(envelope(&restarted)["isError"], false, "{}", text(&restarted));
    let reconnected = eventually(20, || async {
        let (_, body) = scrape(&h, None).await;
        let m = parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
        m.value("muster_upstream_reconnects_total", &[("server", "demo")]) == Some(1.0)
            && m.value("muster_upstream_state", &[("server", "demo"), ("state", "Running")]) == Some(1.0)
    })
    .await;
    assert!(reconnected, "the restart was not counted as a reconnect");
    let (_, body) = scrape(&h, None).await;
    let m = parse(&body).unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert_eq!(
        value_of(
            &m,
            "muster_tool_calls_total",
            &calls("core_service_restart", "muster", "core", "ok")
        ),
        Some(1.0),
        "{body}"
    );
    h.stop().await;
}

#[test]
fn the_parser_refuses_what_is_not_the_text_format() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 2\n";
    assert!(parse(good).is_ok());
    for bad in [
        "a_total 1\n",                                                                             // no TYPE
        "# TYPE a_total counter\na_total{x=1} 2\n",                                                // unquoted value
        "# TYPE a_total counter\na_total 2 3 4\n",                                                 // too many fields
        "# TYPE a_total counter\na_total 2\na_total 3\n",                                          // a series twice
        "# TYPE a_total counter\na_total two\n",                                                   // not a number
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n", // not cumulative
        "# TYPE a_total counter\na_total 2",                                                       // no final newline
    ] {
        assert!(parse(bad).is_err(), "accepted {bad:?}");
    }
}
