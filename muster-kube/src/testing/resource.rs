//! The resource types the double serves: one row per type, as data.

/// One resource type the [`ApiServerDouble`](super::ApiServerDouble) serves, the way a
/// CustomResourceDefinition or a built-in API group describes it.
///
/// The default table ([`ResourceType::defaults`]) holds what muster uses: core `v1` Secrets,
/// `events.k8s.io/v1` Events, `coordination.k8s.io/v1` Leases and muster's three custom
/// resources. Tests add more with [`ApiServerDouble::add_resource_type`](super::ApiServerDouble::add_resource_type).
///
/// ```
/// use muster_kube::testing::ResourceType;
///
/// let configmaps = ResourceType::new("", "v1", "configmaps", "ConfigMap").builtin();
/// assert_eq!(configmaps.api_version(), "v1");
/// let widgets = ResourceType::new("example.com", "v1", "widgets", "Widget").with_status_subresource();
/// assert_eq!(widgets.api_version(), "example.com/v1");
/// assert_eq!(widgets.qualified_resource(), "widgets.example.com");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResourceType {
    /// The API group; empty for the core group.
    pub group: String,
    /// The version served (one per type).
    pub version: String,
    /// The plural resource name in URLs (`mcpservers`).
    pub plural: String,
    /// The kind (`MCPServer`); lists are `<kind>List`.
    pub kind: String,
    /// Namespaced (`true`) or cluster-scoped.
    pub namespaced: bool,
    /// Whether `/status` is a subresource: writes to the main resource then keep `.status`,
    /// writes to `/status` change nothing else.
    pub status_subresource: bool,
    /// Served from a CustomResourceDefinition: objects carry `metadata.generation`, a replace
    /// (`PUT`) must name a `resourceVersion`, and strategic merge patches are refused (415), as
    /// the real API server does for custom resources. Built-in types (`false`) accept strategic
    /// merge patches (applied as JSON merge patches) and carry no generation.
    pub custom: bool,
    /// Field selector labels the type accepts besides `metadata.name` and
    /// `metadata.namespace` (dotted paths into the object, e.g. `regarding.name`).
    pub selectable_fields: Vec<String>,
}

impl ResourceType {
    /// A namespaced custom resource type without a status subresource.
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        plural: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            kind: kind.into(),
            namespaced: true,
            status_subresource: false,
            custom: true,
            selectable_fields: Vec::new(),
        }
    }

    /// Marks the type cluster-scoped.
    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    /// Gives the type a `/status` subresource.
    pub fn with_status_subresource(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Marks the type built-in (not from a CRD); see [`ResourceType::custom`].
    pub fn builtin(mut self) -> Self {
        self.custom = false;
        self
    }

    /// Adds field selector labels (dotted paths into the object).
    pub fn with_selectable_fields<I, S>(mut self, fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.selectable_fields.extend(fields.into_iter().map(Into::into));
        self
    }

    /// `group/version`, or `version` for the core group (what objects carry as `apiVersion`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` (or `plural` in the core group), as the API server's messages name it.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// `Kind.group` (or `Kind` in the core group), as validation messages name it.
    pub(crate) fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// The table a new double starts with: core `v1` `secrets`, `events.k8s.io/v1` `events`,
    /// `coordination.k8s.io/v1` `leases`, the cluster-scoped
    /// `admissionregistration.k8s.io/v1` `validatingadmissionpolicies` and
    /// `validatingadmissionpolicybindings`, and in `muster.giantswarm.io/v1alpha1`
    /// `mcpservers` (status subresource), `workflows` (status subresource) and
    /// `workflowexecutions` (none).
    pub fn defaults() -> Vec<ResourceType> {
        const MUSTER: &str = "muster.giantswarm.io";
        vec![
            ResourceType::new("", "v1", "secrets", "Secret")
                .builtin()
                .with_selectable_fields(["type"]),
            ResourceType::new("events.k8s.io", "v1", "events", "Event")
                .builtin()
                .with_selectable_fields([
                    "regarding.apiVersion",
                    "regarding.fieldPath",
                    "regarding.kind",
                    "regarding.name",
                    "regarding.namespace",
                    "regarding.resourceVersion",
                    "regarding.uid",
                    "reason",
                    "reportingController",
                    "type",
                ]),
            ResourceType::new("coordination.k8s.io", "v1", "leases", "Lease").builtin(),
            ResourceType::new(
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicies",
                "ValidatingAdmissionPolicy",
            )
            .cluster_scoped()
            .builtin(),
            ResourceType::new(
                "admissionregistration.k8s.io",
                "v1",
                "validatingadmissionpolicybindings",
                "ValidatingAdmissionPolicyBinding",
            )
            .cluster_scoped()
            .builtin(),
            ResourceType::new(MUSTER, "v1alpha1", "mcpservers", "MCPServer").with_status_subresource(),
            ResourceType::new(MUSTER, "v1alpha1", "workflows", "Workflow").with_status_subresource(),
            ResourceType::new(MUSTER, "v1alpha1", "workflowexecutions", "WorkflowExecution"),
        ]
    }
}

/// The registered types; an index into it identifies a type inside the double.
#[derive(Debug, Clone)]
pub(crate) struct Registry {
    types: Vec<ResourceType>,
}

impl Registry {
    pub(crate) fn new(types: Vec<ResourceType>) -> Self {
        Self { types }
    }

    /// Adds a type, replacing one with the same group, version and plural.
    pub(crate) fn add(&mut self, rt: ResourceType) -> usize {
        if let Some(i) = self.find(&rt.group, &rt.version, &rt.plural) {
            self.types[i] = rt;
            i
        } else {
            self.types.push(rt);
            self.types.len() - 1
        }
    }

    pub(crate) fn get(&self, index: usize) -> &ResourceType {
        &self.types[index]
    }

    pub(crate) fn all(&self) -> &[ResourceType] {
        &self.types
    }

    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.types
            .iter()
            .position(|t| t.group == group && t.version == version && t.plural == plural)
    }

    /// By `apiVersion` and `kind`, as an object names its own type.
    pub(crate) fn find_kind(&self, api_version: &str, kind: &str) -> Option<usize> {
        self.types
            .iter()
            .position(|t| t.api_version() == api_version && t.kind == kind)
    }

    /// By `plural.group` or by a plural that only one type has (as `kubectl get` resolves).
    pub(crate) fn resolve(&self, name: &str) -> Option<usize> {
        if let Some(i) = self.types.iter().position(|t| t.qualified_resource() == name) {
            return Some(i);
        }
        let mut matches = self.types.iter().enumerate().filter(|(_, t)| t.plural == name);
        match (matches.next(), matches.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_accepts_a_unique_plural_or_the_qualified_name() {
        let mut registry = Registry::new(ResourceType::defaults());
        assert_eq!(
            registry.resolve("mcpservers"),
            registry.find("muster.giantswarm.io", "v1alpha1", "mcpservers")
        );
        let core_events = registry.add(ResourceType::new("", "v1", "events", "Event").builtin());
        assert_eq!(
            registry.resolve("events"),
            Some(core_events),
            "the core group's name is the plural"
        );
        assert_eq!(
            registry.resolve("events.events.k8s.io"),
            registry.find("events.k8s.io", "v1", "events")
        );
        registry.add(ResourceType::new("example.com", "v1", "leases", "Lease"));
        assert_eq!(registry.resolve("leases"), None, "two groups share the plural");
    }
}
