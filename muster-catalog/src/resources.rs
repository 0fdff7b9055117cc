//! Resource discovery: `list_resources`, `filter_resources`, `describe_resource`, and finding the
//! entry `get_resource` reads.
//!
//! A URI with a scheme carries no server prefix, so several servers may expose the same URI; a
//! request then names the server, and one that does not is refused naming the servers.

use std::sync::Arc;

use muster_core::{JsonObject, ResourceEntry};
use serde::Serialize;

use crate::{
    CatalogError, View,
    args::{FILTER_DEFAULT_LIMIT, Paging, opt_bool, opt_string, required_string},
    pattern::NamePattern,
    tools::Scope,
};

/// One resource in a listing.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceListing<'a> {
    /// The exposed URI.
    pub uri: &'a str,
    /// The resource's name.
    pub name: &'a str,
    /// Its description (its name when it has none).
    pub description: &'a str,
    /// Its MIME type, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<&'a str>,
    /// The MCPServer that exposes it.
    pub server: &'a str,
}

impl<'a> ResourceListing<'a> {
    /// The listing of one entry.
    pub fn of(entry: &'a ResourceEntry) -> Self {
        let r = &entry.resource;
        Self {
            uri: &r.uri,
            name: &r.name,
            description: r.description.as_deref().unwrap_or(&r.name),
            mime_type: r.mime_type.as_deref(),
            server: &entry.server,
        }
    }
}

/// The filters of `filter_resources` and `filter_prompts`, echoed in the response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerFilters {
    /// The glob.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// The server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Whether matching was case-sensitive.
    pub case_sensitive: bool,
    /// The page size.
    pub limit: usize,
    /// The entries skipped.
    pub offset: usize,
}

impl ServerFilters {
    /// Reads `pattern`, `server`, `case_sensitive`, `limit` and `offset`.
    pub(crate) fn from_args(args: &JsonObject) -> Result<(Self, Option<NamePattern>), CatalogError> {
        let paging = Paging::from_args(args, FILTER_DEFAULT_LIMIT)?;
        let pattern = opt_string(args, "pattern")?.filter(|p| !p.is_empty());
        let server = opt_string(args, "server")?.filter(|s| !s.is_empty());
        let case_sensitive = opt_bool(args, "case_sensitive", false)?;
        let matcher = pattern.map(|p| NamePattern::new(p, case_sensitive)).transpose()?;
        let filters = Self {
            pattern: pattern.map(str::to_owned),
            server: server.map(str::to_owned),
            case_sensitive,
            limit: paging.limit,
            offset: paging.offset,
        };
        Ok((filters, matcher))
    }

    pub(crate) fn paging(&self) -> Paging {
        Paging {
            limit: self.limit,
            offset: self.offset,
        }
    }
}

/// A page of resources: the answer of `filter_resources`.
#[derive(Debug, Clone, Serialize)]
pub struct ResourcePage<'a> {
    /// The filters applied.
    pub filters: ServerFilters,
    /// Resources in the caller's catalogue.
    pub total_resources: usize,
    /// Entries in this page.
    pub filtered_count: usize,
    /// Matches.
    pub total: usize,
    /// Whether more matches follow this page.
    pub truncated: bool,
    /// This page.
    pub resources: Vec<ResourceListing<'a>>,
}

/// `list_resources`: every resource with its server.
pub fn list_resources(view: &View) -> Vec<ResourceListing<'_>> {
    view.resources().map(|e| ResourceListing::of(e)).collect()
}

/// `filter_resources {pattern, server, case_sensitive, limit, offset}`.
pub fn filter_resources<'a>(view: &'a View, args: &JsonObject) -> Result<ResourcePage<'a>, CatalogError> {
    let (filters, matcher) = ServerFilters::from_args(args)?;
    let matches: Vec<&Arc<ResourceEntry>> = view
        .resources()
        .filter(|e| filters.server.as_deref().is_none_or(|s| e.server == s))
        .filter(|e| matcher.as_ref().is_none_or(|m| m.matches(e.uri())))
        .collect();
    let (page, truncated) = filters.paging().page(&matches);
    let resources: Vec<ResourceListing<'a>> = page.iter().map(|e| ResourceListing::of(e)).collect();
    Ok(ResourcePage {
        total_resources: view.resources().count(),
        filtered_count: resources.len(),
        total: matches.len(),
        truncated,
        resources,
        filters,
    })
}

/// The entry `describe_resource` and `get_resource` mean by `{uri, server?}`.
pub fn find_resource<'a>(
    view: &'a View,
    args: &JsonObject,
    scope: Scope<'_>,
) -> Result<&'a Arc<ResourceEntry>, CatalogError> {
    let uri = required_string(args, "uri")?;
    let server = opt_string(args, "server")?.filter(|s| !s.is_empty());
    let candidates: Vec<&Arc<ResourceEntry>> = view
        .resources()
        .filter(|e| e.uri() == uri && server.is_none_or(|s| e.server == s))
        .collect();
    match candidates.as_slice() {
        [] => Err(match scope.declared {
            Some(toolset) if view.hides_resource(uri) => CatalogError::ResourceOutsideToolset {
                uri: uri.to_owned(),
                selectors: toolset.declared().to_vec(),
            },
            _ => CatalogError::ResourceNotFound { uri: uri.to_owned() },
        }),
        [one] => Ok(one),
        several => Err(CatalogError::AmbiguousResource {
            uri: uri.to_owned(),
            servers: several.iter().map(|e| e.server.clone()).collect(),
        }),
    }
}

/// `describe_resource {uri, server?}`: the resource's metadata, not its contents.
pub fn describe_resource<'a>(
    view: &'a View,
    args: &JsonObject,
    scope: Scope<'_>,
) -> Result<ResourceListing<'a>, CatalogError> {
    find_resource(view, args, scope).map(|e| ResourceListing::of(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;
    use rmcp::model::Resource;
    use serde_json::{Value, json};

    fn obj(v: Value) -> JsonObject {
        v.as_object().cloned().unwrap_or_default()
    }

    fn fixture() -> Arc<Catalog> {
        let mut b = Catalog::builder();
        for (server, uri) in [
            ("a", "board://one"),
            ("a", "board://two"),
            ("b", "board://one"),
            ("b", "file:///x"),
        ] {
            let r = Resource::new(uri, uri.rsplit('/').next().unwrap_or(uri)).with_mime_type("text/plain");
            b.push_resource(ResourceEntry::downstream(uri, server, r));
        }
        Arc::new(b.build())
    }

    #[test]
    fn every_resource_is_listed_with_its_server_and_a_description() {
        let c = fixture();
        let view = c.view();
        let all = list_resources(&view);
        assert_eq!(all.len(), 4);
        assert_eq!((all[0].server, all[0].description), ("a", "one"));
    }

    #[test]
    fn filter_resources_scopes_by_pattern_and_server() {
        let c = fixture();
        let view = c.view();
        let page = filter_resources(&view, &obj(json!({"pattern": "board://*", "server": "b"}))).expect("page");
        assert_eq!(page.total, 1);
        assert_eq!(page.resources[0].uri, "board://one");
        assert_eq!(page.total_resources, 4);
        let page = filter_resources(&view, &obj(json!({"pattern": "BOARD://*", "limit": 2}))).expect("page");
        assert_eq!((page.total, page.filtered_count, page.truncated), (3, 2, true));
    }

    #[test]
    fn a_uri_of_several_servers_needs_the_server_argument() {
        let c = fixture();
        let view = c.view();
        let presets = crate::toolset::Presets::default();
        let scope = Scope::unscoped(&presets);
        let err = describe_resource(&view, &obj(json!({"uri": "board://one"})), scope).expect_err("ambiguous");
        assert_eq!(
            err.to_string(),
            "Resource board://one is exposed by servers a, b; the \"server\" argument is required"
        );
        let d = describe_resource(&view, &obj(json!({"uri": "board://one", "server": "b"})), scope).expect("found");
        assert_eq!(d.server, "b");
        let err = describe_resource(&view, &obj(json!({"uri": "board://none"})), scope).expect_err("missing");
        assert_eq!(err.to_string(), "Resource not found: board://none");
    }
}
