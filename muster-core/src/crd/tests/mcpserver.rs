//! MCPServer: parsing, defaults and one test per validation rule.

use super::{assert_has, assert_only, assert_valid, dropped, yaml, yaml_error};
use crate::crd::{
    AuthType, ClientCredentialsSecretRef, GrantScope, HeaderValueFrom, HeaderValueSourceType, MCPServer, MCPServerAuth,
    MCPServerAuthAuthorizationServer, MCPServerFamily, MCPServerHeaderFrom, MCPServerProgress, MCPServerState,
    MCPServerStatus, ServerType, TokenExchangeConfig,
};

fn stdio() -> MCPServer {
    yaml(
        r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: git-tools
spec:
  type: stdio
  command: npx
  args: ["@modelcontextprotocol/server-git"]
  env:
    GIT_ROOT: /workspace
"#,
    )
}

fn remote() -> MCPServer {
    yaml(
        r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: api-tools
spec:
  type: streamable-http
  url: https://api.example.com/mcp
"#,
    )
}

fn with_auth(auth: MCPServerAuth) -> MCPServer {
    let mut server = remote();
    server.spec.auth = Some(auth);
    server
}

fn pinned(issuer: &str) -> MCPServerAuthAuthorizationServer {
    MCPServerAuthAuthorizationServer {
        issuer: issuer.to_owned(),
        ..Default::default()
    }
}

fn exchange() -> TokenExchangeConfig {
    TokenExchangeConfig {
        enabled: true,
        dex_token_endpoint: Some("https://dex.remote.example.com/token".to_owned()),
        connector_id: Some("local-dex".to_owned()),
        ..Default::default()
    }
}

fn header_from(name: &str) -> MCPServerHeaderFrom {
    MCPServerHeaderFrom {
        name: name.to_owned(),
        value_from: HeaderValueFrom {
            source_type: Some(HeaderValueSourceType::Secret),
            name: "tokens".to_owned(),
            key: name.to_ascii_lowercase(),
        },
    }
}

#[test]
fn valid_stdio_and_remote_servers_pass() {
    assert_valid(stdio().validate());
    assert_valid(remote().validate());
}

#[test]
fn spec_defaults_are_the_documented_ones() {
    let server = remote();
    assert_eq!(server.spec.timeout, 30);
    assert!(!server.spec.auto_start);
    assert!(!server.spec.suspended);
    let progress: MCPServerProgress = yaml("{}");
    assert_eq!(progress.max_duration, 3600);
    assert_eq!(progress, MCPServerProgress::default());
}

#[test]
fn missing_api_version_and_kind_default_to_the_mcpserver_ones() {
    let server: MCPServer = yaml("metadata: {name: a}\nspec: {type: sse, url: 'https://a.example/sse'}");
    assert_eq!(server.api_version, "muster.giantswarm.io/v1alpha1");
    assert_eq!(server.kind, "MCPServer");
    assert_valid(server.validate());
}

#[test]
fn kubernetes_metadata_and_unknown_top_level_fields_are_ignored() {
    let server: MCPServer = yaml(
        r#"
apiVersion: muster.giantswarm.io/v1alpha1
kind: MCPServer
metadata:
  name: api-tools
  uid: 6f1c
  resourceVersion: "42"
  creationTimestamp: "2026-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
spec:
  type: sse
  url: https://a.example/sse
somethingElse: true
"#,
    );
    assert_eq!(server.metadata.name, "api-tools");
}

#[test]
fn unknown_spec_field_is_dropped_and_named() {
    let doc = "metadata: {name: a, uid: u1, resourceVersion: '7'}\nspec: {type: stdio, command: npx, comand: npx}";
    assert_eq!(
        dropped(doc, MCPServer::from_document),
        vec![r#"unknown field "spec.comand" (dropped)"#]
    );
    let (server, _) = MCPServer::from_document(&yaml(doc)).expect("loads");
    assert_eq!(server.spec.command.as_deref(), Some("npx"));
    assert_valid(server.validate());
    let written = serde_json::to_value(&server).expect("serializes");
    assert!(written["spec"].get("comand").is_none(), "{written}");
}

#[test]
fn unknown_field_in_nested_spec_object_and_at_the_top_is_dropped_and_named() {
    let doc = "metadata: {name: a}\nextra: 1\nspec: {type: sse, url: 'https://a', auth: {forwardTokens: true,                tokenExchange: {enabled: false, dexEndpoint: x}}}";
    assert_eq!(
        dropped(doc, MCPServer::from_document),
        vec![
            r#"unknown field "extra" (dropped)"#,
            r#"unknown field "spec.auth.forwardTokens" (dropped)"#,
            r#"unknown field "spec.auth.tokenExchange.dexEndpoint" (dropped)"#,
        ]
    );
}

#[test]
fn a_known_field_with_a_wrong_value_is_still_refused_with_its_path() {
    let value: serde_json::Value = yaml("metadata: {name: a}\nspec: {type: stdio, command: npx, timeout: soon}");
    let error = MCPServer::from_document(&value).expect_err("a wrong value is refused");
    assert_eq!(error.path.as_deref(), Some("spec.timeout"));
    assert!(error.message.contains("invalid type"), "{error}");
}

#[test]
fn fields_of_the_other_server_type_are_dropped_with_a_warning_but_env_on_a_remote_server_is_refused() {
    let stdio = "metadata: {name: a}\nspec: {type: stdio, command: npx, url: 'https://a', headers: {X-A: b},                  auth: {type: none}}";
    assert_eq!(
        dropped(stdio, MCPServer::from_document),
        vec![
            r#"field "spec.url" does not apply to a stdio server (dropped)"#,
            r#"field "spec.headers" does not apply to a stdio server (dropped)"#,
            r#"field "spec.auth" does not apply to a stdio server (dropped)"#,
        ]
    );
    let (server, _) = MCPServer::from_document(&yaml(stdio)).expect("loads");
    assert!(server.spec.url.is_none() && server.spec.headers.is_empty() && server.spec.auth.is_none());
    assert_valid(server.validate());

    let remote = "metadata: {name: a}\nspec: {type: sse, url: 'https://a', command: npx, args: [x], autoStart: true}";
    assert_eq!(
        dropped(remote, MCPServer::from_document),
        vec![
            r#"field "spec.command" does not apply to a sse server (dropped)"#,
            r#"field "spec.args" does not apply to a sse server (dropped)"#,
            r#"field "spec.autoStart" does not apply to a sse server (dropped)"#,
        ]
    );

    let env = "metadata: {name: a}\nspec: {type: sse, url: 'https://a', env: {A: b}}";
    assert!(dropped(env, MCPServer::from_document).is_empty());
    let (server, _) = MCPServer::from_document(&yaml(env)).expect("parses");
    assert_only(
        server.validate(),
        "spec.env",
        "env is refused on a remote server (stdio servers only)",
    );
}

#[test]
fn wrong_api_version_is_refused() {
    let mut server = remote();
    server.api_version = "v1".to_owned();
    assert_only(
        server.validate(),
        "apiVersion",
        "apiVersion must be muster.giantswarm.io/v1alpha1 (is \"v1\")",
    );
}

#[test]
fn wrong_kind_is_refused() {
    let mut server = remote();
    server.kind = "Workflow".to_owned();
    assert_only(server.validate(), "kind", "kind must be MCPServer (is \"Workflow\")");
}

#[test]
fn server_without_name_is_refused() {
    let mut server = remote();
    server.metadata.name = String::new();
    assert_only(server.validate(), "metadata.name", "server name is required");
}

#[test]
fn server_without_type_is_refused() {
    let mut server = remote();
    server.spec.server_type = None;
    assert_only(
        server.validate(),
        "spec.type",
        "type is required (one of stdio, streamable-http, sse)",
    );
}

#[test]
fn unknown_server_type_does_not_parse_and_lists_the_types() {
    let error = yaml_error::<MCPServer>("metadata: {name: a}\nspec: {type: http}");
    assert!(error.contains("unknown variant `http`"), "{error}");
    assert!(error.contains("streamable-http"), "{error}");
}

#[test]
fn server_types_use_the_documented_spellings() {
    for (spelling, server_type) in [
        ("stdio", ServerType::Stdio),
        ("streamable-http", ServerType::StreamableHttp),
        ("sse", ServerType::Sse),
    ] {
        assert_eq!(serde_json::to_value(server_type).expect("serializes"), spelling);
        assert_eq!(server_type.as_str(), spelling);
    }
}

#[test]
fn tool_prefix_not_matching_the_pattern_is_refused() {
    let mut server = remote();
    server.spec.tool_prefix = Some("1bad".to_owned());
    assert_only(
        server.validate(),
        "spec.toolPrefix",
        "toolPrefix \"1bad\" must match ^[a-zA-Z][a-zA-Z0-9_-]*$",
    );
    server.spec.tool_prefix = Some("remote_k8s-2".to_owned());
    assert_valid(server.validate());
}

#[test]
fn family_without_name_is_refused() {
    let mut server = remote();
    server.spec.family = Some(MCPServerFamily {
        name: String::new(),
        instance_arg: "management_cluster".to_owned(),
    });
    assert_only(
        server.validate(),
        "spec.family.name",
        "family.name is required when family is set",
    );
}

#[test]
fn family_without_instance_arg_is_refused() {
    let mut server = remote();
    server.spec.family = Some(MCPServerFamily {
        name: "kubernetes".to_owned(),
        instance_arg: String::new(),
    });
    assert_only(
        server.validate(),
        "spec.family.instanceArg",
        "family.instanceArg is required when family is set",
    );
}

#[test]
fn family_name_not_matching_the_pattern_is_refused() {
    let mut server = remote();
    server.spec.family = Some(MCPServerFamily {
        name: "kube rnetes".to_owned(),
        instance_arg: "cluster".to_owned(),
    });
    assert_only(
        server.validate(),
        "spec.family.name",
        "family.name \"kube rnetes\" must match ^[a-zA-Z][a-zA-Z0-9_-]*$",
    );
}

#[test]
fn family_instance_arg_with_a_dash_is_refused() {
    let mut server = remote();
    server.spec.family = Some(MCPServerFamily {
        name: "kubernetes".to_owned(),
        instance_arg: "management-cluster".to_owned(),
    });
    assert_only(
        server.validate(),
        "spec.family.instanceArg",
        "family.instanceArg \"management-cluster\" must match ^[a-zA-Z][a-zA-Z0-9_]*$",
    );
}

#[test]
fn description_over_500_characters_is_refused() {
    let mut server = remote();
    server.spec.description = Some("é".repeat(500));
    assert_valid(server.validate());
    server.spec.description = Some("é".repeat(501));
    assert_only(
        server.validate(),
        "spec.description",
        "description must be at most 500 characters (has 501)",
    );
}

#[test]
fn stdio_server_without_command_is_refused() {
    let mut server = stdio();
    server.spec.command = None;
    assert_only(
        server.validate(),
        "spec.command",
        "command is required for a stdio server",
    );
    server.spec.command = Some("  ".to_owned());
    assert_only(
        server.validate(),
        "spec.command",
        "command is required for a stdio server",
    );
}

#[test]
fn url_headers_headers_from_and_auth_are_refused_on_a_stdio_server() {
    let mut server = stdio();
    server.spec.url = Some("https://a.example/mcp".to_owned());
    server
        .spec
        .headers
        .insert("X-MCP-Toolsets".to_owned(), "repos".to_owned());
    server.spec.headers_from = vec![header_from("Authorization")];
    server.spec.auth = Some(MCPServerAuth::default());
    let errors = server.validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "spec.url: url is refused on a stdio server (remote servers only)",
            "spec.headers: headers is refused on a stdio server (remote servers only)",
            "spec.headersFrom: headersFrom is refused on a stdio server (remote servers only)",
            "spec.auth: auth is refused on a stdio server (remote servers only)",
        ]
    );
}

#[test]
fn remote_server_without_url_is_refused() {
    let mut server = remote();
    server.spec.url = None;
    assert_only(
        server.validate(),
        "spec.url",
        "url is required for a streamable-http server",
    );
    server.spec.server_type = Some(ServerType::Sse);
    assert_only(server.validate(), "spec.url", "url is required for a sse server");
}

#[test]
fn remote_url_with_another_scheme_is_refused() {
    let mut server = remote();
    server.spec.url = Some("ftp://api.example.com/mcp".to_owned());
    assert_only(
        server.validate(),
        "spec.url",
        "url must use the http or https scheme (is ftp)",
    );
    server.spec.url = Some("http://localhost:8080/mcp".to_owned());
    assert_valid(server.validate());
}

#[test]
fn remote_url_that_does_not_parse_is_refused() {
    let mut server = remote();
    server.spec.url = Some("api.example.com/mcp".to_owned());
    assert_only(
        server.validate(),
        "spec.url",
        "url is not a valid URL (relative URL without a base)",
    );
}

#[test]
fn remote_url_over_2048_characters_is_refused() {
    let mut server = remote();
    let base = "https://api.example.com/";
    server.spec.url = Some(format!("{base}{}", "a".repeat(2048 - base.len())));
    assert_valid(server.validate());
    server.spec.url = Some(format!("{base}{}", "a".repeat(2049 - base.len())));
    assert_only(
        server.validate(),
        "spec.url",
        "url must be at most 2048 characters (has 2049)",
    );
}

#[test]
fn remote_url_with_a_user_name_or_password_is_refused() {
    let message = "url must not contain a user name or password: read credentials from a Secret \
                   with headersFrom";
    for url in [
        "https://user@api.example.com/mcp",
        "https://user:secret@api.example.com/mcp",
        "https://:secret@api.example.com/mcp",
    ] {
        let mut server = remote();
        server.spec.url = Some(url.to_owned());
        assert_only(server.validate(), "spec.url", message);
    }
}

#[test]
fn command_args_and_env_are_refused_on_a_remote_server() {
    let mut server = remote();
    server.spec.command = Some("npx".to_owned());
    server.spec.args = vec!["-y".to_owned()];
    server.spec.env.insert("TOKEN".to_owned(), "secret".to_owned());
    let errors = server.validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "spec.command: command is refused on a remote server (stdio servers only)",
            "spec.args: args is refused on a remote server (stdio servers only)",
            "spec.env: env is refused on a remote server (stdio servers only)",
        ]
    );
}

#[test]
fn more_than_32_headers_are_refused() {
    let mut server = remote();
    for i in 0..32 {
        server.spec.headers.insert(format!("X-Header-{i}"), "v".to_owned());
    }
    assert_valid(server.validate());
    server.spec.headers.insert("X-Header-32".to_owned(), "v".to_owned());
    assert_only(
        server.validate(),
        "spec.headers",
        "headers must have at most 32 entries (has 33)",
    );
}

#[test]
fn credential_header_with_a_value_is_refused_in_any_case() {
    for name in ["Authorization", "proxy-authorization", "COOKIE", "x-api-key"] {
        let mut server = remote();
        server.spec.headers.insert(name.to_owned(), "Bearer abc".to_owned());
        assert_only(
            server.validate(),
            &format!("spec.headers.{name}"),
            &format!(
                "header {name} carries a credential and is refused in headers: read it from a \
                 Secret with headersFrom"
            ),
        );
    }
}

#[test]
fn empty_credential_header_is_accepted() {
    let mut server = remote();
    server.spec.headers.insert("Authorization".to_owned(), String::new());
    assert_valid(server.validate());
}

#[test]
fn header_with_an_invalid_name_or_value_is_refused() {
    let mut server = remote();
    server.spec.headers.insert("X Bad".to_owned(), "ok".to_owned());
    server
        .spec
        .headers
        .insert("X-Good".to_owned(), "line\nbreak".to_owned());
    let result = server.validate();
    assert_has(
        &result,
        "spec.headers.X Bad",
        "\"X Bad\" is not a valid HTTP header name",
    );
    assert_has(
        &result,
        "spec.headers.X-Good",
        "the value of header X-Good is not a valid HTTP header value",
    );
}

#[test]
fn more_than_32_headers_from_are_refused() {
    let mut server = remote();
    server.spec.headers_from = (0..33).map(|i| header_from(&format!("X-H-{i}"))).collect();
    assert_only(
        server.validate(),
        "spec.headersFrom",
        "headersFrom must have at most 32 entries (has 33)",
    );
}

#[test]
fn headers_from_name_must_have_1_to_256_characters() {
    let mut server = remote();
    server.spec.headers_from = vec![header_from("")];
    server.spec.headers_from[0].value_from.key = "k".to_owned();
    assert_only(
        server.validate(),
        "spec.headersFrom[0].name",
        "headersFrom name is required",
    );
    server.spec.headers_from = vec![header_from(&"X".repeat(257))];
    assert_only(
        server.validate(),
        "spec.headersFrom[0].name",
        "headersFrom name must be at most 256 characters (has 257)",
    );
}

#[test]
fn duplicate_headers_from_names_are_refused() {
    let mut server = remote();
    server.spec.headers_from = vec![header_from("Authorization"), header_from("authorization")];
    assert_only(
        server.validate(),
        "spec.headersFrom[1].name",
        "duplicate headersFrom name \"authorization\" (names are unique, in any case)",
    );
}

#[test]
fn headers_from_without_type_name_or_key_is_refused() {
    let server: MCPServer = yaml(
        r#"
metadata: {name: a}
spec:
  type: sse
  url: https://a.example/sse
  headersFrom:
    - name: Authorization
      valueFrom: {}
"#,
    );
    let errors = server.validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "spec.headersFrom[0].valueFrom.type: valueFrom.type is required (Secret)",
            "spec.headersFrom[0].valueFrom.name: valueFrom.name is required",
            "spec.headersFrom[0].valueFrom.key: valueFrom.key is required",
        ]
    );
}

#[test]
fn headers_from_with_another_source_type_does_not_parse() {
    let error = yaml_error::<MCPServer>(
        "metadata: {name: a}\nspec: {type: sse, headersFrom: [{name: A, valueFrom: {type: ConfigMap}}]}",
    );
    assert!(error.contains("unknown variant `ConfigMap`"), "{error}");
}

#[test]
fn timeout_outside_1_to_300_is_refused() {
    let mut server = remote();
    for ok in [1, 300] {
        server.spec.timeout = ok;
        assert_valid(server.validate());
    }
    server.spec.timeout = 0;
    assert_only(
        server.validate(),
        "spec.timeout",
        "timeout must be between 1 and 300 seconds (is 0)",
    );
    server.spec.timeout = 301;
    assert_only(
        server.validate(),
        "spec.timeout",
        "timeout must be between 1 and 300 seconds (is 301)",
    );
}

#[test]
fn progress_max_duration_below_timeout_is_refused() {
    let mut server = remote();
    server.spec.timeout = 60;
    server.spec.progress = Some(MCPServerProgress { max_duration: 60 });
    assert_valid(server.validate());
    server.spec.progress = Some(MCPServerProgress { max_duration: 59 });
    assert_only(
        server.validate(),
        "spec.progress.maxDuration",
        "progress.maxDuration must be at least timeout (60) (is 59)",
    );
}

#[test]
fn progress_max_duration_over_3600_is_refused() {
    let mut server = remote();
    server.spec.progress = Some(MCPServerProgress { max_duration: 3601 });
    assert_only(
        server.validate(),
        "spec.progress.maxDuration",
        "progress.maxDuration must be at most 3600 seconds (is 3601)",
    );
}

#[test]
fn unknown_auth_type_does_not_parse() {
    let error =
        yaml_error::<MCPServer>("metadata: {name: a}\nspec: {type: sse, url: 'https://a', auth: {type: basic}}");
    assert!(error.contains("unknown variant `basic`"), "{error}");
}

#[test]
fn auth_types_use_the_documented_spellings() {
    let auth: MCPServerAuth = yaml("type: none");
    assert_eq!(auth.auth_type, Some(AuthType::None));
    let auth: MCPServerAuth = yaml("type: oauth");
    assert_eq!(auth.auth_type, Some(AuthType::Oauth));
}

#[test]
fn forward_identity_without_oauth_and_authorization_server_is_refused() {
    let message = "forwardIdentity requires auth.type oauth and auth.authorizationServer";
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_identity: true,
        ..Default::default()
    });
    assert_only(server.validate(), "spec.auth.forwardIdentity", message);
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::None),
        forward_identity: true,
        authorization_server: Some(pinned("https://github.com/login/oauth")),
        ..Default::default()
    });
    assert_only(server.validate(), "spec.auth.forwardIdentity", message);
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_identity: true,
        authorization_server: Some(pinned("https://github.com/login/oauth")),
        ..Default::default()
    });
    assert_valid(server.validate());
}

#[test]
fn provider_apps_without_forwarding_are_refused() {
    let mut auth = MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        provider_apps: vec!["github".to_owned()],
        ..Default::default()
    };
    assert_only(
        with_auth(auth.clone()).validate(),
        "spec.auth.providerApps",
        "providerApps requires forwardToken or forwardIdentity",
    );
    auth.forward_token = true;
    assert_valid(with_auth(auth).validate());
}

#[test]
fn forward_token_and_authorization_server_are_mutually_exclusive() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_token: true,
        authorization_server: Some(pinned("https://github.com/login/oauth")),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.forwardToken",
        "forwardToken and authorizationServer are mutually exclusive",
    );
}

#[test]
fn forward_token_and_token_exchange_are_mutually_exclusive() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_token: true,
        token_exchange: Some(exchange()),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.forwardToken",
        "forwardToken and tokenExchange are mutually exclusive",
    );
}

#[test]
fn token_exchange_and_authorization_server_are_mutually_exclusive() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        token_exchange: Some(exchange()),
        authorization_server: Some(pinned("https://github.com/login/oauth")),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.tokenExchange",
        "tokenExchange and authorizationServer are mutually exclusive",
    );
}

#[test]
fn disabled_token_exchange_is_not_exclusive_with_forward_token() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_token: true,
        token_exchange: Some(TokenExchangeConfig::default()),
        ..Default::default()
    });
    assert_valid(server.validate());
}

#[test]
fn required_audience_with_whitespace_is_refused() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        forward_token: true,
        required_audiences: vec!["dex-k8s-authenticator".to_owned(), "two words".to_owned()],
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.requiredAudiences[1]",
        "audience \"two words\" must not contain whitespace",
    );
}

#[test]
fn enabled_token_exchange_without_endpoint_or_connector_is_refused() {
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        token_exchange: Some(TokenExchangeConfig {
            enabled: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    let errors = server.validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "spec.auth.tokenExchange.dexTokenEndpoint: tokenExchange.dexTokenEndpoint is \
             required when token exchange is enabled",
            "spec.auth.tokenExchange.connectorId: tokenExchange.connectorId is required when \
             token exchange is enabled",
        ]
    );
}

#[test]
fn token_exchange_endpoint_must_be_https() {
    let mut config = exchange();
    config.dex_token_endpoint = Some("http://dex.example.com/token".to_owned());
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        token_exchange: Some(config),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.tokenExchange.dexTokenEndpoint",
        "tokenExchange.dexTokenEndpoint must use the https scheme (an https URL is required)",
    );
}

#[test]
fn token_exchange_expected_issuer_must_be_https() {
    let mut config = exchange();
    config.expected_issuer = Some("dex.internal".to_owned());
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        token_exchange: Some(config),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.tokenExchange.expectedIssuer",
        "tokenExchange.expectedIssuer is not a valid URL (an https URL is required)",
    );
}

#[test]
fn token_exchange_scopes_and_secret_keys_default_to_the_documented_values() {
    let config: TokenExchangeConfig = yaml("enabled: true\nclientCredentialsSecretRef: {name: creds}");
    assert_eq!(config.scopes, "openid profile email groups");
    let secret = config.client_credentials_secret_ref.expect("set");
    assert_eq!(secret.client_id_key, "client-id");
    assert_eq!(secret.client_secret_key, "client-secret");
    assert_eq!(
        secret,
        ClientCredentialsSecretRef {
            name: "creds".to_owned(),
            ..Default::default()
        }
    );
}

#[test]
fn client_credentials_secret_ref_without_name_is_refused() {
    let mut config = exchange();
    config.client_credentials_secret_ref = Some(ClientCredentialsSecretRef::default());
    let server = with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        token_exchange: Some(config),
        ..Default::default()
    });
    assert_only(
        server.validate(),
        "spec.auth.tokenExchange.clientCredentialsSecretRef.name",
        "clientCredentialsSecretRef.name is required",
    );
}

fn with_pinned(server: MCPServerAuthAuthorizationServer) -> MCPServer {
    with_auth(MCPServerAuth {
        auth_type: Some(AuthType::Oauth),
        authorization_server: Some(server),
        ..Default::default()
    })
}

#[test]
fn authorization_server_without_issuer_is_refused() {
    assert_only(
        with_pinned(pinned("")).validate(),
        "spec.auth.authorizationServer.issuer",
        "authorizationServer.issuer is required",
    );
}

#[test]
fn authorization_server_issuer_must_be_https() {
    assert_only(
        with_pinned(pinned("http://github.com/login/oauth")).validate(),
        "spec.auth.authorizationServer.issuer",
        "authorizationServer.issuer must use the https scheme (an https URL is required)",
    );
}

#[test]
fn authorization_server_issuer_with_trailing_slash_query_or_fragment_is_refused() {
    let path = "spec.auth.authorizationServer.issuer";
    assert_only(
        with_pinned(pinned("https://github.com/login/oauth/")).validate(),
        path,
        "authorizationServer.issuer must not end with a slash",
    );
    assert_only(
        with_pinned(pinned("https://github.com/login/oauth?x=1")).validate(),
        path,
        "authorizationServer.issuer must not have a query",
    );
    assert_only(
        with_pinned(pinned("https://github.com/login/oauth#top")).validate(),
        path,
        "authorizationServer.issuer must not have a fragment",
    );
}

#[test]
fn authorization_and_token_endpoints_are_set_together() {
    let mut server = pinned("https://github.com/login/oauth");
    server.authorization_endpoint = Some("https://github.com/login/oauth/authorize".to_owned());
    assert_only(
        with_pinned(server.clone()).validate(),
        "spec.auth.authorizationServer.tokenEndpoint",
        "authorizationServer.authorizationEndpoint and tokenEndpoint are set together: \
         tokenEndpoint is missing",
    );
    server.authorization_endpoint = None;
    server.token_endpoint = Some("https://github.com/login/oauth/access_token".to_owned());
    assert_only(
        with_pinned(server).validate(),
        "spec.auth.authorizationServer.authorizationEndpoint",
        "authorizationServer.authorizationEndpoint and tokenEndpoint are set together: \
         authorizationEndpoint is missing",
    );
}

#[test]
fn authorization_server_endpoints_must_be_https() {
    let mut server = pinned("https://github.com/login/oauth");
    server.authorization_endpoint = Some("http://github.com/login/oauth/authorize".to_owned());
    server.token_endpoint = Some("https://github.com/login/oauth/access_token".to_owned());
    server.revocation_endpoint = Some("http://gitlab.example.com/oauth/revoke".to_owned());
    let errors = with_pinned(server).validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "spec.auth.authorizationServer.authorizationEndpoint: authorizationServer.\
             authorizationEndpoint must use the https scheme (an https URL is required)",
            "spec.auth.authorizationServer.revocationEndpoint: authorizationServer.\
             revocationEndpoint must use the https scheme (an https URL is required)",
        ]
    );
}

#[test]
fn expected_issuer_needs_both_endpoints() {
    let mut server = pinned("https://github.com/apps/muster");
    server.expected_issuer = Some("https://github.com/login/oauth".to_owned());
    assert_only(
        with_pinned(server.clone()).validate(),
        "spec.auth.authorizationServer.expectedIssuer",
        "authorizationServer.expectedIssuer needs authorizationEndpoint and tokenEndpoint",
    );
    server.authorization_endpoint = Some("https://github.com/login/oauth/authorize".to_owned());
    server.token_endpoint = Some("https://github.com/login/oauth/access_token".to_owned());
    assert_valid(with_pinned(server).validate());
}

#[test]
fn grant_scope_defaults_to_session_and_accepts_subject_only_otherwise() {
    let server: MCPServerAuthAuthorizationServer = yaml("issuer: https://a.example");
    assert_eq!(server.grant_scope, GrantScope::Session);
    let server: MCPServerAuthAuthorizationServer = yaml("issuer: https://a.example\ngrantScope: subject");
    assert_eq!(server.grant_scope, GrantScope::Subject);
    let error = yaml_error::<MCPServerAuthAuthorizationServer>("issuer: https://a.example\ngrantScope: person");
    assert!(error.contains("unknown variant `person`"), "{error}");
}

#[test]
fn restart_requested_at_must_be_an_rfc3339_timestamp() {
    let server: MCPServer =
        yaml("metadata: {name: a}\nspec: {type: sse, url: 'https://a', restartRequestedAt: '2026-09-21T12:43:00Z'}");
    assert_eq!(
        server.spec.restart_requested_at.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-09-21T12:43:00+00:00")
    );
    let error = yaml_error::<MCPServer>(
        "metadata: {name: a}\nspec: {type: sse, url: 'https://a', restartRequestedAt: yesterday}",
    );
    assert!(
        error.contains("invalid timestamp \"yesterday\": expected an RFC 3339 timestamp"),
        "{error}"
    );
}

#[test]
fn states_serialize_with_the_documented_strings() {
    let expected = [
        (MCPServerState::Running, "Running"),
        (MCPServerState::Starting, "Starting"),
        (MCPServerState::Stopped, "Stopped"),
        (MCPServerState::Connected, "Connected"),
        (MCPServerState::AuthRequired, "Auth Required"),
        (MCPServerState::AwaitingSession, "Awaiting Session"),
        (MCPServerState::Connecting, "Connecting"),
        (MCPServerState::Disconnected, "Disconnected"),
        (MCPServerState::Failed, "Failed"),
    ];
    for (state, spelling) in expected {
        assert_eq!(serde_json::to_value(state).expect("serializes"), spelling);
        assert_eq!(state.to_string(), spelling);
        let parsed: MCPServerState = serde_json::from_value(serde_json::json!(spelling)).expect("parses");
        assert_eq!(parsed, state);
    }
}

#[test]
fn ready_holds_in_the_reachable_states_only() {
    let ready: Vec<_> = MCPServerState::ALL.into_iter().filter(|s| s.is_ready()).collect();
    assert_eq!(
        ready,
        [
            MCPServerState::Running,
            MCPServerState::Connected,
            MCPServerState::AuthRequired,
            MCPServerState::AwaitingSession,
        ]
    );
}

#[test]
fn status_parses_every_documented_field() {
    let status: MCPServerStatus = yaml(
        r#"
state: Awaiting Session
health: healthy
lastError: ""
lastConnected: "2026-09-21T12:41:03Z"
restartCount: 2
lastRestartedAt: "2026-09-21T12:00:00Z"
consecutiveFailures: 3
lastAttempt: "2026-09-21T12:42:00Z"
nextRetryAfter: "2026-09-21T12:43:00Z"
lastFailureHTTPStatus: 504
conditions:
  - type: Ready
    status: "True"
    reason: AwaitingSession
    message: Served per session.
    lastTransitionTime: "2026-09-21T12:41:03Z"
"#,
    );
    assert_eq!(status.state, Some(MCPServerState::AwaitingSession));
    assert_eq!(status.last_failure_http_status, Some(504));
    assert_eq!(status.restart_count, 2);
    assert_eq!(status.consecutive_failures, 3);
    assert_eq!(status.conditions[0].reason, "AwaitingSession");
    let json = serde_json::to_value(&status).expect("serializes");
    assert_eq!(json["lastFailureHTTPStatus"], 504);
    assert_eq!(json["state"], "Awaiting Session");
    assert_eq!(json["nextRetryAfter"], "2026-09-21T12:43:00Z");
    let back: MCPServerStatus = serde_json::from_value(json).expect("parses");
    assert_eq!(back, status);
}

#[test]
fn a_server_with_several_violations_reports_all_of_them() {
    let server: MCPServer = yaml(
        r#"
metadata: {name: ""}
spec:
  type: streamable-http
  toolPrefix: "-x"
  url: "ftp://user@host/mcp"
  env: {A: b}
  timeout: 0
  headers: {Cookie: "session=1"}
  auth:
    forwardToken: true
    authorizationServer: {issuer: "https://a.example/"}
"#,
    );
    let errors = server.validate().expect_err("refused");
    assert_eq!(
        errors.to_lines(),
        vec![
            "metadata.name: server name is required",
            "spec.toolPrefix: toolPrefix \"-x\" must match ^[a-zA-Z][a-zA-Z0-9_-]*$",
            "spec.url: url must use the http or https scheme (is ftp)",
            "spec.url: url must not contain a user name or password: read credentials from a \
             Secret with headersFrom",
            "spec.env: env is refused on a remote server (stdio servers only)",
            "spec.headers.Cookie: header Cookie carries a credential and is refused in headers: \
             read it from a Secret with headersFrom",
            "spec.timeout: timeout must be between 1 and 300 seconds (is 0)",
            "spec.auth.forwardToken: forwardToken and authorizationServer are mutually exclusive",
            "spec.auth.authorizationServer.issuer: authorizationServer.issuer must not end with \
             a slash",
        ]
    );
    let display = errors.to_string();
    assert_eq!(display.lines().count(), 9);
    assert!(display.starts_with("metadata.name: server name is required\nspec.toolPrefix: "));
}

#[test]
fn spec_validate_checks_the_spec_alone() {
    let mut server = remote();
    server.metadata.name = String::new();
    assert_valid(server.spec.validate());
    server.spec.timeout = 0;
    assert_only(
        server.spec.validate(),
        "spec.timeout",
        "timeout must be between 1 and 300 seconds (is 0)",
    );
}
