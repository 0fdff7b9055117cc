//! The layer composed over plain tower services: no gateway, no registry.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use muster_core::{CallContext, JsonObject, ToolCall, ToolError, ToolOutput};
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ElicitationAction, ElicitationCapability,
    ProtocolVersion, UrlElicitationCapability,
};
use serde_json::json;
use tower::{Layer, ServiceExt};

use super::*;
use crate::auth::challenge::{SIGN_IN_INPUT_KEY, SignInChallenge, URL_ELICITATION_REQUIRED};

const LINK: &str = "http://127.0.0.1:1/oauth/proxy/start?state=st4te";

/// A tool that asks for a sign-in to `crm` on every call, counting its runs.
fn needs_sign_in(
    runs: Arc<AtomicUsize>,
) -> impl tower::Service<
    ToolCall,
    Response = ToolOutput,
    Error = ToolError,
    Future = impl Future<Output = Result<ToolOutput, ToolError>> + Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |call: ToolCall| {
        let runs = Arc::clone(&runs);
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            ChallengeSlot::record(&call.ctx, SignInChallenge::new("crm", "st4te", LINK));
            Ok(CallToolResult::error(vec![ContentBlock::text("sign in to crm first")]).into())
        }
    })
}

fn client(version: ProtocolVersion, url_elicitation: bool) -> CallContext {
    let mut ctx = CallContext::default().with_protocol_version(version);
    if url_elicitation {
        ctx.extensions.insert(
            ClientCapabilities::builder()
                .enable_elicitation_with(ElicitationCapability::new().with_url(UrlElicitationCapability::new()))
                .build(),
        );
    }
    ctx
}

fn call(ctx: CallContext) -> ToolCall {
    ToolCall::new("crm_find", JsonObject::new(), ctx)
}

#[tokio::test]
async fn a_2026_client_with_url_elicitation_gets_input_required_whose_state_names_server_and_link() {
    let layered = UrlElicitationLayer::new(None).layer(needs_sign_in(Arc::default()));
    let answer = layered
        .oneshot(call(client(ProtocolVersion::V_2026_07_28, true)))
        .await
        .expect("answered");
    let Elicited::Challenged(CallToolResponse::InputRequired(required)) = answer else {
        panic!("expected input_required, got {answer:?}");
    };
    let wire = serde_json::to_value(&required).expect("serializes");
    let state = SignInState::decode(wire["requestState"].as_str().expect("a requestState")).expect("ours");
    assert_eq!((state.server.as_str(), state.link.as_str()), ("crm", "st4te"));
    assert_eq!(wire["inputRequests"][SIGN_IN_INPUT_KEY]["params"]["url"], LINK);
}

#[tokio::test]
async fn a_2025_11_25_client_with_url_elicitation_gets_the_32042_error_and_others_the_result() {
    let layered = UrlElicitationLayer::new(None).layer(needs_sign_in(Arc::default()));
    let refused = layered
        .clone()
        .oneshot(call(client(ProtocolVersion::V_2025_11_25, true)))
        .await
        .expect_err("-32042");
    assert_eq!(refused.code.0, URL_ELICITATION_REQUIRED);
    assert_eq!(refused.data.expect("the elicitation")["elicitations"][0]["url"], LINK);

    // Without URL elicitation declared, the tool's own result, whatever the version.
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let answer = layered
            .clone()
            .oneshot(call(client(version, false)))
            .await
            .expect("answered");
        let Elicited::Output(output) = answer else {
            panic!("expected the result itself, got {answer:?}");
        };
        let result = output.into_result().expect("a result");
        assert_eq!(result.is_error, Some(true));
        assert!(format!("{:?}", result.content).contains("sign in to crm first"));
    }
}

#[tokio::test]
async fn a_call_that_leaves_no_challenge_passes_unchanged_and_errors_keep_their_code() {
    let ok = tower::service_fn(|_call: ToolCall| async {
        Ok::<_, ToolError>(CallToolResult::structured(json!({"n": 1})).into())
    });
    let answer = UrlElicitationLayer::new(None)
        .layer(ok)
        .oneshot(call(client(ProtocolVersion::V_2026_07_28, true)))
        .await
        .expect("answered");
    let Elicited::Output(output) = answer else {
        panic!("expected the output, got {answer:?}");
    };
    assert_eq!(
        output.into_result().expect("a result").structured_content,
        Some(json!({"n": 1}))
    );

    let missing =
        tower::service_fn(|call: ToolCall| async move { Err::<ToolOutput, _>(ToolError::not_found(&call.name)) });
    let refused = UrlElicitationLayer::new(None)
        .layer(missing)
        .oneshot(call(CallContext::default()))
        .await
        .expect_err("the tool's error");
    assert_eq!(refused, rmcp::ErrorData::from(ToolError::not_found("crm_find")));
}

/// Records each wait; the waits end at once.
#[derive(Default)]
struct Waits(Mutex<Vec<(String, String, String)>>);

impl SignInWaiter for Waits {
    fn wait<'a>(
        &'a self,
        session: &'a SessionId,
        server: &'a str,
        link: &'a str,
        _cancel: CancellationToken,
    ) -> BoxFuture<'a, ()> {
        self.0
            .lock()
            .expect("not poisoned")
            .push((session.as_str().to_owned(), server.to_owned(), link.to_owned()));
        Box::pin(async {})
    }
}

fn retry(action: ElicitationAction) -> SignInRetry {
    let state = SignInState::of(&SignInChallenge::new("crm", "st4te", LINK)).encode();
    let responses =
        serde_json::from_value(json!({ SIGN_IN_INPUT_KEY: { "action": action } })).expect("input responses");
    SignInRetry {
        request_state: Some(state),
        input_responses: Some(responses),
    }
}

#[tokio::test]
async fn a_declining_retry_runs_nothing_and_an_accepting_one_waits_for_its_sign_in_then_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let waits = Arc::new(Waits::default());
    let layered = UrlElicitationLayer::new(Some(Arc::clone(&waits) as Arc<dyn SignInWaiter>))
        .layer(needs_sign_in(Arc::clone(&runs)));

    let mut declined = CallContext::default();
    declined.extensions.insert(retry(ElicitationAction::Decline));
    let answer = layered.clone().oneshot(call(declined)).await.expect("answered");
    let Elicited::Output(output) = answer else {
        panic!("expected the declining answer, got {answer:?}");
    };
    let result = output.into_result().expect("a result");
    assert_eq!(
        result.structured_content.expect("structured")["status"],
        "sign_in_declined"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing ran");
    assert!(waits.0.lock().expect("not poisoned").is_empty());

    let mut accepted = CallContext::for_session(SessionId::new("s1"));
    accepted.extensions.insert(retry(ElicitationAction::Accept));
    layered.oneshot(call(accepted)).await.expect("answered");
    assert_eq!(
        *waits.0.lock().expect("not poisoned"),
        vec![("s1".to_owned(), "crm".to_owned(), "st4te".to_owned())]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the call ran after the wait");
}

#[tokio::test]
async fn a_state_that_is_not_ours_is_not_a_retry() {
    let runs = Arc::new(AtomicUsize::new(0));
    let waits = Arc::new(Waits::default());
    let layered = UrlElicitationLayer::new(Some(Arc::clone(&waits) as Arc<dyn SignInWaiter>))
        .layer(needs_sign_in(Arc::clone(&runs)));
    let mut ctx = CallContext::default();
    ctx.extensions.insert(SignInRetry {
        request_state: Some("made-up".to_owned()),
        ..retry(ElicitationAction::Decline)
    });
    layered.oneshot(call(ctx)).await.expect("answered");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(waits.0.lock().expect("not poisoned").is_empty());
}
