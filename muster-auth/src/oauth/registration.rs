//! The gateway as an OAuth client of an authorization server: registered dynamically (RFC
//! 7591), identified by a Client ID Metadata Document it serves, or registered out of band.

use oauth2::{ClientId, ClientSecret, EndpointNotSet, EndpointSet, TokenUrl, basic::BasicClient};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{
    discovery::AuthorizationServerMetadata,
    error::{AuthError, Result},
    http::OAuthHttp,
};
use crate::Secret;

/// How the client id came about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RegistrationKind {
    /// RFC 7591 dynamic registration.
    Dynamic,
    /// The client id is the URL of the Client ID Metadata Document the gateway serves.
    MetadataDocument,
    /// Registered out of band (`clientCredentialsSecretRef`, `aggregator.oauth.mcpClient.clientId`).
    PreRegistered,
}

/// The gateway's client registration with one authorization server.
#[derive(Debug, Clone)]
pub struct ClientRegistration {
    /// The client id.
    pub client_id: String,
    /// The client secret of a confidential client.
    pub client_secret: Option<Secret>,
    /// How it was obtained.
    pub kind: RegistrationKind,
}

impl ClientRegistration {
    /// A client registered out of band.
    pub fn pre_registered(client_id: impl Into<String>, client_secret: Option<Secret>) -> Self {
        Self {
            client_id: client_id.into(),
            client_secret,
            kind: RegistrationKind::PreRegistered,
        }
    }

    /// The client identified by the metadata document at `document_url`.
    pub fn metadata_document(document_url: impl Into<String>) -> Self {
        Self {
            client_id: document_url.into(),
            client_secret: None,
            kind: RegistrationKind::MetadataDocument,
        }
    }

    /// The id and secret to authenticate token requests with.
    pub fn credentials(&self) -> (&str, Option<&Secret>) {
        (&self.client_id, self.client_secret.as_ref())
    }

    /// This client as the `oauth2` crate knows it, at `token_endpoint` of `issuer`. A client
    /// with a secret authenticates with HTTP Basic (`client_secret_basic`, the id and secret
    /// form-encoded first, RFC 6749 §2.3.1); one without sends its `client_id` in the form
    /// (`none`). Refused when the token endpoint is not a URL.
    pub(crate) fn token_client(&self, issuer: &str, token_endpoint: &str) -> Result<TokenClient> {
        let token_url = TokenUrl::new(token_endpoint.to_owned()).map_err(|e| {
            AuthError::Unsupported(format!(
                "the token endpoint {token_endpoint:?} of {issuer} is not a URL: {e}"
            ))
        })?;
        let client = BasicClient::new(ClientId::new(self.client_id.clone())).set_token_uri(token_url);
        Ok(match &self.client_secret {
            Some(secret) => client.set_client_secret(ClientSecret::new(secret.expose().to_owned())),
            None => client,
        })
    }
}

/// An `oauth2` client that knows its token endpoint.
pub(crate) type TokenClient = BasicClient<EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// What the gateway says about itself when it registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientMetadata {
    /// `client_name`.
    pub client_name: String,
    /// The callback, e.g. `https://muster.example.com/oauth/proxy/callback`.
    pub redirect_uri: String,
    /// The scopes it may ask for.
    pub scope: Option<String>,
}

impl ClientMetadata {
    /// The RFC 7591 registration request: a public client using the code flow with PKCE and
    /// refresh tokens.
    pub fn registration_request(&self) -> Value {
        let mut request = json!({
            "client_name": self.client_name,
            "redirect_uris": [self.redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web",
        });
        if let Some(scope) = &self.scope {
            request["scope"] = Value::String(scope.clone());
        }
        request
    }

    /// The Client ID Metadata Document served at `document_url` (which is the client id).
    pub fn metadata_document(&self, document_url: &str) -> Value {
        let mut doc = self.registration_request();
        doc["client_id"] = Value::String(document_url.to_owned());
        doc
    }
}

/// Registers the gateway with `server` by RFC 7591 dynamic registration.
pub async fn register(
    http: &OAuthHttp,
    server: &AuthorizationServerMetadata,
    metadata: &ClientMetadata,
) -> Result<ClientRegistration> {
    let endpoint = server.registration_endpoint.as_deref().ok_or_else(|| {
        AuthError::Unsupported(format!(
            "the authorization server {} offers no dynamic client registration; configure a pre-registered client",
            server.issuer
        ))
    })?;
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
        client_secret: Option<String>,
    }
    let registered: Registered = http
        .post_json("the registration endpoint", endpoint, &metadata.registration_request())
        .await?;
    Ok(ClientRegistration {
        client_id: registered.client_id,
        client_secret: registered.client_secret.map(Secret::new),
        kind: RegistrationKind::Dynamic,
    })
}
