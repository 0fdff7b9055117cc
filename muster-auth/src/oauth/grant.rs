//! [`Grant`]: what a completed sign-in yields, refreshed before it expires and revoked on
//! logout.

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

use super::{error::Result, http::OAuthHttp, registration::ClientRegistration};
use crate::Secret;

/// Refresh this long before the access token expires.
pub const REFRESH_MARGIN: TimeDelta = TimeDelta::seconds(60);

/// A person's grant for one server: the tokens and what is needed to refresh and revoke them.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The access token sent to the server.
    pub access_token: Secret,
    /// The refresh token, when one was issued.
    pub refresh_token: Option<Secret>,
    /// When the access token expires, when the server said.
    pub expires_at: Option<DateTime<Utc>>,
    /// The granted scope, when the server said.
    pub scope: Option<String>,
    /// The issuer that granted it.
    pub issuer: String,
    /// Its token endpoint (for refreshes).
    pub token_endpoint: String,
    /// Its revocation endpoint, when it has one.
    pub revocation_endpoint: Option<String>,
    /// The client it was granted to.
    pub client: ClientRegistration,
    /// The resource (RFC 8707) it was granted for.
    pub resource: String,
}

/// A token endpoint's answer.
#[derive(Debug, Deserialize)]
pub(crate) struct TokenResponse {
    pub(crate) access_token: String,
    #[serde(default)]
    pub(crate) refresh_token: Option<String>,
    #[serde(default)]
    pub(crate) expires_in: Option<i64>,
    #[serde(default)]
    pub(crate) scope: Option<String>,
}

impl Grant {
    /// Whether the access token expires within [`REFRESH_MARGIN`] of `now`.
    pub fn needs_refresh(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at - REFRESH_MARGIN <= now)
    }

    /// The grant with the tokens of `response`, received at `now`.
    pub(crate) fn updated(mut self, response: TokenResponse, now: DateTime<Utc>) -> Self {
        self.access_token = Secret::new(response.access_token);
        if let Some(refresh) = response.refresh_token {
            self.refresh_token = Some(Secret::new(refresh));
        }
        self.expires_at = response.expires_in.map(|s| now + TimeDelta::seconds(s));
        if response.scope.is_some() {
            self.scope = response.scope;
        }
        self
    }

    /// A fresh access token from the refresh token (the refresh token itself may rotate).
    pub async fn refresh(&self, http: &OAuthHttp) -> Result<Grant> {
        let Some(refresh) = &self.refresh_token else {
            return Err(super::error::AuthError::Unsupported(format!(
                "the grant from {} has no refresh token; sign in again",
                self.issuer
            )));
        };
        let response: TokenResponse = http
            .post_form(
                "the token endpoint",
                &self.token_endpoint,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh.expose()),
                    ("resource", &self.resource),
                ],
                self.client.credentials(),
            )
            .await?;
        Ok(self.clone().updated(response, Utc::now()))
    }

    /// Revokes the grant at the authorization server (RFC 7009): the refresh token when there
    /// is one (which ends the access tokens issued from it), else the access token. Nothing to
    /// do (`Ok(false)`) without a revocation endpoint.
    pub async fn revoke(&self, http: &OAuthHttp) -> Result<bool> {
        let Some(endpoint) = &self.revocation_endpoint else {
            return Ok(false);
        };
        let (token, hint) = match &self.refresh_token {
            Some(refresh) => (refresh, "refresh_token"),
            None => (&self.access_token, "access_token"),
        };
        http.post_form_empty(
            "the revocation endpoint",
            endpoint,
            &[("token", token.expose()), ("token_type_hint", hint)],
            self.client.credentials(),
        )
        .await?;
        Ok(true)
    }
}
