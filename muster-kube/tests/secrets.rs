//! `KubeSecrets` against the API server double over loopback HTTP: the admission-policy
//! condition before any read, protected Secrets, Secret types never read, namespaces, RBAC and
//! an API server that is away.
#![cfg(feature = "test-util")]

use muster_core::config::SecretBindingConfig;
use muster_gateway::secrets::SecretSource;
use muster_kube::{
    secrets::{FORBIDDEN_TYPES, KubeSecrets, POLICY_NOT_IN_FORCE, SecretError},
    testing::ApiServerDouble,
};
use serde_json::{Value, json};

const BINDING: &str = "muster-mcpserver-secret-references";
const SA_TOKEN: &str = "muster-sa";
const SA: &str = "system:serviceaccount:muster:muster";

/// A double with the admission policy and binding `deploy/` installs.
async fn double_with_policy() -> ApiServerDouble {
    let double = ApiServerDouble::start().await;
    let stored = double
        .apply_manifests(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/admission-policy.yaml"))
        .expect("deploy/admission-policy.yaml applies");
    assert_eq!(stored.len(), 2, "the policy and its binding");
    double
}

fn put_policy(double: &ApiServerDouble, spec: Value) {
    let mut spec = spec;
    spec["matchConstraints"] = json!({"resourceRules": [{
        "apiGroups": ["muster.giantswarm.io"], "apiVersions": ["v1alpha1"],
        "operations": ["CREATE", "UPDATE"], "resources": ["mcpservers"]}]});
    spec["validations"] = json!([{"expression": "true"}]);
    double
        .put(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": BINDING},
            "spec": spec,
        }))
        .expect("policy stored");
}

fn put_binding(double: &ApiServerDouble, spec: Value) {
    double
        .put(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": BINDING},
            "spec": spec,
        }))
        .expect("binding stored");
}

fn put_secret(double: &ApiServerDouble, namespace: &str, name: &str, kind: Option<&str>, data: &[(&str, &str)]) {
    use base64::Engine;
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| {
            (
                (*k).to_owned(),
                json!(base64::engine::general_purpose::STANDARD.encode(v)),
            )
        })
        .collect();
    let mut secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    });
    if let Some(kind) = kind {
        secret["type"] = json!(kind);
    }
    double.put(secret).expect("secret stored");
}

/// `secretBinding` as config.yaml writes it.
fn binding_config(yaml: Value) -> SecretBindingConfig {
    serde_json::from_value(yaml).expect("a valid secretBinding")
}

fn secrets(double: &ApiServerDouble, binding: SecretBindingConfig) -> KubeSecrets {
    KubeSecrets::new(double.client(), "muster", binding)
}

#[tokio::test]
async fn a_secret_is_read_in_the_namespace_named_else_in_musters() {
    let double = double_with_policy().await;
    put_secret(&double, "muster", "api", None, &[("token", "Bearer one")]);
    put_secret(&double, "team-a", "api", Some("Opaque"), &[("token", "Bearer two")]);
    let secrets = secrets(&double, SecretBindingConfig::default());
    assert_eq!(
        secrets.get(None, "api", "token").await.expect("read").expose(),
        "Bearer one"
    );
    assert_eq!(
        secrets
            .get(Some("team-a"), "api", "token")
            .await
            .expect("read")
            .expose(),
        "Bearer two"
    );
    assert_eq!(
        secrets.get(Some("team-a"), "api", "other").await.expect_err("no key"),
        SecretError::Refused("Secret team-a/api has no key other".into())
    );
    assert_eq!(
        secrets
            .get(Some("team-b"), "api", "token")
            .await
            .expect_err("no secret"),
        SecretError::Refused("Secret team-b/api not found".into())
    );
}

/// A change that takes the admission policy out of force.
type Breakage = Box<dyn Fn(&ApiServerDouble)>;

#[tokio::test]
async fn nothing_is_read_unless_the_admission_policy_is_in_force() {
    let double = double_with_policy().await;
    put_secret(&double, "muster", "api", None, &[("token", "t0ken")]);
    let cases: [(&str, Breakage); 5] = [
        (
            "does not deny",
            Box::new(|d| {
                put_binding(
                    d,
                    json!({"policyName": BINDING, "validationActions": ["Warn", "Audit"]}),
                )
            }),
        ),
        (
            "has matchResources",
            Box::new(|d| {
                put_binding(
                    d,
                    json!({"policyName": BINDING, "validationActions": ["Deny"],
                           "matchResources": {"namespaceSelector": {"matchLabels": {"team": "a"}}}}),
                )
            }),
        ),
        (
            "failurePolicy Ignore",
            Box::new(|d| put_policy(d, json!({"failurePolicy": "Ignore"}))),
        ),
        (
            "ValidatingAdmissionPolicy muster-mcpserver-secret-references (of ValidatingAdmissionPolicyBinding \
             muster-mcpserver-secret-references) does not exist",
            Box::new(|d| {
                d.delete("validatingadmissionpolicies", None, BINDING).expect("deleted");
            }),
        ),
        (
            "ValidatingAdmissionPolicyBinding muster-mcpserver-secret-references does not exist",
            Box::new(|d| {
                d.delete("validatingadmissionpolicybindings", None, BINDING)
                    .expect("deleted");
            }),
        ),
    ];
    for (reason, break_it) in cases {
        // A fresh reader each time: a check that passed holds for a minute.
        let double = double_with_policy().await;
        put_secret(&double, "muster", "api", None, &[("token", "t0ken")]);
        break_it(&double);
        double.clear_logs();
        let error = secrets(&double, SecretBindingConfig::default())
            .get(None, "api", "token")
            .await
            .expect_err(reason);
        assert!(matches!(error, SecretError::PolicyNotInForce(_)), "{error:?}");
        let error = error.to_string();
        assert!(error.starts_with(POLICY_NOT_IN_FORCE), "{error}");
        assert!(error.contains(reason), "{reason}: {error}");
        assert!(
            !double.requests().iter().any(|r| r.path.contains("/secrets")),
            "no Secret is read while the policy is not in force ({reason})"
        );
    }
    // The reader configured for another binding reads none either.
    let other = binding_config(json!({"admissionPolicyBinding": "someone-elses"}));
    let error = secrets(&double, other)
        .get(None, "api", "token")
        .await
        .expect_err("no such binding")
        .to_string();
    assert!(
        error.contains("ValidatingAdmissionPolicyBinding someone-elses does not exist"),
        "{error}"
    );
}

#[tokio::test]
async fn a_check_that_passed_holds_for_a_while_and_one_that_failed_does_not() {
    let double = double_with_policy().await;
    put_secret(&double, "muster", "api", None, &[("token", "t0ken")]);
    let secrets = secrets(&double, SecretBindingConfig::default());
    secrets.get(None, "api", "token").await.expect("in force");
    double.clear_logs();
    secrets.get(None, "api", "token").await.expect("still in force");
    assert!(
        !double
            .requests()
            .iter()
            .any(|r| r.path.contains("admissionregistration")),
        "checked again within the minute"
    );
    // A failed check is made again on the next read: restoring the policy takes effect at once.
    let fresh = KubeSecrets::new(double.client(), "muster", SecretBindingConfig::default());
    double
        .delete("validatingadmissionpolicybindings", None, BINDING)
        .expect("deleted");
    fresh.get(None, "api", "token").await.expect_err("binding gone");
    put_binding(
        &double,
        json!({"policyName": BINDING, "validationActions": ["Deny", "Audit"]}),
    );
    fresh.get(None, "api", "token").await.expect("binding back");
}

#[tokio::test]
async fn musters_own_secrets_and_secret_types_that_hold_something_else_are_never_read() {
    let double = double_with_policy().await;
    put_secret(
        &double,
        "muster",
        "muster-oauth",
        None,
        &[("client-secret", "0wn-cl1ent")],
    );
    put_secret(&double, "vault", "valkey", None, &[("password", "0wn-cl1ent")]);
    let binding = binding_config(json!({"protectedSecrets": ["muster-oauth", "vault/valkey"]}));
    let reader = secrets(&double, binding);
    for (namespace, name, key) in [
        (None, "muster-oauth", "client-secret"),
        (Some("vault"), "valkey", "password"),
    ] {
        let error = reader
            .get(namespace, name, key)
            .await
            .expect_err("protected")
            .to_string();
        assert!(error.contains("secretBinding.protectedSecrets"), "{error}");
        assert!(!error.contains("0wn-cl1ent"), "{error}");
    }
    for kind in FORBIDDEN_TYPES {
        put_secret(&double, "muster", "typed", Some(kind), &[("token", "tls-key")]);
        let error = reader.get(None, "typed", "token").await.expect_err(kind);
        assert_eq!(
            error,
            SecretError::Refused(format!(
                "Secret muster/typed is of type {kind}, which muster never reads for an MCPServer"
            ))
        );
    }
    put_secret(&double, "muster", "typed", Some("Opaque"), &[("token", "fine")]);
    assert_eq!(
        reader.get(None, "typed", "token").await.expect("opaque").expose(),
        "fine"
    );
}

#[tokio::test]
async fn a_secret_muster_may_not_get_or_an_api_server_away_is_an_error_naming_the_secret() {
    let double = double_with_policy().await;
    put_secret(&double, "muster", "api", None, &[("token", "t0ken")]);
    put_secret(&double, "team-a", "api", None, &[("token", "t0ken")]);
    double.add_token(SA_TOKEN, SA, &[]);
    double.allow(SA, &["get"], "", "secrets", Some("muster"));
    double.allow(SA, &["get"], "admissionregistration.k8s.io", "*", None);
    let reader = KubeSecrets::new(double.client_as(SA_TOKEN), "muster", SecretBindingConfig::default());
    assert_eq!(
        reader.get(None, "api", "token").await.expect("allowed").expose(),
        "t0ken"
    );
    let error = reader
        .get(Some("team-a"), "api", "token")
        .await
        .expect_err("forbidden")
        .to_string();
    assert!(
        error.starts_with("muster's ServiceAccount may not get Secret team-a/api (grant it get on Secrets in team-a)"),
        "{error}"
    );
    double.set_unavailable(true);
    let away = KubeSecrets::new(double.client(), "muster", SecretBindingConfig::default());
    let error = away.get(None, "api", "token").await.expect_err("away");
    assert!(matches!(error, SecretError::PolicyNotInForce(_)), "{error:?}");
    let error = error.to_string();
    assert!(error.starts_with(POLICY_NOT_IN_FORCE), "{error}");
    assert!(!error.contains("t0ken"), "{error}");
}
