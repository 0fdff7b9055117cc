use serde_json::{Value, json};

use super::*;

fn ctx() -> Context {
    Context::new(
        json!({
            "app_name": "shop",
            "environment": "staging",
            "env": "production",
            "image": "ghcr.io/giantswarm/shop",
            "name": "MyApp",
            "value": "  padded  ",
            "replicas": 3,
            "ratio": 1.5,
            "empty": "",
            "zero": 0,
            "nothing": null,
            "tags": ["a", "b", "c"],
            "labels": {"team": "x", "tier": "web"},
            "json": "{\"a\":[1,2]}",
        }),
        json!({
            "pods": {"items": [
                {"name": "p1", "status": {"phase": "Running", "restarts": 4}},
                {"name": "p2", "status": {"phase": "Pending", "restarts": 0}},
            ]},
            "events": {"items": [{"reason": "BackOff"}, {"reason": "BackOff"}]},
        }),
        json!({"item": {"name": "c1"}, "item_index": 2}),
    )
}

fn value(src: &str) -> Value {
    CompiledTemplate::compile("t", src)
        .and_then(|t| t.render_value(&ctx()))
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn text(src: &str) -> String {
    CompiledTemplate::compile("t", src)
        .and_then(|t| t.render_string(&ctx()))
        .unwrap_or_else(|e| panic!("{src}: {e}"))
}

fn error(src: &str) -> String {
    match CompiledTemplate::compile("t", src).and_then(|t| t.render_value(&ctx())) {
        Ok(v) => panic!("{src} rendered {v}"),
        Err(e) => e.to_string(),
    }
}

// ---------- documented examples ----------

#[test]
fn text_with_two_actions_renders_the_documented_service_name() {
    assert_eq!(
        value("{{.input.app_name}}-{{.input.environment}}"),
        json!("shop-staging")
    );
}

#[test]
fn eq_condition_renders_a_bool_and_passes_the_gate() {
    assert_eq!(value(r#"{{ eq .input.env "production" }}"#), json!(true));
    let gate = CompiledTemplate::compile("c", r#"{{ eq .input.env "staging" }}"#).expect("must succeed");
    assert!(!render_bool(&gate, &ctx()).expect("must succeed"));
}

#[test]
fn render_bool_accepts_only_true_and_the_string_true() {
    for (src, expected) in [
        ("{{ true }}", true),
        (r#"{{ "true" }}"#, true),
        ("true", true),
        ("{{ .input.replicas }}", false),
        (r#"{{ "yes" }}"#, false),
        ("{{ false }}", false),
    ] {
        let t = CompiledTemplate::compile("c", src).expect("must succeed");
        assert_eq!(render_bool(&t, &ctx()).expect("must succeed"), expected, "{src}");
    }
}

#[test]
fn replace_takes_the_piped_value_last() {
    assert_eq!(
        value(r#"{{ .input.image | replace "/" "-" }}"#),
        json!("ghcr.io-giantswarm-shop")
    );
}

#[test]
fn lower_and_upper_change_case() {
    assert_eq!(value("{{ .input.name | lower }}"), json!("myapp"));
    assert_eq!(value("{{ .input.name | upper }}"), json!("MYAPP"));
}

#[test]
fn output_template_keeps_arrays_numbers_and_strings() {
    let output = CompiledValue::compile(
        "output",
        &json!({
            "cluster": "{{ .input.app_name }}",
            "notRunning": "{{ .results.pods.items }}",
            "backoffCount": "{{ len .results.events.items }}",
            "nested": {"list": ["{{ .vars.item_index }}", "v{{ .vars.item_index }}", 7, null]},
        }),
    )
    .expect("must succeed");
    let rendered = output.render(&ctx()).expect("must succeed");
    assert_eq!(rendered["cluster"], json!("shop"));
    assert_eq!(rendered["notRunning"], ctx().results()["pods"]["items"]);
    assert_eq!(rendered["backoffCount"], json!(2));
    assert_eq!(rendered["nested"], json!({"list": [2, "v2", 7, null]}));
}

#[test]
fn computed_strings_keep_their_exact_form() {
    assert_eq!(value(r#"{{ printf "%02d" 8 }}"#), json!("08"));
    assert_eq!(value(r#"{{ printf "%.2f" 1.2 }}"#), json!("1.20"));
    assert_eq!(value(r#"{{ "1.20" }}"#), json!("1.20"));
}

#[test]
fn bare_paths_keep_their_type_at_any_depth() {
    assert_eq!(value("{{ .results.pods.items[0].status.restarts }}"), json!(4));
    assert_eq!(
        value("{{.results.pods.items[1].status}}"),
        json!({"phase": "Pending", "restarts": 0})
    );
    assert_eq!(value("  {{ .input.tags }}  "), json!(["a", "b", "c"]));
    assert_eq!(value("{{ .input.ratio }}"), json!(1.5));
    assert_eq!(value("{{ .input.nothing }}"), Value::Null);
    assert_eq!(value("{{ .context.pods.items[0].name }}"), json!("p1"));
}

#[test]
fn non_finite_floats_stay_strings() {
    assert_eq!(value(r#"{{ float64 "NaN" }}"#), json!("NaN"));
    assert_eq!(value(r#"{{ "inf" | float64 }}"#), json!("+Inf"));
}

#[test]
fn strings_without_actions_are_returned_unchanged() {
    assert_eq!(value("  plain }} text "), json!("  plain }} text "));
}

#[test]
fn mixed_text_renders_to_a_string_even_when_it_looks_like_a_number() {
    assert_eq!(value("{{ .input.replicas }}{{ .input.zero }}"), json!("30"));
}

#[test]
fn render_string_prints_bare_paths_like_text_template() {
    assert_eq!(text("{{ .input.tags }}"), "[a b c]");
    assert_eq!(text("{{ .input.replicas }}"), "3");
    assert_eq!(text("{{ len .input.tags }}"), "3");
}

#[test]
fn render_args_walks_objects_and_arrays() {
    let args = json!({
        "service_name": "{{.input.app_name}}-{{.input.environment}}",
        "replicas": "{{.input.replicas}}",
        "list": ["{{ .vars.item.name }}", {"deep": "{{ .input.labels }}"}],
        "flag": true,
    });
    assert_eq!(
        render_args(&args, &ctx()).expect("must succeed"),
        json!({
            "service_name": "shop-staging",
            "replicas": 3,
            "list": ["c1", {"deep": {"team": "x", "tier": "web"}}],
            "flag": true,
        })
    );
}

#[test]
fn control_actions_and_declarations_render_as_text() {
    assert_eq!(value("{{ if .input.replicas }}7{{ end }}"), json!("7"));
    assert_eq!(value("{{ $x := 5 }}"), json!(""));
    assert_eq!(value("{{/* note */}}"), json!(""));
    assert_eq!(value("{{- .input.replicas | add 1 -}}"), json!(4));
}

#[test]
fn compiled_templates_are_send_sync_and_shareable() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<CompiledTemplate>();
    assert_send_sync::<CompiledValue>();
    let t = CompiledTemplate::compile("t", "{{ len .input.tags }}").expect("must succeed");
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || t.render_value(&ctx()).expect("must succeed"))
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().expect("must succeed"), json!(3));
    }
}

// ---------- missing keys and the context ----------

#[test]
fn missing_key_in_an_action_is_an_error_naming_template_and_key() {
    let message = error("{{ .input.missing | upper }}");
    assert!(message.contains("template 't'"), "{message}");
    assert!(message.contains("missing"), "{message}");
}

#[test]
fn missing_key_in_a_bare_path_is_an_error_naming_the_path() {
    assert_eq!(
        error("{{ .input.missing }}"),
        "template 't': path 'input.missing' not found"
    );
}

#[test]
fn missing_key_in_mixed_text_is_an_error() {
    assert!(error("x-{{ .results.nope.field }}").contains("nope"));
}

#[test]
fn bare_top_level_keys_are_refused() {
    assert_eq!(error("{{ .app_name }}"), "template 't': path 'app_name' not found");
    assert!(error("{{ .app_name | lower }}").contains("app_name"));
}

#[test]
fn parse_errors_name_the_template() {
    let err = CompiledTemplate::compile("steps[0].args.x", "{{ .input.x ").expect_err("must fail");
    assert!(err.to_string().starts_with("template 'steps[0].args.x'"), "{err}");
}

#[test]
fn compiled_value_errors_name_the_leaf() {
    let value = CompiledValue::compile("output", &json!({"a": ["{{ .input.nope }}"]})).expect("must succeed");
    let err = value.render(&ctx()).expect_err("must fail").to_string();
    assert!(err.starts_with("template 'output.a[0]'"), "{err}");
}

// ---------- the navigator ----------

#[test]
fn navigator_walks_keys_and_indexes() {
    let root = json!({"a": {"b": [[1, {"c": "x"}]]}});
    assert_eq!(resolve_path(&root, "a.b[0][1].c").expect("must succeed"), "x");
    assert_eq!(resolve_path(&root, ".a.b[0][0]").expect("must succeed"), 1);
    assert_eq!(resolve_path(&json!([5]), "[0]").expect("must succeed"), 5);
}

#[test]
fn navigator_reports_not_found_not_an_object_and_out_of_range() {
    let root = json!({"a": {"b": [1, 2], "s": "str"}});
    let err = |p: &str| resolve_path(&root, p).expect_err("must fail").to_string();
    assert_eq!(err("a.zz"), "path 'a.zz' not found");
    assert_eq!(err("a.s.x"), "cannot access 'x' in path 'a.s.x': not an object");
    assert_eq!(err("a.b[2]"), "index 2 out of range in path 'a.b[2]'");
    assert_eq!(err("a.s[0]"), "cannot index [0] in path 'a.s[0]': not an array");
    assert_eq!(err("a..b"), "invalid path 'a..b'");
    assert_eq!(err("a.b[x]"), "invalid path 'a.b[x]'");
}

// ---------- sprig functions ----------

fn cases(list: &[(&str, Value)]) {
    for (src, expected) in list {
        assert_eq!(&value(src), expected, "{src}");
    }
}

#[test]
fn default_empty_coalesce_and_ternary_follow_sprig_emptiness() {
    cases(&[
        (r#"{{ .input.empty | default "dflt" }}"#, json!("dflt")),
        (r#"{{ .input.zero | default 9 }}"#, json!(9)),
        (r#"{{ .input.app_name | default "dflt" }}"#, json!("shop")),
        ("{{ empty .input.empty }}", json!(true)),
        ("{{ empty .input.tags }}", json!(false)),
        (r#"{{ coalesce .input.nothing .input.empty "third" }}"#, json!("third")),
        (r#"{{ ternary "yes" "no" true }}"#, json!("yes")),
        (r#"{{ false | ternary "yes" "no" }}"#, json!("no")),
    ]);
}

#[test]
fn json_functions_round_trip() {
    cases(&[
        ("{{ toJson .input.labels }}", json!(r#"{"team":"x","tier":"web"}"#)),
        (
            "{{ toPrettyJson .input.tags }}",
            json!("[\n  \"a\",\n  \"b\",\n  \"c\"\n]"),
        ),
        ("{{ fromJson .input.json }}", json!({"a": [1, 2]})),
        (r#"{{ fromJson "not json" }}"#, Value::Null),
        ("{{ toString .input.replicas }}", json!("3")),
        ("{{ .input.tags | toString }}", json!("[a b c]")),
        ("{{ toString .input.nothing }}", json!("<nil>")),
    ]);
}

#[test]
fn string_functions_follow_sprig_argument_order() {
    cases(&[
        (r#"{{ quote "a" 1 }}"#, json!(r#""a" "1""#)),
        (r#"{{ title "hello wide-world" }}"#, json!("Hello Wide-World")),
        (r#"{{ join "-" (list 1 nil "x") }}"#, json!("1-x")),
        ("{{ .input.value | trim }}", json!("padded")),
        (r#"{{ trimPrefix "ghcr.io/" .input.image }}"#, json!("giantswarm/shop")),
        (
            r#"{{ .input.image | trimSuffix "/shop" }}"#,
            json!("ghcr.io/giantswarm"),
        ),
        (r#"{{ .input.image | contains "swarm" }}"#, json!(true)),
        (r#"{{ hasPrefix "ghcr" .input.image }}"#, json!(true)),
        (r#"{{ hasSuffix "ghcr" .input.image }}"#, json!(false)),
        (
            r#"{{ split "/" .input.image }}"#,
            json!({"_0": "ghcr.io", "_1": "giantswarm", "_2": "shop"}),
        ),
        (
            r#"{{ splitList "/" .input.image }}"#,
            json!(["ghcr.io", "giantswarm", "shop"]),
        ),
        (r#"{{ join "," .input.tags }}"#, json!("a,b,c")),
        (r#"{{ (split "/" .input.image)._1 }}"#, json!("giantswarm")),
    ]);
}

#[test]
fn list_and_dict_functions_build_and_read_collections() {
    cases(&[
        (r#"{{ list 1 "two" true }}"#, json!([1, "two", true])),
        (r#"{{ dict "a" 1 "b" "x" }}"#, json!({"a": 1, "b": "x"})),
        (r#"{{ get .input.labels "team" }}"#, json!("x")),
        (r#"{{ get .input.labels "nope" }}"#, json!("")),
        (
            r#"{{ set .input.labels "team" "y" }}"#,
            json!({"team": "y", "tier": "web"}),
        ),
        (r#"{{ hasKey .input.labels "tier" }}"#, json!(true)),
        ("{{ keys .input.labels }}", json!(["team", "tier"])),
        ("{{ values .input.labels }}", json!(["x", "web"])),
        ("{{ first .input.tags }}", json!("a")),
        ("{{ .input.tags | last }}", json!("c")),
        ("{{ index .input.tags 1 }}", json!("b")),
        ("{{ len .input.labels }}", json!(2)),
    ]);
}

#[test]
fn math_functions_work_on_int64() {
    cases(&[
        ("{{ add 1 2 .input.replicas }}", json!(6)),
        ("{{ sub 10 .input.replicas }}", json!(7)),
        ("{{ mul 2 3 4 }}", json!(24)),
        ("{{ div 7 2 }}", json!(3)),
        ("{{ mod 7 2 }}", json!(1)),
        ("{{ max 1 9 3 }}", json!(9)),
        ("{{ min 4 2 8 }}", json!(2)),
        (r#"{{ int "42" }}"#, json!(42)),
        ("{{ int .input.ratio }}", json!(1)),
        (r#"{{ int "3.0" }}"#, json!(3)),
        (r#"{{ int "3.7" }}"#, json!(0)),
        (r#"{{ float64 "2.5" }}"#, json!(2.5)),
        (r#"{{ atoi "17" }}"#, json!(17)),
        (r#"{{ atoi "x" }}"#, json!(0)),
    ]);
    assert!(error("{{ div 1 0 }}").contains("divide by zero"));
}

#[test]
fn base64_round_trips() {
    cases(&[
        (r#"{{ b64enc "muster" }}"#, json!("bXVzdGVy")),
        (r#"{{ "bXVzdGVy" | b64dec }}"#, json!("muster")),
    ]);
    assert!(error(r#"{{ b64dec "%%%" }}"#).contains("b64dec"));
}

#[test]
fn regex_functions_use_sprig_argument_order() {
    cases(&[
        (r#"{{ regexMatch "^p[0-9]$" "p1" }}"#, json!(true)),
        (r#"{{ regexMatch "^p[0-9]$" "pod" }}"#, json!(false)),
        (
            r#"{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}"#,
            json!("-W-xxW-"),
        ),
    ]);
    assert!(error(r#"{{ regexMatch "(" "x" }}"#).contains("regexMatch"));
}

#[test]
fn date_formats_go_layouts_and_now_is_rfc3339() {
    cases(&[
        (r#"{{ date "2006-01-02 15:04:05" 0 }}"#, json!("1970-01-01 00:00:00")),
        (
            r#"{{ date "Jan 2, 2006" "2024-03-05T10:00:00Z" }}"#,
            json!("Mar 5, 2024"),
        ),
    ]);
    let now = value("{{ now }}");
    let now = now.as_str().expect("now is a string");
    assert!(chrono::DateTime::parse_from_rfc3339(now).is_ok(), "{now}");
    assert_eq!(value(r#"{{ now | date "2006" }}"#).as_str().map(str::len), Some(4));
}

#[test]
fn builtins_eq_and_or_not_comparisons_and_printf_are_available() {
    cases(&[
        (r#"{{ ne .input.env "dev" }}"#, json!(true)),
        ("{{ gt .input.replicas 2 }}", json!(true)),
        ("{{ lt .input.replicas 2 }}", json!(false)),
        ("{{ and true .input.replicas }}", json!(3)),
        ("{{ or .input.empty \"x\" }}", json!("x")),
        ("{{ not .input.zero }}", json!(true)),
        (r#"{{ printf "%s-%d" "a" 5 }}"#, json!("a-5")),
    ]);
}

#[test]
fn every_listed_sprig_function_is_registered() {
    let map = sprig::func_map();
    for name in SPRIG_FUNCTIONS {
        assert!(map.contains_key(*name), "{name}");
    }
    assert_eq!(map.len(), SPRIG_FUNCTIONS.len());
}

#[test]
fn go_layouts_translate_to_chrono_formats() {
    assert_eq!(
        sprig::go_layout_to_strftime("2006-01-02T15:04:05Z07:00 Mon 100%"),
        "%Y-%m-%dT%H:%M:%S%:z %a %-m00%%"
    );
}

#[test]
fn undefined_functions_are_refused_at_compile_time() {
    for src in [
        "{{ nosuch 1 }}",
        "x {{ if true }}{{ .input.a | nosuch }}{{ end }}",
        "{{ (nosuch).x }}",
    ] {
        let err = CompiledTemplate::compile("t", src).expect_err("must fail");
        assert_eq!(
            err.to_string(),
            "template 't': function \"nosuch\" not defined",
            "{src}"
        );
    }
}

#[test]
fn every_go_builtin_the_checker_allows_exists_in_gotmpl() {
    for name in check::GO_BUILTINS {
        let t = CompiledTemplate::compile("t", &format!("{{{{ {name} }}}}")).expect("known function");
        if let Err(TemplateError::Render { source, .. }) = t.render_value(&ctx()) {
            assert!(!matches!(source, gotmpl::TemplateError::UndefinedFunction(_)), "{name}");
        }
    }
}

#[test]
fn only_one_action_spanning_the_trimmed_leaf_renders_typed() {
    cases(&[
        ("  {{ len .input.tags }}\n", json!(3)),
        (r#"{{ "a" }}{{ "b" }}"#, json!("ab")),
        (r#"{{ "}}" }}"#, json!("}}")),
        ("{{ 1 }} {{ 2 }}", json!("1 2")),
        ("{{ if true }}{{ 5 }}{{ end }}", json!("5")),
    ]);
}

#[test]
fn json_path_keys_are_paths_or_templates_over_result() {
    let result = json!({"items": [{"name": "p1", "ready": 2}], "status": "ok"});
    assert_eq!(json_path_value("items[0].name", &result).expect("path"), json!("p1"));
    assert_eq!(
        json_path_value("{{ (index .result.items 0).ready }}", &result).expect("template"),
        json!(2)
    );
    assert_eq!(
        json_path_value("{{ .result.status }}", &result).expect("bare"),
        json!("ok")
    );
    assert_eq!(
        json_path_value("items[1]", &result)
            .expect_err("out of range")
            .to_string(),
        "template 'jsonPath.items[1]': index 1 out of range in path 'items[1]'"
    );
    assert!(json_path_value("{{ .input.x }}", &result).is_err());
}

#[test]
fn inserting_results_and_vars_is_visible_to_the_next_render() {
    let mut ctx = Context::default();
    let t = CompiledTemplate::compile("t", "{{ .results.build.id }}-{{ .vars.item }}").expect("compiles");
    assert!(t.render_value(&ctx).is_err());
    ctx.insert_result("build", &json!({"id": 7}));
    ctx.set_var("item", &json!("a"));
    assert_eq!(t.render_value(&ctx).expect("renders"), json!("7-a"));
    ctx.set_var("item", &json!("b"));
    assert_eq!(t.render_value(&ctx).expect("renders"), json!("7-b"));
    assert_eq!(
        CompiledTemplate::compile("u", "{{ .context.build }}")
            .and_then(|t| t.render_value(&ctx))
            .expect("alias"),
        json!({"id": 7})
    );
}

#[test]
fn malformed_bare_paths_are_refused_at_compile_time() {
    let err = CompiledTemplate::compile("t", "{{ .input..x }}").expect_err("must fail");
    assert_eq!(err.to_string(), "template 't': invalid path 'input..x'");
}

#[test]
fn repeat_takes_the_count_first_and_refuses_a_result_over_the_byte_limit() {
    cases(&[
        (r#"{{ repeat 3 "ab" }}"#, json!("ababab")),
        (r#"{{ "ab" | repeat 3 }}"#, json!("ababab")),
        (r#"{{ repeat 0 "ab" }}"#, json!("")),
        ("{{ repeat .input.replicas .input.app_name }}", json!("shopshopshop")),
        (r#"{{ len (repeat 400000 "x") }}"#, json!(400_000)),
    ]);
    let limit = sprig::MAX_REPEAT_BYTES;
    assert_eq!(
        text(&format!(r#"{{{{ len (repeat {limit} "x") }}}}"#)),
        limit.to_string()
    );
    let over = error(&format!(r#"{{{{ repeat {} "ab" }}}}"#, limit / 2 + 1));
    assert!(
        over.contains("repeat") && over.contains("10000000-byte limit"),
        "{over}"
    );
    let huge = error(r#"{{ repeat 9223372036854775807 "ab" }}"#);
    assert!(huge.contains("10000000-byte limit"), "{huge}");
    let negative = error(r#"{{ repeat -1 "ab" }}"#);
    assert!(negative.contains("negative repeat count"), "{negative}");
}
