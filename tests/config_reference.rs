//! The checked-in configuration reference (`docs/config-reference.md`) is what the generator
//! prints for the current types: a doc comment, a key or a default that changed without the
//! reference being regenerated fails here.

#[path = "../examples/config_reference/reference.rs"]
#[allow(dead_code, unreachable_pub)]
mod reference;

#[test]
fn the_checked_in_config_reference_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/config-reference.md");
    let expected = format!("{}\n", reference::config_reference());
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    if actual != expected {
        let first_difference = actual
            .lines()
            .zip(expected.lines())
            .position(|(a, e)| a != e)
            .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()));
        panic!(
            "docs/config-reference.md is stale: run `{}` (first difference at line {})",
            reference::REGENERATE,
            first_difference + 1
        );
    }
}

#[test]
fn the_reference_names_every_kind_of_key_with_its_real_default() {
    let text = reference::config_reference();
    let row = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("| `{key}` |")))
            .unwrap_or_else(|| panic!("no row for {key}"))
            .to_owned()
    };
    // A struct-level serde default (Default impl) reaches the reference.
    assert!(row("aggregator.port").contains("`8090`"), "{}", row("aggregator.port"));
    assert!(row("aggregator.limits.maxJsonDepth").contains("`64`"));
    assert!(row("aggregator.oauth.mcpClient.cimd.path").contains("`\"/.well-known/oauth-client.json\"`"));
    // A field-level default function, inside an optional section.
    assert!(row("spec.progress.maxDuration").contains("`3600`"));
    assert!(row("spec.auth.tokenExchange.scopes").contains("`\"openid profile email groups\"`"));
    assert!(row("spec.auth.tokenExchange.dexTokenEndpoint").contains("*unset*"));
    // A field skipped when empty still has its real default.
    assert!(row("spec.autoStart").contains("`false`"));
    // Enumerations list their values.
    assert!(row("aggregator.transport").contains("`\"streamable-http\"`"));
    // Where the sign-in state is kept, with muster's key names (inside an optional section).
    assert!(row("aggregator.oauth.server.storage.type").contains("`\"memory\"`"));
    assert!(row("aggregator.oauth.server.storage.valkey.keyPrefix").contains("`\"muster:\"`"));
    assert!(row("aggregator.oauth.server.storage.valkey.passwordFile").contains("*unset*"));
}
