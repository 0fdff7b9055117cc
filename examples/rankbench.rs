//! The full ranking evaluation: every query of the three tool-retrieval data sets (bfcl, metatool,
//! metatool_multi; found as `rankbench::search_path` says: the team's `../shared/rankbench`, and
//! bfcl also as `scripts/rankbench-bfcl.py` builds it from PyPI), ranked by `filter_tools {query,
//! limit: 10}` over the tools exposed as `x_<server>_<name>`, and by a straightforward port of Go
//! muster's ranker (`muster::catalog::rank::reference`) in the same run. Prints a Markdown table
//! of R@1, R@5, R@10, MRR@10, nDCG@10 and the share of queries with no result.
//!
//! With `--model DIR` (a static embedding model, see `scripts/model/build-static-model.py`;
//! `MUSTER_RANKING_MODEL` works too) it also ranks with the hybrid ranker, BM25F fused with the
//! model's similarity, and prints its row under the lexical one. `--fusion sum:ALPHA` (default
//! `sum:0.3`) or `--fusion rrf:K:WL:WS` and `--depth N` (default 50) choose the fusion; each
//! `--fusion` given adds a row, so one run compares several. `--parameters-weight W` (repeatable)
//! ranks with that BM25F weight of the parameters field instead of the default, a row each.
//! `--no-go` leaves the Go port out. `--data DIR` (repeatable) ranks the data set in folder
//! `DIR` instead of the three open ones: any catalogue in their format (`catalogue.json` and
//! `queries.jsonl`, see `shared/rankbench/README.md`), such as a held-out one that must not be
//! kept beside the code.
//!
//! ```text
//! cargo run --release --example rankbench            # about a minute; the Go port takes most of it
//! MUSTER_RANKBENCH=/path/to/rankbench cargo run --release --example rankbench
//! cargo run --release --example rankbench -- --model models/minilm-l6-static --no-go
//! cargo run --release --example rankbench -- --data /path/to/held-out --model models/minilm-l6-static \
//!     --fusion sum:0.3 --fusion sum:0.5
//! ```
//!
//! The CI gate on a sample of these queries is `muster-catalog/tests/ranking_quality.rs`.

#![allow(clippy::print_stdout)]

#[path = "../benches/support/rankbench.rs"]
#[allow(dead_code, unreachable_pub)]
mod rankbench;

use std::{error::Error, path::PathBuf, sync::Arc, time::Instant};

use muster::catalog::{
    Catalog,
    rank::{
        Bm25fParams, Field, Fusion, RankingConfig, reference,
        semantic::{SemanticRanking, StaticModel},
    },
    tools::{Scope, filter_tools},
    toolset::Presets,
};
use rankbench::{DATA_SETS, DataSet, Metrics};
use serde_json::json;

fn ours(data: &DataSet, ranking: RankingConfig) -> Result<Metrics, Box<dyn Error>> {
    let mut builder = Catalog::builder().with_ranking(ranking);
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

/// The command line: `--model DIR`, `--fusion SPEC` (repeatable), `--depth N`,
/// `--parameters-weight W` (repeatable), `--data DIR` (repeatable), `--no-go`.
struct Options {
    model: Option<String>,
    /// Data set folders to rank instead of the open data sets.
    data: Vec<PathBuf>,
    /// BM25F weights of the parameters field to compare (none: the default only).
    parameter_weights: Vec<f64>,
    fusions: Vec<Fusion>,
    depth: usize,
    go: bool,
}

fn options() -> Result<Options, Box<dyn Error>> {
    let mut options = Options {
        model: std::env::var("MUSTER_RANKING_MODEL").ok(),
        data: Vec::new(),
        fusions: Vec::new(),
        parameter_weights: Vec::new(),
        depth: SemanticRanking::DEFAULT_DEPTH,
        go: true,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => options.model = Some(args.next().ok_or("--model needs a folder")?),
            "--fusion" => options
                .fusions
                .push(fusion(&args.next().ok_or("--fusion needs a spec")?)?),
            "--depth" => options.depth = args.next().ok_or("--depth needs a number")?.parse()?,
            "--parameters-weight" => options
                .parameter_weights
                .push(args.next().ok_or("--parameters-weight needs a number")?.parse()?),
            "--data" => options.data.push(args.next().ok_or("--data needs a folder")?.into()),
            "--no-go" => options.go = false,
            "--bench" => {} // cargo passes it to examples run as benches
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if options.fusions.is_empty() {
        options.fusions.push(Fusion::default());
    }
    Ok(options)
}

/// `rrf:K:WL:WS` or `sum:ALPHA`.
fn fusion(spec: &str) -> Result<Fusion, Box<dyn Error>> {
    let parts: Vec<&str> = spec.split(':').collect();
    match parts.as_slice() {
        ["rrf", k, wl, ws] => Ok(Fusion::ReciprocalRank {
            k: k.parse()?,
            lexical_weight: wl.parse()?,
            semantic_weight: ws.parse()?,
        }),
        ["sum", alpha] => Ok(Fusion::WeightedSum {
            semantic_weight: alpha.parse()?,
        }),
        _ => Err(format!("--fusion {spec}: expected rrf:K:WL:WS or sum:ALPHA").into()),
    }
}

fn label(fusion: Fusion, depth: usize) -> String {
    match fusion {
        Fusion::ReciprocalRank {
            k,
            lexical_weight,
            semantic_weight,
        } => format!("hybrid RRF k={k} {lexical_weight}:{semantic_weight} depth {depth}"),
        Fusion::WeightedSum { semantic_weight } => format!("hybrid sum α={semantic_weight} depth {depth}"),
        _ => format!("hybrid {fusion:?} depth {depth}"),
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    let options = options()?;
    let model = match &options.model {
        Some(dir) => {
            let started = Instant::now();
            let model = Arc::new(StaticModel::load(dir)?);
            println!(
                "Model: {dir} ({} tokens × {} dimensions, {:.1} MB of vectors, loaded in {:.0} ms)",
                model.tokenizer().len(),
                model.dimensions(),
                model.vector_bytes() as f64 / 1e6,
                started.elapsed().as_secs_f64() * 1e3
            );
            Some(model)
        }
        None => None,
    };
    let sets: Vec<DataSet> = if options.data.is_empty() {
        let looked: Vec<String> = rankbench::search_path()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        println!("Data: the first of {} with each data set\n", looked.join(", "));
        DATA_SETS
            .iter()
            .map(|name| rankbench::load(name))
            .collect::<Result<_, _>>()?
    } else {
        let folders: Vec<String> = options.data.iter().map(|d| d.display().to_string()).collect();
        println!("Data: {}\n", folders.join(", "));
        options
            .data
            .iter()
            .map(|dir| {
                let name = dir
                    .file_name()
                    .map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
                rankbench::load_dir(&name, dir)
            })
            .collect::<Result<_, _>>()?
    };
    println!("| data set | ranker | R@1 | R@5 | R@10 | MRR@10 | nDCG@10 | no result |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    let mut timings = Vec::new();
    for data in &sets {
        let name = &data.name;
        let lexical: Vec<(String, RankingConfig)> = if options.parameter_weights.is_empty() {
            vec![(String::new(), RankingConfig::default())]
        } else {
            let field = Bm25fParams::default().field(Field::Parameters);
            options
                .parameter_weights
                .iter()
                .map(|&w| {
                    let params = Bm25fParams::default().with_field(Field::Parameters, w, field.b);
                    (
                        format!(", parameters {w}"),
                        RankingConfig::default().with_params(params),
                    )
                })
                .collect()
        };
        let mut ours_time = None;
        let mut hybrid_time = None;
        for (suffix, config) in &lexical {
            let started = Instant::now();
            let m = ours(data, config.clone())?;
            ours_time.get_or_insert(started.elapsed());
            println!("{}", m.row(&format!("{name} | muster-rs BM25F{suffix}")));
            if let Some(model) = &model {
                for &fusion in &options.fusions {
                    let semantic = SemanticRanking::new(Arc::clone(model))
                        .with_fusion(fusion)
                        .with_depth(options.depth);
                    let started = Instant::now();
                    let h = ours(data, config.clone().with_semantic(semantic))?;
                    hybrid_time.get_or_insert(started.elapsed());
                    println!(
                        "{}",
                        h.row(&format!("{name} | {}{suffix}", label(fusion, options.depth)))
                    );
                }
            }
        }
        let ours_time = ours_time.unwrap_or_default();
        let go_time = options.go.then(|| {
            let started = Instant::now();
            let g = go_port(data);
            println!("{}", g.row(&format!("{name} | Go muster (port)")));
            started.elapsed()
        });
        timings.push((
            name,
            data.tools.len(),
            data.cases.len(),
            ours_time,
            hybrid_time,
            go_time,
        ));
    }
    println!();
    let per_query = |t: std::time::Duration, queries: usize| t.as_secs_f64() * 1e6 / queries as f64;
    for (name, tools, queries, ours, hybrid, go) in timings {
        let mut line = format!(
            "{name}: {tools} tools, {queries} queries; filter_tools {:.1} µs/query",
            per_query(ours, queries)
        );
        if let Some(hybrid) = hybrid {
            line.push_str(&format!(
                ", hybrid {:.1} µs/query (with the snapshot build)",
                per_query(hybrid, queries)
            ));
        }
        if let Some(go) = go {
            line.push_str(&format!(", Go port {:.1} µs/query", per_query(go, queries)));
        }
        println!("{line}");
    }
    Ok(())
}
