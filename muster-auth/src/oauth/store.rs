//! [`EncryptedGrantStore`]: people's grants on disk, encrypted, so they survive a restart.
//!
//! The gateway keeps grants in memory. With a store configured (it is opt-in) it also writes
//! each grant to a file of its own and reads them all back when it starts:
//!
//! - one file per owner (a session id or `subject:<...>`) and server, named by the hex SHA-256 of
//!   the two (`<64 hex digits>.grant`): no file name is ever made from the raw owner or server;
//! - sealed with AES-256-GCM under a [`GrantStoreKey`] (32 random bytes, kept as base64 in a file
//!   or a variable; `openssl rand -base64 32` makes one) with a fresh random 96-bit nonce per
//!   write. The file's name, and so the owner and server, is associated data: a file moved onto
//!   another owner's name does not open;
//! - written atomically: a temporary file created `0600` in the same directory, synced, renamed
//!   over the target, and the directory synced. The directory is created `0700`;
//! - [`EncryptedGrantStore::load_all`] skips, with a warning naming the file (never its
//!   contents), any file it cannot open: another key, corrupted, truncated. One bad file never
//!   takes the store down. Temporary files a crash left behind are removed by
//!   [`EncryptedGrantStore::open`].
//!
//! A file is `MGRANT`, a format version byte (1), the 12-byte nonce, then the sealed JSON record
//! (owner, server, grant) and its 16-byte tag. The cipher is shared with the Valkey sign-in
//! state store (feature `valkey`), which seals its values the same way under the same key. Nothing else in muster can serialize a grant: the
//! record types are private to this module and [`Secret`](crate::Secret) is not `Serialize`.
//!
//! The calls block on file I/O; from async code, run them in `tokio::task::spawn_blocking` (the
//! store is cheap to clone). One process owns a directory.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use muster_auth::{
//!     Secret,
//!     oauth::{
//!         grant::Grant,
//!         registration::ClientRegistration,
//!         store::{EncryptedGrantStore, GrantStoreKey},
//!     },
//! };
//!
//! let dir = tempfile::tempdir()?;
//! // In production the key comes from `GrantStoreKey::from_file`, so it outlives the process.
//! let key = GrantStoreKey::generate();
//! let grant = Grant {
//!     access_token: Secret::new("access-token"),
//!     refresh_token: Some(Secret::new("refresh-token")),
//!     expires_at: None,
//!     scope: Some("repo".to_owned()),
//!     issuer: "https://auth.example.com".to_owned(),
//!     token_endpoint: "https://auth.example.com/token".to_owned(),
//!     revocation_endpoint: None,
//!     client: ClientRegistration::pre_registered("muster", None),
//!     resource: "https://mcp.example.com/mcp".to_owned(),
//!     rotates_refresh_tokens: None,
//! };
//! let store = EncryptedGrantStore::open(dir.path(), key.clone())?;
//! store.save("session-1", "github", &grant)?;
//!
//! // After a restart, with the same key:
//! let store = EncryptedGrantStore::open(dir.path(), key)?;
//! let stored = store.load_all()?;
//! assert_eq!((stored[0].owner.as_str(), stored[0].server.as_str()), ("session-1", "github"));
//! assert!(stored[0].grant.access_token.matches("access-token"));
//!
//! // Another key opens nothing (and says so in a warning per file).
//! let other = EncryptedGrantStore::open(dir.path(), GrantStoreKey::generate())?;
//! assert!(other.load_all()?.is_empty());
//! # Ok(())
//! # }
//! ```

use std::{
    ffi::OsStr,
    fmt,
    fs::{self, File, OpenOptions},
    io::{self, Read, Write},
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
};

use base64::{
    Engine, alphabet,
    engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig},
};
use muster_core::fs::{TEMP_MARKER, is_temp_file};
use sha2::{Digest, Sha256};

use self::{
    record::{GrantRecord, Record},
    seal::{Header, OpenProblem, Sealer},
};
use super::grant::Grant;

pub(crate) mod record;
pub(crate) mod seal;

/// The length of a [`GrantStoreKey`] in bytes (AES-256).
pub const KEY_LEN: usize = 32;

/// What every grant file starts with: `MGRANT` and the format version.
const HEADER: Header = Header {
    magic: b"MGRANT",
    version: 1,
};
/// The length of a file id (a SHA-256).
const ID_LEN: usize = 32;
/// A grant file's extension.
const EXTENSION: &str = "grant";
/// No grant comes near this; a larger file is skipped unread.
const MAX_FILE_LEN: u64 = 1 << 20;

/// The key grant files are sealed with: 32 bytes. `Debug` shows `[redacted]`, and no error
/// message contains it or the text it was parsed from.
#[derive(Clone)]
pub struct GrantStoreKey([u8; KEY_LEN]);

impl GrantStoreKey {
    /// The key in `text`: standard or URL-safe base64 (padded or not, surrounding whitespace
    /// ignored) of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, GrantStoreError> {
        Self::parse(text).map_err(|problem| GrantStoreError::InvalidKey { problem })
    }

    /// The key in the file at `path`, which holds it as in [`GrantStoreKey::from_base64`].
    pub fn from_file(path: &Path) -> Result<Self, GrantStoreError> {
        let bytes = fs::read(path).map_err(|source| GrantStoreError::ReadKeyFile {
            path: path.to_owned(),
            source,
        })?;
        std::str::from_utf8(&bytes)
            .map_err(|_| KeyProblem::NotBase64)
            .and_then(Self::parse)
            .map_err(|problem| GrantStoreError::InvalidKeyFile {
                path: path.to_owned(),
                problem,
            })
    }

    /// A random key. For tests: a store's key has to outlive the process, so in production it
    /// comes from [`GrantStoreKey::from_file`] or [`GrantStoreKey::from_base64`].
    pub fn generate() -> Self {
        let mut bytes = [0u8; KEY_LEN];
        if let Err(e) = getrandom::fill(&mut bytes) {
            panic!("the operating system's random source failed: {e}");
        }
        Self(bytes)
    }

    /// A key for another purpose, derived from this one: HMAC-SHA256 of `label` under it.
    /// (The Valkey store names its keys with one, so that names reveal nothing without the key.)
    #[cfg_attr(not(feature = "valkey"), allow(dead_code))]
    pub(crate) fn derive(&self, label: &[u8]) -> [u8; KEY_LEN] {
        let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &self.0), label);
        let mut derived = [0u8; KEY_LEN];
        derived.copy_from_slice(tag.as_ref());
        derived
    }

    fn parse(text: &str) -> Result<Self, KeyProblem> {
        let text = text.trim();
        if text.is_empty() {
            return Err(KeyProblem::Empty);
        }
        let alphabet = if text.contains(['-', '_']) {
            &alphabet::URL_SAFE
        } else {
            &alphabet::STANDARD
        };
        let config = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
        let bytes = GeneralPurpose::new(alphabet, config)
            .decode(text)
            .map_err(|_| KeyProblem::NotBase64)?;
        let key =
            <[u8; KEY_LEN]>::try_from(bytes.as_slice()).map_err(|_| KeyProblem::WrongLength { got: bytes.len() })?;
        Ok(Self(key))
    }
}

impl fmt::Debug for GrantStoreKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GrantStoreKey([redacted])")
    }
}

/// What is wrong with a grant store key's text (never the text itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyProblem {
    /// There is nothing but whitespace.
    #[error("it is empty")]
    Empty,
    /// It is not base64.
    #[error("it is not base64 (standard or URL-safe)")]
    NotBase64,
    /// It is base64 of the wrong number of bytes.
    #[error("it decodes to {got} bytes, not {KEY_LEN}")]
    WrongLength {
        /// How many bytes it decodes to.
        got: usize,
    },
}

/// Why a grant store operation failed. Messages name the path and the problem; they never
/// contain a token, a key or an owner.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GrantStoreError {
    /// The key given as text is not a key.
    #[error("invalid grant store key: {problem}")]
    InvalidKey {
        /// What is wrong with it.
        problem: KeyProblem,
    },
    /// The key file does not hold a key.
    #[error("invalid grant store key in {}: {problem}", path.display())]
    InvalidKeyFile {
        /// The key file.
        path: PathBuf,
        /// What is wrong with its contents.
        problem: KeyProblem,
    },
    /// The key file cannot be read.
    #[error("cannot read the grant store key file {}: {source}", path.display())]
    ReadKeyFile {
        /// The key file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The store's directory cannot be created.
    #[error("cannot create the grant store directory {}: {source}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The store's directory cannot be listed.
    #[error("cannot list the grant store directory {}: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A grant file cannot be written (or sealed: no random nonce).
    #[error("cannot write the grant file {}: {source}", path.display())]
    Write {
        /// The grant file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A grant file cannot be removed.
    #[error("cannot remove the grant file {}: {source}", path.display())]
    Remove {
        /// The grant file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A grant read back by [`EncryptedGrantStore::load_all`].
#[derive(Debug, Clone)]
pub struct StoredGrant {
    /// Whose it is, as given to [`EncryptedGrantStore::save`].
    pub owner: String,
    /// The MCPServer it is for.
    pub server: String,
    /// The grant.
    pub grant: Grant,
}

/// Grants in a directory, one AES-256-GCM sealed file each. See the [module docs](self).
#[derive(Clone)]
pub struct EncryptedGrantStore {
    dir: PathBuf,
    sealer: Sealer,
}

impl fmt::Debug for EncryptedGrantStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptedGrantStore")
            .field("dir", &self.dir)
            .field("key", &format_args!("[redacted]"))
            .finish()
    }
}

impl EncryptedGrantStore {
    /// The store in `dir`, created (`0700`) when missing. Temporary files an interrupted write
    /// left behind are removed.
    pub fn open(dir: &Path, key: GrantStoreKey) -> Result<Self, GrantStoreError> {
        create_private_dir(dir).map_err(|source| GrantStoreError::CreateDir {
            path: dir.to_owned(),
            source,
        })?;
        warn_if_shared(dir);
        let store = Self {
            dir: dir.to_owned(),
            sealer: Sealer::new(&key),
        };
        store.remove_temp_files()?;
        Ok(store)
    }

    /// The directory the grants are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stores `grant` as `owner`'s for `server`, replacing the one stored before.
    pub fn save(&self, owner: &str, server: &str, grant: &Grant) -> Result<(), GrantStoreError> {
        let id = FileId::of(owner, server);
        let path = self.path(&id);
        let record = Record {
            owner: owner.to_owned(),
            server: server.to_owned(),
            grant: GrantRecord::from(grant),
        };
        let plaintext = serde_json::to_vec(&record).expect("a grant record serializes: strings, options and a date");
        let write_error = |source| GrantStoreError::Write {
            path: path.clone(),
            source,
        };
        let contents = self.sealer.seal(HEADER, &id.0, plaintext).map_err(write_error)?;
        write_private_atomic(&self.dir, &path, &contents).map_err(write_error)
    }

    /// Removes `owner`'s grant for `server`; whether there was one.
    pub fn remove(&self, owner: &str, server: &str) -> Result<bool, GrantStoreError> {
        let path = self.path(&FileId::of(owner, server));
        match fs::remove_file(&path).and_then(|()| sync_dir(&self.dir)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(GrantStoreError::Remove { path, source }),
        }
    }

    /// Every grant that opens with this store's key, by owner then server. A file that does not
    /// (another key, corrupted, truncated, moved from another name) is skipped with a warning.
    pub fn load_all(&self) -> Result<Vec<StoredGrant>, GrantStoreError> {
        let list_error = |source| GrantStoreError::ReadDir {
            path: self.dir.clone(),
            source,
        };
        let mut grants = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(list_error)? {
            let entry = entry.map_err(list_error)?;
            let Some(id) = FileId::from_file_name(&entry.file_name()) else {
                continue;
            };
            let path = entry.path();
            let loaded = match entry.file_type() {
                Ok(kind) if kind.is_file() => self.load_file(&path, &id),
                Ok(_) => Err(LoadProblem::NotAFile),
                Err(e) => Err(LoadProblem::Unreadable(e)),
            };
            match loaded {
                Ok(grant) => grants.push(grant),
                Err(problem) => tracing::warn!(
                    path = %path.display(),
                    %problem,
                    "skipping a grant file that cannot be loaded"
                ),
            }
        }
        grants.sort_by(|a, b| (&a.owner, &a.server).cmp(&(&b.owner, &b.server)));
        Ok(grants)
    }

    fn path(&self, id: &FileId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    fn load_file(&self, path: &Path, id: &FileId) -> Result<StoredGrant, LoadProblem> {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|file| file.take(MAX_FILE_LEN + 1).read_to_end(&mut bytes))
            .map_err(LoadProblem::Unreadable)?;
        if bytes.len() as u64 > MAX_FILE_LEN {
            return Err(LoadProblem::TooLarge);
        }
        let plaintext = self
            .sealer
            .open(HEADER, &id.0, &mut bytes)
            .map_err(LoadProblem::Sealed)?;
        let record: Record = serde_json::from_slice(plaintext).map_err(|_| LoadProblem::NotARecord)?;
        if FileId::of(&record.owner, &record.server) != *id {
            return Err(LoadProblem::Misplaced);
        }
        Ok(StoredGrant {
            owner: record.owner,
            server: record.server,
            grant: record.grant.into(),
        })
    }

    fn remove_temp_files(&self) -> Result<(), GrantStoreError> {
        let list_error = |source| GrantStoreError::ReadDir {
            path: self.dir.clone(),
            source,
        };
        for entry in fs::read_dir(&self.dir).map_err(list_error)? {
            let entry = entry.map_err(list_error)?;
            let name = entry.file_name();
            let ours = name
                .to_str()
                .is_some_and(|n| is_temp_file(n) && n.contains(&format!(".{EXTENSION}{TEMP_MARKER}")));
            if !ours {
                continue;
            }
            match fs::remove_file(entry.path()) {
                Ok(()) => tracing::debug!(path = %entry.path().display(), "removed an interrupted grant write"),
                Err(e) => tracing::warn!(
                    path = %entry.path().display(),
                    error = %e,
                    "cannot remove an interrupted grant write"
                ),
            }
        }
        Ok(())
    }
}

/// Why one file was skipped. Says nothing of the file's contents.
#[derive(Debug)]
enum LoadProblem {
    Unreadable(io::Error),
    NotAFile,
    TooLarge,
    Sealed(OpenProblem),
    NotARecord,
    Misplaced,
}

impl fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreadable(e) => write!(f, "cannot read it: {e}"),
            Self::NotAFile => f.write_str("it is not a regular file"),
            Self::TooLarge => write!(f, "it is larger than {MAX_FILE_LEN} bytes, which no grant is"),
            Self::Sealed(problem) => problem.fmt(f),
            Self::NotARecord => f.write_str("it decrypts but holds no grant record"),
            Self::Misplaced => f.write_str("its grant belongs under another file name"),
        }
    }
}

/// A file's identity: the SHA-256 of the owner (length-prefixed, so no two pairs share it) and
/// the server. Its hex is the file name; with the header it is the associated data.
#[derive(PartialEq, Eq)]
struct FileId([u8; ID_LEN]);

impl FileId {
    fn of(owner: &str, server: &str) -> Self {
        let digest = Sha256::new()
            .chain_update((owner.len() as u64).to_be_bytes())
            .chain_update(owner)
            .chain_update(server)
            .finalize();
        Self(digest.into())
    }

    fn file_name(&self) -> String {
        let mut name = String::with_capacity(ID_LEN * 2 + 1 + EXTENSION.len());
        for byte in self.0 {
            name.push(char::from(HEX[usize::from(byte >> 4)]));
            name.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
        name.push('.');
        name.push_str(EXTENSION);
        name
    }

    /// The id a grant file's name spells; `None` for any other file.
    fn from_file_name(name: &OsStr) -> Option<Self> {
        let hex = name.to_str()?.strip_suffix(EXTENSION)?.strip_suffix('.')?;
        if hex.len() != ID_LEN * 2 {
            return None;
        }
        let digit = |c: u8| HEX.iter().position(|&h| h == c).and_then(|d| u8::try_from(d).ok());
        let mut id = [0u8; ID_LEN];
        for (byte, pair) in id.iter_mut().zip(hex.as_bytes().chunks_exact(2)) {
            *byte = digit(pair[0])? << 4 | digit(pair[1])?;
        }
        Some(Self(id))
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn create_private_dir(dir: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// A directory made by someone else may be open to other users; the files stay `0600`.
fn warn_if_shared(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = fs::metadata(dir) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                tracing::warn!(
                    path = %dir.display(),
                    mode = format_args!("{mode:o}"),
                    "the grant store directory is open to other users; consider chmod 700"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Replaces `target` (in `dir`) with `contents`: a new `0600` file beside it, synced, renamed
/// over it, and the directory synced. The temporary file is removed on failure.
fn write_private_atomic(dir: &Path, target: &Path, contents: &[u8]) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = target.file_name().and_then(OsStr::to_str).unwrap_or(EXTENSION);
    let temp = dir.join(format!(
        ".{name}{TEMP_MARKER}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let result = options.open(&temp).and_then(|mut file| {
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, target)?;
        sync_dir(dir)
    });
    if result.is_err() {
        let _already_gone = fs::remove_file(&temp);
    }
    result
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    return File::open(dir)?.sync_all();
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
