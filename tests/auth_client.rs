//! muster-auth's OAuth client against a real authorization server (panva's oidc-provider on
//! loopback) and a protected MCP server that trusts only its tokens: from the server's 401 to a
//! grant, a call with it, a refresh, and a revocation. No step is mocked.

mod common;

use common::{oidc::OidcProvider, scripted::ScriptedServer};
use muster::auth::{
    Secret,
    jwt::{JwtValidator, TokenError, TrustedIssuer},
    oauth::{
        AuthError,
        discovery::{authorization_server_metadata, protected_resource_metadata},
        flow::{Callback, SignInRequest, SignIns},
        http::OAuthHttp,
        registration::{ClientMetadata, register},
    },
};
use rmcp::{
    ServiceExt,
    model::CallToolRequestParams,
    transport::{StreamableHttpClientTransport, streamable_http_client::StreamableHttpClientTransportConfig},
};
use serde_json::json;

const CALLBACK: &str = "http://127.0.0.1:9/oauth/proxy/callback";

/// Calls `whoami` on the protected server with `token`: Ok(text) or the client's error.
async fn call_with(url: &str, token: Option<&str>) -> Result<String, String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if let Some(token) = token {
        config = config.auth_header(token.to_owned());
    }
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.map_err(|e| e.to_string())?;
    let result = client
        .call_tool(CallToolRequestParams::new("whoami"))
        .await
        .map_err(|e| e.to_string())?;
    let _ = client.cancel().await;
    Ok(result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default())
}

/// The 401 of an unauthenticated request: its `WWW-Authenticate` value.
async fn challenge(url: &str) -> String {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#)
        .send()
        .await
        .expect("the server answers");
    assert_eq!(response.status(), 401);
    response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .expect("a challenge")
        .to_owned()
}

#[tokio::test]
async fn a_person_signs_in_to_a_protected_server_through_discovery_registration_and_pkce() {
    let idp = OidcProvider::start();
    let server = ScriptedServer::builder()
        .tool("whoami", true, |_| Ok(json!("you are in")))
        .serve_protected(idp.issuer())
        .await;
    let http = OAuthHttp::new();

    // Unauthenticated: refused, with a challenge naming the metadata.
    assert!(call_with(&server.url, None).await.is_err());
    let www = challenge(&server.url).await;
    assert!(www.contains("resource_metadata="), "{www}");

    // Discovery: the resource's metadata names the provider; its metadata checks out.
    let resource = protected_resource_metadata(&http, &server.url, Some(&www))
        .await
        .expect("discovered");
    assert_eq!(resource.resource, server.url);
    assert_eq!(resource.authorization_servers, [idp.issuer()]);
    let metadata = authorization_server_metadata(&http, idp.issuer())
        .await
        .expect("metadata");
    assert!(metadata.authorization_response_iss_parameter_supported);

    // Registration and the sign-in link.
    let client = register(
        &http,
        &metadata,
        &ClientMetadata {
            client_name: "muster test".into(),
            redirect_uri: CALLBACK.into(),
            scope: Some("openid offline_access".into()),
        },
    )
    .await
    .expect("registered");
    let sign_ins = SignIns::new();
    let started = sign_ins
        .start(SignInRequest {
            session: "session-1".into(),
            owner: "session-1".into(),
            server: "protected".into(),
            metadata: metadata.clone(),
            client,
            redirect_uri: CALLBACK.into(),
            resource: server.url.clone(),
            scope: Some("openid offline_access".into()),
            expected_issuer: None,
        })
        .expect("a link");

    // The person signs in; the provider redirects to the callback, which completes it once.
    let callback_url = idp.sign_in(started.url.as_str(), "alice").await;
    let callback = Callback::from_query(callback_url.query().unwrap_or_default());
    assert_eq!(callback.iss.as_deref(), Some(idp.issuer()));
    let completed = sign_ins.complete(&http, &callback).await.expect("signed in");
    assert_eq!(
        (completed.session.as_str(), completed.server.as_str()),
        ("session-1", "protected")
    );
    assert!(matches!(
        sign_ins.complete(&http, &callback).await,
        Err(AuthError::UnknownState)
    ));
    let grant = completed.grant;
    assert!(
        format!("{grant:?}").contains("[redacted]"),
        "tokens never show in Debug"
    );

    // The protected server's own validator accepts the token, for its audience only.
    let validator = JwtValidator::new(vec![TrustedIssuer::new(idp.issuer()).with_audience(server.url.clone())]);
    let claims = validator.validate(grant.access_token.expose()).await.expect("valid");
    assert_eq!(claims.sub, "alice");
    let elsewhere = JwtValidator::new(vec![
        TrustedIssuer::new(idp.issuer()).with_audience("http://127.0.0.1:9/other"),
    ]);
    assert_eq!(
        elsewhere.validate(grant.access_token.expose()).await,
        Err(TokenError::Invalid("is not for this audience".into()))
    );

    // A call with the grant succeeds; a forged token does not.
    assert_eq!(
        call_with(&server.url, Some(grant.access_token.expose()))
            .await
            .as_deref(),
        Ok("\"you are in\"")
    );
    // One signature character changed (well inside it, so the base64 stays canonical).
    let token = grant.access_token.expose();
    let at = token.len() - 10;
    let swapped = if &token[at..=at] == "A" { "B" } else { "A" };
    let forged = format!("{}{swapped}{}", &token[..at], &token[at + 1..]);
    assert_eq!(
        validator.validate(&forged).await,
        Err(TokenError::Invalid("has an invalid signature".into()))
    );
    assert!(call_with(&server.url, Some(&forged)).await.is_err());

    // Refresh: a new access token that works, and a rotated refresh token.
    let refreshed = grant.refresh(&http).await.expect("refreshed");
    assert_ne!(refreshed.access_token, grant.access_token);
    assert_ne!(refreshed.refresh_token, grant.refresh_token);
    assert_eq!(
        call_with(&server.url, Some(refreshed.access_token.expose()))
            .await
            .as_deref(),
        Ok("\"you are in\"")
    );

    // Logout: revoked at the provider; the refresh token is dead.
    assert!(refreshed.revoke(&http).await.expect("revoked"));
    let err = refreshed.refresh(&http).await.expect_err("revoked");
    assert_eq!(err.oauth_error(), Some("invalid_grant"), "{err}");
    assert!(
        !err.to_string()
            .contains(refreshed.refresh_token.as_ref().map_or("-", Secret::expose))
    );
}

#[tokio::test]
async fn a_callback_from_another_issuer_yields_no_grant() {
    let idp = OidcProvider::start();
    let http = OAuthHttp::new();
    let metadata = authorization_server_metadata(&http, idp.issuer())
        .await
        .expect("metadata");
    let client = register(
        &http,
        &metadata,
        &ClientMetadata {
            client_name: "muster test".into(),
            redirect_uri: CALLBACK.into(),
            scope: None,
        },
    )
    .await
    .expect("registered");
    let sign_ins = SignIns::new();
    let request = SignInRequest {
        session: "s".into(),
        owner: "s".into(),
        server: "protected".into(),
        metadata,
        client,
        redirect_uri: CALLBACK.into(),
        resource: "http://127.0.0.1:9/mcp".into(),
        scope: Some("openid".into()),
        expected_issuer: Some("http://127.0.0.1:1".into()),
    };
    let started = sign_ins.start(request).expect("a link");
    let callback = Callback::from_query(
        idp.sign_in(started.url.as_str(), "mallory")
            .await
            .query()
            .unwrap_or_default(),
    );
    let err = sign_ins.complete(&http, &callback).await.expect_err("refused");
    assert_eq!(
        err.to_string(),
        format!(
            "issuer mismatch: expected \"http://127.0.0.1:1\", got \"{}\"",
            idp.issuer()
        )
    );
}
