//! The workflow template layer: Go text/template on gotmpl with sprig, muster's load-time checks
//! and its type preservation.
//!
//! Input: a template source, then optionally a NUL byte and a JSON value. The source is compiled
//! with [`CompiledTemplate::compile`] (which runs the parse-tree checks of `template/check.rs`:
//! undefined functions, the single-action analysis) and rendered against a small fixed
//! [`Context`] as a value, as a string and as a condition gate, and against a fixed result as a
//! condition's `jsonPath` template ([`json_path_value`]); the source is also used as a bare
//! path ([`resolve_path`], [`Context::resolve`]). The JSON value, when there is one, is compiled
//! as step arguments ([`CompiledValue`]) and rendered.
//!
//! Invariants: a source without `{{` renders to itself; a compiled template keeps its name and
//! source and renders the same value twice; `render_args` and a compiled value render alike.

#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use muster_workflow::template::{
    CompiledTemplate, CompiledValue, Context, json_path_value, render_args, render_bool, resolve_path,
};
use serde_json::{Value, json};

/// The fixed result a condition's `jsonPath` sees (`.result`).
static RESULT: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "items": [
            {"name": "p1", "status": {"phase": "Running", "restarts": 4}},
            {"name": "p2", "status": {"phase": "Pending", "restarts": 0}},
        ],
        "count": 2,
        "ratio": 0.5,
        "ok": true,
        "next": null,
        "text": "a,b,c",
    })
});

/// The context every template renders against: the template layer's own test fixture.
fn context() -> Context {
    Context::new(
        json!({
            "app_name": "shop",
            "environment": "staging",
            "image": "ghcr.io/giantswarm/shop",
            "value": "  padded  ",
            "replicas": 3,
            "ratio": 1.5,
            "empty": "",
            "zero": 0,
            "nothing": null,
            "tags": ["a", "b", "c"],
            "labels": {"team": "x", "tier": "web"},
            "json": "{\"a\":[1,2]}",
            "date": "2026-09-21T12:43:00Z",
        }),
        json!({
            "pods": RESULT.clone(),
            "events": {"items": [{"reason": "BackOff"}, {"reason": "BackOff"}]},
        }),
        json!({"item": {"name": "c1"}, "item_index": 2}),
    )
}

fuzz_target!(|data: &[u8]| {
    let (source, value) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let source = String::from_utf8_lossy(source);
    let ctx = context();

    let _ = resolve_path(&RESULT, &source);
    let _ = ctx.resolve(&source);
    let _ = json_path_value(&source, &RESULT);

    if let Ok(template) = CompiledTemplate::compile("t", &source) {
        assert_eq!(template.name(), "t");
        assert_eq!(template.source(), source);
        let rendered = template.render_value(&ctx);
        if !source.contains("{{") {
            assert_eq!(
                rendered.as_ref().ok(),
                Some(&Value::String(source.clone().into_owned()))
            );
        }
        let _ = template.render_string(&ctx);
        let _ = render_bool(&template, &ctx);
        let _ = template.render_result_value(&RESULT);
        // A compiled template is rendered many times: the second render sees a clean slate
        // (`now` aside, which reads the clock).
        if !source.contains("now") {
            let again = template.render_value(&ctx);
            assert_eq!(rendered.as_ref().ok(), again.as_ref().ok(), "rendering twice differs");
        }
    }

    if let Some(value) = value.and_then(|v| serde_json::from_slice::<Value>(v).ok()) {
        let compiled = CompiledValue::compile("args", &value).map(|c| c.render(&ctx));
        let direct = render_args(&value, &ctx);
        if let (Ok(Ok(a)), Ok(b)) = (&compiled, &direct) {
            assert_eq!(a, b);
        }
    }
});
