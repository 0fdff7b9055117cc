//! [`Grant`]: what a completed sign-in yields, refreshed before it expires and revoked on
//! logout.
//!
//! The refresh is the `oauth2` crate's (`grant_type=refresh_token`, the `resource` of RFC 8707
//! added); the revocation (RFC 7009) is a form post of our own, because `oauth2` refuses every
//! revocation endpoint that is not `https` and muster also signs in at authorization servers on
//! a loopback `http` address (see the [module docs](super)).

use chrono::{DateTime, TimeDelta, Utc};
use oauth2::{RefreshToken, TokenResponse, basic::BasicTokenResponse};

use super::{
    error::Result,
    http::{OAuthHttp, oauth2_failure},
    registration::ClientRegistration,
};
use crate::Secret;

/// The token endpoint, as errors name it.
pub(crate) const TOKEN_ENDPOINT: &str = "the token endpoint";

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
    /// Whether its authorization server rotates its refresh token (answers a refresh with a
    /// new one), as learnt from its refreshes: `None` until it was refreshed, `Some(true)` once
    /// a refresh answered a different refresh token (and from then on), `Some(false)` while
    /// every refresh answered none or the same one. Only a grant that is known not to rotate
    /// is refreshed on one replica while the others use it too (the sign-in state store's
    /// `GrantFallback` reads this).
    pub rotates_refresh_tokens: Option<bool>,
}

impl Grant {
    /// Whether the access token expires within [`REFRESH_MARGIN`] of `now`.
    pub fn needs_refresh(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_some_and(|at| at - REFRESH_MARGIN <= now)
    }

    /// The grant with the tokens of `response`, received at `now`: the refresh token and the
    /// scope stay when the answer has none; an `expires_in` too large for a date is no expiry.
    pub(crate) fn updated(mut self, response: &BasicTokenResponse, now: DateTime<Utc>) -> Self {
        self.access_token = Secret::new(response.access_token().secret().as_str());
        if let Some(refresh) = response.refresh_token() {
            self.refresh_token = Some(Secret::new(refresh.secret().as_str()));
        }
        self.expires_at = response
            .expires_in()
            .and_then(|lifetime| TimeDelta::from_std(lifetime).ok())
            .and_then(|lifetime| now.checked_add_signed(lifetime));
        if let Some(scopes) = response.scopes() {
            self.scope = Some(scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "));
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
        let client = self.client.token_client(&self.issuer, &self.token_endpoint)?;
        let refresh = RefreshToken::new(refresh.expose().to_owned());
        let response = client
            .exchange_refresh_token(&refresh)
            .add_extra_param("resource", self.resource.as_str())
            .request_async(&http.oauth2_client(TOKEN_ENDPOINT))
            .await
            .map_err(|e| oauth2_failure(TOKEN_ENDPOINT, &self.token_endpoint, e))?;
        let rotated = rotated(self.refresh_token.as_ref(), response.refresh_token());
        let mut refreshed = self.clone().updated(&response, Utc::now());
        refreshed.rotates_refresh_tokens = Some(self.rotates_refresh_tokens == Some(true) || rotated);
        Ok(refreshed)
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

/// Whether a refresh with refresh token `sent` that answered `answered` rotated it: a different
/// refresh token came back (none, or the same one, is no rotation).
fn rotated(sent: Option<&Secret>, answered: Option<&RefreshToken>) -> bool {
    answered.is_some_and(|new| !sent.is_some_and(|old| old.matches(new.secret())))
}

#[cfg(test)]
mod tests;
