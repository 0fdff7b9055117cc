//! [`KubeSecrets`]: the Secrets an MCPServer names (`headersFrom`, `clientCredentialsSecretRef`),
//! read from the cluster with muster's own ServiceAccount, under the rules the reference gives.
//!
//! muster sends what it reads to endpoints of the same MCPServer, so whoever may write an
//! MCPServer could otherwise read any Secret muster may get. Three guards, checked before a
//! value leaves the cluster:
//!
//! - **The admission policy is in force.** `deploy/admission-policy.yaml` admits an MCPServer
//!   only when its writer may get each Secret it names. muster reads none unless the binding
//!   `secretBinding.admissionPolicyBinding` has `Deny` among its `validationActions` and no
//!   `matchResources`, and its policy exists with `failurePolicy: Fail` (the default). A check
//!   that passed holds for at most a minute. Otherwise the read fails with
//!   [`SecretError::PolicyNotInForce`] (its text [`POLICY_NOT_IN_FORCE`] and the reason).
//! - **muster's own Secrets are never read** for an MCPServer (`secretBinding.protectedSecrets`).
//! - **Secret types that hold something else** are never read: Helm releases, TLS keys,
//!   ServiceAccount and bootstrap tokens, image pull credentials.
//!
//! A reference without a namespace names a Secret of muster's namespace. A missing Secret or key,
//! a Secret muster may not get and an API server that does not answer within ten seconds are
//! errors naming the Secret, never a value: the server reads Failed with the reason and is
//! retried on its backoff, so a Secret created later is picked up.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use muster_core::config::SecretBindingConfig;
//! use muster_gateway::{GatewayOptions, secrets::SecretSource};
//! use muster_kube::secrets::KubeSecrets;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let secrets = KubeSecrets::new(client, "muster", SecretBindingConfig::default());
//! let token = secrets.get(None, "github-token", "token").await?;
//! let options = GatewayOptions::default().with_secrets(Arc::new(secrets));
//! # drop((token, options));
//! # Ok(()) }
//! ```

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    core::v1::Secret as KubeSecret,
};
use kube::{Api, Client};
use muster_auth::Secret;
use muster_core::config::SecretBindingConfig;
use muster_gateway::secrets::SecretSource;
pub use muster_gateway::secrets::{POLICY_NOT_IN_FORCE, SecretError};

/// Secret types muster never reads for an MCPServer: they hold a Helm release, a TLS key, a
/// ServiceAccount or bootstrap token, or image pull credentials, never a header value or an
/// OAuth client.
pub const FORBIDDEN_TYPES: [&str; 6] = [
    "helm.sh/release.v1",
    "kubernetes.io/tls",
    "kubernetes.io/service-account-token",
    "bootstrap.kubernetes.io/token",
    "kubernetes.io/dockerconfigjson",
    "kubernetes.io/dockercfg",
];

/// How long a check that found the admission policy in force holds.
pub const POLICY_RECHECK: Duration = Duration::from_secs(60);

/// How long a read may wait for the API server.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The Secrets MCPServers name, read from the cluster (see the module documentation).
pub struct KubeSecrets {
    client: Client,
    namespace: String,
    binding: SecretBindingConfig,
    /// When the admission policy was last found in force.
    in_force_since: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for KubeSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSecrets")
            .field("namespace", &self.namespace)
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

impl KubeSecrets {
    /// Reads Secrets with `client` (muster's ServiceAccount), muster being in `namespace`.
    pub fn new(client: Client, namespace: impl Into<String>, binding: SecretBindingConfig) -> Self {
        Self {
            client,
            namespace: namespace.into(),
            binding,
            in_force_since: Mutex::new(None),
        }
    }

    async fn read(&self, namespace: Option<&str>, name: &str, key: &str) -> Result<Secret, SecretError> {
        let namespace = namespace.unwrap_or(&self.namespace);
        if self.binding.protects(&self.namespace, namespace, name) {
            return Err(SecretError::Refused(format!(
                "Secret {namespace}/{name} is one of muster's own Secrets (secretBinding.protectedSecrets), which \
                 muster never reads for an MCPServer"
            )));
        }
        self.policy_in_force().await.map_err(SecretError::policy_not_in_force)?;
        self.fetch(namespace, name, key).await.map_err(SecretError::Refused)
    }

    /// The value under `key` of Secret `name` in `namespace`, once the rules allow reading it.
    async fn fetch(&self, namespace: &str, name: &str, key: &str) -> Result<Secret, String> {
        let what = format!("Secret {namespace}/{name}");
        let secrets: Api<KubeSecret> = Api::namespaced(self.client.clone(), namespace);
        let secret = match tokio::time::timeout(READ_TIMEOUT, secrets.get_opt(name)).await {
            Err(_) => {
                return Err(format!(
                    "{what} cannot be read: the Kubernetes API server did not answer"
                ));
            }
            Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                return Err(format!(
                    "muster's ServiceAccount may not get {what} (grant it get on Secrets in {namespace}): {}",
                    status.message
                ));
            }
            Ok(Err(e)) => return Err(format!("{what} cannot be read: {e}")),
            Ok(Ok(None)) => return Err(format!("{what} not found")),
            Ok(Ok(Some(secret))) => secret,
        };
        if let Some(kind) = secret.type_.as_deref().filter(|t| FORBIDDEN_TYPES.contains(t)) {
            return Err(format!(
                "{what} is of type {kind}, which muster never reads for an MCPServer"
            ));
        }
        let bytes = secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .ok_or_else(|| format!("{what} has no key {key}"))?;
        String::from_utf8(bytes.0.clone())
            .map(Secret::new)
            .map_err(|_| format!("{what}: key {key} is not UTF-8 text"))
    }

    /// Whether the admission policy that guards the references is in force, else why not.
    async fn policy_in_force(&self) -> Result<(), String> {
        let fresh = |since: &Option<Instant>| since.is_some_and(|at| at.elapsed() < POLICY_RECHECK);
        if fresh(&self.in_force_since.lock().unwrap_or_else(|e| e.into_inner())) {
            return Ok(());
        }
        let checked = tokio::time::timeout(READ_TIMEOUT, self.check_policy())
            .await
            .unwrap_or_else(|_| Err("the Kubernetes API server did not answer".to_owned()));
        *self.in_force_since.lock().unwrap_or_else(|e| e.into_inner()) = checked.is_ok().then(Instant::now);
        checked
    }

    async fn check_policy(&self) -> Result<(), String> {
        let name = &self.binding.admission_policy_binding;
        let what = format!("ValidatingAdmissionPolicyBinding {name}");
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.client.clone());
        let binding = read(&bindings, name, &what).await?;
        let spec = binding.spec.unwrap_or_default();
        let actions = spec.validation_actions.unwrap_or_default();
        if !actions.iter().any(|a| a == "Deny") {
            return Err(format!("{what} does not deny (validationActions {actions:?})"));
        }
        if spec.match_resources.is_some() {
            return Err(format!(
                "{what} has matchResources, so it may leave MCPServers out; the binding must match every MCPServer"
            ));
        }
        let policy_name = spec.policy_name.unwrap_or_default();
        if policy_name.is_empty() {
            return Err(format!("{what} names no policy"));
        }
        let what = format!("ValidatingAdmissionPolicy {policy_name} (of {what})");
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(self.client.clone());
        let policy = read(&policies, &policy_name, &what).await?;
        match policy.spec.and_then(|s| s.failure_policy) {
            Some(failure) if failure != "Fail" => Err(format!(
                "{what} has failurePolicy {failure}: an MCPServer is admitted when the policy cannot be evaluated"
            )),
            _ => Ok(()),
        }
    }
}

/// Object `name` of `api`, `what` naming it in an error.
async fn read<K>(api: &Api<K>, name: &str, what: &str) -> Result<K, String>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get_opt(name).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(format!("{what} does not exist")),
        Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
            "muster's ServiceAccount may not get {what}: {}",
            status.message
        )),
        Err(e) => Err(format!("{what} cannot be read: {e}")),
    }
}

impl SecretSource for KubeSecrets {
    fn get<'a>(
        &'a self,
        namespace: Option<&'a str>,
        name: &'a str,
        key: &'a str,
    ) -> BoxFuture<'a, Result<Secret, SecretError>> {
        Box::pin(self.read(namespace, name, key))
    }
}
