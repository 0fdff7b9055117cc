//! The repository's `deploy/` folder: the CRDs there are the ones muster-kube generates, and every
//! manifest reads into the Kubernetes API types with no field they do not know (a misspelt field
//! fails here, not at `kubectl apply`).
//!
//! `MUSTER_BLESS=1 cargo test -p muster-kube --test deploy` writes the generated CRDs into
//! `deploy/crds/`.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
};

use k8s_openapi::api::{
    admissionregistration::v1::{ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding},
    apps::v1::Deployment,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Namespace, Service, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use muster_core::config::{MusterConfig, unknown_keys};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The YAML documents of `path`, each as JSON.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// Every `.yaml` file under `dir`, relative to it.
fn yaml_files(dir: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let relative = path.strip_prefix(dir).expect("under dir");
                found.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
    found
}

/// `doc` read as `T`, with the paths of the fields `T` does not know.
fn read_as<T: DeserializeOwned>(doc: &Value) -> Result<(T, Vec<String>), String> {
    let mut unknown = Vec::new();
    // serde_ignored writes `?` for a step through an `Option`.
    let value = serde_ignored::deserialize(doc.clone(), |path| unknown.push(path.to_string().replace(".?", "")))
        .map_err(|e| e.to_string())?;
    Ok((value, unknown))
}

/// The fields of manifest `doc` its kind's API type does not know; an error when it does not
/// read as that type or its kind is not one deploy/ is expected to hold.
fn unknown_fields(doc: &Value) -> Result<Vec<String>, String> {
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let kind = doc["kind"].as_str().unwrap_or_default();
    let unknown = match (api_version, kind) {
        ("v1", "Namespace") => read_as::<Namespace>(doc)?.1,
        ("v1", "ServiceAccount") => read_as::<ServiceAccount>(doc)?.1,
        ("v1", "ConfigMap") => read_as::<ConfigMap>(doc)?.1,
        ("v1", "Service") => read_as::<Service>(doc)?.1,
        ("apps/v1", "Deployment") => read_as::<Deployment>(doc)?.1,
        ("coordination.k8s.io/v1", "Lease") => read_as::<Lease>(doc)?.1,
        ("rbac.authorization.k8s.io/v1", "Role") => read_as::<Role>(doc)?.1,
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => read_as::<RoleBinding>(doc)?.1,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => read_as::<ClusterRole>(doc)?.1,
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => read_as::<ClusterRoleBinding>(doc)?.1,
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => read_as::<CustomResourceDefinition>(doc)?.1,
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            read_as::<ValidatingAdmissionPolicy>(doc)?.1
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            read_as::<ValidatingAdmissionPolicyBinding>(doc)?.1
        }
        ("kustomize.config.k8s.io/v1beta1", "Kustomization") => read_as::<Kustomization>(doc)?.1,
        (api_version, kind) => return Err(format!("{api_version} {kind} is not a kind deploy/ holds")),
    };
    Ok(unknown)
}

/// The part of a kustomization deploy/ uses.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct Kustomization {
    api_version: String,
    kind: String,
    namespace: String,
    resources: Vec<String>,
}

#[test]
fn the_crds_in_deploy_are_the_ones_generated_from_the_types() {
    let bless = std::env::var_os("MUSTER_BLESS").is_some();
    let crds = deploy_dir().join("crds");
    for crd in muster_kube::crd::all() {
        let plural = &crd.spec.names.plural;
        let path = crds.join(format!("{plural}.yaml"));
        let generated = muster_kube::crd::to_yaml(&crd);
        if bless {
            std::fs::create_dir_all(&crds).expect("deploy/crds");
            std::fs::write(&path, &generated).expect("written");
            continue;
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{} differs from what muster_kube::crd generates (a field of muster-core's types \
             changed?). Regenerate it: MUSTER_BLESS=1 cargo test -p muster-kube --test deploy",
            path.display()
        );
    }
}

#[test]
fn every_manifest_reads_into_the_kubernetes_types_with_no_unknown_field() {
    let dir = deploy_dir();
    let files = yaml_files(&dir);
    assert!(files.len() >= 10, "deploy/ holds the manifests: {files:?}");
    let mut kinds = BTreeSet::new();
    for file in &files {
        for doc in documents(&dir.join(file)) {
            let unknown = unknown_fields(&doc).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(unknown.is_empty(), "{file}: fields the API does not know: {unknown:?}");
            kinds.insert(doc["kind"].as_str().unwrap_or_default().to_owned());
        }
    }
    for kind in [
        "CustomResourceDefinition",
        "Deployment",
        "Service",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "Lease",
        "Kustomization",
    ] {
        assert!(kinds.contains(kind), "no {kind} in deploy/: {kinds:?}");
    }
}

#[test]
fn a_misspelt_field_is_caught() {
    let doc = serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "muster"},
        "spec": {"replica": 2, "selector": {}, "template": {"spec": {"containers": []}}},
    });
    assert_eq!(unknown_fields(&doc), Ok(vec!["spec.replica".to_owned()]));
    let doc = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}});
    assert!(unknown_fields(&doc).is_err(), "a kind deploy/ does not hold is refused");
}

#[test]
fn the_kustomization_lists_every_manifest_and_nothing_else() {
    let dir = deploy_dir();
    let kustomization: Kustomization =
        serde_json::from_value(documents(&dir.join("kustomization.yaml")).remove(0)).expect("a kustomization");
    assert_eq!(kustomization.namespace, "muster");
    let listed: BTreeSet<String> = kustomization.resources.into_iter().collect();
    let mut present = yaml_files(&dir);
    present.remove("kustomization.yaml");
    present.retain(|f| !f.starts_with("components/"));
    assert_eq!(
        listed, present,
        "the kustomization's resources are the manifests in deploy/"
    );
}

/// The documents of `file` in deploy/ of kind `kind`, read as `T`.
fn manifests<T: DeserializeOwned>(file: &str, kind: &str) -> Vec<T> {
    documents(&deploy_dir().join(file))
        .into_iter()
        .filter(|d| d["kind"] == kind)
        .map(|d| serde_json::from_value(d).expect("reads as its type"))
        .collect()
}

#[test]
fn the_gateway_runs_in_kubernetes_mode_with_two_replicas_as_its_service_account() {
    let config_maps: Vec<ConfigMap> = manifests("configmap.yaml", "ConfigMap");
    let text = config_maps[0]
        .data
        .as_ref()
        .and_then(|d| d.get("config.yaml"))
        .expect("config.yaml in the config map");
    let doc: Value = serde_saphyr::from_str(text).expect("config.yaml is YAML");
    assert_eq!(
        unknown_keys(&doc),
        Vec::<String>::new(),
        "every key is one the gateway reads"
    );
    let config: MusterConfig = serde_saphyr::from_str(text).expect("config.yaml reads as the gateway's config");
    config.validate_config().expect("a valid config");
    assert!(config.kubernetes);
    assert_eq!(config.namespace.as_deref(), Some("muster"));

    let deployment: Deployment = manifests("deployment.yaml", "Deployment").remove(0);
    let spec = deployment.spec.expect("a spec");
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.expect("a pod spec");
    assert_eq!(pod.service_account_name.as_deref(), Some("muster"));
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    let config_path = args.iter().position(|a| a == "--config-path").map(|i| &args[i + 1]);
    let mounted = container.volume_mounts.iter().flatten().map(|m| &m.mount_path);
    assert!(
        mounted.into_iter().any(|m| Some(m) == config_path),
        "the config map is mounted where --config-path points: {args:?}"
    );
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("http"));
    assert_eq!(port.map(|p| p.container_port), Some(i32::from(config.aggregator.port)));
}

#[test]
fn the_lease_is_the_one_the_replicas_elect_the_status_writer_with_and_holds_nothing_they_write() {
    let leases: Vec<Lease> = manifests("lease.yaml", "Lease");
    assert_eq!(leases.len(), 1);
    assert_eq!(
        leases[0].metadata.name.as_deref(),
        Some(muster_kube::status::STATUS_LEASE)
    );
    assert!(
        leases[0].spec.as_ref().is_none_or(|s| *s == Default::default()),
        "a re-apply must not take the Lease from its holder: {:?}",
        leases[0].spec
    );
}

#[test]
fn the_service_account_may_do_what_kubernetes_mode_needs_and_no_more() {
    let roles: Vec<Role> = manifests("rbac.yaml", "Role");
    let rules = roles[0].rules.clone().unwrap_or_default();
    let may = |group: &str, resource: &str, verb: &str| {
        rules.iter().any(|r| {
            r.api_groups.iter().flatten().any(|g| g == group)
                && r.resources.iter().flatten().any(|x| x == resource)
                && r.verbs.iter().any(|v| v == verb)
        })
    };
    for (group, resource, verbs) in [
        ("muster.giantswarm.io", "mcpservers", &["get", "list", "watch"][..]),
        ("muster.giantswarm.io", "workflows", &["get", "list", "watch"]),
        ("muster.giantswarm.io", "mcpservers/status", &["patch"]),
        ("muster.giantswarm.io", "workflows/status", &["patch"]),
        (
            "muster.giantswarm.io",
            "workflowexecutions",
            &["create", "list", "delete"],
        ),
        ("events.k8s.io", "events", &["create", "list"]),
        ("coordination.k8s.io", "leases", &["create", "get", "update"]),
    ] {
        for verb in verbs {
            assert!(
                may(group, resource, verb),
                "the Role lacks {verb} on {group}/{resource}"
            );
        }
    }
    // Events are created and listed, never changed or removed (the API server expires them).
    for verb in ["update", "patch", "delete", "deletecollection"] {
        assert!(!may("events.k8s.io", "events", verb), "the gateway may {verb} Events");
    }
    // Definitions are written with the caller's identity, never the gateway's.
    for verb in ["create", "update", "patch", "delete"] {
        assert!(
            !may("muster.giantswarm.io", "mcpservers", verb),
            "the gateway may {verb} MCPServers"
        );
        assert!(
            !may("muster.giantswarm.io", "workflows", verb),
            "the gateway may {verb} Workflows"
        );
    }
    let cluster_roles: Vec<ClusterRole> = manifests("rbac.yaml", "ClusterRole");
    for role in &cluster_roles {
        for rule in role.rules.iter().flatten() {
            assert!(
                !rule.verbs.iter().any(|v| v == "impersonate" || v == "*"),
                "{:?} grants {:?}: impersonation is the opt-in component's",
                role.metadata.name,
                rule.verbs
            );
        }
    }
}

/// The expression of `variables.<name>` of the admission policy, with the variables it uses
/// written out (the client-side evaluator binds no `variables`).
fn policy_variable(name: &str) -> String {
    let policy: ValidatingAdmissionPolicy = manifests("admission-policy.yaml", "ValidatingAdmissionPolicy").remove(0);
    let variables = policy.spec.and_then(|s| s.variables).unwrap_or_default();
    let mut expression = format!("variables.{name}");
    for variable in variables.iter().rev() {
        expression = expression.replace(
            &format!("variables.{}", variable.name),
            &format!("({})", variable.expression),
        );
    }
    assert!(
        !expression.contains("variables."),
        "every variable is defined: {expression}"
    );
    expression
}

#[test]
fn the_admission_policy_checks_every_secret_an_mcpserver_names() {
    use kube::core::cel::{AdmissionRequest, VapEvaluator, VapExpression};

    let refs = policy_variable("refs");
    let evaluate = |object: Value, expected: Value| {
        let request = AdmissionRequest {
            operation: "CREATE".into(),
            namespace: "team".into(),
            ..Default::default()
        };
        let evaluator = VapEvaluator::builder().object(object.clone()).request(request).build();
        let results = evaluator.evaluate(&[VapExpression {
            expression: format!("{refs} == {expected}"),
            message: None,
            message_expression: None,
        }]);
        assert!(
            results[0].passed,
            "{object}: refs is not {expected}: {:?}",
            results[0].message
        );
    };
    let server = |spec: Value| serde_json::json!({"metadata": {"name": "s", "namespace": "team"}, "spec": spec});
    evaluate(
        server(serde_json::json!({"type": "streamable-http", "url": "https://x"})),
        serde_json::json!([]),
    );
    evaluate(
        server(serde_json::json!({
            "type": "streamable-http", "url": "https://x",
            "headersFrom": [{"name": "Authorization", "valueFrom": {"type": "Secret", "name": "token", "key": "k"}}],
            "auth": {
                "type": "oauth",
                "tokenExchange": {"enabled": true, "clientCredentialsSecretRef": {"name": "exchange", "namespace": "muster"}},
                "authorizationServer": {"issuer": "https://i", "clientCredentialsSecretRef": {"name": "app"}},
            },
        })),
        serde_json::json!(["team/token", "muster/exchange", "team/app"]),
    );
}
