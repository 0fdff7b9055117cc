//! An MCP session opened by hand over streamable HTTP (protocol 2025-06-18): the HTTP exchanges a
//! client library would make, with every status and header in view, for the tests of what the
//! gateway answers on the wire (session calls, unknown sessions, replicas behind haproxy).

use serde_json::{Value, json};

const ACCEPT: &str = "application/json, text/event-stream";

/// A session opened by hand: the HTTP exchanges a client library would make.
pub struct RawSession {
    pub http: reqwest::Client,
    pub url: String,
    pub id: String,
    /// The `x-served-by` header of the `initialize` answer: the replica a load balancer in
    /// front sent it to (`tests/common/haproxy.rs` sets it).
    pub served_by: Option<String>,
}

/// One HTTP answer: status, and the SSE events of its body (each as its lines).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub served_by: Option<String>,
    pub events: Vec<Vec<String>>,
}

impl Answer {
    /// The JSON-RPC messages the stream carried, in order.
    pub fn messages(&self) -> Vec<Value> {
        self.events
            .iter()
            .flat_map(|lines| lines.iter().filter_map(|l| l.strip_prefix("data:")))
            .map(str::trim)
            .filter(|data| !data.is_empty())
            .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON ({e}): {data}")))
            .collect()
    }

    /// Whether rmcp answered: its event ids are numbers (`0`, `0/3`), where the gateway's are
    /// `call-N-I`; both streams open with a priming event.
    pub fn answered_by_rmcp(&self) -> bool {
        let ids: Vec<&str> = self
            .events
            .iter()
            .flatten()
            .filter_map(|l| l.strip_prefix("id: "))
            .collect();
        assert!(!ids.is_empty(), "a primed stream: {:?}", self.events);
        ids.iter().all(|id| !id.starts_with("call-"))
    }
}

impl RawSession {
    pub async fn open(url: &str) -> Self {
        let http = reqwest::Client::new();
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
        let response = http
            .post(url)
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .json(&initialize)
            .send()
            .await
            .expect("initialize answers");
        assert_eq!(response.status(), 200, "initialize through {url}");
        let served_by = served_by(&response);
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .expect("a session id")
            .to_owned();
        let _ = response.text().await;
        let session = Self {
            http,
            url: url.to_owned(),
            id,
            served_by,
        };
        let initialized = session
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), &[])
            .await;
        assert_eq!(initialized.status, 202, "{initialized:?}");
        session
    }

    /// POSTs `message` on the session with the headers of the handshake, those named in
    /// `headers` replaced.
    pub async fn post(&self, message: Value, headers: &[(&str, &str)]) -> Answer {
        let response = self.send(message, headers).await;
        Answer::read(response).await
    }

    pub async fn send(&self, message: Value, headers: &[(&str, &str)]) -> reqwest::Response {
        let request = self
            .http
            .post(&self.url)
            .header("accept", ACCEPT)
            .header("content-type", "application/json")
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18");
        let mut request = request.json(&message).build().expect("a request");
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).expect("a header name");
            let value = reqwest::header::HeaderValue::from_str(value).expect("a header value");
            request.headers_mut().insert(name, value);
        }
        self.http.execute(request).await.expect("answers")
    }

    /// Ends the session (`DELETE`), as a client does when it closes.
    pub async fn end(&self) {
        let deleted = self
            .http
            .delete(&self.url)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .expect("answers");
        assert!(deleted.status().is_success(), "{}", deleted.status());
    }

    /// Calls meta-tool `call_tool` with `tool` and `arguments` as request `id`.
    pub fn call(id: u64, tool: &str, arguments: Value, meta: Option<Value>) -> Value {
        let mut params = json!({"name": "call_tool", "arguments": {"name": tool, "arguments": arguments}});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    }
}

impl Answer {
    pub async fn read(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let served_by = served_by(&response);
        let body = response.text().await.unwrap_or_default();
        let events = body
            .replace("\r\n", "\n")
            .split("\n\n")
            .filter(|e| !e.trim().is_empty())
            .map(|e| e.lines().map(str::to_owned).collect())
            .collect();
        Self {
            status,
            served_by,
            events,
        }
    }
}

/// The text the downstream tool answered, from `call_tool`'s envelope in a JSON-RPC result.
pub fn result_text(message: &Value) -> String {
    let envelope: Value = message["result"]["content"][0]["text"]
        .as_str()
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_else(|| panic!("no call_tool envelope: {message}"));
    envelope["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in the envelope: {envelope}"))
        .to_owned()
}

impl RawSession {
    /// The status a `method` request on this session (`GET`, `DELETE`; `POST` of a `ping`)
    /// gets from `url`: another replica's, say.
    pub async fn status_at(&self, url: &str, method: reqwest::Method) -> (u16, String) {
        let request = self
            .http
            .request(method.clone(), url)
            .header("mcp-session-id", &self.id)
            .header("mcp-protocol-version", "2025-06-18");
        let request = match method {
            reqwest::Method::POST => request
                .header("accept", ACCEPT)
                .header("content-type", "application/json")
                .json(&json!({"jsonrpc": "2.0", "id": 99, "method": "ping"})),
            reqwest::Method::GET => request.header("accept", "text/event-stream"),
            _ => request,
        };
        let response = request.send().await.expect("answers");
        let status = response.status().as_u16();
        // A GET that is answered opens the standalone stream, which never ends: read no body.
        let body = if status == 200 && method == reqwest::Method::GET {
            String::new()
        } else {
            response.text().await.unwrap_or_default()
        };
        (status, body)
    }
}

/// The `x-served-by` header of `response`.
pub fn served_by(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get("x-served-by")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
