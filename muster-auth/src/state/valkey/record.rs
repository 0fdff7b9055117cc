//! What the Valkey store keeps in a value: JSON records, sealed ([`Sealed`]) before they leave the
//! process. Crate-private and without `Debug`, like the grant file's record: a token is
//! serializable only here, on its way into the cipher.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use url::Url;

use super::super::{ExchangeEntry, ExchangedToken};
use crate::{
    Secret,
    issuers::Description,
    oauth::{
        discovery::AuthorizationServerMetadata,
        flow::{PendingSignIn, SignInRequest},
        store::{
            record::{ClientRecord, GrantRecord},
            seal::{Header, OpenProblem, Sealer},
        },
    },
};

/// Each kind of value has a header of its own: a value moved under another kind's key does not
/// open.
pub(super) const PENDING: Header = Header {
    magic: b"MVPEND",
    version: 1,
};
pub(super) const GRANT: Header = Header {
    magic: b"MVGRNT",
    version: 1,
};
pub(super) const CLIENT: Header = Header {
    magic: b"MVCLNT",
    version: 1,
};
pub(super) const EXCHANGE: Header = Header {
    magic: b"MVEXCH",
    version: 1,
};
pub(super) const NOTICE: Header = Header {
    magic: b"MVNOTE",
    version: 1,
};

/// Why a value read from Valkey is not a record. Says nothing of the value.
#[derive(Debug, thiserror::Error)]
pub(super) enum RecordProblem {
    #[error("a value in the store does not open with this gateway's key: {0}")]
    Sealed(OpenProblem),
    #[error("a value in the store opens but holds no record of its kind")]
    NotARecord,
    #[error("the random source failed while sealing a value: {0}")]
    Seal(std::io::Error),
}

/// Seals and opens records of the store.
#[derive(Debug, Clone)]
pub(super) struct Sealed {
    sealer: Sealer,
}

impl Sealed {
    pub(super) fn new(sealer: Sealer) -> Self {
        Self { sealer }
    }

    /// `record` as JSON, sealed with `header`, bound to `id`.
    pub(super) fn seal<T: Serialize>(&self, header: Header, id: &str, record: &T) -> Result<Vec<u8>, RecordProblem> {
        let plaintext = serde_json::to_vec(record).expect("a record serializes: strings, options and dates");
        self.sealer
            .seal(header, id.as_bytes(), plaintext)
            .map_err(RecordProblem::Seal)
    }

    /// The record in `sealed`, sealed with `header` and bound to `id`.
    pub(super) fn open<T: DeserializeOwned>(
        &self,
        header: Header,
        id: &str,
        mut sealed: Vec<u8>,
    ) -> Result<T, RecordProblem> {
        let plaintext = self
            .sealer
            .open(header, id.as_bytes(), &mut sealed)
            .map_err(RecordProblem::Sealed)?;
        serde_json::from_slice(plaintext).map_err(|_| RecordProblem::NotARecord)
    }
}

/// A pending sign-in with its state (so that the latest one of a session and server, found by
/// its id, gives its state back).
#[derive(Serialize, Deserialize)]
pub(super) struct PendingRecord {
    state: String,
    session: String,
    owner: String,
    server: String,
    metadata: AuthorizationServerMetadata,
    client: ClientRecord,
    redirect_uri: String,
    resource: String,
    scope: Option<String>,
    expected_issuer: Option<String>,
    verifier: String,
    authorization_url: String,
    browser_redirect: Option<String>,
    described: Option<Description>,
    expires_at: DateTime<Utc>,
}

impl PendingRecord {
    pub(super) fn new(state: &str, pending: &PendingSignIn) -> Self {
        // Destructured in full: a field added to either fails to compile here until it is kept.
        let PendingSignIn {
            request,
            verifier,
            authorization_url,
            browser_redirect,
            described,
            expires_at,
        } = pending;
        let SignInRequest {
            session,
            owner,
            server,
            metadata,
            client,
            redirect_uri,
            resource,
            scope,
            expected_issuer,
        } = request;
        Self {
            state: state.to_owned(),
            session: session.clone(),
            owner: owner.clone(),
            server: server.clone(),
            metadata: metadata.clone(),
            client: ClientRecord::from(client),
            redirect_uri: redirect_uri.clone(),
            resource: resource.clone(),
            scope: scope.clone(),
            expected_issuer: expected_issuer.clone(),
            verifier: verifier.expose().to_owned(),
            authorization_url: authorization_url.to_string(),
            browser_redirect: browser_redirect.clone(),
            described: described.clone(),
            expires_at: *expires_at,
        }
    }

    /// Where the browser goes after the callback.
    pub(super) fn set_browser_redirect(&mut self, redirect: &str) {
        self.browser_redirect = Some(redirect.to_owned());
    }

    /// The state and the sign-in; `None` when it expired (Valkey's expiry is the rule, this the
    /// guard against clocks that disagree) or its link is no URL.
    pub(super) fn into_pending(self) -> Option<(String, PendingSignIn)> {
        if self.expires_at <= Utc::now() {
            return None;
        }
        let authorization_url = Url::parse(&self.authorization_url).ok()?;
        let pending = PendingSignIn {
            request: SignInRequest {
                session: self.session,
                owner: self.owner,
                server: self.server,
                metadata: self.metadata,
                client: self.client.into(),
                redirect_uri: self.redirect_uri,
                resource: self.resource,
                scope: self.scope,
                expected_issuer: self.expected_issuer,
            },
            verifier: Secret::new(self.verifier),
            authorization_url,
            browser_redirect: self.browser_redirect,
            described: self.described,
            expires_at: self.expires_at,
        };
        Some((self.state, pending))
    }
}

/// A grant's record is the grant file's.
pub(super) type GrantValue = GrantRecord;

/// A client registration's record is the grant file's client record.
pub(super) type ClientValue = ClientRecord;

/// An exchanged token with its key (for forgetting by a prefix that is not a session's) and
/// fingerprint.
#[derive(Serialize, Deserialize)]
pub(super) struct ExchangeRecord {
    pub(super) key: String,
    fingerprint: [u8; 32],
    token: String,
    issuer: String,
    expires_at: Option<DateTime<Utc>>,
}

impl ExchangeRecord {
    pub(super) fn new(key: &str, entry: &ExchangeEntry) -> Self {
        let ExchangeEntry { fingerprint, token } = entry;
        let ExchangedToken {
            token,
            issuer,
            expires_at,
        } = token;
        Self {
            key: key.to_owned(),
            fingerprint: *fingerprint,
            token: token.expose().to_owned(),
            issuer: issuer.clone(),
            expires_at: *expires_at,
        }
    }

    pub(super) fn into_entry(self) -> ExchangeEntry {
        ExchangeEntry {
            fingerprint: self.fingerprint,
            token: ExchangedToken {
                token: Secret::new(self.token),
                issuer: self.issuer,
                expires_at: self.expires_at,
            },
        }
    }
}
