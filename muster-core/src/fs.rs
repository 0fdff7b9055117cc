//! File writes that survive a crash: the one way the crates of muster replace a file.
//!
//! [`write_atomic`] writes a temporary file beside the target, syncs it, renames it over the
//! target and syncs the folder, so a reader (or a restart after a crash) sees the old file or the
//! new one, never half of one. A temporary file a crash left behind is recognised by
//! [`is_temp_file`] and can be removed at the next start.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let target = dir.path().join("server.yaml");
//! muster_core::fs::write_atomic(&target, b"kind: MCPServer\n").unwrap();
//! assert_eq!(std::fs::read(&target).unwrap(), b"kind: MCPServer\n");
//! assert!(muster_core::fs::is_temp_file(".server.yaml.tmp-1-2-3"));
//! ```

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

/// What marks a temporary file's name (after a leading `.` and the target's name).
pub const TEMP_MARKER: &str = ".tmp-";

/// A write that failed: what was being done, to which path, and why.
#[derive(Debug, thiserror::Error)]
#[error("{action} {}: {source}", path.display())]
pub struct WriteError {
    /// What was being done (`cannot write`, `cannot replace`, ...).
    pub action: &'static str,
    /// The path it was done to.
    pub path: PathBuf,
    /// Why it failed.
    #[source]
    pub source: std::io::Error,
}

fn failed(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> WriteError {
    let path = path.to_owned();
    move |source| WriteError { action, path, source }
}

/// Whether `file_name` is a temporary file of [`write_atomic`].
pub fn is_temp_file(file_name: &str) -> bool {
    file_name.starts_with('.') && file_name.contains(TEMP_MARKER)
}

/// Replaces `target` with `contents` atomically (creating its folder). The permissions of the
/// file being replaced are kept; the temporary file is removed on failure.
pub fn write_atomic(target: &Path, contents: &[u8]) -> Result<(), WriteError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let folder = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(failed("cannot create", folder))?;
    let file_name = target.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let temp = folder.join(format!(
        ".{file_name}{TEMP_MARKER}{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(failed("cannot create", &temp))?;
        if let Ok(existing) = std::fs::metadata(target) {
            file.set_permissions(existing.permissions())
                .map_err(failed("cannot set the permissions of", &temp))?;
        }
        file.write_all(contents).map_err(failed("cannot write", &temp))?;
        file.sync_all().map_err(failed("cannot sync", &temp))?;
        drop(file);
        std::fs::rename(&temp, target).map_err(failed("cannot replace", target))
    })();
    if result.is_err() {
        let _already_gone = std::fs::remove_file(&temp);
    }
    result?;
    sync_dir(folder)
}

/// Flushes a folder's entries to disk, so a rename or a removal survives a crash (Unix; a no-op
/// elsewhere).
pub fn sync_dir(folder: &Path) -> Result<(), WriteError> {
    #[cfg(unix)]
    File::open(folder)
        .and_then(|dir| dir.sync_all())
        .map_err(failed("cannot sync", folder))?;
    #[cfg(not(unix))]
    let _ = (folder, File::open);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_keeps_the_old_permissions_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("a.yaml");
        std::fs::write(&target, "old").expect("write");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        write_atomic(&target, b"new").expect("replaced");
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "new");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&target).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .filter_map(Result::ok)
            .filter(|e| is_temp_file(&e.file_name().to_string_lossy()))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_failed_replacement_leaves_the_target_and_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("folder");
        std::fs::create_dir(&target).expect("mkdir");
        let err = write_atomic(&target, b"x").expect_err("a folder cannot be replaced by a file");
        assert_eq!(err.action, "cannot replace");
        assert!(target.is_dir());
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }
}
