//! [`CataloguePublisher`]: the catalogue the registry publishes, built once per change from the
//! connected servers, the tools run in this process and the workflows, and read by every
//! request without building anything.
//!
//! It holds three things: the shared catalogue (what a session without connections of its own
//! sees), the tools offered to it that run in this process (the core tools, an embedder's
//! own), and each workflow's availability as of that catalogue. Building is a join over the
//! server table and a session's own connections ([`CataloguePublisher::build`]); publishing
//! swaps the shared catalogue in one step ([`CataloguePublisher::publish`]), so a request reads
//! either the one before or the one after.

use std::{
    collections::BTreeMap,
    sync::{Arc, RwLock},
};

use muster_catalog::{Catalog, rank::RankingConfig};
use muster_core::{NameRules, ToolEntry};
use muster_workflow::tools::{Availability, WorkflowTable};

use super::servers::ServerTable;
use crate::{
    server_entries::{self, Collision, Contribution},
    upstream::SharedConnection,
};

/// The published catalogue, the in-process tools offered to it, and the workflows'
/// availability as of it. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct CataloguePublisher {
    catalog: RwLock<Arc<Catalog>>,
    /// The tools that run in this process, offered to the catalogue.
    in_process: RwLock<Vec<ToolEntry>>,
    /// Whether each workflow can run, as of the published catalogue.
    availability: RwLock<BTreeMap<String, Availability>>,
    /// How every catalogue built here ranks (`filter_tools {query}`).
    ranking: RankingConfig,
}

/// What one build makes: the catalogue, the exposed names that collided (each kept by the first
/// server that produced it), and each workflow's availability.
pub(crate) type Built = (Catalog, Vec<Collision>, BTreeMap<String, Availability>);

impl CataloguePublisher {
    /// Nothing published yet; every catalogue built ranks with `ranking`.
    pub(crate) fn new(ranking: RankingConfig) -> Self {
        Self {
            catalog: RwLock::new(Arc::new(Catalog::empty())),
            in_process: RwLock::default(),
            availability: RwLock::default(),
            ranking,
        }
    }

    /// The shared catalogue, as last published.
    pub(crate) fn current(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Offers tools run in this process: each is listed beside the servers' tools from the next
    /// build on, replacing an offered tool of the same name.
    pub(crate) fn offer(&self, entries: impl IntoIterator<Item = ToolEntry>) {
        let mut offered = self.in_process.write().unwrap_or_else(|e| e.into_inner());
        for entry in entries {
            offered.retain(|e| e.name() != entry.name());
            offered.push(entry);
        }
    }

    /// A catalogue of the connected servers of `servers`, plus `own` (a session's connections
    /// to servers people sign in to), the offered tools and the workflows; named by `names`,
    /// with servers outside `home_namespace` exposed under namespaced names.
    pub(crate) fn build(
        &self,
        names: &NameRules,
        servers: &ServerTable,
        own: &BTreeMap<String, SharedConnection>,
        workflows: &WorkflowTable,
        home_namespace: Option<&str>,
    ) -> Built {
        let servers = servers.read();
        let contributions: Vec<Contribution<'_>> = servers
            .values()
            .filter_map(|slot| {
                let conn = slot
                    .connection
                    .as_deref()
                    .or_else(|| own.get(&slot.definition.metadata.name).map(|c| &**c))?;
                Some(Contribution {
                    definition: &slot.definition,
                    conn,
                    home_namespace,
                })
            })
            .collect();
        let in_process = self.in_process.read().unwrap_or_else(|e| e.into_inner());
        server_entries::build(names, &contributions, &in_process, workflows, &self.ranking)
    }

    /// Publishes `catalog` as the shared one, with the workflows' `availability` as of it.
    pub(crate) fn publish(&self, catalog: Catalog, availability: BTreeMap<String, Availability>) {
        *self.catalog.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(catalog);
        *self.availability.write().unwrap_or_else(|e| e.into_inner()) = availability;
    }

    /// Whether workflow `name` can run, as of the published catalogue.
    pub(crate) fn availability(&self, name: &str) -> Option<Availability> {
        self.availability
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }
}
