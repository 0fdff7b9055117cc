//! TEMPORARY tuning harness (not committed).
#![allow(clippy::print_stdout, missing_docs, unreachable_pub, dead_code)]

#[path = "../../benches/support/rankbench.rs"]
mod rankbench;

use std::sync::Arc;

use muster_catalog::rank::{self, *};
use rankbench::{DATA_SETS, Metrics};

fn eval(ds: &rankbench::DataSet, tools: &[Arc<muster_core::ToolEntry>], config: &RankingConfig, step: usize) -> Metrics {
    let index = SearchIndex::build_with(tools, config.clone());
    let mut m = Metrics::default();
    for case in ds.cases.iter().step_by(step) {
        let q = index.query(&case.query);
        let hits = index.rank(&q, tools);
        let names: Vec<&str> = hits.iter().take(10).map(|h| tools[h.position].name()).collect();
        m.add(&names, &case.relevant);
    }
    m
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("variants");
    let step: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let sets: Vec<_> = DATA_SETS.iter().map(|n| rankbench::load(n).expect("load")).collect();
    let arcs: Vec<Vec<Arc<muster_core::ToolEntry>>> =
        sets.iter().map(|d| d.tools.iter().cloned().map(Arc::new).collect()).collect();
    if mode == "noresult" { noresult(&sets, &arcs); return; }
    if mode == "go" {
        for (ds, tools) in sets.iter().zip(&arcs) {
            let mut go = Metrics::default();
            let mut compat = Metrics::default();
            let index = SearchIndex::build_with(tools, RankingConfig::muster_compatible());
            let mut diff = 0;
            for case in ds.cases.iter().step_by(step) {
                let r = rank::reference::rank(tools, &case.query);
                let names: Vec<&str> = r.iter().take(10).map(|&(i, _)| tools[i].name()).collect();
                go.add(&names, &case.relevant);
                let hits = index.rank(&index.query(&case.query), tools);
                let n2: Vec<&str> = hits.iter().take(10).map(|h| tools[h.position].name()).collect();
                compat.add(&n2, &case.relevant);
                if names.iter().take(5).ne(n2.iter().take(5)) { diff += 1; if diff < 4 { println!("DIFF {:?}\n {:?}\n {:?}", case.query, &names[..names.len().min(5)], &n2[..n2.len().min(5)]); } }
            }
            println!("{}", go.row(&format!("{} go", ds.name)));
            println!("{}", compat.row(&format!("{} compat (diff top5 {diff})", ds.name)));
        }
        return;
    }
    let variants: Vec<(String, RankingConfig)> = variants(mode);
    for (label, config) in &variants {
        let mut line = format!("{label:<40}");
        for (ds, tools) in sets.iter().zip(&arcs) {
            let step = if ds.name == "metatool" { step * 4 } else { step };
            let m = eval(ds, tools, config, step);
            line += &format!(" {} r1 {:.3} r5 {:.3} r10 {:.3} nr {:.2}% |", &ds.name[..ds.name.len().min(6)], m.recall1(), m.recall5(), m.recall10(), m.no_result_percent());
        }
        println!("{line}");
    }
}

fn variants(mode: &str) -> Vec<(String, RankingConfig)> {
    let base = RankingConfig::default();
    let mut v = vec![("default".to_owned(), base.clone())];
    match mode {
        "features" => {
            v.push(("no folding".into(), base.clone().with_analyzer(Analyzer::default().with_folding(Folding::None))));
            v.push(("no function words".into(), base.clone().with_analyzer(Analyzer::default().with_function_words(false))));
            v.push(("verbs list/get only".into(), base.clone().with_analyzer(Analyzer::default().with_ubiquitous_verbs(&["list", "get"]))));
            v.push(("no acronym split".into(), base.clone().with_analyzer(Analyzer::default().with_acronym_splitting(false))));
            v.push(("prefix counted".into(), base.clone().with_prefix(PrefixTokens::Counted)));
            v.push(("prefix ignored".into(), base.clone().with_prefix(PrefixTokens::Ignored)));
            v.push(("go params".into(), base.clone().with_params(Bm25fParams::muster_compatible())));
        }
        "stem" => {
        }
        "k1" => {
            for k1 in [0.6, 0.9, 1.2, 1.5, 2.0, 3.0] {
                v.push((format!("k1 {k1}"), base.clone().with_params(base.params.with_k1(k1))));
            }
        }
        "name" => {
            for w in [1.5, 2.0, 3.0, 4.0, 6.0] {
                for b in [0.3, 0.5, 0.75, 0.9] {
                    v.push((format!("name w {w} b {b}"), base.clone().with_params(base.params.with_field(Field::Name, w, b))));
                }
            }
        }
        "desc" => {
            for b in [0.3, 0.5, 0.75, 0.9, 1.0] {
                v.push((format!("first b {b}"), base.clone().with_params(base.params.with_field(Field::FirstLine, 1.0, b))));
            }
            for w in [0.0, 0.25, 0.5, 0.75, 1.0] {
                v.push((format!("rest w {w}"), base.clone().with_params(base.params.with_field(Field::Rest, w, 0.75))));
            }
        }
        "verb" => {
            for w in [0.0, 0.1, 0.25, 0.5, 1.0] {
                v.push((format!("verb w {w}"), base.clone().with_params(base.params.with_ubiquitous_verb_weight(w))));
            }
        }
        _ => {}
    }
    v
}

pub fn noresult(sets: &[rankbench::DataSet], arcs: &[Vec<Arc<muster_core::ToolEntry>>]) {
    for (ds, tools) in sets.iter().zip(arcs) {
        let index = SearchIndex::build_with(tools, RankingConfig::default());
        let mut k = 0;
        for case in &ds.cases {
            let q = index.query(&case.query);
            if index.rank(&q, tools).is_empty() {
                k += 1;
                if k <= 12 { println!("{}: {:?} -> {:?}", ds.name, case.query.chars().take(100).collect::<String>(), q.terms().iter().map(|t| (&t.text, t.term.is_some())).collect::<Vec<_>>()); }
            }
        }
    }
}
