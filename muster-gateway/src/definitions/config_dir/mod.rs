//! Filesystem mode: the muster config directory, the definitions' source and store of the
//! embedded gateway.
//!
//! ```text
//! <dir>/config.yaml              aggregator settings (optional: defaults apply)
//! <dir>/mcpservers/*.yaml|yml    one MCPServer document each
//! <dir>/workflows/*.yaml|yml     one Workflow document each
//! ```
//!
//! - [`load`] reads it: every file that loads, and each one that does not as a [`LoadProblem`];
//! - [`ConfigStore`] writes it, atomically (the [`DefinitionStore`](super::DefinitionStore) of
//!   filesystem mode, and `config.yaml`), and turns what [`load`] read into the
//!   [`DefinitionSnapshot`](super::DefinitionSnapshot) the registry applies, remembering which
//!   file defines what so that a file that no longer loads keeps its last good definition;
//! - [`watch`] reads it again after each change and hands on each snapshot.
//!
//! [`Gateway::from_config_dir`](crate::Gateway::from_config_dir) and
//! [`Gateway::watch_config_dir`](crate::Gateway::watch_config_dir) put them together. By hand:
//!
//! ```
//! use muster_gateway::{definitions::config_dir::{self, ConfigStore}, registry::{Registry, RegistryOptions}};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let file = |name: &str| format!("apiVersion: muster.giantswarm.io/v1alpha1\nkind: MCPServer\nmetadata:\n  name: {name}\nspec:\n  type: streamable-http\n  url: http://127.0.0.1:9/mcp\n");
//! std::fs::create_dir_all(dir.path().join(config_dir::MCPSERVERS_DIR))?;
//! std::fs::write(dir.path().join("mcpservers/api.yaml"), file("api"))?;
//!
//! let store = ConfigStore::new(dir.path());
//! let loaded = config_dir::load(dir.path())?;
//! let registry = Registry::new(loaded.config.clone(), Vec::new(), Vec::new(), RegistryOptions::default())?;
//! assert_eq!(registry.apply_snapshot(store.snapshot(&loaded)).added, ["api"]);
//!
//! // The file breaks: `api` keeps its last good definition. A new file adds `docs`.
//! std::fs::write(dir.path().join("mcpservers/api.yaml"), "kind: MCPServer\nmetadata: [")?;
//! std::fs::write(dir.path().join("mcpservers/docs.yaml"), file("docs"))?;
//! let summary = registry.apply_snapshot(store.snapshot(&config_dir::load(dir.path())?));
//! assert_eq!((summary.added, summary.kept), (vec!["docs".to_owned()], vec!["api".to_owned()]));
//! # Ok(()) }
//! ```

mod read;
mod store;
mod watch;

use std::path::Path;

pub use read::{LoadProblem, LoadWarning, LoadedConfig, MAX_FILE_BYTES, load};
pub use store::{ConfigStore, MAX_NAME_LEN, StoreError, check_name};
pub use watch::{DEBOUNCE, WatchHandle, watch};

/// The folder of the MCPServer definitions.
pub const MCPSERVERS_DIR: &str = "mcpservers";
/// The folder of the Workflow definitions.
pub const WORKFLOWS_DIR: &str = "workflows";
/// The file of the gateway configuration.
pub const CONFIG_FILE: &str = "config.yaml";

/// `path` named relative to the config directory `dir` (`mcpservers/git.yaml`), as answers,
/// events and errors show files; a path outside `dir` is named by its file name alone.
pub fn relative_path(dir: &Path, path: &Path) -> String {
    match path.strip_prefix(dir) {
        Ok(relative) if !relative.as_os_str().is_empty() => relative.to_string_lossy().replace('\\', "/"),
        _ => path
            .file_name()
            .map_or_else(|| ".".to_owned(), |n| n.to_string_lossy().into_owned()),
    }
}
