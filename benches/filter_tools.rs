//! Discovery latency: `filter_tools {query}` against the snapshot's BM25F index, the index build,
//! a `list_tools` page, and a straightforward port of Go muster's ranker (per-query statistics,
//! `muster::catalog::rank::reference`) on the same query, so ours/Go can be read at each size.
//!
//! Corpus: a deterministic synthetic catalogue (a seeded SplitMix64 generator, no `rand`) of 50,
//! 450 and 10,000 tools spread over servers of about 45 tools each, names `<verb>_<noun>[_<noun>]`,
//! one-line descriptions with a second paragraph on about a third of them, words drawn with a
//! skew so some are common and most are rare; plus the bfcl catalogue (1,437 tools) when it is
//! there (`../shared/rankbench`, or built from PyPI by `scripts/rankbench-bfcl.py`).
//!
//! Before measuring, the bench checks that our engine run with Go muster's settings
//! (`RankingConfig::muster_compatible()`: Go's tokeniser, no folding, no function words, name
//! weight 3 with the server prefix counted, first line weight 1 and the rest not indexed, k1 1.5,
//! b 0.75, list/get × 0.25) gives the same top 5, with the same rounded scores, as the Go port
//! with the whole catalogue as the candidate set (where Go's per-query statistics equal the
//! snapshot's): on every synthetic query at every size and on every 10th bfcl query. Every
//! measured call asserts its result count.
//!
//! The hybrid ranker (BM25F fused with a static embedding model's similarity) is measured beside
//! it when a model is there (`$MUSTER_RANKING_MODEL`, else the repository's
//! `models/minilm-l6-static`): `query/filter_tools_hybrid` against `query/filter_tools`, and
//! `index_build_hybrid` (the snapshot's index with every tool's vector) and
//! `index_rebuild_hybrid` (the same tools again, their vectors from the ranker's cache) against
//! `index_build`;
//! the memory of the tool vectors and of the model's token vectors is printed before measuring.
//!
//! ```text
//! cargo bench --bench filter_tools -- --warm-up-time 1 --measurement-time 3
//! cargo bench --bench filter_tools -- 'query/10000'        # one group and size
//! cargo bench --bench filter_tools -- 'query/filter_tools(_hybrid)?/10000|index_build'
//! ```
//!
//! Numbers and the command that produced them: `benches/README.md`.

#[path = "support/rankbench.rs"]
#[allow(dead_code, unreachable_pub)]
mod rankbench;

use std::{hint::black_box, sync::Arc, time::Duration};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use muster::{
    catalog::{
        Catalog, View,
        rank::{
            RankingConfig, SearchIndex, display_score, reference,
            semantic::{SemanticRanking, StaticModel},
        },
        tools::{Scope, filter_tools, list_tools},
        toolset::Presets,
    },
    core::{JsonObject, ToolEntry},
};
use rmcp::model::Tool;
use serde_json::json;

/// The catalogue sizes of the synthetic corpus.
const SIZES: [usize; 3] = [50, 450, 10_000];

/// The query every `query` benchmark ranks: function words, a ubiquitous verb, a plural.
const QUERY: &str = "show the error rate metrics of the payment services";

/// SplitMix64: a tiny seeded generator, so the corpus is the same on every machine.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index below `n`, skewed towards 0 (squared uniform): a few words are common.
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u) * n as f64) as usize
    }

    fn uniform(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const SERVERS: &[&str] = &[
    "kubernetes",
    "prometheus",
    "grafana",
    "github",
    "gitlab",
    "slack",
    "pagerduty",
    "jira",
    "postgres",
    "redis",
    "vault",
    "argocd",
    "terraform",
    "aws",
    "gcp",
    "azure",
    "datadog",
    "sentry",
    "stripe",
    "payments",
];
const VERBS: &[&str] = &[
    "list", "get", "create", "delete", "update", "describe", "restart", "scale", "query", "search", "send", "sync",
    "rotate", "approve", "deploy", "rollback", "export", "import", "validate", "watch",
];
const NOUNS: &[&str] = &[
    "pod",
    "service",
    "metric",
    "alert",
    "dashboard",
    "incident",
    "issue",
    "repository",
    "branch",
    "commit",
    "deployment",
    "namespace",
    "node",
    "volume",
    "secret",
    "certificate",
    "policy",
    "user",
    "team",
    "channel",
    "message",
    "invoice",
    "payment",
    "customer",
    "subscription",
    "refund",
    "cluster",
    "database",
    "table",
    "query",
    "bucket",
    "object",
    "queue",
    "topic",
    "log",
    "trace",
    "span",
    "error",
    "rate",
    "latency",
    "budget",
    "release",
    "pipeline",
    "job",
    "runner",
    "artifact",
    "image",
    "registry",
    "tag",
    "label",
    "annotation",
    "schedule",
    "window",
    "quota",
    "limit",
    "token",
    "key",
    "role",
    "binding",
    "account",
    "region",
    "zone",
    "snapshot",
    "backup",
    "restore",
    "migration",
    "index",
    "shard",
    "replica",
    "lease",
    "lock",
    "event",
    "webhook",
    "notification",
    "report",
    "summary",
    "config",
    "setting",
    "feature",
    "flag",
    "experiment",
    "endpoint",
    "route",
    "gateway",
    "proxy",
    "firewall",
    "rule",
    "network",
    "subnet",
    "address",
    "record",
    "domain",
    "zonefile",
    "ticket",
    "comment",
    "review",
    "approval",
    "audit",
    "compliance",
    "cost",
    "forecast",
];
const FILLER: &[&str] = &[
    "the", "a", "of", "in", "for", "with", "by", "from", "to", "on", "all", "each", "given", "current", "recent",
    "matching", "selected", "active", "failed", "pending", "optional", "named", "new", "existing", "remote",
];

fn sentence(rng: &mut SplitMix64, words: usize) -> String {
    let mut out: Vec<&str> = Vec::with_capacity(words);
    for i in 0..words {
        let w = match (i, rng.uniform(3)) {
            (0, _) => VERBS[rng.uniform(VERBS.len())],
            (_, 0) => FILLER[rng.skewed(FILLER.len())],
            _ => NOUNS[rng.skewed(NOUNS.len())],
        };
        out.push(w);
    }
    let mut s = out.join(" ");
    if let Some(first) = s.get(..1) {
        s.replace_range(..1, &first.to_uppercase());
    }
    s.push('.');
    s
}

/// `size` synthetic tools, deterministic for a given size.
fn synthetic(size: usize) -> Vec<ToolEntry> {
    let mut rng = SplitMix64(0x6D75_7374_6572 ^ size as u64);
    let servers = size.div_ceil(45);
    let mut tools = Vec::with_capacity(size);
    let mut seen = std::collections::HashSet::new();
    for i in 0..size {
        let s = i % servers;
        let server = match SERVERS.get(s) {
            Some(name) => (*name).to_owned(),
            None => format!("{}{}", SERVERS[s % SERVERS.len()], s / SERVERS.len()),
        };
        let mut name = format!("{}_{}", VERBS[rng.uniform(VERBS.len())], NOUNS[rng.skewed(NOUNS.len())]);
        if rng.uniform(2) == 0 {
            name = format!("{name}_{}", NOUNS[rng.skewed(NOUNS.len())]);
        }
        while !seen.insert(format!("{server}/{name}")) {
            name = format!("{name}_{}", rng.uniform(100));
        }
        let words = 6 + rng.uniform(10);
        let mut description = sentence(&mut rng, words);
        if rng.uniform(3) == 0 {
            let words = 10 + rng.uniform(20);
            description = format!("{description}\n\n{}", sentence(&mut rng, words));
        }
        let tool = Tool::new(name.clone(), description, Arc::new(JsonObject::new()));
        tools.push(ToolEntry::downstream(format!("x_{server}_{name}"), server, tool));
    }
    tools
}

fn catalog_of(tools: &[ToolEntry], ranking: RankingConfig) -> Arc<Catalog> {
    let mut builder = Catalog::builder().with_ranking(ranking);
    for t in tools {
        builder.push_tool(t.clone());
    }
    Arc::new(builder.build())
}

/// The corpora: the synthetic sizes, then bfcl when its data is there.
fn corpora() -> Vec<(String, Vec<ToolEntry>, Vec<String>)> {
    let synthetic_queries: Vec<String> = [
        QUERY,
        "list pods",
        "get the pod",
        "restart a failed deployment in the namespace",
        "rotate certificates",
        "how to",
        "query latency metrics for the gateway proxy",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut out: Vec<(String, Vec<ToolEntry>, Vec<String>)> = SIZES
        .iter()
        .map(|&n| (n.to_string(), synthetic(n), synthetic_queries.clone()))
        .collect();
    match rankbench::load("bfcl") {
        Ok(data) => {
            let queries = data.cases.iter().step_by(10).map(|c| c.query.clone()).collect();
            out.push(("bfcl".to_owned(), data.tools, queries));
        }
        Err(e) => eprintln!("bfcl left out: {e} (scripts/rankbench-bfcl.py builds it)"),
    }
    out
}

/// Our engine with Go's settings gives the Go port's top 5 (names and rounded scores).
fn check_muster_compatible_top5(label: &str, catalog: &Catalog, queries: &[String]) {
    let tools = catalog.tools();
    let compat = SearchIndex::build_with(tools, RankingConfig::muster_compatible());
    for query in queries {
        let ours: Vec<(usize, f64)> = compat
            .rank(&compat.query(query), tools)
            .iter()
            .take(5)
            .map(|h| (h.position, display_score(h.score)))
            .collect();
        let go: Vec<(usize, f64)> = reference::rank(tools, query)
            .into_iter()
            .take(5)
            .map(|(i, s)| (i, display_score(s)))
            .collect();
        assert_eq!(ours, go, "{label}: top 5 differ for {query:?}");
    }
    eprintln!(
        "{label}: muster-compatible top 5 equal to the Go port's on {} queries",
        queries.len()
    );
}

fn query_page(view: &View, presets: &Presets, args: &JsonObject) -> usize {
    let page = filter_tools(view, args, Scope::unscoped(presets)).expect("filter_tools answers");
    assert!(page.total > 0 && !page.tools.is_empty(), "the query matches");
    page.tools.len()
}

/// The hybrid ranking configuration, when a model is there (see the module docs).
fn hybrid_ranking() -> Option<RankingConfig> {
    let dir = std::env::var_os("MUSTER_RANKING_MODEL").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/minilm-l6-static"),
        std::path::PathBuf::from,
    );
    match StaticModel::load(&dir) {
        Ok(model) => {
            eprintln!(
                "hybrid: model {} ({} tokens × {} dimensions, token vectors {:.1} MB)",
                dir.display(),
                model.tokenizer().len(),
                model.dimensions(),
                model.vector_bytes() as f64 / 1e6
            );
            Some(RankingConfig::default().with_semantic(SemanticRanking::new(Arc::new(model))))
        }
        Err(e) => {
            eprintln!("hybrid left out: {e} (set MUSTER_RANKING_MODEL to a model folder)");
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let corpora = corpora();
    let hybrid = hybrid_ranking();
    let presets = Presets::default();
    let query_args = json!({"query": QUERY, "limit": 5});
    let query_args = query_args.as_object().expect("an object");
    let list_args = json!({"limit": 50, "offset": 25});
    let list_args = list_args.as_object().expect("an object");

    let catalogs: Vec<(String, Arc<Catalog>)> = corpora
        .iter()
        .map(|(label, tools, queries)| {
            let catalog = catalog_of(tools, RankingConfig::default());
            check_muster_compatible_top5(label, &catalog, queries);
            (label.clone(), catalog)
        })
        .collect();
    let hybrid_catalogs: Vec<(String, Arc<Catalog>)> = match &hybrid {
        Some(ranking) => corpora
            .iter()
            .map(|(label, tools, _)| {
                let catalog = catalog_of(tools, ranking.clone());
                let bytes = catalog.search_index().vectors().map_or(0, |v| v.bytes());
                eprintln!(
                    "hybrid {label}: tool vectors {:.2} MB ({} tools)",
                    bytes as f64 / 1e6,
                    tools.len()
                );
                (label.clone(), catalog)
            })
            .collect(),
        None => Vec::new(),
    };

    let mut group = c.benchmark_group("index_build");
    for (label, catalog) in &catalogs {
        group.bench_with_input(BenchmarkId::from_parameter(label), catalog, |b, catalog| {
            b.iter(|| {
                let index = SearchIndex::build(black_box(catalog.tools()));
                assert_eq!(index.len(), catalog.tools().len());
                index
            });
        });
    }
    group.finish();

    if let Some(ranking) = &hybrid {
        // The first build embeds every tool: each iteration starts from an empty vector cache.
        let mut group = c.benchmark_group("index_build_hybrid");
        for (label, catalog) in &catalogs {
            group.bench_with_input(BenchmarkId::from_parameter(label), catalog, |b, catalog| {
                b.iter(|| {
                    let mut fresh = ranking.clone();
                    if let Some(semantic) = fresh.semantic.as_mut() {
                        semantic.cache = Arc::default();
                    }
                    let index = SearchIndex::build_with(black_box(catalog.tools()), fresh);
                    assert_eq!(index.vectors().map(|v| v.bytes() > 0), Some(true));
                    index
                });
            });
        }
        group.finish();
        // A rebuild of the same tools (another change, a session's own catalogue): every vector
        // from the cache.
        let mut group = c.benchmark_group("index_rebuild_hybrid");
        for (label, catalog) in &catalogs {
            SearchIndex::build_with(catalog.tools(), ranking.clone());
            group.bench_with_input(BenchmarkId::from_parameter(label), catalog, |b, catalog| {
                b.iter(|| SearchIndex::build_with(black_box(catalog.tools()), ranking.clone()));
            });
        }
        group.finish();
    }

    let mut group = c.benchmark_group("query");
    for (label, catalog) in &catalogs {
        let view = catalog.view();
        group.bench_with_input(BenchmarkId::new("filter_tools", label), &view, |b, view| {
            b.iter(|| assert_eq!(query_page(view, &presets, black_box(query_args)), 5));
        });
    }
    for (label, catalog) in &hybrid_catalogs {
        let view = catalog.view();
        group.bench_with_input(BenchmarkId::new("filter_tools_hybrid", label), &view, |b, view| {
            b.iter(|| assert_eq!(query_page(view, &presets, black_box(query_args)), 5));
        });
    }
    group.finish();

    let mut group = c.benchmark_group("go_port_query");
    group.sample_size(10);
    for (label, catalog) in &catalogs {
        group.bench_with_input(BenchmarkId::new("reference", label), catalog, |b, catalog| {
            b.iter(|| {
                let ranked = reference::rank(catalog.tools(), black_box(QUERY));
                assert!(ranked.len() >= 5);
                ranked
            });
        });
    }
    group.finish();

    let mut group = c.benchmark_group("list_tools");
    for (label, catalog) in &catalogs {
        let view = catalog.view();
        let expected = catalog.tools().len().saturating_sub(25).min(50);
        group.bench_with_input(BenchmarkId::new("page", label), &view, |b, view| {
            b.iter(|| {
                let page =
                    list_tools(view, black_box(list_args), Scope::unscoped(&presets)).expect("list_tools answers");
                assert_eq!(page.tools.len(), expected);
            });
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
