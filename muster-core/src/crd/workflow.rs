//! The `Workflow` resource: a multi-step process exposed as the tool `workflow_<name>`.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::validate::STEP_ID_PATTERN;
use super::workflow_validate::{MAX_DESCRIPTION, MAX_PARALLELISM, MAX_STEP_ID, MAX_WORKFLOW_DESCRIPTION, MOST_PAGES};
use super::{API_VERSION, Condition, ObjectMeta, is_false, is_zero};

/// A `Workflow` document: `apiVersion`, `kind`, `metadata`, `spec`, `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workflow {
    /// Always `muster.giantswarm.io/v1alpha1` ([`API_VERSION`]); [`Workflow::validate`] refuses another.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// Always `Workflow` ([`Workflow::KIND`]); [`Workflow::validate`] refuses another.
    #[serde(default = "workflow_kind")]
    pub kind: String,
    /// Name, namespace, labels and annotations. The name makes the tool `workflow_<name>`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The workflow definition.
    #[serde(default)]
    pub spec: WorkflowSpec,
    /// Observed state, written by muster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<WorkflowStatus>,
}

fn api_version() -> String {
    API_VERSION.to_owned()
}

fn workflow_kind() -> String {
    Workflow::KIND.to_owned()
}

impl Workflow {
    /// The `kind` of the resource.
    pub const KIND: &'static str = "Workflow";

    /// A workflow named `name` with `spec` and no status.
    pub fn new(name: impl Into<String>, spec: WorkflowSpec) -> Self {
        Self {
            api_version: api_version(),
            kind: workflow_kind(),
            metadata: ObjectMeta::named(name),
            spec,
            status: None,
        }
    }
}

impl Default for Workflow {
    fn default() -> Self {
        Self::new(String::new(), WorkflowSpec::default())
    }
}

/// The definition of a workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["steps"]))]
pub struct WorkflowSpec {
    /// Human-readable description, at most 1000 characters; the tool's description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_WORKFLOW_DESCRIPTION))]
    pub description: Option<String>,
    /// Arguments of the workflow, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, ArgDefinition>,
    /// The steps, in order; at least one.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub steps: Vec<WorkflowStep>,
    /// Best-effort cleanup steps run when the workflow fails on a step that does not
    /// allow failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub on_failure: Vec<WorkflowSubStep>,
    /// Output template rendered after all steps and returned in place of the default
    /// response; each leaf is a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Map<String, Value>>,
    /// The legacy spelling of the argument schema: older muster wrote `spec.input_schema`,
    /// and Go muster ignores keys it does not know. It is accepted so such files still load,
    /// then ignored: never read, never written back. [`deprecated_spellings`] reports it so
    /// loaders warn; declare arguments in [`args`](Self::args).
    ///
    /// [`deprecated_spellings`]: super::deprecated_spellings
    #[serde(rename = "input_schema", default, skip_serializing)]
    #[schemars(skip)]
    pub input_schema: Option<Value>,
}

/// JSON type of a workflow argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ArgType {
    /// A JSON string.
    String,
    /// A JSON number without fraction (any number is accepted at run time).
    Integer,
    /// `true` or `false`.
    Boolean,
    /// Any JSON number.
    Number,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl ArgType {
    /// The spelling in a document, e.g. `integer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Boolean => "boolean",
            Self::Number => "number",
            Self::Object => "object",
            Self::Array => "array",
        }
    }
}

impl fmt::Display for ArgType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One argument of a workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["type"]))]
pub struct ArgDefinition {
    /// JSON type of the argument; required.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub arg_type: Option<ArgType>,
    /// Whether a call must pass it. Default false.
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// Value used when a call omits it (any JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Human-readable description, at most 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_DESCRIPTION))]
    pub description: Option<String>,
}

/// One step of a workflow: exactly one of a tool call (`tool`), a loop (`forEach`) or
/// a concurrent group (`parallel`).
///
/// The three are separate optional fields, not an enum, so that
/// [`Workflow::validate`] can report a step that sets none or several of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The CRD enforces the same at `kubectl apply`: a CEL rule in the JSON schema.
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.tool), has(self.forEach), has(self.parallel)].filter(x, x).size() == 1",
     "message": "exactly one of tool, forEach or parallel must be set"},
]))]
#[schemars(extend("required" = ["id"]))]
pub struct WorkflowStep {
    /// Step identifier, unique in the workflow; pattern `^[a-zA-Z0-9_-]+$`, at most 63
    /// characters.
    #[serde(default)]
    #[schemars(pattern(STEP_ID_PATTERN), length(max = MAX_STEP_ID))]
    pub id: String,
    /// Tool to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Arguments of the tool call; string leaves are templates.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
    /// Runs the step only when the condition holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<WorkflowCondition>,
    /// Runs a body of sub-steps once per list item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<WorkflowForEach>,
    /// Sub-steps run concurrently.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Vec<WorkflowSubStep>>,
    /// Follows the tool's pages (tool steps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paginate: Option<WorkflowPaginate>,
    /// jq program reshaping the result before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<String>,
    /// Include the result in the returned document. Default false. The result is referenceable
    /// by later steps whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<bool>,
    /// Deprecated alias of `output`, read only when `output` is not set: when both are set,
    /// `output` decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Continue when the step fails. Default false. Deprecated spelling: `allow_failure`.
    #[serde(default, alias = "allow_failure", skip_serializing_if = "is_false")]
    pub allow_failure: bool,
    /// Human-readable description, at most 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_DESCRIPTION))]
    pub description: Option<String>,
}

impl WorkflowStep {
    /// Whether the step's result goes into the returned document: `output` when it is set
    /// (whatever `store` says), else its deprecated alias `store`, else false.
    pub fn returns_output(&self) -> bool {
        returns_output(self.output, self.store)
    }
}

/// `output` decides when set; the deprecated `store` only when `output` is not.
fn returns_output(output: Option<bool>, store: Option<bool>) -> bool {
    output.or(store).unwrap_or(false)
}

/// A sub-step: in a `forEach` body, a `parallel` group or `onFailure`. A tool call or,
/// in a `forEach` body only, a nested `forEach`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The CRD enforces "exactly one of the two" at `kubectl apply`: a CEL rule in the JSON schema.
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.tool) != has(self.forEach)",
     "message": "exactly one of tool or forEach must be set"},
]))]
#[schemars(extend("required" = ["id"]))]
pub struct WorkflowSubStep {
    /// Sub-step identifier, unique in the workflow.
    #[serde(default)]
    #[schemars(pattern(STEP_ID_PATTERN), length(max = MAX_STEP_ID))]
    pub id: String,
    /// Tool to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// A nested loop (in a `forEach` body only, one level deep).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<WorkflowNestedForEach>,
    /// Arguments of the tool call; string leaves are templates.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
    /// Runs the sub-step only when the condition holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<WorkflowCondition>,
    /// Follows the tool's pages (tool sub-steps only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paginate: Option<WorkflowPaginate>,
    /// jq program reshaping the result before it is stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jq: Option<String>,
    /// Include the result in the returned document. Default false. The result is referenceable
    /// by later steps whatever this says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<bool>,
    /// Deprecated alias of `output`, read only when `output` is not set: when both are set,
    /// `output` decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Continue when the sub-step fails. Default false. Deprecated spelling:
    /// `allow_failure`.
    #[serde(default, alias = "allow_failure", skip_serializing_if = "is_false")]
    pub allow_failure: bool,
    /// Human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl WorkflowSubStep {
    /// Whether the sub-step's result goes into the returned document: `output` when it is set
    /// (whatever `store` says), else its deprecated alias `store`, else false.
    pub fn returns_output(&self) -> bool {
        returns_output(self.output, self.store)
    }
}

/// A step inside a nested `forEach` body: a [`WorkflowSubStep`] that must be a tool call
/// (checked by [`Workflow::validate`]).
pub type WorkflowNestedStep = WorkflowSubStep;

/// A `forEach` inside a `forEach` body: the same shape as [`WorkflowForEach`], whose body
/// [`Workflow::validate`] restricts to tool calls.
pub type WorkflowNestedForEach = WorkflowForEach;

/// Default loop variable of a `forEach`.
pub(crate) const DEFAULT_LOOP_VAR: &str = "item";

fn default_loop_var() -> String {
    DEFAULT_LOOP_VAR.to_owned()
}

/// A loop: runs `steps` once per item of `items`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["items", "steps"]))]
pub struct WorkflowForEach {
    /// Template resolving to an array, e.g. `{{ .input.clusters }}`; required.
    #[serde(default)]
    pub items: String,
    /// Loop variable, exposed as `{{ .vars.<as> }}` (and `<as>_index`). Default `item`.
    #[serde(rename = "as", default = "default_loop_var")]
    pub var: String,
    /// Iterations run at once, 1 to 50. Default: one after another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = MAX_PARALLELISM))]
    pub parallelism: Option<u32>,
    /// Body run once per item; at least one sub-step.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub steps: Vec<WorkflowSubStep>,
}

impl Default for WorkflowForEach {
    fn default() -> Self {
        Self {
            items: String::new(),
            var: default_loop_var(),
            parallelism: None,
            steps: Vec::new(),
        }
    }
}

/// Default of `paginate.itemsField`.
pub(crate) const DEFAULT_ITEMS_FIELD: &str = "items";
/// Default of `paginate.tokenField` and `paginate.tokenArg`.
pub(crate) const DEFAULT_TOKEN: &str = "continue";
/// Default of `paginate.maxPages`.
pub(crate) const DEFAULT_MAX_PAGES: u32 = 10;

fn default_items_field() -> String {
    DEFAULT_ITEMS_FIELD.to_owned()
}

fn default_token() -> String {
    DEFAULT_TOKEN.to_owned()
}

fn default_max_pages() -> u32 {
    DEFAULT_MAX_PAGES
}

/// Follows a tool's next-page token and stores every page's items as one list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowPaginate {
    /// Dotted path of a page's list. Default `items`.
    #[serde(default = "default_items_field")]
    pub items_field: String,
    /// Dotted path of a page's next-page token. Default `continue`.
    #[serde(default = "default_token")]
    pub token_field: String,
    /// Tool argument the token is passed in. Default `continue`.
    #[serde(default = "default_token")]
    pub token_arg: String,
    /// Most pages fetched, 1 to 1000. Default 10.
    #[serde(default = "default_max_pages")]
    #[schemars(range(min = 1, max = MOST_PAGES))]
    pub max_pages: u32,
}

impl Default for WorkflowPaginate {
    fn default() -> Self {
        Self {
            items_field: default_items_field(),
            token_field: default_token(),
            token_arg: default_token(),
            max_pages: DEFAULT_MAX_PAGES,
        }
    }
}

/// When a step runs: exactly one of a `template` gate, a `tool` call or the result of
/// an earlier step (`fromStep`). `tool` and `fromStep` need `expect` or `expectNot`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
// The CRD enforces both at `kubectl apply`: CEL rules in the JSON schema.
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "[has(self.template), has(self.tool), has(self.fromStep)].filter(x, x).size() == 1",
     "message": "exactly one of template, tool or fromStep must be set"},
    {"rule": "has(self.template) || has(self.expect) || has(self.expectNot)",
     "message": "a tool or fromStep condition must declare expect or expectNot"},
]))]
pub struct WorkflowCondition {
    /// Boolean template gate; the step runs when it renders to `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Tool called to evaluate the condition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Arguments of the condition tool.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
    /// Earlier step whose result is evaluated. Deprecated spelling: `from_step`.
    #[serde(default, alias = "from_step", skip_serializing_if = "Option::is_none")]
    pub from_step: Option<String>,
    /// What must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<WorkflowConditionExpectation>,
    /// What must not hold. Deprecated spelling: `expect_not`.
    #[serde(default, alias = "expect_not", skip_serializing_if = "Option::is_none")]
    pub expect_not: Option<WorkflowConditionExpectation>,
}

/// Expectations about a condition's result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowConditionExpectation {
    /// Whether the tool call should succeed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success: Option<bool>,
    /// Expected values by path in the result (or by template seeing it as `.result`).
    /// Deprecated spelling: `json_path`.
    #[serde(default, alias = "json_path", skip_serializing_if = "Map::is_empty")]
    pub json_path: Map<String, Value>,
}

/// Observed state of a workflow, written by muster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowStatus {
    /// Whether the spec passes validation.
    #[serde(default)]
    pub valid: bool,
    /// The validation errors, one per entry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validation_errors: Vec<String>,
    /// Tools the steps mention (informational).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub referenced_tools: Vec<String>,
    /// Number of steps.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step_count: u32,
    /// Standard conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
