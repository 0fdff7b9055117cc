use serde_json::{Value, json};

use super::*;

fn run(program: &str, value: Value) -> Result<Value> {
    JqProgram::compile(program)?.run(&value, &json!({}), &json!({}))
}

fn ok(program: &str, value: Value) -> Value {
    run(program, value).unwrap_or_else(|e| panic!("{program}: {e}"))
}

fn compile_err(program: &str) -> String {
    JqProgram::compile(program).expect_err("must not compile").to_string()
}

const _: () = {
    const fn shareable<T: Send + Sync + Clone + fmt::Debug + 'static>() {}
    shareable::<JqProgram>();
    const fn error<T: std::error::Error + Send + Sync + 'static>() {}
    error::<JqError>();
};

#[test]
fn a_result_is_reshaped() {
    let pods = json!({"items": [
        {"metadata": {"name": "p1", "namespace": "a"}},
        {"metadata": {"name": "p2", "namespace": "b"}},
    ]});
    assert_eq!(
        ok("[.items[] | {name: .metadata.name}]", pods),
        json!([{"name": "p1"}, {"name": "p2"}])
    );
}

#[test]
fn input_and_vars_are_in_scope() {
    let program = JqProgram::compile("{x: $input.x, item: $vars.item, n: .}").expect("compiles");
    let out = program.run(&json!(7), &json!({"x": "from-input"}), &json!({"item": {"id": 3}}));
    assert_eq!(out, Ok(json!({"x": "from-input", "item": {"id": 3}, "n": 7})));
}

#[test]
fn unused_globals_do_not_change_the_result() {
    let program = JqProgram::compile(".a").expect("compiles");
    assert_eq!(
        program.run(&json!({"a": 1}), &json!({"a": 2}), &json!({"a": 3})),
        Ok(json!(1))
    );
    let program = JqProgram::compile("$vars").expect("compiles");
    assert_eq!(
        program.run(&json!(null), &json!({"a": 2}), &json!({"a": 3})),
        Ok(json!({"a": 3}))
    );
}

#[test]
fn builtins_work() {
    assert_eq!(ok("length", json!([1, 2, 3])), json!(3));
    assert_eq!(ok("length", json!("héllo")), json!(5));
    assert_eq!(ok("[.[] | select(. > 1)]", json!([1, 2, 3])), json!([2, 3]));
    assert_eq!(ok("map(. * 10)", json!([1, 2])), json!([10, 20]));
    assert_eq!(
        ok("to_entries", json!({"a": 1, "b": "x"})),
        json!([{"key": "a", "value": 1}, {"key": "b", "value": "x"}])
    );
    assert_eq!(ok("tojson", json!({"a": [1, "x"]})), json!(r#"{"a":[1,"x"]}"#));
    assert_eq!(
        ok("[.[] | test(\"^p[0-9]$\")]", json!(["p1", "q1", "p22"])),
        json!([true, false, false])
    );
    assert_eq!(
        ok(r#""\(.name) has \(.n) pods""#, json!({"name": "shop", "n": 2})),
        json!("shop has 2 pods")
    );
    assert_eq!(ok("keys", json!({"b": 1, "a": 2})), json!(["a", "b"]));
    assert_eq!(ok("ascii_downcase", json!("ABC")), json!("abc"));
}

#[test]
fn integers_stay_integers_and_floats_stay_floats() {
    let three = ok(".a + 1", json!({"a": 2}));
    assert_eq!(three, json!(3));
    assert!(three.is_i64(), "{three:?}");
    assert_eq!(three.to_string(), "3");

    let half = ok(".a / 2", json!({"a": 1}));
    assert_eq!(half.as_f64(), Some(0.5));
    let float = ok(".", json!(2.5));
    assert!(float.is_f64() && float.as_f64() == Some(2.5), "{float:?}");
    assert!(ok(".", json!(3.0)).is_f64());
    assert!(ok("1.5", json!(null)).is_f64());
    assert_eq!(ok("-7", json!(null)), json!(-7));

    assert_eq!(ok(".", json!(u64::MAX)), json!(u64::MAX));
    assert_eq!(ok(".", json!(i64::MIN)), json!(i64::MIN));
    assert_eq!(ok(". + 0", json!(u64::MAX)), json!(u64::MAX));
    assert_eq!(ok(".", json!(i64::MAX)), json!(i64::MAX));
    // beyond u64: the nearest float, as serde_json would read it
    assert!(ok(". * 10", json!(u64::MAX)).is_f64());

    assert_eq!(ok("nan", json!(null)), json!(null));
    assert_eq!(ok("infinite", json!(null)), json!(f64::MAX));
}

#[test]
fn strings_arrays_and_objects_round_trip() {
    let doc = json!({
        "s": "tab\tquote\" unicode é 🦀",
        "empty": {},
        "nested": [[], [null, true, false], {"k": [1, -2, 3.25]}],
    });
    assert_eq!(ok(".", doc.clone()), doc);
}

#[test]
fn a_second_value_is_refused() {
    assert_eq!(run(".[]", json!([1, 2])), Err(JqError::ManyValues));
    assert_eq!(
        JqError::ManyValues.to_string(),
        "jq program yielded more than one value; it must yield exactly one"
    );
    // counting stops at two: an endless stream is refused too
    assert_eq!(run("repeat(1)", json!(null)), Err(JqError::ManyValues));
    assert_eq!(run(".[]", json!([1])), Ok(json!(1)));
}

#[test]
fn no_value_is_refused() {
    assert_eq!(run("empty", json!(1)), Err(JqError::NoValue));
    assert_eq!(run("select(. > 5)", json!(1)), Err(JqError::NoValue));
    assert_eq!(JqError::NoValue.to_string(), "jq program yielded no value");
}

#[test]
fn a_syntax_error_is_refused_at_compile_with_its_place() {
    assert_eq!(
        compile_err(".items["),
        r#"jq: syntax error near "[" at line 1, column 7: expected closing bracket"#
    );
    assert_eq!(
        compile_err("{a: 1"),
        r#"jq: syntax error near "{" at line 1, column 1: expected closing brace"#
    );
    assert_eq!(compile_err(".a |"), "jq: syntax error at end of program: expected term");
    assert_eq!(
        compile_err("1 +\n  ) "),
        r#"jq: syntax error near ")" at line 2, column 3: expected token"#
    );
    assert_eq!(
        compile_err(r#""abc"#),
        r#"jq: syntax error near "\"" at line 1, column 1: expected closing quote"#
    );
    assert!(
        compile_err("if . then 1").starts_with("jq: syntax error"),
        "{}",
        compile_err("if . then 1")
    );
    assert!(matches!(JqProgram::compile(".["), Err(JqError::Syntax { .. })));
}

#[test]
fn undefined_names_are_refused_at_compile() {
    assert_eq!(compile_err("$nope"), "jq: undefined variable $nope");
    assert_eq!(compile_err("frobnicate(1)"), "jq: undefined filter frobnicate/1");
    assert_eq!(
        compile_err("$a + $b + $a"),
        "jq: undefined variable $a, undefined variable $b"
    );
    assert_eq!(
        JqProgram::compile("$nope").expect_err("undefined"),
        JqError::Undefined {
            symbols: vec![UndefinedSymbol {
                kind: SymbolKind::Variable,
                name: "$nope".into()
            }]
        }
    );
}

#[test]
fn a_runtime_error_is_reported() {
    let err = run(".a.b", json!("text")).expect_err("cannot index a string");
    assert!(matches!(err, JqError::Runtime { .. }), "{err:?}");
    assert_eq!(err.to_string(), r#"jq: cannot index "text" with "a""#);
    assert_eq!(
        run(r#"error("boom")"#, json!(null)).map_err(|e| e.to_string()),
        Err("jq: boom".into())
    );
    assert_eq!(
        run(r#"error({code: 1})"#, json!(null)).map_err(|e| e.to_string()),
        Err(r#"jq: {"code":1}"#.into())
    );
    // an error after the first value fails the run
    assert!(matches!(
        run(r#"1, error("late")"#, json!(null)),
        Err(JqError::Runtime { .. })
    ));
    // try/catch is the program's to use
    assert_eq!(run(r#"try error("x") catch ."#, json!(null)), Ok(json!("x")));
}

#[test]
fn the_gateway_environment_and_process_are_out_of_reach() {
    assert_eq!(compile_err("env"), "jq: undefined filter env/0");
    assert_eq!(compile_err("$ENV"), "jq: undefined variable $ENV");
    assert_eq!(run("halt", json!(null)), Err(JqError::Halted { code: 0 }));
    assert_eq!(
        run(r#""bye" | halt_error(3)"#, json!(null)),
        Err(JqError::Halted { code: 3 })
    );
    assert_eq!(
        compile_err(r#"include "x"; ."#),
        r#"jq: cannot load module "x": module loading not supported"#
    );
}

#[test]
fn a_result_nested_too_deeply_is_refused() {
    let deep = format!("{}1{}", "[".repeat(MAX_RESULT_DEPTH), "]".repeat(MAX_RESULT_DEPTH));
    assert!(run(&deep, json!(null)).is_ok());
    let deeper = format!("[{deep}]");
    assert_eq!(
        run(&deeper, json!(null)),
        Err(JqError::TooDeep {
            limit: MAX_RESULT_DEPTH
        })
    );
}

#[test]
fn a_program_is_shared_and_shows_its_source() {
    let program = JqProgram::compile(".a").expect("compiles");
    let copy = program.clone();
    assert!(Arc::ptr_eq(&program.inner, &copy.inner));
    assert_eq!(copy.source(), ".a");
    assert_eq!(format!("{program:?}"), r#"JqProgram { source: ".a" }"#);
    let handle = std::thread::spawn(move || copy.run(&json!({"a": 1}), &json!(null), &json!(null)));
    assert_eq!(handle.join().expect("thread"), Ok(json!(1)));
}

/// `cargo test --release -p muster-workflow jq::tests::cost -- --ignored --nocapture`
#[test]
#[ignore = "timing; run by hand"]
fn cost_of_compile_and_run() {
    use std::time::Instant;

    let start = Instant::now();
    let program = JqProgram::compile("[.items[] | {name: .metadata.name, ns: $input.ns}]").expect("compiles");
    let compile = start.elapsed();
    let doc = json!({"items": (0..10).map(|i| json!({
        "metadata": {"name": format!("pod-{i}"), "namespace": "default", "labels": {"app": "shop"}},
        "status": {"phase": "Running", "restarts": i},
    })).collect::<Vec<_>>()});
    let input = json!({"ns": "default"});
    let vars = json!({});
    let runs: u32 = 10_000;
    let start = Instant::now();
    for _ in 0..runs {
        let out = program.run(&doc, &input, &vars).expect("runs");
        assert_eq!(out.as_array().map(Vec::len), Some(10));
    }
    let per_run = start.elapsed() / runs;
    let start = Instant::now();
    for _ in 0..runs {
        let val = convert::to_val(&doc);
        assert!(matches!(val, jaq_json::Val::Obj(_)));
    }
    let to_val = start.elapsed() / runs;
    let val = convert::to_val(&doc);
    let start = Instant::now();
    for _ in 0..runs {
        let back = convert::to_json(&val).expect("converts");
        assert!(back.is_object());
    }
    let to_json = start.elapsed() / runs;
    let start = Instant::now();
    for _ in 0..runs {
        let text = serde_json::to_string(&doc).expect("serializes");
        let val = jaq_json::read::parse_single(text.as_bytes()).expect("parses");
        let back: Value = serde_json::from_str(&val.to_string()).expect("parses");
        assert!(back.is_object());
    }
    let via_text = start.elapsed() / runs;
    let start = Instant::now();
    for _ in 0..runs {
        let text = serde_json::to_string(&doc).expect("serializes");
        let back: Value = serde_json::from_str(&text).expect("parses");
        assert!(back.is_object());
    }
    let text = start.elapsed() / runs;
    eprintln!(
        "jq compile: {compile:?}; run on 10 pods (~1 KB): {per_run:?}; to Val {to_val:?}, back {to_json:?}; \
         the same through JSON text: {via_text:?}; serde_json text round-trip alone: {text:?}"
    );
}
