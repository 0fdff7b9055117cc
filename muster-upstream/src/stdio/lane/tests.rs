//! Tests of the stdio call lane, on real shell servers.

use std::{path::Path, time::Duration};

use rmcp::{RoleClient, model::JsonRpcMessage, transport::Transport};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{super::tests::sh, *};
use crate::lane::ID_PREFIX;

const BUDGET: CallBudget = CallBudget {
    idle: Duration::from_secs(10),
    max_total: Duration::from_secs(30),
};

/// A server run by `script`, its lane, and the messages rmcp would get, read as they come.
fn serve(script: &str) -> (Arc<StdioLane>, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let mut transport = sh(script);
    let lane = transport.lane();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = transport.receive().await {
            let _ = tx.send(serde_json::to_value(&message).expect("json"));
        }
    });
    (lane, rx)
}

fn params(name: &str) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(json!({"n": 1}).as_object().cloned().unwrap_or_default())
}

/// One call of `name` through `lane`, start to end, within [`BUDGET`].
async fn call(lane: &Arc<StdioLane>, name: &str) -> Result<ToolOutput, Failure> {
    let mut call = lane.prepare(None, Reading::Passed)?;
    call.send(params(name)).await?;
    call.answer(BUDGET, &CancellationToken::new()).await
}

/// The lines a server wrote to `file`, once it holds `count` of them.
async fn lines_in(file: &Path, count: usize) -> Vec<Value> {
    for _ in 0..200 {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.lines().count() >= count {
            return text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a whole JSON line"))
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{} holds fewer than {count} lines", file.display());
}

/// A shell server that answers each request line with `answer`, its `ID` replaced by the
/// request's id; it writes what it read to `log`.
fn echoing(answer: &str, log: &Path) -> String {
    format!(
        r#"while read -r line; do printf '%s\n' "$line" >> '{log}'
id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
[ -n "$id" ] && printf '%s\n' '{answer}' | sed "s/ID/$id/"; done"#,
        log = log.display()
    )
}

#[tokio::test]
async fn a_call_is_written_with_its_token_and_its_answer_reaches_it_not_rmcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let answer =
        r#"{"jsonrpc":"2.0","id":"ID","result":{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}}"#;
    let (lane, mut to_rmcp) = serve(&echoing(answer, &log));
    let output = call(&lane, "echo").await.expect("answered");
    // Passed on as the server wrote it.
    assert_eq!(
        output.json().map(|json| json.get()),
        Some(r#"{"content":[{"type":"text","text":"hi"}],"structuredContent":{"n":1}}"#)
    );
    let result = output.into_result().expect("a result");
    assert_eq!(result.structured_content, Some(json!({"n": 1})));
    let written = &lines_in(&log, 1).await[0];
    assert_eq!(written["method"], "tools/call");
    assert_eq!(written["params"]["name"], "echo");
    assert_eq!(written["params"]["arguments"], json!({"n": 1}));
    assert!(
        written["id"].as_str().is_some_and(|id| id.starts_with(ID_PREFIX)),
        "{written}"
    );
    assert_eq!(written["params"]["_meta"]["progressToken"], written["id"]);
    assert!(to_rmcp.try_recv().is_err(), "the answer was the lane's");
    assert!(lane.calls().waiting.is_empty());
}

#[test]
fn a_request_line_is_what_rmcp_would_write() {
    let id = lane_id(7);
    let mut params = params("echo");
    let mut meta = rmcp::model::RequestMetaObject::with_progress_token(ProgressToken(id.clone()));
    meta.0.0.insert("traceparent".to_owned(), json!("00-abc-def-01"));
    params.meta = Some(meta);
    let ours: Value =
        serde_json::from_slice(&super::super::encode(&CallRequestLine::new(&id, &params)).expect("encoded"))
            .expect("JSON");
    let rmcps: rmcp::service::TxJsonRpcMessage<RoleClient> = JsonRpcMessage::request(
        rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params)),
        id,
    );
    assert_eq!(ours, serde_json::to_value(&rmcps).expect("JSON"));
    assert_eq!(ours["params"]["_meta"]["traceparent"], "00-abc-def-01");
}

#[tokio::test]
async fn an_error_answer_refuses_the_call_and_an_odd_one_is_unreadable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let refused = r#"{"jsonrpc":"2.0","id":"ID","error":{"code":-32602,"message":"bad"}}"#;
    let (lane, _rx) = serve(&echoing(refused, &dir.path().join("a")));
    let failure = call(&lane, "x").await.expect_err("refused");
    assert!(
        matches!(&failure, Failure::Refused(e) if e.message == "bad"),
        "{failure:?}"
    );

    let odd = r#"{"jsonrpc":"2.0","id":"ID","result":{"content":"not a list"}}"#;
    let (lane, _rx) = serve(&echoing(odd, &dir.path().join("b")));
    let failure = call(&lane, "x").await.expect_err("unreadable");
    assert!(matches!(failure, Failure::Unreadable(_)), "{failure:?}");
}

#[tokio::test]
async fn messages_that_are_not_the_lanes_go_on_to_rmcp() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    // Before its answer, the server sends rmcp's own answer, a progress report of another
    // token and a request of its own.
    let script = format!(
        r#"read -r line; printf '%s\n' "$line" >> '{log}'
id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
printf '%s\n' '{{"jsonrpc":"2.0","id":4,"result":{{}}}}'
printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":7,"progress":1}}}}'
printf '%s\n' '{{"jsonrpc":"2.0","id":"muster-1","method":"ping"}}'
printf '%s\n' '{{"jsonrpc":"2.0","id":"'$id'","result":{{"content":[]}}}}'
exec sleep 30"#,
        log = log.display()
    );
    let (lane, mut to_rmcp) = serve(&script);
    call(&lane, "x").await.expect("answered");
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(
            tokio::time::timeout(Duration::from_secs(5), to_rmcp.recv())
                .await
                .expect("in time")
                .expect("a message"),
        );
    }
    assert_eq!(seen[0]["id"], 4);
    assert_eq!(seen[1]["params"]["progressToken"], 7);
    assert_eq!(
        seen[2]["method"], "ping",
        "a server request is not an answer, whatever its id"
    );
}

/// A server that reports progress every 0.2 s for 1.5 s, then answers; it writes what it
/// reads after the request to `log`.
fn reporting(log: &Path) -> String {
    format!(
        r#"read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
for i in 1 2 3 4 5 6 7; do sleep 0.2
printf '%s\n' '{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":"'$id'","progress":'$i',"total":7}}}}'; done
printf '%s\n' '{{"jsonrpc":"2.0","id":"'$id'","result":{{"content":[]}}}}'
while read -r line; do printf '%s\n' "$line" >> '{log}'; done"#,
        log = log.display()
    )
}

#[tokio::test]
async fn progress_reaches_the_sink_in_order_and_restarts_the_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (lane, mut to_rmcp) = serve(&reporting(&dir.path().join("log")));
    let seen = Arc::new(SyncMutex::new(Vec::new()));
    let sink = {
        let seen = Arc::clone(&seen);
        ProgressSink::new(move |u: muster_core::call::ProgressUpdate| seen.lock().expect("lock").push(u.progress))
    };
    let mut call = lane.prepare(Some(sink), Reading::Passed).expect("open");
    call.send(params("slow")).await.expect("written");
    let budget = CallBudget {
        idle: Duration::from_millis(600),
        max_total: Duration::from_secs(10),
    };
    call.answer(budget, &CancellationToken::new())
        .await
        .expect("a 1.5 s call reporting every 0.2 s outlives a 0.6 s timeout");
    assert_eq!(*seen.lock().expect("lock"), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    assert!(to_rmcp.try_recv().is_err(), "the lane took the reports");
}

#[tokio::test]
async fn each_timeout_fails_the_call_and_cancels_it_downstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (budget, after, reason) in [
        (
            CallBudget {
                idle: Duration::from_millis(100),
                max_total: Duration::from_secs(10),
            },
            Duration::from_millis(100),
            "request timeout",
        ),
        (
            CallBudget {
                idle: Duration::from_millis(600),
                max_total: Duration::from_millis(700),
            },
            Duration::from_millis(700),
            "maximum total timeout exceeded",
        ),
    ] {
        let log = dir.path().join(reason);
        let (lane, _rx) = serve(&reporting(&log));
        let mut call = lane.prepare(None, Reading::Passed).expect("open");
        call.send(params("slow")).await.expect("written");
        let failure = call
            .answer(budget, &CancellationToken::new())
            .await
            .expect_err("timed out");
        assert!(matches!(failure, Failure::TimedOut(t) if t == after), "{failure:?}");
        let cancelled = &lines_in(&log, 1).await[0];
        assert_eq!(cancelled["method"], "notifications/cancelled");
        assert_eq!(cancelled["params"]["reason"], reason);
        assert!(
            cancelled["params"]["requestId"]
                .as_str()
                .is_some_and(|id| id.starts_with(ID_PREFIX))
        );
        assert!(lane.calls().waiting.is_empty());
    }
}

#[tokio::test]
async fn a_cancelled_or_dropped_call_is_cancelled_downstream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    let (lane, _rx) = serve(&format!(
        "while read -r line; do printf '%s\\n' \"$line\" >> '{}'; done",
        log.display()
    ));
    let cancel = CancellationToken::new();
    let mut first = lane.prepare(None, Reading::Passed).expect("open");
    first.send(params("a")).await.expect("written");
    let waiting = tokio::spawn({
        let cancel = cancel.clone();
        async move { first.answer(BUDGET, &cancel).await }
    });
    let mut second = lane.prepare(None, Reading::Passed).expect("open");
    second.send(params("b")).await.expect("written");
    cancel.cancel();
    let failure = waiting.await.expect("joined").expect_err("cancelled");
    assert!(matches!(failure, Failure::Cancelled), "{failure:?}");
    drop(second);
    let lines = lines_in(&log, 4).await;
    let (a, b) = (&lines[0]["id"], &lines[1]["id"]);
    let cancelled: Vec<_> = lines[2..]
        .iter()
        .map(|l| (&l["params"]["requestId"], &l["params"]["reason"]))
        .collect();
    assert!(cancelled.contains(&(a, &json!("cancelled by the client"))), "{lines:?}");
    assert!(
        cancelled.contains(&(b, &json!("the gateway stopped waiting for the call"))),
        "{lines:?}"
    );
}

#[tokio::test]
async fn calls_waiting_fail_when_the_server_exits_and_later_ones_at_once() {
    let (lane, _rx) = serve("read -r line; exit 0");
    let failure = tokio::time::timeout(Duration::from_secs(5), call(&lane, "x"))
        .await
        .expect("not left waiting")
        .expect_err("no answer");
    assert!(matches!(failure, Failure::Closed), "{failure:?}");
    assert!(matches!(lane.prepare(None, Reading::Passed), Err(Failure::Closed)));
}

#[tokio::test]
async fn a_call_to_a_server_that_closed_its_input_fails_as_closed() {
    let (lane, _rx) = serve("exec 0<&-; exec sleep 30");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut call = lane.prepare(None, Reading::Passed).expect("its output is open");
    let failure = call.send(params("x")).await.expect_err("nobody reads");
    assert!(matches!(failure, Failure::Closed), "{failure:?}");
    assert!(lane.calls().waiting.is_empty());
}

#[tokio::test]
async fn a_lane_that_outlives_its_transport_holds_no_pipe_open() {
    let open_fds = || {
        std::fs::read_dir("/proc/self/fd")
            .map(Iterator::count)
            .unwrap_or_default()
    };
    let before = open_fds();
    let transport = sh("exec sleep 30");
    let lane = transport.lane();
    drop(transport);
    assert_eq!(open_fds(), before, "the child's stdin closed with the transport");
    assert!(matches!(lane.prepare(None, Reading::Passed), Err(Failure::Closed)));
}

#[tokio::test]
async fn a_request_whose_write_is_dropped_part_way_is_still_written_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("log");
    // The server reads nothing for a while: a request larger than the pipe blocks part way.
    let (lane, _rx) = serve(&format!("sleep 1; cat > '{}'", log.display()));
    let mut big = lane.prepare(None, Reading::Passed).expect("open");
    let arguments = json!({"pad": "x".repeat(1 << 20)})
        .as_object()
        .cloned()
        .unwrap_or_default();
    let send = big.send(CallToolRequestParams::new("big").with_arguments(arguments));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), send).await.is_err(),
        "the write blocked"
    );
    drop(big);
    let mut small = lane.prepare(None, Reading::Passed).expect("open");
    small.send(params("small")).await.expect("written after the big one");
    drop(small);
    let lines = lines_in(&log, 4).await;
    // Every line is whole JSON (`lines_in` reads each), the big request first.
    assert_eq!(lines[0]["params"]["name"], "big");
    assert_eq!(
        lines[0]["params"]["arguments"]["pad"].as_str().map(str::len),
        Some(1 << 20)
    );
    let methods: Vec<_> = lines[1..]
        .iter()
        .map(|l| l["method"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        methods.iter().filter(|m| **m == "notifications/cancelled").count(),
        2,
        "{methods:?}"
    );
    assert!(lines[1..].iter().any(|l| l["params"]["name"] == "small"), "{methods:?}");
}
