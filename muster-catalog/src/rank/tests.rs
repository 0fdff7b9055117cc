mod hybrid;

use std::sync::Arc;

use muster_core::{JsonObject, ToolEntry, ToolKind};
use rmcp::model::Tool;
use serde_json::json;

use super::*;
use crate::{
    Catalog,
    tools::{Scope, filter_tools},
    toolset::Presets,
};

fn downstream(server: &str, name: &str, description: &str) -> ToolEntry {
    let tool = Tool::new(name.to_owned(), description.to_owned(), Arc::new(JsonObject::new()));
    ToolEntry::downstream(format!("x_{server}_{name}"), server, tool)
}

fn catalog(entries: Vec<ToolEntry>) -> Arc<Catalog> {
    let mut b = Catalog::builder();
    for e in entries {
        b.push_tool(e);
    }
    Arc::new(b.build())
}

/// The names `query` ranks over the whole catalogue, best first.
fn ranked(c: &Catalog, query: &str) -> Vec<String> {
    let index = c.search_index();
    index
        .rank(&index.query(query), c.tools())
        .iter()
        .map(|h| c.tools()[h.position].name().to_owned())
        .collect()
}

fn plain_terms(text: &str) -> Vec<String> {
    Analyzer::default().with_folding(Folding::None).terms(text)
}

#[test]
fn tokens_split_at_separators_and_camel_case_and_are_lowercased() {
    assert_eq!(
        plain_terms("x_k8s_list-pods.v2/getHTTPServer runJarAgent ec2Instance"),
        [
            "x", "k8s", "list", "pods", "v2", "get", "http", "server", "run", "jar", "agent", "ec2", "instance"
        ]
    );
    assert_eq!(
        plain_terms("Überprüfe die Größe (GB)!"),
        ["überprüfe", "die", "größe", "gb"]
    );
    assert!(plain_terms(" -- _ / . ").is_empty());
}

#[test]
fn go_tokens_split_only_where_a_lowercase_letter_meets_a_capital() {
    let go = Analyzer::muster_compatible();
    assert_eq!(
        go.terms("getHTTPServer ec2Instance"),
        ["get", "httpserver", "ec2instance"]
    );
    assert_eq!(
        reference::tokenize("getHTTPServer ec2Instance"),
        ["get", "httpserver", "ec2instance"]
    );
}

#[test]
fn plurals_and_inflections_fold_onto_the_base_word() {
    let same = [
        ("policies", "policy"),
        ("pods", "pod"),
        ("processes", "process"),
        ("caches", "cache"),
        ("matches", "match"),
        ("scheduling", "schedule"),
        ("scheduled", "schedule"),
        ("deployed", "deploy"),
        ("running", "run"),
        ("installed", "install"),
        ("apis", "api"),
        ("ids", "id"),
        ("queries", "query"),
        ("statuses", "status"),
        ("namespaces", "namespace"),
    ];
    for (a, b) in same {
        assert_eq!(fold(a), fold(b), "{a} / {b}");
    }
    let kept = ["status", "redis", "string", "speed", "news", "k8s", "größe", "the"];
    for w in kept {
        assert_eq!(fold(w), w, "{w}");
    }
    assert_ne!(fold("news"), fold("new"));
}

#[test]
fn function_words_are_dropped_unless_the_query_has_no_other_word() {
    let c = catalog(vec![downstream("k8s", "list_pods", "How to list the pods.")]);
    let index = c.search_index();
    let q = index.query("How do I list the pods?");
    let terms: Vec<(&str, TermClass)> = q.terms().iter().map(|t| (t.text.as_str(), t.class)).collect();
    assert_eq!(
        terms,
        [("list", TermClass::UbiquitousVerb), ("pod", TermClass::Content)]
    );
    let only = index.query("how to");
    let texts: Vec<&str> = only.terms().iter().map(|t| t.text.as_str()).collect();
    assert_eq!(texts, ["how", "to"]);
    assert_eq!(ranked(&c, "how to"), ["x_k8s_list_pods"]);
}

#[test]
fn ubiquitous_verbs_count_a_quarter_of_a_content_word() {
    let c = catalog(vec![
        downstream("a", "list_things", "Things."),
        downstream("a", "pods_things", "Things."),
    ]);
    let index = c.search_index();
    let verb = index.query("list");
    let noun = index.query("pods");
    assert_eq!(verb.terms()[0].weight, 0.25);
    assert_eq!(noun.terms()[0].weight, 1.0);
    let v = index.explain(&verb, DocId(0));
    let n = index.explain(&noun, DocId(1));
    // Same statistics (df 1, same field lengths): the verb's contribution is exactly a quarter.
    assert!((v.score * 4.0 - n.score).abs() < 1e-12, "{v}{n}");
}

#[test]
fn the_index_holds_snapshot_statistics_that_a_candidate_subset_does_not_change() {
    let c = catalog(vec![
        downstream("k8s", "get_pods", "List pods.\n\nAll of them, in every namespace."),
        downstream("k8s", "delete_pod", "Delete a pod."),
        downstream("prom", "query", "Run a query."),
    ]);
    let index = c.search_index();
    let stats = index.statistics();
    assert_eq!(stats.document_count(), 3);
    let pod = index.term_id("pod").expect("indexed");
    assert_eq!(stats.document_frequency(pod), 2);
    // Own names only: get pod / delete pod / query.
    assert!((stats.average_field_length(Field::Name) - 5.0 / 3.0).abs() < 1e-12);
    assert!((stats.average_field_length(Field::Rest) - 6.0 / 3.0).abs() < 1e-12);

    let q = index.query("pods");
    let all = index.rank(&q, c.tools());
    let subset = index.rank(&q, &c.tools()[1..2]);
    assert_eq!(subset.len(), 1);
    assert_eq!((subset[0].position, subset[0].doc), (0, DocId(1)));
    let same_doc = all.iter().find(|h| h.doc == DocId(1)).expect("ranked");
    assert_eq!(subset[0].score, same_doc.score);
}

#[test]
fn a_match_in_the_name_outranks_one_in_the_first_line_which_outranks_one_below_it() {
    let c = catalog(vec![
        downstream("s", "alpha_beta", "Gamma delta.\nEpsilon widget."),
        downstream("s", "alpha_gamma", "Widget delta.\nEpsilon beta."),
        downstream("s", "alpha_widget", "Gamma delta.\nEpsilon beta."),
    ]);
    assert_eq!(
        ranked(&c, "widget"),
        ["x_s_alpha_widget", "x_s_alpha_gamma", "x_s_alpha_beta"]
    );
}

fn with_parameters(server: &str, name: &str, description: &str, properties: serde_json::Value) -> ToolEntry {
    let schema = json!({"type": "object", "properties": properties});
    let schema = schema.as_object().cloned().unwrap_or_default();
    let tool = Tool::new(name.to_owned(), description.to_owned(), Arc::new(schema));
    ToolEntry::downstream(format!("x_{server}_{name}"), server, tool)
}

#[test]
fn parameters_are_a_field_weaker_than_the_description() {
    let c = catalog(vec![
        with_parameters(
            "s",
            "post",
            "Send a note.",
            json!({"channel": {"type": "string", "description": "Where the widget goes"}}),
        ),
        with_parameters("s", "render", "Draw a widget.", json!({"size": {"type": "integer"}})),
        with_parameters("s", "delete", "Remove a note.", json!({"widget": {"type": "string"}})),
        downstream("s", "other", "Nothing of the kind."),
    ]);
    // The description's match first; a parameter's name and a parameter's description both match.
    assert_eq!(ranked(&c, "widget"), ["x_s_render", "x_s_delete", "x_s_post"]);
    let index = c.search_index();
    let q = index.query("channel");
    let e = index.explain(&q, DocId(0));
    let field = e
        .term("channel")
        .and_then(|t| t.field(Field::Parameters))
        .expect("in the parameters");
    assert_eq!(
        (field.tf, field.weight),
        (1, Bm25fParams::default().field(Field::Parameters).weight)
    );
}

#[test]
fn go_compatible_ranking_does_not_read_parameters() {
    let mut b = Catalog::builder().with_ranking(RankingConfig::muster_compatible());
    b.push_tool(with_parameters(
        "s",
        "post",
        "Send a note.",
        json!({"channel": {"type": "string", "description": "Where it goes"}}),
    ));
    let c = b.build();
    let index = c.search_index();
    assert!(index.rank(&index.query("channel"), c.tools()).is_empty());
    assert!(!index.rank(&index.query("note"), c.tools()).is_empty());
}

#[test]
fn ties_are_broken_by_catalogue_order() {
    let c = catalog(vec![
        downstream("b", "restart_service", "Restart it."),
        downstream("a", "restart_service", "Restart it."),
        downstream("c", "restart_service", "Restart it."),
    ]);
    assert_eq!(
        ranked(&c, "restart"),
        ["x_b_restart_service", "x_a_restart_service", "x_c_restart_service"]
    );
}

#[test]
fn tools_matching_no_query_term_are_dropped_and_an_unknown_query_matches_nothing() {
    let c = catalog(vec![
        downstream("k8s", "get_pods", "Get pods."),
        downstream("k8s", "get_nodes", "Get nodes."),
    ]);
    assert_eq!(ranked(&c, "pods"), ["x_k8s_get_pods"]);
    assert!(ranked(&c, "zebra").is_empty());
    assert!(ranked(&c, "   ").is_empty());
    assert!(c.search_index().query("zebra").matches_nothing());
}

#[test]
fn a_plural_finds_its_singular_and_the_reverse() {
    let c = catalog(vec![
        downstream("opa", "get_policy", "Get one policy."),
        downstream("k8s", "describe_pod", "Describe a pod."),
        downstream("k8s", "list_nodes", "List the nodes."),
    ]);
    assert_eq!(ranked(&c, "policies"), ["x_opa_get_policy"]);
    assert_eq!(ranked(&c, "pods"), ["x_k8s_describe_pod"]);
    assert_eq!(ranked(&c, "node"), ["x_k8s_list_nodes"]);
}

#[test]
fn the_server_prefix_matches_but_does_not_lengthen_the_name() {
    let c = catalog(vec![
        downstream("kubernetes", "get_pods", "Pods."),
        downstream("prometheus", "query", "Query."),
    ]);
    let index = c.search_index();
    assert_eq!(ranked(&c, "kubernetes"), ["x_kubernetes_get_pods"]);
    let q = index.query("pods");
    let e = index.explain(&q, DocId(0));
    let name = e.term("pod").and_then(|t| t.field(Field::Name)).expect("name match");
    assert_eq!(name.length, 2);
    let counted = SearchIndex::build_with(c.tools(), RankingConfig::default().with_prefix(PrefixTokens::Counted));
    let e = counted.explain(&counted.query("pods"), DocId(0));
    let name = e.term("pod").and_then(|t| t.field(Field::Name)).expect("name match");
    assert_eq!(name.length, 4);
}

#[test]
fn the_first_line_is_the_first_non_empty_line() {
    let c = catalog(vec![downstream(
        "s",
        "tool",
        "\n\n   Rotate certificates.\nRenew leases.",
    )]);
    let index = c.search_index();
    let q = index.query("certificate lease");
    let e = index.explain(&q, DocId(0));
    assert!(
        e.term("certificat").and_then(|t| t.field(Field::FirstLine)).is_some(),
        "{e}"
    );
    assert!(e.term("leas").and_then(|t| t.field(Field::Rest)).is_some(), "{e}");
}

#[test]
fn explain_adds_up_to_the_score_and_shows_each_factor() {
    let c = catalog(vec![
        downstream(
            "prom",
            "query_range",
            "Query metrics over a range.\nMetrics are sampled.",
        ),
        downstream("prom", "metrics_overview", "Show a metrics summary."),
        downstream("k8s", "get_pods", "Get pods."),
    ]);
    let index = c.search_index();
    let q = index.query("metrics query");
    let hits = index.rank(&q, c.tools());
    assert_eq!(hits.len(), 2);
    for hit in &hits {
        let e = index.explain(&q, hit.doc);
        assert!((e.score - hit.score).abs() < 1e-12, "{e}");
        let sum: f64 = e.terms.iter().map(|t| t.contribution).sum();
        assert!((sum - e.score).abs() < 1e-12);
        for t in &e.terms {
            let expected = t.query_weight * t.idf * saturate(t.weighted_tf, index.config().params.k1);
            assert!((t.contribution - expected).abs() < 1e-12);
            let wtf: f64 = t.fields.iter().map(|f| f.weighted_tf).sum();
            assert!((wtf - t.weighted_tf).abs() < 1e-12);
        }
    }
    let e = index.explain(&q, DocId(0));
    let metric = e.term("metric").expect("matched");
    assert_eq!(metric.document_frequency, 2);
    assert_eq!(
        metric.fields.iter().map(|f| (f.field, f.tf)).collect::<Vec<_>>(),
        [(Field::FirstLine, 1), (Field::Rest, 1)]
    );
    assert!(e.to_string().contains("x_prom_query_range"));
    assert!(index.explain(&q, DocId(2)).terms.is_empty());
}

#[test]
fn shown_scores_are_rounded_to_four_decimals_and_never_zero() {
    assert_eq!(display_score(1.234_56), 1.2346);
    assert_eq!(display_score(0.000_01), 0.0001);
    assert_eq!(display_score(2.0), 2.0);
}

#[test]
fn a_candidate_not_taken_from_the_snapshot_is_found_by_name() {
    let c = catalog(vec![
        downstream("k8s", "get_pods", "Pods."),
        downstream("k8s", "get_nodes", "Nodes."),
    ]);
    let index = c.search_index();
    let copy = Arc::new((*c.tools()[1]).clone());
    let stranger = Arc::new(downstream("x", "pods", "Pods."));
    let hits = index.rank(&index.query("nodes pods"), &[copy, stranger]);
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].position, hits[0].doc), (0, DocId(1)));
}

#[test]
fn muster_compatible_settings_rank_as_the_go_port_does() {
    let entries = vec![
        downstream("k8s", "list_pods", "List pods in a namespace."),
        downstream("k8s", "get_pod", "Get one pod by name.\nIncludes status."),
        downstream("k8s", "delete_pod", "Delete a pod."),
        downstream("pd", "list_incidents", "List PagerDuty incidents."),
        downstream("pd", "get_incident", "Get an incident."),
        downstream("prom", "query_range", "Query Prometheus metrics over a time range."),
        downstream("prom", "metricsOverview", "Show a metrics summary."),
        ToolEntry::builtin(
            ToolKind::Core,
            Tool::new("core_service_list", "List services.", Arc::new(JsonObject::new())),
        ),
    ];
    let c = catalog(entries);
    let compat = SearchIndex::build_with(c.tools(), RankingConfig::muster_compatible());
    for query in [
        "list pods",
        "get pod",
        "pods",
        "prometheus metrics query",
        "list",
        "metrics overview",
        "pod pods",
    ] {
        let ours: Vec<(usize, f64)> = compat
            .rank(&compat.query(query), c.tools())
            .iter()
            .map(|h| (h.position, display_score(h.score)))
            .collect();
        let go: Vec<(usize, f64)> = reference::rank(c.tools(), query)
            .into_iter()
            .map(|(i, s)| (i, display_score(s)))
            .collect();
        assert_eq!(ours, go, "{query}");
    }
}

#[test]
fn the_documented_example_ranks_prometheus_query_range_first_and_drops_the_unrelated() {
    // The four tools of the reference scenario filter-tools-query-ranking.yaml.
    let c = catalog(vec![
        downstream(
            "rank",
            "prometheus_query_range",
            "Query Prometheus metrics over a time range.",
        ),
        downstream("rank", "metrics_overview", "Show a metrics summary."),
        downstream("rank", "service_restart", "Restart a running service."),
        downstream("rank", "grafana_dashboard", "Fetch a Grafana monitoring dashboard."),
    ]);
    let presets = Presets::default();
    let args = json!({"query": "prometheus metrics query", "pattern": "x_rank_*"});
    let page = filter_tools(&c.view(), args.as_object().expect("object"), Scope::unscoped(&presets)).expect("page");
    let json = serde_json::to_value(&page).expect("json");
    assert_eq!(
        (json["total"].as_u64(), json["filtered_count"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(json["truncated"], false);
    assert_eq!(json["tools"][0]["name"], "x_rank_prometheus_query_range");
    assert_eq!(json["tools"][1]["name"], "x_rank_metrics_overview");
    let first = json["tools"][0]["score"].as_f64().expect("score");
    let second = json["tools"][1]["score"].as_f64().expect("score");
    assert!(first > second && second >= 0.0001, "{first} {second}");
    assert_eq!(first, (first * 10_000.0).round() / 10_000.0);
    let text = json.to_string();
    assert!(!text.contains("x_rank_service_restart") && !text.contains("x_rank_grafana_dashboard"));
}

#[test]
fn rank_top_orders_only_the_best_hits_and_keeps_every_match() {
    let entries: Vec<ToolEntry> = (0..40)
        .map(|i| {
            let desc = format!("Widget report {}.", "widget ".repeat(i % 7));
            downstream("s", &format!("tool_{i}"), &desc)
        })
        .collect();
    let c = catalog(entries);
    let index = c.search_index();
    let q = index.query("widget");
    let all = index.rank(&q, c.tools());
    let top = index.rank_top(&q, c.tools(), 6);
    assert_eq!(all.len(), 40);
    assert_eq!(top.len(), 40);
    assert_eq!(&top[..6], &all[..6]);
    let mut rest: Vec<usize> = top[6..].iter().map(|h| h.position).collect();
    rest.sort_unstable();
    let mut expected: Vec<usize> = all[6..].iter().map(|h| h.position).collect();
    expected.sort_unstable();
    assert_eq!(rest, expected);
    assert!(index.rank_top(&q, c.tools(), 0).len() == 40);
}

#[test]
fn candidates_find_their_documents_in_any_order_and_from_another_snapshot_by_name() {
    let entries: Vec<ToolEntry> = (0..6)
        .map(|i| downstream("s", &format!("tool_{i}"), "A tool."))
        .collect();
    let c = catalog(entries.clone());
    let index = c.search_index();
    let tools = c.tools();
    let expected =
        |picked: &[&Arc<ToolEntry>]| -> Vec<Option<DocId>> { picked.iter().map(|e| index.doc_id(e)).collect() };
    let whole: Vec<&Arc<ToolEntry>> = tools.iter().collect();
    let gaps: Vec<&Arc<ToolEntry>> = tools.iter().step_by(2).collect();
    let reversed: Vec<&Arc<ToolEntry>> = tools.iter().rev().collect();
    let repeated: Vec<&Arc<ToolEntry>> = [0, 1, 1, 0, 5, 2].iter().map(|&i| &tools[i]).collect();
    for picked in [&whole, &gaps, &reversed, &repeated] {
        let found = index.doc_ids(picked);
        assert_eq!(found, expected(picked));
        assert!(found.iter().all(Option::is_some));
    }
    assert_eq!(
        index.doc_ids(&whole),
        (0..6).map(|i| Some(DocId(i))).collect::<Vec<_>>()
    );
    // Equal entries of another snapshot: found by name; an unknown one: none.
    let other = catalog(entries);
    let mut foreign: Vec<&Arc<ToolEntry>> = other.tools().iter().rev().collect();
    let unknown = Arc::new(downstream("s", "missing", "Not here."));
    foreign.push(&unknown);
    let found = index.doc_ids(&foreign);
    assert_eq!(found[0], index.doc_id(&tools[5]));
    assert_eq!(found.last(), Some(&None));
}
