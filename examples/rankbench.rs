//! The full ranking evaluation: every query of the three tool-retrieval data sets (bfcl, metatool,
//! metatool_multi; found as `rankbench::search_path` says: the team's `../shared/rankbench`, and
//! bfcl also as `scripts/rankbench-bfcl.py` builds it from PyPI), ranked by `filter_tools {query,
//! limit: 10}` over the tools exposed as `x_<server>_<name>`, and by a straightforward port of Go
//! muster's ranker (`muster::catalog::rank::reference`) in the same run. Prints a Markdown table
//! of R@1, R@5, R@10, MRR@10, nDCG@10 and the share of queries with no result.
//!
//! ```text
//! cargo run --release --example rankbench            # about a minute; the Go port takes most of it
//! MUSTER_RANKBENCH=/path/to/rankbench cargo run --release --example rankbench
//! ```
//!
//! The CI gate on a sample of these queries is `muster-catalog/tests/ranking_quality.rs`.

#![allow(clippy::print_stdout)]

#[path = "../benches/support/rankbench.rs"]
#[allow(dead_code, unreachable_pub)]
mod rankbench;

use std::{error::Error, sync::Arc, time::Instant};

use muster::catalog::{
    Catalog,
    rank::reference,
    tools::{Scope, filter_tools},
    toolset::Presets,
};
use rankbench::{DATA_SETS, DataSet, Metrics};
use serde_json::json;

fn ours(data: &DataSet) -> Result<Metrics, Box<dyn Error>> {
    let mut builder = Catalog::builder();
    for tool in &data.tools {
        builder.push_tool(tool.clone());
    }
    let catalog = Arc::new(builder.build());
    let view = catalog.view();
    let presets = Presets::default();
    let mut metrics = Metrics::default();
    for case in &data.cases {
        let args = json!({"query": case.query, "limit": 10});
        let args = args.as_object().ok_or("arguments are an object")?;
        let page = filter_tools(&view, args, Scope::unscoped(&presets))?;
        let names: Vec<&str> = page.tools.iter().map(|t| t.name()).collect();
        metrics.add(&names, &case.relevant);
    }
    Ok(metrics)
}

fn go_port(data: &DataSet) -> Metrics {
    let tools: Vec<Arc<muster::core::ToolEntry>> = data.tools.iter().cloned().map(Arc::new).collect();
    let mut metrics = Metrics::default();
    for case in &data.cases {
        let ranked = reference::rank(&tools, &case.query);
        let names: Vec<&str> = ranked.iter().take(10).map(|&(i, _)| tools[i].name()).collect();
        metrics.add(&names, &case.relevant);
    }
    metrics
}

fn main() -> Result<(), Box<dyn Error>> {
    let looked: Vec<String> = rankbench::search_path()
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    println!("Data: the first of {} with each data set\n", looked.join(", "));
    println!("| data set | ranker | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 | no result |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut timings = Vec::new();
    for name in DATA_SETS {
        let data = rankbench::load(name)?;
        let started = Instant::now();
        let m = ours(&data)?;
        let ours_time = started.elapsed();
        println!("{}", m.row(&format!("{name} | muster-rs BM25F")));
        let started = Instant::now();
        let g = go_port(&data);
        let go_time = started.elapsed();
        println!("{}", g.row(&format!("{name} | Go muster (port)")));
        timings.push((name, data.tools.len(), data.cases.len(), ours_time, go_time));
    }
    println!();
    for (name, tools, queries, ours, go) in timings {
        println!(
            "{name}: {tools} tools, {queries} queries; filter_tools {:.1} µs/query, Go port {:.1} µs/query",
            ours.as_secs_f64() * 1e6 / queries as f64,
            go.as_secs_f64() * 1e6 / queries as f64
        );
    }
    Ok(())
}
