//! The plaintext of a grant file (and of a grant or client registration in the Valkey sign-in
//! state store). Crate-private and without `Debug`: the only place a token becomes
//! serializable, and only on its way into the cipher.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::{
    Secret,
    oauth::{
        grant::Grant,
        registration::{ClientRegistration, RegistrationKind},
    },
};

#[derive(Serialize, Deserialize)]
pub(super) struct Record {
    pub(super) owner: String,
    pub(super) server: String,
    pub(super) grant: GrantRecord,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct GrantRecord {
    access_token: String,
    refresh_token: Option<String>,
    expires_at: Option<DateTime<Utc>>,
    scope: Option<String>,
    issuer: String,
    token_endpoint: String,
    revocation_endpoint: Option<String>,
    client: ClientRecord,
    resource: String,
    /// Added after the first records were sealed: a record without it opens as not known yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rotates_refresh_tokens: Option<bool>,
}

#[derive(Serialize, Deserialize)]
pub(crate) struct ClientRecord {
    client_id: String,
    client_secret: Option<String>,
    kind: RegistrationKind,
}

impl From<&Grant> for GrantRecord {
    fn from(grant: &Grant) -> Self {
        // Destructured in full: a field added to `Grant` fails to compile here until it is stored.
        let Grant {
            access_token,
            refresh_token,
            expires_at,
            scope,
            issuer,
            token_endpoint,
            revocation_endpoint,
            client,
            resource,
            rotates_refresh_tokens,
        } = grant;
        Self {
            access_token: access_token.expose().to_owned(),
            refresh_token: refresh_token.as_ref().map(|t| t.expose().to_owned()),
            expires_at: *expires_at,
            scope: scope.clone(),
            issuer: issuer.clone(),
            token_endpoint: token_endpoint.clone(),
            revocation_endpoint: revocation_endpoint.clone(),
            client: ClientRecord::from(client),
            resource: resource.clone(),
            rotates_refresh_tokens: *rotates_refresh_tokens,
        }
    }
}

impl From<GrantRecord> for Grant {
    fn from(record: GrantRecord) -> Self {
        Self {
            access_token: Secret::new(record.access_token),
            refresh_token: record.refresh_token.map(Secret::new),
            expires_at: record.expires_at,
            scope: record.scope,
            issuer: record.issuer,
            token_endpoint: record.token_endpoint,
            revocation_endpoint: record.revocation_endpoint,
            client: record.client.into(),
            resource: record.resource,
            rotates_refresh_tokens: record.rotates_refresh_tokens,
        }
    }
}

impl From<&ClientRegistration> for ClientRecord {
    fn from(client: &ClientRegistration) -> Self {
        let ClientRegistration {
            client_id,
            client_secret,
            kind,
        } = client;
        Self {
            client_id: client_id.clone(),
            client_secret: client_secret.as_ref().map(|s| s.expose().to_owned()),
            kind: *kind,
        }
    }
}

impl From<ClientRecord> for ClientRegistration {
    fn from(record: ClientRecord) -> Self {
        Self {
            client_id: record.client_id,
            client_secret: record.client_secret.map(Secret::new),
            kind: record.kind,
        }
    }
}
