//! How a sign-in link reaches the person: the protocol answers of a call that needs a sign-in.
//!
//! A call to a tool of a server the session has not signed in to, and `core_auth_login`
//! itself, leave a [`SignInChallenge`] in the call's [`ChallengeSlot`] (a backend result of the
//! same shape leaves none, so it passes unchanged). The URL elicitation layer
//! ([`super::elicitation`]) then answers by the client's protocol version, as the reference's
//! table says ([`answer`]):
//!
//! - 2026-07-28 or later with URL elicitation declared on the request: `input_required` with one
//!   URL-mode `elicitation/create` under [`SIGN_IN_INPUT_KEY`] and a `requestState` naming the
//!   server and the link ([`SignInState`]). The client retries with the person's answer: an
//!   accepting retry waits for the sign-in (see [`super::outcome`]), a declining one runs
//!   nothing ([`declined`]).
//! - 2025-11-25 with URL elicitation declared at initialize: JSON-RPC error -32042 carrying the
//!   elicitation, whose id is the link's; `notifications/elicitation/complete` follows the
//!   callback.
//! - Any other client: the `auth_required` result itself.
//!
//! ```
//! use muster_gateway::auth::challenge::{SignInChallenge, SignInState};
//!
//! let challenge = SignInChallenge::new("github", "st4te", "https://muster.example.com/oauth/proxy/start?state=st4te");
//! let state = SignInState::of(&challenge).encode();
//! let back = SignInState::decode(&state).expect("our own state");
//! assert_eq!((back.server.as_str(), back.link.as_str()), ("github", "st4te"));
//! assert!(SignInState::decode("something a client made up").is_none());
//! ```

use std::sync::{Arc, Mutex};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use muster_core::CallContext;
use rmcp::{
    ErrorData as McpError,
    model::{
        CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitRequest, ElicitRequestParams,
        ElicitationAction, ErrorCode, InputRequest, InputRequests, InputRequiredResult, InputResponses,
        ProtocolVersion,
    },
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The key of the sign-in elicitation among an `input_required` result's input requests.
pub const SIGN_IN_INPUT_KEY: &str = "muster_sign_in";

/// JSON-RPC error code of URLElicitationRequiredError (MCP 2025-11-25).
pub const URL_ELICITATION_REQUIRED: i32 = -32042;

/// A sign-in link the gateway gave in answer to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignInChallenge {
    /// The MCPServer to sign in to.
    pub server: String,
    /// The link's state (also the elicitation id: one per link).
    pub link: String,
    /// The link (`/oauth/proxy/start?state=…`).
    pub url: String,
}

impl SignInChallenge {
    /// The challenge of link `link` (state) to `server` at `url`.
    pub fn new(server: impl Into<String>, link: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            server: server.into(),
            link: link.into(),
            url: url.into(),
        }
    }

    fn message(&self) -> String {
        format!("Sign in to {} to continue", self.server)
    }
}

/// Where a call's [`SignInChallenge`] is left, in the call's extensions: only the gateway's own
/// sign-in answers write it, never a backend.
#[derive(Debug, Clone, Default)]
pub struct ChallengeSlot(Arc<Mutex<Option<SignInChallenge>>>);

impl ChallengeSlot {
    /// Puts a fresh slot into `ctx` and returns it.
    pub fn install(ctx: &mut CallContext) -> Self {
        let slot = Self::default();
        ctx.extensions.insert(slot.clone());
        slot
    }

    /// Leaves `challenge` in `ctx`'s slot, when it has one.
    pub fn record(ctx: &CallContext, challenge: SignInChallenge) {
        if let Some(slot) = ctx.extensions.get::<Self>() {
            *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(challenge);
        }
    }

    /// The challenge left, if any.
    pub fn take(&self) -> Option<SignInChallenge> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The `requestState` of a 2026-07-28 sign-in answer: the server and the link. It is only a
/// handle: the link is bound to the session that got it on the gateway, so a forged or replayed
/// state finds nothing for another caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignInState {
    /// The MCPServer.
    pub server: String,
    /// The link's state.
    pub link: String,
}

const STATE_PREFIX: &str = "muster-sign-in.";

impl SignInState {
    /// The state naming `challenge`'s server and link.
    pub fn of(challenge: &SignInChallenge) -> Self {
        Self {
            server: challenge.server.clone(),
            link: challenge.link.clone(),
        }
    }

    /// Its wire form.
    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        format!("{STATE_PREFIX}{}", URL_SAFE_NO_PAD.encode(json))
    }

    /// The state `wire` names, when it is one of the gateway's sign-in states.
    pub fn decode(wire: &str) -> Option<Self> {
        let bytes = URL_SAFE_NO_PAD.decode(wire.strip_prefix(STATE_PREFIX)?).ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The person's answer to the sign-in elicitation, in a retry's `inputResponses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consent {
    /// They agreed to open the link.
    Accepted,
    /// They declined or cancelled.
    Declined,
    /// The retry carries no answer to it.
    Missing,
}

/// The consent `responses` carry for the sign-in elicitation.
pub fn consent(responses: Option<&InputResponses>) -> Consent {
    let action = responses
        .and_then(|r| r.get(SIGN_IN_INPUT_KEY))
        .and_then(|answer| answer.get("action"))
        .and_then(|a| serde_json::from_value::<ElicitationAction>(a.clone()).ok());
    match action {
        Some(ElicitationAction::Accept) => Consent::Accepted,
        Some(ElicitationAction::Decline | ElicitationAction::Cancel) => Consent::Declined,
        _ => Consent::Missing,
    }
}

/// The tool error of a retry whose person declined to sign in to `server`: nothing ran, and no
/// link is given.
pub fn declined(server: &str) -> CallToolResult {
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "The sign-in to {server} was declined, so the call did not run. Ask for it again when you want to sign in."
    ))]);
    result.structured_content = Some(json!({"status": "sign_in_declined", "server": server}));
    result
}

/// Whether the client of `version` with `capabilities` is asked to sign in by URL elicitation
/// (else it reads the call's own result).
pub fn elicits(version: Option<&ProtocolVersion>, capabilities: Option<&ClientCapabilities>) -> bool {
    let declared_url = capabilities
        .and_then(|c| c.elicitation.as_ref())
        .is_some_and(|e| e.url.is_some());
    declared_url && version.is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28 || *v == ProtocolVersion::V_2025_11_25)
}

/// What the client of `version` with `capabilities` gets for a call that left `challenge`
/// instead of `result`.
pub fn answer(
    challenge: SignInChallenge,
    result: CallToolResult,
    version: Option<&ProtocolVersion>,
    capabilities: Option<&ClientCapabilities>,
) -> Result<CallToolResponse, McpError> {
    if !elicits(version, capabilities) {
        return Ok(result.into());
    }
    match version {
        Some(v) if *v >= ProtocolVersion::V_2026_07_28 => {
            let state = SignInState::of(&challenge).encode();
            let request = ElicitRequest::new(ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: challenge.message(),
                url: challenge.url,
                elicitation_id: challenge.link,
            });
            let requests = InputRequests::from([(SIGN_IN_INPUT_KEY.to_owned(), InputRequest::Elicitation(request))]);
            Ok(InputRequiredResult::new(Some(requests), Some(state)).into())
        }
        _ => Err(McpError::new(
            ErrorCode(URL_ELICITATION_REQUIRED),
            format!("{} requires you to sign in", challenge.server),
            Some(json!({"elicitations": [{
                "mode": "url",
                "elicitationId": challenge.link,
                "url": challenge.url,
                "message": challenge.message(),
            }]})),
        )),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ElicitationCapability, UrlElicitationCapability};
    use serde_json::Value;

    use super::*;

    fn challenge() -> SignInChallenge {
        SignInChallenge::new("github", "abc", "http://127.0.0.1/oauth/proxy/start?state=abc")
    }

    fn with_url() -> ClientCapabilities {
        ClientCapabilities::builder()
            .enable_elicitation_with(ElicitationCapability::new().with_url(UrlElicitationCapability::new()))
            .build()
    }

    fn auth_required() -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("sign in")])
    }

    #[test]
    fn a_2026_client_with_url_elicitation_gets_input_required_naming_server_and_link() {
        let response = answer(
            challenge(),
            auth_required(),
            Some(&ProtocolVersion::V_2026_07_28),
            Some(&with_url()),
        )
        .expect("in the test");
        let CallToolResponse::InputRequired(required) = response else {
            panic!("expected input_required, got {response:?}");
        };
        let wire = serde_json::to_value(&required).expect("in the test");
        assert_eq!(wire["resultType"], "input_required");
        let elicitation = &wire["inputRequests"][SIGN_IN_INPUT_KEY];
        assert_eq!(elicitation["method"], "elicitation/create");
        assert_eq!(elicitation["params"]["mode"], "url");
        assert_eq!(elicitation["params"]["url"], challenge().url);
        assert_eq!(elicitation["params"]["elicitationId"], "abc");
        let state = SignInState::decode(wire["requestState"].as_str().expect("in the test")).expect("in the test");
        assert_eq!(state, SignInState::of(&challenge()));
    }

    #[test]
    fn a_2025_11_25_client_with_url_elicitation_gets_the_32042_error() {
        let error = answer(
            challenge(),
            auth_required(),
            Some(&ProtocolVersion::V_2025_11_25),
            Some(&with_url()),
        )
        .expect_err("in the test");
        assert_eq!(error.code.0, URL_ELICITATION_REQUIRED);
        let elicitation = &error.data.expect("in the test")["elicitations"][0];
        assert_eq!(elicitation["elicitationId"], "abc");
        assert_eq!(elicitation["url"], challenge().url);
    }

    #[test]
    fn other_clients_get_the_result_itself() {
        for (version, caps) in [
            (ProtocolVersion::V_2026_07_28, ClientCapabilities::default()),
            (ProtocolVersion::V_2025_06_18, with_url()),
            (ProtocolVersion::V_2025_11_25, ClientCapabilities::default()),
        ] {
            let response = answer(challenge(), auth_required(), Some(&version), Some(&caps)).expect("in the test");
            assert!(
                matches!(response, CallToolResponse::Complete(ref r) if r.is_error == Some(true)),
                "{version:?}: {response:?}"
            );
        }
    }

    #[test]
    fn consent_reads_the_answer_to_the_sign_in_elicitation() {
        let responses =
            |action: &str| InputResponses::from([(SIGN_IN_INPUT_KEY.to_owned(), json!({"action": action}))]);
        assert_eq!(consent(Some(&responses("accept"))), Consent::Accepted);
        assert_eq!(consent(Some(&responses("decline"))), Consent::Declined);
        assert_eq!(consent(Some(&responses("cancel"))), Consent::Declined);
        assert_eq!(consent(Some(&responses("maybe"))), Consent::Missing);
        assert_eq!(consent(None), Consent::Missing);
        let other = InputResponses::from([("other".to_owned(), json!({"action": "accept"}))]);
        assert_eq!(consent(Some(&other)), Consent::Missing);
    }

    #[test]
    fn a_declined_sign_in_carries_no_link() {
        let result = declined("github");
        let text = serde_json::to_string(&result).expect("in the test");
        assert!(!text.contains("http"), "{text}");
        assert_eq!(result.is_error, Some(true));
        assert_eq!(
            result.structured_content.as_ref().and_then(|s| s.get("server")),
            Some(&Value::from("github"))
        );
    }
}
