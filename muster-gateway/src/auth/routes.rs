//! The browser side of a sign-in: `/oauth/proxy/start` sends the person to the authorization
//! server, the callback completes the sign-in, and the Client ID Metadata Document tells
//! authorization servers who the gateway is.

use std::sync::Arc;

use axum::{
    Json, Router,
    extract::{RawQuery, State},
    http::{StatusCode, header},
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
};
use muster_auth::oauth::{flow::Callback, registration::ClientMetadata};

use super::{DownstreamAuth, SignInService};
use crate::registry::Registry;

/// What the routes answer with: the registry the signed-in sessions connect in, and sign-in.
type SignInState = State<(Arc<Registry>, Arc<SignInService>)>;

/// The sign-in routes, when `auth` signs in by link: `/oauth/proxy/start`, the callback path
/// and the client metadata document path of `aggregator.oauth.mcpClient`.
pub fn routes(registry: Arc<Registry>, auth: &DownstreamAuth) -> Router {
    let Some(service) = auth.sign_in().cloned() else {
        return Router::new();
    };
    let config = service.config.clone();
    let document = config.public_url.as_deref().map(|base| {
        let base = base.trim_end_matches('/');
        let url = format!("{base}{}", config.cimd.path);
        ClientMetadata {
            client_name: "muster".to_owned(),
            redirect_uri: format!("{base}{}", config.callback_path),
            scope: Some(config.cimd.scopes.clone()),
        }
        .metadata_document(&url)
    });
    let mut router = Router::new()
        .route("/oauth/proxy/start", get(start))
        .route(&config.callback_path, get(callback));
    if let Some(document) = document {
        router = router.route(&config.cimd.path, get(move || async move { Json(document) }));
    }
    router.with_state((registry, service))
}

async fn start(State((_, service)): SignInState, RawQuery(query): RawQuery) -> Response {
    let param = |name: &str| {
        query.as_deref().and_then(|q| {
            url::form_urlencoded::parse(q.as_bytes())
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.into_owned())
        })
    };
    let Some(state) = param("state") else {
        return page(StatusCode::NOT_FOUND, "This sign-in link is unknown or expired", "");
    };
    if let Some(redirect) = param("redirect")
        && let Err(reason) = service.remember_redirect(&state, &redirect).await
    {
        return page(StatusCode::BAD_REQUEST, "This redirect is not allowed", &reason);
    }
    match service.authorization_url(&state).await {
        Ok(Some(url)) => Redirect::to(&url).into_response(),
        Ok(None) => page(
            StatusCode::NOT_FOUND,
            "This sign-in link is unknown or expired",
            "Ask your agent to sign in again (core_auth_login) for a new link.",
        ),
        Err(e) => page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Signing in is not possible right now",
            &e.to_string(),
        ),
    }
}

async fn callback(State((registry, service)): SignInState, RawQuery(query): RawQuery) -> Response {
    let callback = Callback::from_query(query.as_deref().unwrap_or_default());
    match service.complete(&registry, &callback).await {
        Ok((done, Some(redirect))) => {
            tracing::info!(server = %done.server, "signed in; sending the browser to its allowed redirect");
            Redirect::to(&redirect).into_response()
        }
        Ok((done, None)) => page(
            StatusCode::OK,
            &format!("Signed in to {}", done.server),
            "You can close this window and return to your agent.",
        ),
        Err(reason) => {
            tracing::warn!(%reason, "sign-in callback refused");
            page(StatusCode::BAD_REQUEST, "The sign-in did not complete", &reason)
        }
    }
}

/// A minimal HTML page (text escaped).
fn page(status: StatusCode, title: &str, detail: &str) -> Response {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head>\
         <body><h1>{t}</h1><p>{d}</p></body></html>",
        t = escape(title),
        d = escape(detail)
    );
    (status, [(header::CACHE_CONTROL, "no-store")], Html(body)).into_response()
}
