//! The tool-retrieval data sets ([`search_path`]) and the retrieval metrics, shared by the
//! `rankbench` example, the `filter_tools` bench and muster-catalog's ranking quality gate
//! (included with `#[path]`).

use std::{
    error::Error,
    fs,
    path::{Path, PathBuf},
    sync::Arc,
};

use muster_core::ToolEntry;
use rmcp::model::Tool;
use serde::Deserialize;

/// The three data sets, in report order.
pub const DATA_SETS: [&str; 3] = ["bfcl", "metatool", "metatool_multi"];

/// One query with the exposed names of its relevant tools.
#[derive(Debug, Clone)]
pub struct Case {
    pub query: String,
    pub relevant: Vec<String>,
}

/// A data set: its tools exposed as `x_<server>_<name>` (catalogue order) and its queries.
#[derive(Debug)]
pub struct DataSet {
    pub name: String,
    pub tools: Vec<ToolEntry>,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
struct RawTool {
    server: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(rename = "inputSchema", default)]
    input_schema: serde_json::Map<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct RawQuery {
    query: String,
    relevant: Vec<String>,
}

/// Where the data sets are looked for, in order: `$MUSTER_RANKBENCH`, `$MUSTER_SHARED/rankbench`,
/// `shared/rankbench` beside the workspace (the team's copies of all three), then
/// `target/rankbench` (or `$CARGO_TARGET_DIR/rankbench`), where `scripts/test` builds `bfcl` from
/// its PyPI wheel (`scripts/rankbench-bfcl.py`), so that one needs nothing beside the repository.
pub fn search_path() -> Vec<PathBuf> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The including crate may be the root package or a member: the workspace is the nearest
    // ancestor with a Cargo.lock.
    let workspace = manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").is_file())
        .unwrap_or(manifest);
    let mut dirs = Vec::new();
    dirs.extend(std::env::var_os("MUSTER_RANKBENCH").map(PathBuf::from));
    dirs.extend(std::env::var_os("MUSTER_SHARED").map(|shared| PathBuf::from(shared).join("rankbench")));
    dirs.push(workspace.join("../shared/rankbench"));
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from);
    dirs.push(workspace.join(target).join("rankbench"));
    dirs
}

/// The folder of data set `name`: the first of [`search_path`] that has its `catalogue.json`.
pub fn data_set_dir(name: &str) -> Option<PathBuf> {
    search_path()
        .into_iter()
        .map(|dir| dir.join(name))
        .find(|dir| dir.join("catalogue.json").is_file())
}

/// The exposed name of `<server>/<name>`.
pub fn exposed(server: &str, name: &str) -> String {
    format!("x_{server}_{name}")
}

/// Loads the data set `name` from [`data_set_dir`]; the error names where it was looked for.
pub fn load(name: &str) -> Result<DataSet, Box<dyn Error>> {
    let dir = data_set_dir(name).ok_or_else(|| {
        let looked: Vec<String> = search_path().iter().map(|d| d.display().to_string()).collect();
        format!("data set {name} not found in {}", looked.join(", "))
    })?;
    load_dir(name, &dir)
}

/// Loads the data set in folder `dir` (`catalogue.json` and `queries.jsonl`, the format of
/// `shared/rankbench/README.md`) under the name `name`; an error names the file.
pub fn load_dir(name: &str, dir: &Path) -> Result<DataSet, Box<dyn Error>> {
    let (catalogue, queries) = (dir.join("catalogue.json"), dir.join("queries.jsonl"));
    let read = |path: &Path| fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()));
    let raw: Vec<RawTool> =
        serde_json::from_str(&read(&catalogue)?).map_err(|e| format!("{}: {e}", catalogue.display()))?;
    let tools = raw
        .into_iter()
        .map(|t| {
            let tool = Tool::new(t.name.clone(), t.description, Arc::new(t.input_schema));
            ToolEntry::downstream(exposed(&t.server, &t.name), t.server, tool)
        })
        .collect();
    let mut cases = Vec::new();
    for (number, line) in read(&queries)?.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q: RawQuery =
            serde_json::from_str(line).map_err(|e| format!("{} line {}: {e}", queries.display(), number + 1))?;
        let relevant = q
            .relevant
            .iter()
            .map(|r| match r.split_once('/') {
                Some((server, name)) => exposed(server, name),
                None => r.clone(),
            })
            .collect();
        cases.push(Case {
            query: q.query,
            relevant,
        });
    }
    Ok(DataSet {
        name: name.to_owned(),
        tools,
        cases,
    })
}

/// Recall@1/5/10, MRR@10, nDCG@10 and the share of queries with no result, accumulated.
#[derive(Debug, Default, Clone, Copy)]
pub struct Metrics {
    pub queries: usize,
    pub r1: f64,
    pub r5: f64,
    pub r10: f64,
    pub mrr10: f64,
    pub ndcg10: f64,
    pub no_result: usize,
}

impl Metrics {
    /// Adds one query: `ranked` best first (at least its top 10), `relevant` its relevant tools.
    pub fn add<S: AsRef<str>>(&mut self, ranked: &[S], relevant: &[String]) {
        self.queries += 1;
        if ranked.is_empty() {
            self.no_result += 1;
        }
        if relevant.is_empty() {
            return;
        }
        let is_rel = |s: &S| relevant.iter().any(|r| r == s.as_ref());
        let recall = |k: usize| ranked.iter().take(k).filter(|s| is_rel(s)).count() as f64 / relevant.len() as f64;
        self.r1 += recall(1);
        self.r5 += recall(5);
        self.r10 += recall(10);
        if let Some(i) = ranked.iter().take(10).position(is_rel) {
            self.mrr10 += 1.0 / (i + 1) as f64;
        }
        let dcg: f64 = ranked
            .iter()
            .take(10)
            .enumerate()
            .filter(|(_, s)| is_rel(s))
            .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let ideal: f64 = (0..relevant.len().min(10)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
        self.ndcg10 += dcg / ideal;
    }

    fn mean(&self, sum: f64) -> f64 {
        if self.queries == 0 {
            0.0
        } else {
            sum / self.queries as f64
        }
    }

    /// Mean recall@1.
    pub fn recall1(&self) -> f64 {
        self.mean(self.r1)
    }
    /// Mean recall@5.
    pub fn recall5(&self) -> f64 {
        self.mean(self.r5)
    }
    /// Mean recall@10.
    pub fn recall10(&self) -> f64 {
        self.mean(self.r10)
    }
    /// Mean MRR@10.
    pub fn mrr(&self) -> f64 {
        self.mean(self.mrr10)
    }
    /// Mean nDCG@10.
    pub fn ndcg(&self) -> f64 {
        self.mean(self.ndcg10)
    }
    /// The share of queries with no result, in percent.
    pub fn no_result_percent(&self) -> f64 {
        self.mean(self.no_result as f64) * 100.0
    }

    /// A Markdown table row.
    pub fn row(&self, label: &str) -> String {
        let f = |x: f64| format!("{x:.3}").trim_start_matches('0').to_owned();
        format!(
            "| {label} | {} | {} | {} | {} | {} | {:.3}% |",
            f(self.recall1()),
            f(self.recall5()),
            f(self.recall10()),
            f(self.mrr()),
            f(self.ndcg()),
            self.no_result_percent()
        )
    }
}
