//! A real OAuth 2.1 / OpenID Connect authorization server for the tests: panva's `oidc-provider`
//! (npm, pinned in `package.json`) run by `tests/fixtures/oidc/provider.mjs` on a loopback port,
//! and a browserless sign-in through its development login and consent pages.
//!
//! ```ignore
//! let provider = OidcProvider::start();
//! // ... a client builds an authorization URL for `provider.issuer()` ...
//! let callback = provider.sign_in(&authorization_url, "alice").await;
//! // `callback` is the redirect to the client's redirect_uri with `code`, `state` and `iss`.
//! ```
//!
//! The fixture script documents what the provider offers and the environment variables that
//! configure it (`OidcProvider::start_with_env`).

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    thread,
    time::Duration,
};

use reqwest::{
    StatusCode,
    header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE},
    redirect::Policy,
};
use url::Url;

/// How long the provider may take to print its issuer line.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Requests of one sign-in, at most: start link, authorization, login page, login post, resume,
/// consent page, consent post, resume, plus slack.
const MAX_SIGN_IN_STEPS: usize = 16;

/// A running oidc-provider on `127.0.0.1`; killed on drop.
#[derive(Debug)]
pub struct OidcProvider {
    issuer: String,
    child: Child,
    /// The one client `token_for` registers and reuses (tokens of one client: one `azp`).
    client: std::sync::Mutex<Option<muster::auth::oauth::registration::ClientRegistration>>,
}

impl OidcProvider {
    /// Starts the provider on a free loopback port with the default configuration.
    pub fn start() -> Self {
        Self::start_with_env(&[])
    }

    /// Starts the provider with extra environment variables (`OIDC_ACCESS_TTL`,
    /// `OIDC_STATIC_CLIENT_ID`, ...; see `tests/fixtures/oidc/provider.mjs`).
    pub fn start_with_env(env: &[(&str, &str)]) -> Self {
        Self::start_on(0, env)
    }

    /// Starts the provider on loopback port `port` (0: a free one) with extra environment
    /// variables.
    pub fn start_on(port: u16, env: &[(&str, &str)]) -> Self {
        let root = repo_root();
        assert!(
            root.join("node_modules/oidc-provider/package.json").is_file(),
            "{} has no node_modules/oidc-provider: run npm ci in {} (scripts/test does)",
            root.display(),
            root.display()
        );
        let mut command = Command::new("node");
        command
            .arg(root.join("tests/fixtures/oidc/provider.mjs"))
            .arg(port.to_string())
            .current_dir(&root)
            .env_remove("OIDC_PORT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("spawn node (is Node.js on PATH?)");
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        forward_lines(stderr, None);
        let (first_line, rx) = mpsc::channel();
        forward_lines(stdout, Some(first_line));

        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(err) => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "oidc provider did not print its issuer line within {START_TIMEOUT:?} ({err}); exit: {status:?}; \
                     see its stderr above (run npm ci if oidc-provider is missing)"
                );
            }
        };
        let issuer = match line.strip_prefix("issuer ") {
            Some(issuer) => issuer.trim().to_owned(),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("oidc provider printed {line:?} instead of `issuer <url>`");
            }
        };
        Self {
            issuer,
            child,
            client: std::sync::Mutex::new(None),
        }
    }

    /// The issuer identifier, exactly as the provider states it: `http://127.0.0.1:<port>`, no
    /// trailing slash (compare it as a string; `Url` would add one).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// An access token for `resource` issued to `login`, obtained the way the gateway's OAuth
    /// client does it (discovery, dynamic registration, PKCE sign-in, code exchange). Every call
    /// uses the same registered client (one `azp`).
    pub async fn token_for(&self, resource: &str, login: &str) -> String {
        self.token_through(resource, login, false).await
    }

    /// As [`Self::token_for`], through a client registered for this token alone: the same person
    /// signed in to another application (another `azp`).
    pub async fn token_for_new_client(&self, resource: &str, login: &str) -> String {
        self.token_through(resource, login, true).await
    }

    async fn token_through(&self, resource: &str, login: &str, new_client: bool) -> String {
        use muster::auth::oauth::{
            discovery::authorization_server_metadata,
            flow::{Callback, SignInRequest, SignIns},
            http::OAuthHttp,
            registration::{ClientMetadata, register},
        };
        let http = OAuthHttp::new();
        let metadata = authorization_server_metadata(&http, self.issuer())
            .await
            .expect("metadata");
        let redirect = "http://127.0.0.1:9/callback".to_owned();
        let known = if new_client {
            None
        } else {
            self.client.lock().expect("lock").clone()
        };
        let client = match known {
            Some(client) => client,
            None => {
                let client = register(
                    &http,
                    &metadata,
                    &ClientMetadata {
                        client_name: "test client".into(),
                        redirect_uri: redirect.clone(),
                        scope: Some("openid".into()),
                    },
                )
                .await
                .expect("registered");
                if !new_client {
                    *self.client.lock().expect("lock") = Some(client.clone());
                }
                client
            }
        };
        let flows = SignIns::new();
        let started = flows
            .start(SignInRequest {
                session: "test".into(),
                owner: "test".into(),
                server: "test".into(),
                metadata,
                client,
                redirect_uri: redirect,
                resource: resource.to_owned(),
                scope: Some("openid".into()),
                expected_issuer: None,
            })
            .expect("a link");
        let callback = self.sign_in(started.url.as_str(), login).await;
        let callback = Callback::from_query(callback.query().unwrap_or_default());
        let done = flows.complete(&http, &callback).await.expect("a token");
        done.grant.access_token.expose().to_owned()
    }

    /// Signs `login` in (any password works) through the provider's login and consent pages,
    /// starting at `authorization_url`: the provider's authorization URL, or a link of the client
    /// that redirects to it. Redirects are followed by hand with a cookie jar of this sign-in only,
    /// so every call is a fresh browser. Returns the provider's final redirect to the client's
    /// redirect URI (with `code`, `state` and `iss`, or an `error`) without requesting it.
    pub async fn sign_in(&self, authorization_url: &str, login: &str) -> Url {
        let issuer = Url::parse(&self.issuer).expect("issuer is a URL");
        let http = reqwest::Client::builder()
            .redirect(Policy::none())
            .timeout(Duration::from_secs(15))
            .build()
            .expect("reqwest client");
        let mut jar = CookieJar::default();
        let mut next = Request::Get(Url::parse(authorization_url).expect("authorization URL is a URL"));

        for _ in 0..MAX_SIGN_IN_STEPS {
            let url = next.url().clone();
            let builder = match &next {
                Request::Get(url) => http.get(url.clone()),
                Request::Post(url, form) => http
                    .post(url.clone())
                    .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(form.clone()),
            };
            let builder = match jar.header_for(&url) {
                Some(cookies) => builder.header(COOKIE, cookies),
                None => builder,
            };
            let response = builder
                .send()
                .await
                .unwrap_or_else(|err| panic!("sign-in request to {url}: {err}"));
            for value in response.headers().get_all(SET_COOKIE) {
                if let Ok(value) = value.to_str() {
                    jar.store(&url, value);
                }
            }
            let status = response.status();

            if status.is_redirection() {
                let location = response
                    .headers()
                    .get(LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_else(|| panic!("{status} from {url} without a Location"));
                let target = url
                    .join(location)
                    .unwrap_or_else(|err| panic!("Location {location:?}: {err}"));
                // The provider sending the browser elsewhere is the answer to the client.
                if same_origin(&url, &issuer) && !same_origin(&target, &issuer) {
                    return target;
                }
                next = Request::Get(target);
                continue;
            }

            let body = response.text().await.unwrap_or_default();
            assert!(
                status == StatusCode::OK,
                "sign-in: {status} from {url}:\n{}",
                truncate(&body, 2000)
            );
            let form = Form::find(&body).unwrap_or_else(|| {
                panic!(
                    "sign-in: no interaction form on the page at {url}:\n{}",
                    truncate(&body, 2000)
                )
            });
            let action = url
                .join(&form.action)
                .unwrap_or_else(|err| panic!("form action {:?}: {err}", form.action));
            let mut fields = url::form_urlencoded::Serializer::new(String::new());
            match form.prompt.as_str() {
                "login" => {
                    fields
                        .append_pair("prompt", "login")
                        .append_pair("login", login)
                        .append_pair("password", "any password");
                }
                "consent" => {
                    fields.append_pair("prompt", "consent");
                }
                other => panic!("sign-in: unexpected interaction prompt {other:?} at {url}"),
            }
            next = Request::Post(action, fields.finish());
        }
        panic!("sign-in did not reach the client's redirect URI in {MAX_SIGN_IN_STEPS} requests")
    }
}

/// Key rotation and the published keys (additions for the front-door tests).
impl OidcProvider {
    /// The provider's JWKS as it publishes it now (its discovery document's `jwks_uri`).
    pub async fn jwks(&self) -> serde_json::Value {
        let discovery: serde_json::Value = reqwest::get(format!("{}/.well-known/openid-configuration", self.issuer))
            .await
            .expect("discovery answers")
            .json()
            .await
            .expect("discovery is JSON");
        let jwks_uri = discovery["jwks_uri"].as_str().expect("discovery names the jwks_uri");
        reqwest::get(jwks_uri)
            .await
            .expect("the JWKS answers")
            .json()
            .await
            .expect("the JWKS is JSON")
    }

    /// The `kid`s of the published keys, the signing one first.
    pub async fn published_kids(&self) -> Vec<String> {
        kids(&self.jwks().await["keys"])
    }

    /// Rotates the signing key: a fresh key signs every token from now on and the keys before
    /// it stay published. Returns the new key's `kid`. The provider must have been started with
    /// `OIDC_ROTATE_ADMIN=1`.
    pub async fn rotate_signing_key(&self) -> String {
        let answer = self.key_admin("rotate").await;
        answer["signing"].as_str().expect("the signing kid").to_owned()
    }

    /// Retires the keys before the signing one: they leave the JWKS. Returns the `kid`s still
    /// published. The provider must have been started with `OIDC_ROTATE_ADMIN=1`.
    pub async fn retire_old_keys(&self) -> Vec<String> {
        kids(&self.key_admin("retire").await["published"])
    }

    async fn key_admin(&self, action: &str) -> serde_json::Value {
        let response = reqwest::Client::new()
            .post(format!("{}/admin/keys/{action}", self.issuer))
            .send()
            .await
            .expect("the provider answers");
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        assert!(
            status == StatusCode::OK,
            "keys/{action}: {status} {body} (was the provider started with OIDC_ROTATE_ADMIN=1?)"
        );
        serde_json::from_str(&body).expect("the admin answer is JSON")
    }
}

/// Token exchange (additions for the token exchange tests; the provider started with
/// `OIDC_TOKEN_EXCHANGE=1`, see `tests/fixtures/oidc/provider.mjs`).
impl OidcProvider {
    /// The token endpoint, `<issuer>/token` (oidc-provider's path).
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// How many token requests with the token exchange grant the provider has received,
    /// whatever their outcome (a refused client included). Blocks briefly on a loopback
    /// request, so it can be called from sync and async tests alike.
    pub fn exchange_count(&self) -> u64 {
        let (succeeded, failed) = self.exchange_counts();
        succeeded + failed
    }

    /// How many token requests with grant type `grant_type` (`refresh_token`,
    /// `authorization_code`, ...) the provider answered 200, and how many it refused.
    pub fn token_requests(&self, grant_type: &str) -> (u64, u64) {
        let counts = self.admin_get("/admin/token-requests");
        let count = |outcome: &str| counts[grant_type][outcome].as_u64().unwrap_or(0);
        (count("succeeded"), count("failed"))
    }

    /// The token exchange requests received: `(succeeded, failed)`.
    pub fn exchange_counts(&self) -> (u64, u64) {
        let counts = self.admin_get("/admin/exchanges");
        let count = |name: &str| {
            counts[name]
                .as_u64()
                .unwrap_or_else(|| panic!("/admin/exchanges has no {name}: {counts}"))
        };
        (count("succeeded"), count("failed"))
    }

    /// GETs the admin route `path` with a plain HTTP/1.0 request (no async runtime needed) and
    /// reads its JSON answer.
    fn admin_get(&self, path: &str) -> serde_json::Value {
        use std::io::Write;
        let url = Url::parse(&self.issuer).expect("issuer is a URL");
        let address = format!(
            "{}:{}",
            url.host_str().expect("issuer host"),
            url.port_or_known_default().expect("issuer port")
        );
        let mut stream = std::net::TcpStream::connect(&address)
            .unwrap_or_else(|err| panic!("the provider at {address} answers: {err}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        write!(
            stream,
            "GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
        )
        .expect("request sent");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response read");
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        assert!(
            head.lines().next().is_some_and(|status| status.contains(" 200 ")),
            "GET {path}: {head}\n{body} (was the provider started with OIDC_TOKEN_EXCHANGE=1?)"
        );
        serde_json::from_str(body).unwrap_or_else(|err| panic!("GET {path}: not JSON ({err}): {body}"))
    }
}

fn kids(list: &serde_json::Value) -> Vec<String> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|key| key.get("kid").unwrap_or(key).as_str().map(str::to_owned))
        .collect()
}

/// A forged token: `payload` under `header` (its `alg` set to RS256), signed with a fresh RSA
/// key that no issuer publishes. Made by `tests/fixtures/oidc/forge.mjs`.
pub fn sign_with_foreign_key(header: &serde_json::Value, payload: &serde_json::Value) -> String {
    forge(&["foreign-rsa", &header.to_string(), &payload.to_string()])
}

/// A forged token for the algorithm confusion attack: `payload` under `header` (its `alg` set to
/// HS256), its HMAC keyed with the PEM of `public_jwk` (an issuer's public RSA key, which anyone
/// can read from its JWKS). Made by `tests/fixtures/oidc/forge.mjs`.
pub fn sign_hs256_with_public_key(
    header: &serde_json::Value,
    payload: &serde_json::Value,
    public_jwk: &serde_json::Value,
) -> String {
    forge(&[
        "hs256-public-key",
        &header.to_string(),
        &payload.to_string(),
        &public_jwk.to_string(),
    ])
}

fn forge(args: &[&str]) -> String {
    let root = repo_root();
    let output = Command::new("node")
        .arg(root.join("tests/fixtures/oidc/forge.mjs"))
        .args(args)
        .current_dir(&root)
        .output()
        .expect("run node (is Node.js on PATH?)");
    assert!(
        output.status.success(),
        "forge.mjs {}: {}",
        args[0],
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("a token is ASCII")
        .trim()
        .to_owned()
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

/// Copies the child's output lines to the test's stderr (captured per test); the first line goes
/// to `first` instead, when given.
fn forward_lines(output: impl Read + Send + 'static, mut first: Option<mpsc::Sender<String>>) {
    thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            let Ok(line) = line else { break };
            match first.take() {
                Some(tx) => {
                    let _ = tx.send(line);
                }
                None => eprintln!("[oidc-provider] {line}"),
            }
        }
    });
}

enum Request {
    Get(Url),
    Post(Url, String),
}

impl Request {
    fn url(&self) -> &Url {
        match self {
            Request::Get(url) | Request::Post(url, _) => url,
        }
    }
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.origin() == b.origin()
}

fn truncate(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// The interaction form of a devInteractions page: `<form ... action="URL" method="post">` with a
/// hidden `<input type="hidden" name="prompt" value="login|consent"/>`.
#[derive(Debug)]
struct Form {
    action: String,
    prompt: String,
}

impl Form {
    fn find(html: &str) -> Option<Form> {
        let start = html.find("<form")?;
        let rest = &html[start..];
        let end = rest.find("</form>").unwrap_or(rest.len());
        let form = &rest[..end];
        let tag_end = form.find('>')?;
        let action = attribute(&form[..tag_end], "action")?;
        let prompt = form[tag_end..]
            .split("<input")
            .skip(1)
            .find(|input| attribute(input, "name").as_deref() == Some("prompt"))
            .and_then(|input| attribute(input, "value"))?;
        Some(Form { action, prompt })
    }
}

/// The value of attribute `name` in the start of a tag (`name="value"` or `name='value'`),
/// with the entities a template engine writes decoded.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let mut search = tag;
    loop {
        let at = search.find(name)?;
        let before_ok = at == 0 || search[..at].ends_with(|c: char| c.is_ascii_whitespace());
        let after = search[at + name.len()..].trim_start();
        if before_ok && let Some(after) = after.strip_prefix('=') {
            let after = after.trim_start();
            let quote = after.chars().next().filter(|c| *c == '"' || *c == '\'')?;
            let value = &after[1..];
            let close = value.find(quote)?;
            return Some(decode_entities(&value[..close]));
        }
        search = &search[at + name.len()..];
    }
}

fn decode_entities(text: &str) -> String {
    text.replace("&#x2F;", "/")
        .replace("&#47;", "/")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Cookies of one sign-in, by origin and path: enough for oidc-provider's session and
/// interaction cookies (which are scoped to `/interaction/<uid>` and `/auth/<uid>`).
#[derive(Debug, Default)]
struct CookieJar {
    cookies: Vec<Cookie>,
}

#[derive(Debug)]
struct Cookie {
    origin: url::Origin,
    path: String,
    name: String,
    value: String,
}

impl CookieJar {
    /// Records one `Set-Cookie` header received from `url`; an empty value or an expiry in the
    /// past (`max-age=0`, or the 1970 date koa writes) deletes the cookie.
    fn store(&mut self, url: &Url, header: &str) {
        let mut parts = header.split(';');
        let Some((name, value)) = parts.next().and_then(|pair| pair.split_once('=')) else {
            return;
        };
        let (name, value) = (name.trim().to_owned(), value.trim().to_owned());
        let mut path = default_path(url);
        let mut expired = value.is_empty();
        for attribute in parts {
            let (key, val) = attribute.split_once('=').unwrap_or((attribute, ""));
            match key.trim().to_ascii_lowercase().as_str() {
                "path" if val.trim().starts_with('/') => path = val.trim().to_owned(),
                "max-age" => expired |= val.trim().parse::<i64>().is_ok_and(|age| age <= 0),
                "expires" => expired |= val.contains("1970"),
                _ => {}
            }
        }
        let origin = url.origin();
        self.cookies
            .retain(|c| !(c.origin == origin && c.path == path && c.name == name));
        if !expired {
            self.cookies.push(Cookie {
                origin,
                path,
                name,
                value,
            });
        }
    }

    /// The `Cookie` header for a request to `url`, if any cookie applies.
    fn header_for(&self, url: &Url) -> Option<String> {
        let origin = url.origin();
        let request_path = url.path();
        let pairs: Vec<String> = self
            .cookies
            .iter()
            .filter(|c| c.origin == origin && path_matches(request_path, &c.path))
            .map(|c| format!("{}={}", c.name, c.value))
            .collect();
        (!pairs.is_empty()).then(|| pairs.join("; "))
    }
}

/// RFC 6265 5.1.4 default-path: the request path up to its last `/`.
fn default_path(url: &Url) -> String {
    match url.path().rfind('/') {
        Some(0) | None => "/".to_owned(),
        Some(at) => url.path()[..at].to_owned(),
    }
}

/// RFC 6265 5.1.4 path-match.
fn path_matches(request_path: &str, cookie_path: &str) -> bool {
    request_path == cookie_path
        || (request_path.starts_with(cookie_path)
            && (cookie_path.ends_with('/') || request_path[cookie_path.len()..].starts_with('/')))
}
