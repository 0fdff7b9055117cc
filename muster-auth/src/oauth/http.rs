//! [`OAuthHttp`]: the HTTP client of every OAuth request: no redirects followed, bounded time,
//! JSON documents and form posts, OAuth error bodies turned into [`AuthError::OAuth`].
//!
//! It is also the HTTP client of the `oauth2` crate, which builds the code exchange and the
//! refresh: those requests get the same limits and the same error answers as every other.

use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;

use super::error::{AuthError, Result};
use crate::Secret;

/// How long one OAuth request may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest document or token response read.
const MAX_BODY: usize = 1024 * 1024;

/// The HTTP client for discovery, registration and token requests. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OAuthHttp {
    client: reqwest::Client,
}

impl Default for OAuthHttp {
    fn default() -> Self {
        Self::new()
    }
}

impl OAuthHttp {
    /// A client that follows no redirects and gives up after [`REQUEST_TIMEOUT`].
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self { client }
    }

    /// GETs the JSON document `what` at `url`; `None` when the server answers 404.
    pub async fn get_json<T: DeserializeOwned>(&self, what: &'static str, url: &str) -> Result<Option<T>> {
        let response = self
            .client
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| unreachable(url, &e))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let body = read_body(url, response).await?;
        if !status.is_success() {
            return Err(AuthError::BadDocument {
                what,
                url: url.to_owned(),
                reason: format!("HTTP {status}"),
            });
        }
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| AuthError::BadDocument {
                what,
                url: url.to_owned(),
                reason: format!("not the expected JSON: {e}"),
            })
    }

    /// POSTs a JSON body to `endpoint` and reads the JSON answer (dynamic registration).
    pub async fn post_json<T: DeserializeOwned>(
        &self,
        endpoint: &'static str,
        url: &str,
        body: &serde_json::Value,
    ) -> Result<T> {
        let response = self
            .client
            .post(url)
            .json(body)
            .send()
            .await
            .map_err(|e| unreachable(url, &e))?;
        answer(endpoint, url, response).await
    }

    /// POSTs `form` to `endpoint`, authenticating the client with HTTP Basic when it has a
    /// secret (the client id in the form otherwise), and only checks the status (RFC 7009
    /// revocation answers 200 with no body).
    pub async fn post_form_empty(
        &self,
        endpoint: &'static str,
        url: &str,
        form: &[(&str, &str)],
        client: (&str, Option<&Secret>),
    ) -> Result<()> {
        let response = self.send_form(url, form, client).await?;
        if response.status().is_success() {
            return Ok(());
        }
        let status = response.status();
        Err(refusal(endpoint, status, &read_body(url, response).await?))
    }

    /// The HTTP client the `oauth2` crate sends a request to `endpoint` through (code exchange,
    /// refresh): [`OAuthHttp::send_oauth2`] on a clone of this client. Its future is boxed and
    /// owns what it uses, so the caller's future stays `Send` for any lifetime.
    pub(crate) fn oauth2_client(
        &self,
        endpoint: &'static str,
    ) -> impl Fn(oauth2::HttpRequest) -> BoxFuture<'static, Result<oauth2::HttpResponse>> + use<> {
        let http = self.clone();
        move |request| {
            let http = http.clone();
            Box::pin(async move { http.send_oauth2(endpoint, request).await })
        }
    }

    /// Sends a request the `oauth2` crate built (code exchange, refresh) to `endpoint`, and
    /// hands a successful answer back to it as it came. Like every other request here it
    /// follows no redirect, gives up after [`REQUEST_TIMEOUT`] and reads at most 1 MiB; an
    /// answer that is no success is the server's refusal, [`AuthError::OAuth`] with its
    /// `error` and `error_description`.
    async fn send_oauth2(&self, endpoint: &'static str, request: oauth2::HttpRequest) -> Result<oauth2::HttpResponse> {
        let url = request.uri().to_string();
        let request = reqwest::Request::try_from(request).map_err(|e| unreachable(&url, &e))?;
        let response = self.client.execute(request).await.map_err(|e| unreachable(&url, &e))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = read_body(&url, response).await?;
        if !status.is_success() {
            return Err(refusal(endpoint, status, &body));
        }
        let mut answer = ::http::Response::new(body);
        *answer.status_mut() = status;
        *answer.headers_mut() = headers;
        Ok(answer)
    }

    /// POSTs `form`, authenticating the client with HTTP Basic when one is given (and not at
    /// all otherwise), and returns the status and the body as they are, for a caller that
    /// classifies the answer itself (token exchange). Only a failure to get an answer is an
    /// error ([`AuthError::Unreachable`], or a body larger than the limit).
    pub(crate) async fn post_form_raw(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic: Option<(&str, &Secret)>,
    ) -> Result<(reqwest::StatusCode, Vec<u8>)> {
        let response = self.send(url, form.to_vec(), basic).await?;
        let status = response.status();
        Ok((status, read_body(url, response).await?))
    }

    async fn send_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        (client_id, secret): (&str, Option<&Secret>),
    ) -> Result<reqwest::Response> {
        let mut fields: Vec<(&str, &str)> = form.to_vec();
        let basic = match secret {
            Some(secret) => Some((client_id, secret)),
            None => {
                fields.push(("client_id", client_id));
                None
            }
        };
        self.send(url, fields, basic).await
    }

    async fn send(
        &self,
        url: &str,
        fields: Vec<(&str, &str)>,
        basic: Option<(&str, &Secret)>,
    ) -> Result<reqwest::Response> {
        let mut request = self
            .client
            .post(url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some((client_id, secret)) = basic {
            request = request.basic_auth(form_encode(client_id), Some(form_encode(secret.expose())));
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        request
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .map_err(|e| unreachable(url, &e))
    }
}

/// The [`AuthError`] of a token request `oauth2` ran at `endpoint` (`url`) over
/// [`OAuthHttp::send_oauth2`]: that client's own error as it is; what `oauth2` found wrong with
/// a successful answer (not JSON, no `token_type`, ...) as a [`AuthError::BadDocument`]. The
/// answer's body is never quoted: it may hold a token.
pub(crate) fn oauth2_failure(
    endpoint: &'static str,
    url: &str,
    error: oauth2::basic::BasicRequestTokenError<AuthError>,
) -> AuthError {
    use oauth2::RequestTokenError;
    let reason = match error {
        RequestTokenError::Request(error) => return error,
        RequestTokenError::ServerResponse(refused) => {
            return AuthError::OAuth {
                endpoint,
                error: refused.error().as_ref().to_owned(),
                description: refused.error_description().cloned(),
            };
        }
        RequestTokenError::Parse(error, _body) => format!("not a token response: {error}"),
        RequestTokenError::Other(reason) => reason,
    };
    AuthError::BadDocument {
        what: endpoint,
        url: url.to_owned(),
        reason,
    }
}

/// RFC 6749 §2.3.1: the client id and secret are form-encoded before Basic encoding.
fn form_encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

async fn answer<T: DeserializeOwned>(endpoint: &'static str, url: &str, response: reqwest::Response) -> Result<T> {
    let status = response.status();
    let body = read_body(url, response).await?;
    if !status.is_success() {
        return Err(refusal(endpoint, status, &body));
    }
    serde_json::from_slice(&body).map_err(|e| AuthError::BadDocument {
        what: endpoint,
        url: url.to_owned(),
        reason: format!("not the expected JSON: {e}"),
    })
}

/// The refusal `body` of `endpoint` answered with `status`: the server's `error` and
/// `error_description` (RFC 6749 §5.2), or the status when the body says nothing readable.
fn refusal(endpoint: &'static str, status: reqwest::StatusCode, body: &[u8]) -> AuthError {
    #[derive(serde::Deserialize)]
    struct OAuthErrorBody {
        error: String,
        error_description: Option<String>,
    }
    match serde_json::from_slice::<OAuthErrorBody>(body) {
        Ok(e) => AuthError::OAuth {
            endpoint,
            error: e.error,
            description: e.error_description,
        },
        Err(_) => AuthError::OAuth {
            endpoint,
            error: format!("HTTP {status}"),
            description: None,
        },
    }
}

async fn read_body(url: &str, response: reqwest::Response) -> Result<Vec<u8>> {
    if response.content_length().is_some_and(|n| n > MAX_BODY as u64) {
        return Err(too_big(url));
    }
    let body = response.bytes().await.map_err(|e| unreachable(url, &e))?;
    if body.len() > MAX_BODY {
        return Err(too_big(url));
    }
    Ok(body.to_vec())
}

fn too_big(url: &str) -> AuthError {
    AuthError::BadDocument {
        what: "answer",
        url: url.to_owned(),
        reason: format!("larger than {MAX_BODY} bytes"),
    }
}

fn unreachable(url: &str, error: &reqwest::Error) -> AuthError {
    let reason = if error.is_timeout() {
        format!("no answer within {}s", REQUEST_TIMEOUT.as_secs())
    } else if error.is_connect() {
        "connection refused or failed".to_owned()
    } else {
        // reqwest's message may carry the URL, never a body or header.
        error.to_string()
    };
    AuthError::Unreachable {
        url: url.to_owned(),
        reason,
    }
}
