//! Kubernetes mode's settings: `kubernetesWrites`, whose identity the core tools write
//! definitions with, and `secretBinding`, the guards on the Secrets an MCPServer names.
//!
//! `core_mcpserver_*`, `core_workflow_*` and `core_service_start`/`_stop`/`_restart` write
//! MCPServer and Workflow resources as their caller, never as muster's ServiceAccount, so that
//! Kubernetes RBAC decides and the audit log names the person. Two ways:
//!
//! - `forwardToken` (the default): the caller's bearer token, which the front door validated,
//!   goes to the API server. The API server must trust the token's issuer (its OIDC
//!   configuration). muster needs no right of its own.
//! - `impersonate`: muster's ServiceAccount impersonates the caller (`Impersonate-User`). It needs
//!   the `impersonate` right on users, which lets it act as anyone; use it only where the API
//!   server does not trust the front door's issuer. The user name is built as the API server
//!   would build it from the token (`usernameClaim`, `usernamePrefix`, as its
//!   `--oidc-username-claim` and `--oidc-username-prefix`), and so are the groups (the
//!   `groups` claim, with `groupsPrefix` as its `--oidc-groups-prefix`), so the same RBAC
//!   bindings apply.
//!
//! Without a caller the front door authenticated there is no identity to write with, and the
//! write is refused.
//!
//! `secretBinding`: muster reads the Secrets an MCPServer names (`headersFrom`,
//! `clientCredentialsSecretRef`) with its own ServiceAccount, so it reads none unless the
//! admission policy that admits only writers who may get them is in force: the
//! ValidatingAdmissionPolicyBinding `admissionPolicyBinding` (default
//! `muster-mcpserver-secret-references`, as `deploy/` names it) denies, matches every MCPServer
//! and its policy fails closed. `protectedSecrets` are muster's own Secrets (its OAuth client,
//! its encryption key, its Valkey password), `<name>` in muster's namespace or
//! `<namespace>/<name>`: no MCPServer may name them.
//!
//! ```
//! use muster_core::config::{MusterConfig, UsernameClaim, WriteIdentity};
//!
//! let config: MusterConfig = serde_json::from_value(serde_json::json!({
//!     "kubernetes": true,
//!     "kubernetesWrites": {"identity": "impersonate", "usernameClaim": "email"}
//! }))?;
//! assert_eq!(config.kubernetes_writes.identity, WriteIdentity::Impersonate);
//! assert_eq!(config.kubernetes_writes.username_claim, UsernameClaim::Email);
//! assert_eq!(config.secret_binding.admission_policy_binding, "muster-mcpserver-secret-references");
//! # Ok::<(), serde_json::Error>(())
//! ```

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `kubernetesWrites`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct KubernetesWritesConfig {
    /// Whose identity reaches the API server: the caller's own token (`forwardToken`, the
    /// default) or muster's ServiceAccount impersonating the caller (`impersonate`).
    pub identity: WriteIdentity,
    /// With `impersonate`: the claim the user name is taken from, `sub` (the default) or
    /// `email`, as the API server's `--oidc-username-claim`.
    pub username_claim: UsernameClaim,
    /// With `impersonate`: put in front of the user name, as the API server's
    /// `--oidc-username-prefix`. Unset: the API server's default, `<issuer>#` for `sub` and
    /// nothing for `email`; `-` puts nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username_prefix: Option<String>,
    /// With `impersonate`: put in front of each group of the caller's `groups` claim, as the
    /// API server's `--oidc-groups-prefix` (the API server's default is none). The groups go
    /// to the API server as `Impersonate-Group`, so RBAC bound to groups applies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub groups_prefix: Option<String>,
}

/// Whose identity the core tools' writes reach the API server with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum WriteIdentity {
    /// The caller's validated bearer token.
    #[default]
    ForwardToken,
    /// muster's ServiceAccount, impersonating the caller.
    Impersonate,
}

/// The claim an impersonated user name is taken from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum UsernameClaim {
    /// The subject.
    #[default]
    Sub,
    /// The e-mail address.
    Email,
}

impl KubernetesWritesConfig {
    /// The user name the API server would give the caller of `issuer`, `subject` and `email`,
    /// or `None` when the claim it is built from is missing.
    pub fn username(&self, issuer: Option<&str>, subject: &str, email: Option<&str>) -> Option<String> {
        let (claim, default_prefix) = match self.username_claim {
            UsernameClaim::Sub => (subject, issuer.map(|i| format!("{i}#")).unwrap_or_default()),
            UsernameClaim::Email => (email?, String::new()),
        };
        let prefix = match self.username_prefix.as_deref() {
            Some("-") => String::new(),
            Some(prefix) => prefix.to_owned(),
            None => default_prefix,
        };
        Some(format!("{prefix}{claim}"))
    }

    /// The groups the API server would give a caller whose `groups` claim is `groups`.
    pub fn groups(&self, groups: &[String]) -> Vec<String> {
        let prefix = self.groups_prefix.as_deref().unwrap_or_default();
        groups.iter().map(|group| format!("{prefix}{group}")).collect()
    }
}

/// The ValidatingAdmissionPolicyBinding `deploy/` installs.
pub const DEFAULT_ADMISSION_POLICY_BINDING: &str = "muster-mcpserver-secret-references";

/// `secretBinding`: the guards on the Secrets an MCPServer names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct SecretBindingConfig {
    /// The ValidatingAdmissionPolicyBinding that must be in force (its validationActions
    /// include `Deny`, it has no matchResources, and its policy has `failurePolicy: Fail`)
    /// before muster reads any Secret an MCPServer names.
    pub admission_policy_binding: String,
    /// muster's own Secrets, which it never reads for an MCPServer: `<name>` (muster's
    /// namespace) or `<namespace>/<name>`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub protected_secrets: Vec<String>,
}

impl Default for SecretBindingConfig {
    fn default() -> Self {
        Self {
            admission_policy_binding: DEFAULT_ADMISSION_POLICY_BINDING.to_owned(),
            protected_secrets: Vec::new(),
        }
    }
}

impl SecretBindingConfig {
    /// Whether Secret `name` of `namespace` is one of muster's own, with muster in
    /// `muster_namespace`.
    pub fn protects(&self, muster_namespace: &str, namespace: &str, name: &str) -> bool {
        self.protected_secrets.iter().any(|entry| match entry.split_once('/') {
            Some((ns, n)) => ns == namespace && n == name,
            None => namespace == muster_namespace && entry == name,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names_follow_the_api_servers_oidc_rules() {
        let sub = KubernetesWritesConfig::default();
        let issuer = Some("https://dex.example.com");
        assert_eq!(
            sub.username(issuer, "ada", None).as_deref(),
            Some("https://dex.example.com#ada")
        );
        let email = KubernetesWritesConfig {
            username_claim: UsernameClaim::Email,
            ..KubernetesWritesConfig::default()
        };
        assert_eq!(
            email.username(issuer, "ada", Some("ada@example.com")).as_deref(),
            Some("ada@example.com")
        );
        assert_eq!(email.username(issuer, "ada", None), None);
        let prefixed = KubernetesWritesConfig {
            username_prefix: Some("oidc:".into()),
            ..KubernetesWritesConfig::default()
        };
        assert_eq!(prefixed.username(issuer, "ada", None).as_deref(), Some("oidc:ada"));
        let bare = KubernetesWritesConfig {
            username_prefix: Some("-".into()),
            ..KubernetesWritesConfig::default()
        };
        assert_eq!(bare.username(issuer, "ada", None).as_deref(), Some("ada"));
        let groups = vec!["platform".to_owned(), "ops".to_owned()];
        assert_eq!(sub.groups(&groups), groups, "no prefix unless one is set");
        let prefixed: KubernetesWritesConfig =
            serde_json::from_value(serde_json::json!({"groupsPrefix": "oidc:"})).expect("valid");
        assert_eq!(prefixed.groups(&groups), ["oidc:platform", "oidc:ops"]);
    }

    #[test]
    fn protected_secrets_are_named_in_musters_namespace_or_with_their_own() {
        let binding: SecretBindingConfig =
            serde_json::from_value(serde_json::json!({"protectedSecrets": ["muster-oauth", "vault/valkey"]}))
                .expect("valid");
        assert_eq!(binding.admission_policy_binding, DEFAULT_ADMISSION_POLICY_BINDING);
        assert!(binding.protects("muster", "muster", "muster-oauth"));
        assert!(!binding.protects("muster", "team-a", "muster-oauth"));
        assert!(binding.protects("muster", "vault", "valkey"));
        assert!(!binding.protects("muster", "muster", "valkey"));
    }
}
