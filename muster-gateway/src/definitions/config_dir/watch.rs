//! Live reload: the config directory's `mcpservers/` and `workflows/` folders are watched, and
//! after a change (a file added, edited or removed) and [`DEBOUNCE`] of quiet, the directory is
//! read again and its [`DefinitionSnapshot`] handed on, to
//! `Registry::apply_snapshot` as
//! [`Gateway::watch_config_dir`](crate::Gateway::watch_config_dir) does: only the servers and
//! workflows whose definitions changed are touched, and a file that no longer loads is reported
//! while its last good definition stays in force.
//!
//! Only changes count: reading a definition (opening, reading, closing it unwritten) does not.
//! Each reload reads the folders, and `notify` reports those reads: counted as changes, they
//! started the next reload, twice a second for as long as the gateway ran.

use std::{path::Path, time::Duration};

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::{ConfigStore, MCPSERVERS_DIR, WORKFLOWS_DIR};
use crate::definitions::{ChangeSummary, DefinitionSnapshot};

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
        Some(MCPSERVERS_DIR | WORKFLOWS_DIR)
    )
}

/// Whether `event` changes a definition in `dir`: a file of a watched folder created, modified
/// (its data, name or metadata) or removed. A read is no change.
fn changes_definitions(dir: &Path, event: &notify::Event) -> bool {
    !matches!(event.kind, EventKind::Access(_)) && event.paths.iter().any(|p| relevant(dir, p))
}

/// Watches the folders of `dir` (canonical), sending on `changes` at each change.
fn watcher(dir: &Path, changes: mpsc::UnboundedSender<()>) -> notify::Result<notify::RecommendedWatcher> {
    for sub in [MCPSERVERS_DIR, WORKFLOWS_DIR] {
        // Watching needs the folders; creating them empty changes nothing.
        let _ = std::fs::create_dir_all(dir.join(sub));
    }
    let filter_dir = dir.to_path_buf();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
        Ok(event) if changes_definitions(&filter_dir, &event) => {
            let _ = changes.send(());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "watching the config directory failed"),
    })?;
    for sub in [MCPSERVERS_DIR, WORKFLOWS_DIR] {
        watcher.watch(&dir.join(sub), RecursiveMode::NonRecursive)?;
    }
    Ok(watcher)
}

/// Watches the directory of `store` and, after each change, reads it again and hands its
/// snapshot ([`ConfigStore::snapshot`]) to `apply`, until `apply` answers `None` (what it
/// applied to is gone) or the handle is dropped. Each file that does not load is logged.
pub fn watch<F>(store: &ConfigStore, apply: F) -> notify::Result<WatchHandle>
where
    F: FnMut(DefinitionSnapshot) -> Option<ChangeSummary> + Send + 'static,
{
    // Events name canonical paths; the directory is read as the store names it, so that the
    // files of each reading match those of the first (`Gateway::from_config_dir`'s).
    let canonical = store.dir().canonicalize().unwrap_or_else(|_| store.dir().to_path_buf());
    let (tx, rx) = mpsc::unbounded_channel();
    let watcher = watcher(&canonical, tx)?;
    let task = tokio::spawn(reload_loop(store.clone(), rx, apply));
    Ok(WatchHandle {
        _watcher: watcher,
        task,
    })
}

async fn reload_loop(
    store: ConfigStore,
    mut changes: mpsc::UnboundedReceiver<()>,
    mut apply: impl FnMut(DefinitionSnapshot) -> Option<ChangeSummary>,
) {
    while changes.recv().await.is_some() {
        // Debounce: wait until nothing changed for DEBOUNCE.
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, changes.recv()).await {}
        let dir = store.dir().to_path_buf();
        let loaded = match tokio::task::spawn_blocking({
            let dir = dir.clone();
            move || super::load(&dir)
        })
        .await
        {
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
        let Some(summary) = apply(store.snapshot(&loaded)) else {
            return;
        };
        tracing::info!(?summary, "config directory change applied");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a change arrives on `changes` within `wait`.
    async fn changed(changes: &mut mpsc::UnboundedReceiver<()>, wait: Duration) -> bool {
        tokio::time::timeout(wait, changes.recv()).await.is_ok()
    }

    /// Waits until the changes have been quiet for a while.
    async fn settle(changes: &mut mpsc::UnboundedReceiver<()>) {
        while changed(changes, Duration::from_millis(200)).await {}
    }

    #[tokio::test]
    async fn reading_a_definition_is_no_change_and_writing_one_is() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(dir.join(MCPSERVERS_DIR)).expect("mcpservers/");
        let file = dir.join(MCPSERVERS_DIR).join("demo.yaml");
        std::fs::write(&file, "kind: MCPServer\n").expect("written");
        let (tx, mut changes) = mpsc::unbounded_channel();
        let _watcher = watcher(&dir, tx).expect("watching");

        // What a reload does: list the folder, read each file.
        for _ in 0..3 {
            let listed = std::fs::read_dir(file.parent().expect("its folder")).expect("listed");
            assert_eq!(listed.count(), 1);
            assert_eq!(std::fs::read_to_string(&file).expect("read"), "kind: MCPServer\n");
        }
        assert!(
            !changed(&mut changes, Duration::from_millis(400)).await,
            "reading the definitions is no change"
        );

        std::fs::write(&file, "kind: MCPServer\nmetadata: {}\n").expect("rewritten");
        assert!(
            changed(&mut changes, Duration::from_secs(5)).await,
            "an edit is a change"
        );
        settle(&mut changes).await;
        std::fs::write(dir.join(WORKFLOWS_DIR).join("w.yaml"), "kind: Workflow\n").expect("added");
        assert!(
            changed(&mut changes, Duration::from_secs(5)).await,
            "a new file is a change"
        );
        settle(&mut changes).await;
        std::fs::remove_file(&file).expect("removed");
        assert!(
            changed(&mut changes, Duration::from_secs(5)).await,
            "a removal is a change"
        );
        settle(&mut changes).await;
        // Elsewhere in the directory (the event log's folder) nothing counts.
        std::fs::create_dir_all(dir.join("events")).expect("events/");
        std::fs::write(dir.join("events").join("e.json"), "{}").expect("an event");
        assert!(
            !changed(&mut changes, Duration::from_millis(400)).await,
            "not a watched folder"
        );
    }
}
