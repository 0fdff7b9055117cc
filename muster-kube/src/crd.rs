//! The CustomResourceDefinitions of muster's three resources, generated from muster-core's Rust
//! types: the same types filesystem mode reads, so a field cannot be in one and not the other.
//!
//! | kind | plural | short name | status subresource |
//! |---|---|---|---|
//! | `MCPServer` | `mcpservers` | `mcps` | yes |
//! | `Workflow` | `workflows` | `wf` | yes |
//! | `WorkflowExecution` | `workflowexecutions` | `wfe` | no: an append-only record |
//!
//! All are namespaced, in group `muster.giantswarm.io`, version `v1alpha1`, category `muster`
//! (`kubectl get muster` lists them together). The schemas are generated as kube-rs' derive
//! generates them (OpenAPI v3, every subschema inlined, `nullable` for an `Option`), with
//! what the types say about themselves: patterns, lengths and ranges, required fields, and the
//! CEL rules (`x-kubernetes-validations`) that `kubectl apply` enforces, such as "exactly one
//! of tool, forEach or parallel". Two rewrites make them structural, as the API server demands:
//! arbitrary JSON (a step's `args`, an execution's `result`) keeps its unknown fields
//! (`x-kubernetes-preserve-unknown-fields`), and the one recursive type (a `forEach` inside a
//! `forEach` body) is cut to the nesting the reference allows: one level, tool calls only.
//!
//! `deploy/crds/` holds [`to_yaml`] of each; a test fails when they differ.
//!
//! ```
//! use muster_kube::crd;
//!
//! let wf = crd::workflow();
//! let version = &wf.spec.versions[0];
//! assert_eq!(version.name, "v1alpha1");
//! assert!(version.subresources.as_ref().is_some_and(|s| s.status.is_some()));
//!
//! // The rule `kubectl apply` checks on every step.
//! let yaml = crd::to_yaml(&wf);
//! assert!(yaml.contains("exactly one of tool, forEach or parallel must be set"));
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use muster_core::crd::{
    MCPServer, MCPServerSpec, MCPServerStatus, Workflow, WorkflowExecution, WorkflowExecutionSpec, WorkflowSpec,
    WorkflowStatus,
};
use schemars::{
    JsonSchema, Schema,
    generate::SchemaSettings,
    transform::{AddNullable, Transform},
};
use serde_json::{Map, Value, json};

/// The API group of muster's resources.
pub const GROUP: &str = "muster.giantswarm.io";
/// The version of muster's resources.
pub const VERSION: &str = "v1alpha1";
/// The category all three are in: `kubectl get muster`.
pub const CATEGORY: &str = "muster";

/// The `MCPServer` definition: `kubectl get mcps` shows type, state, health and age.
pub fn mcpserver() -> CustomResourceDefinition {
    Kind {
        kind: MCPServer::KIND,
        plural: "mcpservers",
        short_name: "mcps",
        description: "A downstream MCP server muster connects to and serves the tools of.",
        spec: schema_of::<MCPServerSpec>(),
        status: Some(schema_of::<MCPServerStatus>()),
        columns: &[
            ("Type", "string", ".spec.type", "How muster reaches the server."),
            ("State", "string", ".status.state", "Infrastructure state."),
            ("Health", "string", ".status.health", "Health of the last check."),
        ],
    }
    .definition()
}

/// The `Workflow` definition: `kubectl get wf` shows whether the spec is valid and its steps.
pub fn workflow() -> CustomResourceDefinition {
    Kind {
        kind: Workflow::KIND,
        plural: "workflows",
        short_name: "wf",
        description: "A multi-step process muster serves as the tool workflow_<name>.",
        spec: bound_step_lists(schema_of::<WorkflowSpec>()),
        status: Some(schema_of::<WorkflowStatus>()),
        columns: &[
            (
                "Valid",
                "boolean",
                ".status.valid",
                "Whether the spec passes validation.",
            ),
            ("Steps", "integer", ".status.stepCount", "Number of steps."),
        ],
    }
    .definition()
}

/// The `WorkflowExecution` definition: the record of one run, with no status subresource.
/// `kubectl get wfe` shows the workflow, the outcome and when it started.
pub fn workflow_execution() -> CustomResourceDefinition {
    Kind {
        kind: WorkflowExecution::KIND,
        plural: "workflowexecutions",
        short_name: "wfe",
        description: "The durable, immutable record of one workflow run, written and pruned by muster.",
        spec: schema_of::<WorkflowExecutionSpec>(),
        status: None,
        columns: &[
            ("Workflow", "string", ".spec.workflowName", "The workflow that ran."),
            ("Status", "string", ".spec.status", "inprogress, completed or failed."),
            ("Started", "date", ".spec.startedAt", "When the run began."),
            (
                "Duration-ms",
                "integer",
                ".spec.durationMs",
                "Duration of the run in milliseconds.",
            ),
        ],
    }
    .definition()
}

/// The API resource of kind `kind` (plural `plural`) of muster's group, for kube-rs'
/// `Api::namespaced_with`.
pub(crate) fn api_resource(kind: &str, plural: &str) -> kube::api::ApiResource {
    let gvk = kube::api::GroupVersionKind::gvk(GROUP, VERSION, kind);
    kube::api::ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// The three definitions, in the order `deploy/crds/` lists them.
pub fn all() -> [CustomResourceDefinition; 3] {
    [mcpserver(), workflow(), workflow_execution()]
}

/// `crd` as the YAML document `deploy/crds/` holds, behind a line saying where it comes from.
pub fn to_yaml(crd: &CustomResourceDefinition) -> String {
    let body = serde_saphyr::to_string(crd).unwrap_or_else(|e| format!("# not serializable: {e}\n"));
    format!(
        "# Generated from muster-core's types by muster_kube::crd; do not edit by hand.\n\
         # Regenerate: MUSTER_BLESS=1 cargo test -p muster-kube --test deploy\n---\n{body}"
    )
}

/// What differs between muster's three definitions.
struct Kind {
    kind: &'static str,
    plural: &'static str,
    short_name: &'static str,
    description: &'static str,
    spec: Value,
    status: Option<Value>,
    /// Printer columns besides Age: name, type, JSON path, description.
    columns: &'static [(&'static str, &'static str, &'static str, &'static str)],
}

impl Kind {
    fn definition(self) -> CustomResourceDefinition {
        let mut properties = Map::new();
        properties.insert("apiVersion".into(), json!({"type": "string"}));
        properties.insert("kind".into(), json!({"type": "string"}));
        properties.insert("metadata".into(), json!({"type": "object"}));
        properties.insert("spec".into(), self.spec);
        if let Some(status) = self.status.clone() {
            properties.insert("status".into(), status);
        }
        let root = json!({
            "type": "object",
            "description": self.description,
            "required": ["spec"],
            "properties": properties,
        });
        let schema: JSONSchemaProps = serde_path_to_error::deserialize(root)
            .unwrap_or_else(|e| panic!("a generated schema reads as JSONSchemaProps: {e}"));

        let mut columns: Vec<CustomResourceColumnDefinition> = self
            .columns
            .iter()
            .map(|(name, type_, json_path, description)| CustomResourceColumnDefinition {
                name: (*name).to_owned(),
                type_: (*type_).to_owned(),
                json_path: (*json_path).to_owned(),
                description: Some((*description).to_owned()),
                ..Default::default()
            })
            .collect();
        columns.push(CustomResourceColumnDefinition {
            name: "Age".to_owned(),
            type_: "date".to_owned(),
            json_path: ".metadata.creationTimestamp".to_owned(),
            ..Default::default()
        });

        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(format!("{}.{GROUP}", self.plural)),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: GROUP.to_owned(),
                names: CustomResourceDefinitionNames {
                    kind: self.kind.to_owned(),
                    list_kind: Some(format!("{}List", self.kind)),
                    plural: self.plural.to_owned(),
                    singular: Some(self.kind.to_lowercase()),
                    short_names: Some(vec![self.short_name.to_owned()]),
                    categories: Some(vec![CATEGORY.to_owned()]),
                },
                scope: "Namespaced".to_owned(),
                versions: vec![CustomResourceDefinitionVersion {
                    name: VERSION.to_owned(),
                    served: true,
                    storage: true,
                    additional_printer_columns: Some(columns),
                    schema: Some(CustomResourceValidation {
                        open_api_v3_schema: Some(schema),
                    }),
                    subresources: self.status.map(|_| CustomResourceSubresources {
                        status: Some(CustomResourceSubresourceStatus(json!({}))),
                        scale: None,
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: None,
        }
    }
}

/// The structural schema of `T`: generated with kube-rs' settings and transforms, then made
/// structural where muster's types need it ([`structural`]).
fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>();
    kube_transforms(&mut schema);
    let mut schema = schema.to_value();
    structural(&mut schema);
    schema
}

/// The transforms kube-rs' derive applies (`nullable` for an `Option`, structural enums): to
/// the root schema and, since the generator's own pass leaves them alone, to the definitions a
/// recursive type is kept in.
fn kube_transforms(schema: &mut Schema) {
    let mut transforms: [&mut dyn Transform; 3] = [
        &mut AddNullable::default(),
        &mut kube::core::schema::StructuralSchemaRewriter,
        &mut kube::core::schema::OptionalEnum,
    ];
    for transform in &mut transforms {
        transform.transform(schema);
    }
    if let Some(Value::Object(definitions)) = schema.get_mut("components").and_then(|c| c.get_mut("schemas")) {
        for definition in definitions.values_mut() {
            if let Ok(mut inner) = Schema::try_from(definition.take()) {
                for transform in &mut transforms {
                    transform.transform(&mut inner);
                }
                *definition = inner.to_value();
            }
        }
    }
}

/// Makes `schema` structural, as the API server requires of a CRD:
///
/// - a recursive type, which schemars leaves as a `$ref` into `components/schemas`, is inlined
///   down to the nesting the reference allows: a step's `forEach` body may hold a `forEach`
///   whose body is tool calls only, and `parallel` and `onFailure` hold tool calls only. A
///   sub-step there loses its `forEach`, and its "tool or forEach" rule becomes "tool";
/// - arbitrary JSON (schemars' `true`, an object whose values are anything, a schema with no
///   type) keeps its unknown fields (`x-kubernetes-preserve-unknown-fields: true`);
/// - a default that is its type's zero value (`""`, `0`, `[]`, `{}`, `false`, `null`) goes: the API server
///   checks every default against the schema, and an empty `steps` (at least one) fails it;
/// - integer formats Kubernetes does not know (`uint32`, `uint16`, ...) go, their ranges stay;
/// - `title` and the definitions table go.
fn structural(schema: &mut Value) {
    let definitions = match schema {
        Value::Object(object) => object.remove("components"),
        _ => None,
    };
    let definitions = definitions
        .as_ref()
        .and_then(|c| c.get("schemas"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    rewrite(schema, &definitions, 0);
}

/// The most `forEach`s on one path: a loop and the loop in its body. A `parallel` group or
/// `onFailure` counts as the most: their sub-steps are tool calls.
const MOST_NESTED_LOOPS: usize = 2;

/// [`structural`] of `schema`, `loops` deep in `forEach`s.
fn rewrite(schema: &mut Value, definitions: &Map<String, Value>, loops: usize) {
    if let Value::Bool(true) = schema {
        *schema = json!({"x-kubernetes-preserve-unknown-fields": true});
        return;
    }
    let Value::Object(object) = schema else { return };
    if let Some(Value::String(reference)) = object.remove("$ref") {
        let name = reference.rsplit('/').next().unwrap_or_default();
        let Some(Value::Object(definition)) = definitions.get(name) else {
            panic!("schemars referred to {reference}, which it did not define");
        };
        // The referring schema's own keywords (its description, `nullable`) win.
        for (key, value) in definition {
            object.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
    object.remove("title");
    if let Some(Value::String(format)) = object.get("format")
        && format.starts_with("uint")
    {
        object.remove("format");
    }
    if object.get("default").is_some_and(|d| {
        matches!(d, Value::Null | Value::Bool(false)) || d == "" || d == 0 || d == &json!([]) || d == &json!({})
    }) {
        object.remove("default");
    }
    if object.get("additionalProperties") == Some(&Value::Bool(true)) {
        object.remove("additionalProperties");
        object.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
    }
    let typed = ["type", "properties", "items", "anyOf", "oneOf", "allOf", "enum"]
        .iter()
        .any(|k| object.contains_key(*k));
    if !typed && !object.contains_key("x-kubernetes-preserve-unknown-fields") {
        object.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
    }
    if loops >= MOST_NESTED_LOOPS {
        cut_loop(object);
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        for (name, child) in properties.iter_mut() {
            let loops = match name.as_str() {
                "forEach" => loops + 1,
                // Their sub-steps are tool calls.
                "parallel" | "onFailure" => MOST_NESTED_LOOPS,
                _ => loops,
            };
            rewrite(child, definitions, loops);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(child) = object.get_mut(key) {
            rewrite(child, definitions, loops);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = object.get_mut(key) {
            for child in children {
                rewrite(child, definitions, loops);
            }
        }
    }
}

/// The most steps of a workflow, and the most sub-steps of a `forEach` body, of the body of a
/// `forEach` in it, of a `parallel` group and of `onFailure`, in Kubernetes.
///
/// The API server refuses a CRD whose CEL rules may cost more than its budget, and it estimates
/// a rule inside a list as the rule's cost times the most items the list can have: without a
/// bound, about a million per list (3 MiB of request over the smallest item), so a rule on a
/// step in a loop in a loop would be estimated at a million million. Go muster's Workflow CRD
/// was refused for exactly this (3.2 times over the budget on Kubernetes 1.34). These bounds
/// keep the deepest rules (a tool call in a nested loop, 100 × 50 × 25 places) inside the
/// budget; filesystem mode, which has no such budget, does not impose them.
const STEP_LIST_BOUNDS: [(&str, u64); 5] = [
    ("steps", 100),
    ("forEach.steps", 50),
    ("forEach.forEach.steps", 25),
    ("parallel", 50),
    ("onFailure", 50),
];

/// [`STEP_LIST_BOUNDS`] applied to a Workflow spec's schema: `maxItems`, told in the field's
/// description too.
fn bound_step_lists(mut spec: Value) -> Value {
    fn walk(schema: &mut Value, loops: usize) {
        let Some(Value::Object(properties)) = schema.get_mut("properties") else {
            if let Some(items) = schema.get_mut("items") {
                walk(items, loops);
            }
            return;
        };
        for (name, child) in properties.iter_mut() {
            let key = match (name.as_str(), loops) {
                ("steps", 0) => "steps".to_owned(),
                ("steps", 1) => "forEach.steps".to_owned(),
                ("steps", _) => "forEach.forEach.steps".to_owned(),
                (other, _) => other.to_owned(),
            };
            if child.get("type").and_then(Value::as_str) == Some("array")
                && let Some((_, most)) = STEP_LIST_BOUNDS.iter().find(|(k, _)| *k == key)
                && let Value::Object(list) = child
            {
                list.insert("maxItems".into(), json!(most));
                let described = list.get("description").and_then(Value::as_str).unwrap_or_default();
                let bounded = format!(
                    "{described} At most {most} in Kubernetes, where the API server's CEL cost budget needs a bound."
                );
                list.insert("description".into(), Value::String(bounded.trim_start().to_owned()));
            }
            walk(child, loops + usize::from(name == "forEach"));
        }
    }
    walk(&mut spec, 0);
    spec
}

/// Drops the `forEach` of a sub-step that is a tool call: in a nested loop's body, a
/// `parallel` group or `onFailure`.
fn cut_loop(step: &mut Map<String, Value>) {
    let Some(Value::Object(properties)) = step.get_mut("properties") else {
        return;
    };
    if properties.remove("forEach").is_none() {
        return;
    }
    if let Some(Value::Array(rules)) = step.get_mut("x-kubernetes-validations") {
        rules.retain(|r| !r["rule"].as_str().is_some_and(|r| r.contains("forEach")));
        rules.push(json!({
            "rule": "has(self.tool)",
            "message": "tool must be set: a forEach is allowed only in a step and in its forEach body",
        }));
    }
}
