//! How a resource is named in the gateway, and back.
//!
//! A resource of muster's namespace keeps its name. One of another namespace is named
//! `<namespace>_<name>`: a Kubernetes name has no `_`, so it cannot collide with one of muster's
//! namespace, and the name says where to write it back. Such a server keeps its own name as its
//! `toolPrefix` when it has none, so that the catalogue, which puts a server's namespace in
//! front of the prefix of a server outside muster's namespace, exposes its tools under
//! `<namespace>_<toolPrefix or name>`, as the reference says.

use muster_core::crd::{MCPServer, Workflow};

/// The naming of muster in `muster_namespace`.
#[derive(Debug, Clone)]
pub(crate) struct Naming {
    muster_namespace: String,
}

impl Naming {
    pub(crate) fn new(muster_namespace: impl Into<String>) -> Self {
        Self {
            muster_namespace: muster_namespace.into(),
        }
    }

    pub(crate) fn muster_namespace(&self) -> &str {
        &self.muster_namespace
    }

    /// The gateway's name of resource `name` of `namespace`.
    pub(crate) fn gateway_name(&self, namespace: &str, name: &str) -> String {
        if namespace == self.muster_namespace {
            name.to_owned()
        } else {
            format!("{namespace}_{name}")
        }
    }

    /// The namespace and name of the resource the gateway names `gateway_name`.
    pub(crate) fn resource(&self, gateway_name: &str) -> (String, String) {
        match gateway_name.split_once('_') {
            Some((namespace, name)) => (namespace.to_owned(), name.to_owned()),
            None => (self.muster_namespace.clone(), gateway_name.to_owned()),
        }
    }

    /// `server` as read from the cluster, named for the gateway.
    pub(crate) fn server_for_gateway(&self, mut server: MCPServer) -> MCPServer {
        let namespace = server.metadata.namespace.clone().unwrap_or_default();
        if namespace != self.muster_namespace {
            let prefix = server
                .spec
                .tool_prefix
                .take()
                .unwrap_or_else(|| server.metadata.name.clone());
            server.spec.tool_prefix = Some(prefix);
            server.metadata.name = self.gateway_name(&namespace, &server.metadata.name);
        }
        server
    }

    /// `server` as the gateway names it, named for the cluster (namespace set).
    pub(crate) fn server_for_cluster(&self, mut server: MCPServer) -> MCPServer {
        let (namespace, name) = self.resource(&server.metadata.name);
        if namespace != self.muster_namespace {
            server.spec.tool_prefix = server.spec.tool_prefix.take().filter(|p| *p != name);
        }
        server.metadata.name = name;
        server.metadata.namespace = Some(namespace);
        server
    }

    /// `workflow` as read from the cluster, named for the gateway.
    pub(crate) fn workflow_for_gateway(&self, mut workflow: Workflow) -> Workflow {
        let namespace = workflow.metadata.namespace.clone().unwrap_or_default();
        workflow.metadata.name = self.gateway_name(&namespace, &workflow.metadata.name);
        workflow
    }

    /// `workflow` as the gateway names it, named for the cluster (namespace set).
    pub(crate) fn workflow_for_cluster(&self, mut workflow: Workflow) -> Workflow {
        let (namespace, name) = self.resource(&workflow.metadata.name);
        workflow.metadata.name = name;
        workflow.metadata.namespace = Some(namespace);
        workflow
    }
}

#[cfg(test)]
mod tests {
    use muster_core::crd::MCPServerSpec;

    use super::*;

    fn server(namespace: &str, name: &str, prefix: Option<&str>) -> MCPServer {
        let mut server = MCPServer::new(
            name,
            MCPServerSpec {
                tool_prefix: prefix.map(str::to_owned),
                ..MCPServerSpec::default()
            },
        );
        server.metadata.namespace = Some(namespace.to_owned());
        server
    }

    #[test]
    fn a_name_goes_to_the_gateway_and_back() {
        let naming = Naming::new("muster");
        for (namespace, name, prefix) in [
            ("muster", "api", None),
            ("muster", "api", Some("kb")),
            ("team", "api", None),
            ("team", "api", Some("kb")),
        ] {
            let original = server(namespace, name, prefix);
            let gateway = naming.server_for_gateway(original.clone());
            assert_eq!(naming.server_for_cluster(gateway), original);
        }
        let gateway = naming.server_for_gateway(server("team", "api", Some("kb")));
        assert_eq!(gateway.metadata.name, "team_api");
        assert_eq!(gateway.spec.tool_prefix.as_deref(), Some("kb"));
        let gateway = naming.server_for_gateway(server("team", "api", None));
        assert_eq!(
            gateway.spec.tool_prefix.as_deref(),
            Some("api"),
            "the catalogue puts team_ in front"
        );
        assert_eq!(naming.resource("team_api"), ("team".to_owned(), "api".to_owned()));
        assert_eq!(naming.resource("api"), ("muster".to_owned(), "api".to_owned()));
    }
}
