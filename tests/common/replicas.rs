//! Replicas of the reference gateway as child processes (`gateway serve`, each with its own
//! config directory and loopback port), configured alike: the sign-in at one public URL (the load
//! balancer's, when there is one), the state in one Valkey, the same servers. A replica can be
//! stopped, killed and started again on its port, as a rollout or a crash does.
//!
//! ```ignore
//! let settings = ReplicaSettings::default().with_valkey(&valkey, &key_file);
//! let mut replicas = Replicas::start(3, &settings);
//! let haproxy = Haproxy::start(&replicas.backends());
//! replicas[0].kill();
//! replicas[0].start_again();
//! ```

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use super::{gateway_binary, gateway_process::GatewayChild, valkey::ValkeyServer};

/// How long a replica may take to say where it serves.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A free loopback port (free when asked; the caller binds it soon after).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binds a loopback port");
    listener.local_addr().expect("its address").port()
}

/// What every replica is configured with.
#[derive(Debug, Clone, Default)]
pub struct ReplicaSettings {
    /// `aggregator.oauth.mcpClient.publicUrl` (the sign-in on), and the front door's `baseUrl`.
    pub public_url: Option<String>,
    /// The front door (`aggregator.oauth.server.enabled`) trusting this issuer.
    pub trusted_issuer: Option<String>,
    /// `storage.valkey.url` and the `encryptionKeyFile`.
    pub valkey: Option<(String, PathBuf)>,
    /// The MCPServer definitions: name and the YAML of its `spec` (indented by two).
    pub servers: Vec<(String, String)>,
}

impl ReplicaSettings {
    /// Sign-in (and the front door's metadata) at `url`.
    pub fn with_public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(url.into());
        self
    }

    /// The front door on, trusting `issuer`.
    pub fn with_front_door(mut self, issuer: impl Into<String>) -> Self {
        self.trusted_issuer = Some(issuer.into());
        self
    }

    /// The state in `valkey`, sealed with `key_file`.
    pub fn with_valkey(mut self, valkey: &ValkeyServer, key_file: &Path) -> Self {
        self.valkey = Some((valkey.url(), key_file.to_owned()));
        self
    }

    /// A streamable-HTTP server `name` at `url`; `auth` (YAML under `spec.auth`, one line per
    /// key indented by four) when given.
    pub fn with_http_server(mut self, name: &str, url: &str, auth: Option<&str>) -> Self {
        let mut spec = format!("  type: streamable-http\n  url: {url}\n  timeout: 5\n");
        if let Some(auth) = auth {
            spec.push_str("  auth:\n");
            spec.push_str(auth);
        }
        self.servers.push((name.to_owned(), spec));
        self
    }

    /// `config.yaml` of a replica on `port`.
    fn config_yaml(&self, port: u16) -> String {
        let mut yaml = format!("aggregator:\n  host: 127.0.0.1\n  port: {port}\n");
        if self.public_url.is_none() && self.valkey.is_none() && self.trusted_issuer.is_none() {
            return yaml;
        }
        yaml.push_str("  oauth:\n");
        if let Some(url) = &self.public_url {
            yaml.push_str(&format!(
                "    mcpClient:\n      enabled: true\n      publicUrl: {url}\n"
            ));
        }
        yaml.push_str("    server:\n");
        if let Some(issuer) = &self.trusted_issuer {
            let base = self
                .public_url
                .clone()
                .unwrap_or_else(|| format!("http://127.0.0.1:{port}"));
            yaml.push_str(&format!(
                "      enabled: true\n      baseUrl: {base}\n      trustedIssuers: [\"{issuer}\"]\n"
            ));
        }
        if let Some((url, key_file)) = &self.valkey {
            yaml.push_str(&format!(
                "      encryptionKeyFile: {}\n      storage:\n        type: valkey\n        valkey:\n          \
                 url: {url}\n          keyPrefix: \"replicas:\"\n",
                key_file.display()
            ));
        }
        yaml
    }

    /// Writes a replica's config directory `dir` for `port`.
    fn write(&self, dir: &Path, port: u16) {
        std::fs::create_dir_all(dir.join("mcpservers")).expect("creates the config directory");
        std::fs::write(dir.join("config.yaml"), self.config_yaml(port)).expect("writes config.yaml");
        for (name, spec) in &self.servers {
            let server = format!(
                "apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: {name}\nspec:\n{spec}"
            );
            std::fs::write(dir.join(format!("mcpservers/{name}.yaml")), server).expect("writes a server");
        }
    }
}

/// One replica: a gateway process on its own port, with its own config directory.
pub struct Replica {
    /// `r1`, `r2`, ...: the name the load balancer gives it.
    pub name: String,
    pub port: u16,
    dir: PathBuf,
    child: Option<GatewayChild>,
    /// The log of the processes before the running one.
    earlier: Vec<String>,
}

impl Replica {
    /// Starts a replica named `name` serving config directory `dir` on `port`, and waits until
    /// it serves.
    pub fn start(name: &str, dir: PathBuf, port: u16) -> Self {
        let mut replica = Self {
            name: name.to_owned(),
            port,
            dir,
            child: None,
            earlier: Vec::new(),
        };
        replica.start_again();
        replica
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Its MCP endpoint.
    pub fn mcp(&self) -> String {
        format!("{}/mcp", self.base())
    }

    /// Everything it logged, over its restarts.
    pub fn log(&self) -> String {
        let mut lines = self.earlier.clone();
        if let Some(child) = &self.child {
            lines.extend(child.lines());
        }
        lines.join("\n")
    }

    /// Stops it with SIGTERM (a graceful shutdown, as a rollout does).
    pub fn stop(&mut self) {
        if let Some(child) = self.child.take() {
            self.earlier.extend(child.stop());
        }
    }

    /// Kills it with SIGKILL (a crash: nothing is cleaned up).
    pub fn kill(&mut self) {
        if let Some(child) = self.child.take() {
            let lines = child.lines();
            drop(child); // kills and reaps
            self.earlier.extend(lines);
        }
    }

    /// Starts it (again) on its port, and waits until it serves.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "{} is running", self.name);
        let mut command = Command::new(gateway_binary());
        command
            .args(["serve", "--config-path"])
            .arg(&self.dir)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .env_remove("MUSTER_LOG_FORMAT");
        let child = GatewayChild::spawn(command);
        child.endpoint(START_TIMEOUT);
        self.child = Some(child);
    }
}

/// Replicas configured alike, in one temporary directory.
pub struct Replicas {
    pub replicas: Vec<Replica>,
    _dir: tempfile::TempDir,
}

impl Replicas {
    /// Starts `count` replicas (`r1`, `r2`, ...) with `settings`, each on a free port.
    pub fn start(count: usize, settings: &ReplicaSettings) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let replicas = (1..=count)
            .map(|i| {
                let port = free_port();
                let config = dir.path().join(format!("r{i}"));
                settings.write(&config, port);
                Replica::start(&format!("r{i}"), config, port)
            })
            .collect();
        Self { replicas, _dir: dir }
    }

    /// Each replica's name and port, for the load balancer.
    pub fn backends(&self) -> Vec<(String, u16)> {
        self.replicas.iter().map(|r| (r.name.clone(), r.port)).collect()
    }

    /// The replica named `name`.
    pub fn named(&self, name: &str) -> &Replica {
        self.replicas
            .iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no replica {name}"))
    }

    /// Every replica's log, headed by its name.
    pub fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {} ---\n{}", r.name, r.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl std::ops::Index<usize> for Replicas {
    type Output = Replica;

    fn index(&self, i: usize) -> &Replica {
        &self.replicas[i]
    }
}

impl std::ops::IndexMut<usize> for Replicas {
    fn index_mut(&mut self, i: usize) -> &mut Replica {
        &mut self.replicas[i]
    }
}

/// The aggregator configuration of in-process replicas behind `public` (sign-in links, and the
/// front door trusting `issuer`), their state in `valkey` under `prefix`, sealed with `key_file`.
pub fn front_door_on_valkey(
    public: &str,
    issuer: &str,
    valkey: &ValkeyServer,
    key_file: &Path,
    prefix: &str,
) -> muster::core::config::AggregatorConfig {
    use muster::core::config::OAuthServerConfig;
    let server = OAuthServerConfig::trusting(public.to_owned(), vec![issuer.to_owned()]);
    on_valkey(public, server, valkey, key_file, prefix)
}

/// As [`front_door_on_valkey`], without the front door (a session's grants are the transport
/// session's).
pub fn sign_in_on_valkey(
    public: &str,
    valkey: &ValkeyServer,
    key_file: &Path,
    prefix: &str,
) -> muster::core::config::AggregatorConfig {
    on_valkey(public, Default::default(), valkey, key_file, prefix)
}

fn on_valkey(
    public: &str,
    server: muster::core::config::OAuthServerConfig,
    valkey: &ValkeyServer,
    key_file: &Path,
    prefix: &str,
) -> muster::core::config::AggregatorConfig {
    use muster::core::config::{AggregatorConfig, McpClientConfig, StorageConfig, ValkeyConfig};
    let storage = StorageConfig::valkey(ValkeyConfig::at(valkey.url()).with_key_prefix(prefix));
    AggregatorConfig::default()
        .with_mcp_client(McpClientConfig::enabled_at(public.to_owned()))
        .with_oauth_server(
            server
                .with_storage(storage)
                .with_encryption_key_file(key_file.display().to_string()),
        )
}

/// A replica as a [`Gateway`](muster::gateway::Gateway) in this process, on a fixed loopback
/// port, for what a config directory cannot say (an `http://` issuer on loopback: files want
/// `https`). Replicas in one process share nothing but what their configuration names (the
/// Valkey store); each has its own registry, sessions and connections.
pub struct InProcessReplica {
    pub name: String,
    pub port: u16,
    config: muster::core::config::MusterConfig,
    servers: Vec<muster::core::crd::MCPServer>,
    secrets: Option<std::sync::Arc<dyn muster::gateway::secrets::SecretSource>>,
    running: Option<(muster::gateway::Gateway, tokio::task::JoinHandle<()>)>,
}

impl InProcessReplica {
    /// Starts replica `name` on `port` with `config` and `servers`.
    pub async fn start(
        name: &str,
        port: u16,
        config: muster::core::config::MusterConfig,
        servers: Vec<muster::core::crd::MCPServer>,
    ) -> Self {
        Self::start_with_secrets(name, port, config, servers, None).await
    }

    /// As [`Self::start`], reading the servers' Secrets from `secrets`.
    pub async fn start_with_secrets(
        name: &str,
        port: u16,
        config: muster::core::config::MusterConfig,
        servers: Vec<muster::core::crd::MCPServer>,
        secrets: Option<std::sync::Arc<dyn muster::gateway::secrets::SecretSource>>,
    ) -> Self {
        let mut replica = Self {
            name: name.to_owned(),
            port,
            config,
            servers,
            secrets,
            running: None,
        };
        replica.start_again().await;
        replica
    }

    /// `http://127.0.0.1:<port>/mcp`.
    pub fn mcp(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Its gateway, while it runs.
    pub fn gateway(&self) -> &muster::gateway::Gateway {
        &self.running.as_ref().expect("the replica runs").0
    }

    /// Shuts it down (its sessions end; what it kept in memory is gone).
    pub async fn stop(&mut self) {
        if let Some((gateway, server)) = self.running.take() {
            gateway.shutdown().await;
            server.abort();
            let _ = server.await;
        }
    }

    /// Starts it (again) on its port: a new gateway, as after a restart.
    pub async fn start_again(&mut self) {
        use muster::gateway::{Gateway, GatewayOptions};
        assert!(self.running.is_none(), "{} is running", self.name);
        let mut options = GatewayOptions::default().with_supervision(super::fast_supervision());
        if let Some(secrets) = &self.secrets {
            options = options.with_secrets(std::sync::Arc::clone(secrets));
        }
        let gateway = Gateway::with_options(self.config.clone(), self.servers.clone(), Vec::new(), options)
            .expect("a valid configuration");
        gateway.start().await;
        let listener = bind_again(self.port).await;
        let app = gateway.router();
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        self.running = Some((gateway, server));
    }
}

/// Binds loopback `port`, retrying for a while (a port just released may still be held).
async fn bind_again(port: u16) -> tokio::net::TcpListener {
    for _ in 0..100 {
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            return listener;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("port {port} stayed taken");
}

/// What a replica test signs in against: a real redis-server, the state key, an oidc-provider
/// and the protected server `protected` (tool `whoami`, answering `"you are in"`) it guards.
pub struct SignInParts {
    pub valkey: ValkeyServer,
    pub key_file: PathBuf,
    pub idp: super::oidc::OidcProvider,
    pub protected: super::scripted::ScriptedServer,
    _dir: tempfile::TempDir,
}

impl SignInParts {
    /// `None` (with a note) without redis-server; the provider started with `idp_env`.
    pub async fn start(idp_env: &[(&str, &str)]) -> Option<Self> {
        let valkey = ValkeyServer::start()?;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let key_file = super::valkey::write_state_key(dir.path());
        let idp = super::oidc::OidcProvider::start_with_env(idp_env);
        let protected = super::scripted::ScriptedServer::builder()
            .tool("whoami", true, |_| Ok(serde_json::json!("you are in")))
            .serve_protected(idp.issuer())
            .await;
        Some(Self {
            valkey,
            key_file,
            idp,
            protected,
            _dir: dir,
        })
    }
}
