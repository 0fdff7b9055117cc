//! Live reload: the config directory's `mcpservers/` and `workflows/` folders are watched, and a
//! change (a file added, edited or removed) is applied to the running gateway after things have
//! been quiet for [`DEBOUNCE`]: only the servers and workflows whose definitions changed are
//! touched, and a file that no longer loads is reported while its last good definition stays in
//! force.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Weak},
    time::Duration,
};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::{config_dir, registry::Registry, sync};

/// How long the folders must be quiet before a change is applied.
pub const DEBOUNCE: Duration = Duration::from_millis(500);

/// A running watch; dropping it stops watching.
#[derive(Debug)]
pub struct WatchHandle {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn relevant(dir: &Path, path: &Path) -> bool {
    let Ok(relative) = path.strip_prefix(dir) else {
        return false;
    };
    matches!(
        relative.components().next().and_then(|c| c.as_os_str().to_str()),
        Some(config_dir::MCPSERVERS_DIR | config_dir::WORKFLOWS_DIR)
    )
}

/// Watches `dir` and applies its changes to `registry`.
pub fn watch(registry: &Arc<Registry>, dir: &Path) -> notify::Result<WatchHandle> {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    for sub in [config_dir::MCPSERVERS_DIR, config_dir::WORKFLOWS_DIR] {
        // Watching needs the folders; creating them empty changes nothing.
        let _ = std::fs::create_dir_all(dir.join(sub));
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let filter_dir = dir.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
        Ok(event) if event.paths.iter().any(|p| relevant(&filter_dir, p)) => {
            let _ = tx.send(());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "watching the config directory failed"),
    })?;
    for sub in [config_dir::MCPSERVERS_DIR, config_dir::WORKFLOWS_DIR] {
        watcher.watch(&dir.join(sub), RecursiveMode::NonRecursive)?;
    }
    let task = tokio::spawn(reload_loop(Arc::downgrade(registry), dir, rx));
    Ok(WatchHandle {
        _watcher: watcher,
        task,
    })
}

async fn reload_loop(registry: Weak<Registry>, dir: PathBuf, mut changes: mpsc::UnboundedReceiver<()>) {
    while changes.recv().await.is_some() {
        // Debounce: wait until nothing changed for DEBOUNCE.
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, changes.recv()).await {}
        let load_dir = dir.clone();
        let loaded = match tokio::task::spawn_blocking(move || config_dir::load(&load_dir)).await {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(e)) => {
                tracing::error!(dir = %dir.display(), error = %e, "cannot read the config directory");
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, "reloading the config directory failed");
                continue;
            }
        };
        for problem in &loaded.problems {
            tracing::error!("{problem} (the last good definition stays in force)");
        }
        let Some(registry) = registry.upgrade() else { return };
        let summary = sync::apply(&registry, &loaded);
        tracing::info!(?summary, "config directory change applied");
    }
}
