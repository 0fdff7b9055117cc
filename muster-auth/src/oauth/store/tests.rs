use std::{
    os::unix::fs::PermissionsExt,
    sync::{Arc, Mutex},
};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chrono::{TimeZone, Utc};
use ring::aead::NONCE_LEN;

use super::*;
use crate::{
    Secret,
    oauth::registration::{ClientRegistration, RegistrationKind},
};

fn grant(token: &str) -> Grant {
    Grant {
        access_token: Secret::new(format!("{token}-access")),
        refresh_token: Some(Secret::new(format!("{token}-refresh"))),
        expires_at: Some(
            Utc.with_ymd_and_hms(2030, 1, 2, 3, 4, 5)
                .single()
                .expect("a valid date"),
        ),
        scope: Some("repo read:org".to_owned()),
        issuer: "https://auth.example.com".to_owned(),
        token_endpoint: "https://auth.example.com/token".to_owned(),
        revocation_endpoint: Some("https://auth.example.com/revoke".to_owned()),
        client: ClientRegistration {
            client_id: "muster-client".to_owned(),
            client_secret: Some(Secret::new(format!("{token}-client-secret"))),
            kind: RegistrationKind::Dynamic,
        },
        resource: "https://mcp.example.com/mcp".to_owned(),
        rotates_refresh_tokens: Some(false),
    }
}

fn store(dir: &Path, key: &GrantStoreKey) -> EncryptedGrantStore {
    EncryptedGrantStore::open(dir, key.clone()).expect("opens")
}

fn file_of(store: &EncryptedGrantStore, owner: &str, server: &str) -> PathBuf {
    store.path(&FileId::of(owner, server))
}

fn tokens(stored: &StoredGrant) -> (&str, &str, &str, &str) {
    (
        stored.owner.as_str(),
        stored.server.as_str(),
        stored.grant.access_token.expose(),
        stored.grant.refresh_token.as_ref().map_or("", Secret::expose),
    )
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("exists").permissions().mode() & 0o777
}

/// Runs `f` with `tracing` output captured; returns its result and the text logged.
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.lock().expect("not poisoned").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buffer.0.lock().expect("not poisoned").clone()).expect("utf-8");
    (result, text)
}

#[test]
fn a_saved_grant_loads_back_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = GrantStoreKey::generate();
    let original = grant("alice");
    store(dir.path(), &key)
        .save("session-1", "github", &original)
        .expect("saves");

    let loaded = store(dir.path(), &key).load_all().expect("loads");
    assert_eq!(loaded.len(), 1);
    let StoredGrant { owner, server, grant } = &loaded[0];
    assert_eq!((owner.as_str(), server.as_str()), ("session-1", "github"));
    assert!(grant.access_token.matches("alice-access"));
    assert_eq!(grant.refresh_token, original.refresh_token);
    assert_eq!(grant.expires_at, original.expires_at);
    assert_eq!(grant.scope, original.scope);
    assert_eq!(grant.issuer, original.issuer);
    assert_eq!(grant.token_endpoint, original.token_endpoint);
    assert_eq!(grant.revocation_endpoint, original.revocation_endpoint);
    assert_eq!(grant.resource, original.resource);
    assert_eq!(grant.rotates_refresh_tokens, Some(false));
    assert_eq!(grant.client.client_id, "muster-client");
    assert_eq!(grant.client.client_secret, original.client.client_secret);
    assert_eq!(grant.client.kind, RegistrationKind::Dynamic);
}

#[test]
fn a_grant_sealed_before_rotation_was_learnt_opens_as_not_known_yet() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = GrantStoreKey::generate();
    let store = store(dir.path(), &key);
    // The record as sealed before grants learnt whether their refresh token rotates: no
    // `rotates_refresh_tokens`.
    let old = serde_json::json!({
        "owner": "subject:alice",
        "server": "github",
        "grant": {
            "access_token": "old-access",
            "refresh_token": "old-refresh",
            "expires_at": null,
            "scope": "repo",
            "issuer": "https://auth.example.com",
            "token_endpoint": "https://auth.example.com/token",
            "revocation_endpoint": null,
            "client": {"client_id": "muster-client", "client_secret": null, "kind": "pre_registered"},
            "resource": "https://mcp.example.com/mcp",
        },
    });
    let id = FileId::of("subject:alice", "github");
    let plaintext = serde_json::to_vec(&old).expect("json");
    let sealed = store.sealer.seal(HEADER, &id.0, plaintext).expect("seals");
    fs::write(store.path(&id), sealed).expect("writes");

    let loaded = store.load_all().expect("loads");
    assert_eq!(loaded.len(), 1, "the old record opens");
    let grant = &loaded[0].grant;
    assert!(grant.access_token.matches("old-access"));
    assert_eq!(grant.rotates_refresh_tokens, None);

    // Saved again without knowing, it keeps the old shape.
    store.save("subject:alice", "github", grant).expect("saves");
    let mut bytes = fs::read(store.path(&id)).expect("reads");
    let plaintext = store.sealer.open(HEADER, &id.0, &mut bytes).expect("opens");
    let record: serde_json::Value = serde_json::from_slice(plaintext).expect("json");
    assert_eq!(record, old);
}

#[test]
fn a_grant_without_optional_parts_loads_back_without_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = GrantStoreKey::generate();
    let bare = Grant {
        refresh_token: None,
        expires_at: None,
        scope: None,
        revocation_endpoint: None,
        client: ClientRegistration::metadata_document("https://muster.example.com/client.json"),
        ..grant("bare")
    };
    let store = store(dir.path(), &key);
    store.save("subject:bob", "jira", &bare).expect("saves");

    let loaded = store.load_all().expect("loads");
    let grant = &loaded[0].grant;
    assert!(grant.refresh_token.is_none() && grant.expires_at.is_none() && grant.scope.is_none());
    assert!(grant.revocation_endpoint.is_none() && grant.client.client_secret.is_none());
    assert_eq!(grant.client.kind, RegistrationKind::MetadataDocument);
}

#[test]
fn two_owners_of_one_server_are_kept_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store.save("session-a", "github", &grant("a")).expect("saves");
    store.save("session-b", "github", &grant("b")).expect("saves");
    store.save("session-a", "jira", &grant("a-jira")).expect("saves");

    let loaded = store.load_all().expect("loads");
    let loaded: Vec<_> = loaded.iter().map(tokens).collect();
    assert_eq!(
        loaded,
        [
            ("session-a", "github", "a-access", "a-refresh"),
            ("session-a", "jira", "a-jira-access", "a-jira-refresh"),
            ("session-b", "github", "b-access", "b-refresh"),
        ]
    );
}

#[test]
fn owner_and_server_boundaries_do_not_collide() {
    assert!(FileId::of("ab", "c") != FileId::of("a", "bc"));
    assert!(FileId::of("a\0b", "c") != FileId::of("a", "b\0c"));
}

#[test]
fn saving_again_replaces_the_grant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store.save("session-1", "github", &grant("old")).expect("saves");
    store.save("session-1", "github", &grant("new")).expect("saves");

    let loaded = store.load_all().expect("loads");
    assert_eq!(loaded.len(), 1);
    assert!(loaded[0].grant.access_token.matches("new-access"));
    assert_eq!(
        fs::read_dir(dir.path()).expect("lists").count(),
        1,
        "no temporary file is left"
    );
}

#[test]
fn a_removed_grant_is_gone_and_others_stay() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store.save("session-a", "github", &grant("a")).expect("saves");
    store.save("session-b", "github", &grant("b")).expect("saves");

    assert!(store.remove("session-a", "github").expect("removes"));
    assert!(!store.remove("session-a", "github").expect("nothing to remove is fine"));
    let loaded = store.load_all().expect("loads");
    assert_eq!(
        loaded.iter().map(|s| s.owner.as_str()).collect::<Vec<_>>(),
        ["session-b"]
    );
}

#[test]
fn files_sealed_with_another_key_are_skipped_with_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (old_key, new_key) = (GrantStoreKey::generate(), GrantStoreKey::generate());
    store(dir.path(), &old_key)
        .save("session-old", "github", &grant("old"))
        .expect("saves");
    store(dir.path(), &new_key)
        .save("session-new", "github", &grant("new"))
        .expect("saves");

    let (loaded, log) = logged(|| store(dir.path(), &new_key).load_all());
    let loaded = loaded.expect("a wrong key does not fail the store");
    assert_eq!(
        loaded.iter().map(|s| s.owner.as_str()).collect::<Vec<_>>(),
        ["session-new"]
    );
    let skipped = file_of(&store(dir.path(), &old_key), "session-old", "github");
    assert!(log.contains("skipping a grant file"), "{log}");
    assert!(
        log.contains(&skipped.display().to_string()),
        "the warning names the file: {log}"
    );
    assert!(!log.contains("session-old") && !log.contains("old-access"), "{log}");
}

#[test]
fn a_file_moved_onto_another_owners_name_does_not_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store
        .save("session-mallory", "github", &grant("mallory"))
        .expect("saves");
    store.save("session-alice", "github", &grant("alice")).expect("saves");
    let mallory = file_of(&store, "session-mallory", "github");
    let alice = file_of(&store, "session-alice", "github");
    fs::copy(&mallory, &alice).expect("copies");

    // Refused by the cipher itself (the name is associated data), before any check of the contents.
    let problem = store.load_file(&alice, &FileId::of("session-alice", "github")).err();
    assert!(
        matches!(problem, Some(LoadProblem::Sealed(OpenProblem::DoesNotOpen))),
        "{problem:?}"
    );

    let loaded = store.load_all().expect("loads");
    assert_eq!(
        loaded.iter().map(tokens).collect::<Vec<_>>(),
        [("session-mallory", "github", "mallory-access", "mallory-refresh")]
    );
}

#[test]
fn truncated_and_garbage_files_are_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    for owner in ["truncated", "garbage", "flipped", "future", "empty", "kept"] {
        store.save(owner, "github", &grant(owner)).expect("saves");
    }
    let path = |owner| file_of(&store, owner, "github");
    let bytes = fs::read(path("truncated")).expect("reads");
    fs::write(path("truncated"), &bytes[..bytes.len() - 1]).expect("writes");
    fs::write(path("garbage"), b"not a grant file at all, just some text").expect("writes");
    let mut flipped = fs::read(path("flipped")).expect("reads");
    let middle = flipped.len() / 2;
    flipped[middle] ^= 1;
    fs::write(path("flipped"), flipped).expect("writes");
    let mut future = fs::read(path("future")).expect("reads");
    future[HEADER.magic.len()] = HEADER.version + 1;
    fs::write(path("future"), future).expect("writes");
    fs::write(path("empty"), b"").expect("writes");
    fs::create_dir(dir.path().join(FileId::of("a directory", "x").file_name())).expect("creates");

    let (loaded, log) = logged(|| store.load_all());
    let loaded = loaded.expect("bad files do not fail the store");
    assert_eq!(loaded.iter().map(|s| s.owner.as_str()).collect::<Vec<_>>(), ["kept"]);
    assert_eq!(log.matches("skipping a grant file").count(), 6, "{log}");
}

#[test]
fn files_that_are_not_grant_files_are_ignored() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::write(dir.path().join("README"), "notes").expect("writes");
    fs::write(dir.path().join("not-hex.grant"), "x").expect("writes");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store.save("session-1", "github", &grant("a")).expect("saves");

    let (loaded, log) = logged(|| store.load_all());
    assert_eq!(loaded.expect("loads").len(), 1);
    assert!(log.is_empty(), "{log}");
}

#[test]
fn interrupted_writes_are_removed_on_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = GrantStoreKey::generate();
    store(dir.path(), &key)
        .save("session-1", "github", &grant("a"))
        .expect("saves");
    let leftover = dir.path().join(format!(
        ".{}{TEMP_MARKER}123-0",
        FileId::of("session-2", "github").file_name()
    ));
    fs::write(&leftover, b"half a file").expect("writes");
    let unrelated = dir.path().join(".notes.txt.tmp-1-2");
    fs::write(&unrelated, b"someone else's").expect("writes");

    let store = store(dir.path(), &key);
    assert!(!leftover.exists());
    assert!(unrelated.exists(), "only the store's own temporary files are removed");
    assert_eq!(store.load_all().expect("loads").len(), 1);
}

#[test]
fn the_directory_is_0700_and_files_are_0600() {
    let parent = tempfile::tempdir().expect("tempdir");
    let dir = parent.path().join("grants").join("nested");
    let store = store(&dir, &GrantStoreKey::generate());
    store.save("session-1", "github", &grant("a")).expect("saves");

    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&file_of(&store, "session-1", "github")), 0o600);
    // Still 0600 after replacing a file someone loosened.
    fs::set_permissions(
        file_of(&store, "session-1", "github"),
        fs::Permissions::from_mode(0o644),
    )
    .expect("chmod");
    store.save("session-1", "github", &grant("b")).expect("saves");
    assert_eq!(mode(&file_of(&store, "session-1", "github")), 0o600);
}

#[test]
fn no_secret_owner_or_server_appears_in_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    store
        .save("session-secret-owner", "secret-server", &grant("tok"))
        .expect("saves");

    let path = file_of(&store, "session-secret-owner", "secret-server");
    let name = path.file_name().and_then(OsStr::to_str).expect("a name");
    assert!(name.ends_with(".grant") && name.len() == 64 + ".grant".len(), "{name}");
    let bytes = fs::read(&path).expect("reads");
    assert!(bytes.starts_with(b"MGRANT\x01"));
    for plain in [
        "tok-access",
        "tok-refresh",
        "tok-client-secret",
        "session-secret-owner",
        "secret-server",
    ] {
        assert!(
            !bytes.windows(plain.len()).any(|w| w == plain.as_bytes()),
            "{plain} is in the file"
        );
    }
}

#[test]
fn each_write_uses_a_fresh_nonce() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = store(dir.path(), &GrantStoreKey::generate());
    let path = file_of(&store, "session-1", "github");
    store.save("session-1", "github", &grant("same")).expect("saves");
    let first = fs::read(&path).expect("reads");
    store.save("session-1", "github", &grant("same")).expect("saves");
    let second = fs::read(&path).expect("reads");
    assert_ne!(
        first[Header::LEN..Header::LEN + NONCE_LEN],
        second[Header::LEN..Header::LEN + NONCE_LEN]
    );
}

#[test]
fn keys_parse_from_standard_and_url_safe_base64() {
    let bytes: Vec<u8> = (0..32).map(|i| i * 7 + 250).map(|b: u32| (b % 256) as u8).collect();
    for text in [
        STANDARD.encode(&bytes),
        URL_SAFE_NO_PAD.encode(&bytes),
        format!("  {}\n", STANDARD.encode(&bytes)),
    ] {
        let key = GrantStoreKey::from_base64(&text).expect("parses");
        assert_eq!(key.0.as_slice(), bytes.as_slice(), "{text}");
    }
}

#[test]
fn a_key_loaded_from_a_file_opens_what_it_sealed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("grant-store.key");
    fs::write(&key_file, format!("{}\n", STANDARD.encode([9u8; KEY_LEN]))).expect("writes");
    let grants = dir.path().join("grants");
    let key = GrantStoreKey::from_file(&key_file).expect("reads the key");
    store(&grants, &key)
        .save("session-1", "github", &grant("a"))
        .expect("saves");

    let again = GrantStoreKey::from_file(&key_file).expect("reads the key");
    assert_eq!(store(&grants, &again).load_all().expect("loads").len(), 1);
}

#[test]
fn bad_keys_are_refused_without_echoing_them() {
    let short = STANDARD.encode([7u8; 16]);
    let long = STANDARD.encode([7u8; 33]);
    let not_base64 = "this-is-not-base64!!but-is-quite-long-and-secret";
    for (text, problem) in [
        (short.as_str(), KeyProblem::WrongLength { got: 16 }),
        (long.as_str(), KeyProblem::WrongLength { got: 33 }),
        (not_base64, KeyProblem::NotBase64),
        (" \n", KeyProblem::Empty),
    ] {
        let error = GrantStoreKey::from_base64(text).expect_err("refused");
        assert!(
            matches!(error, GrantStoreError::InvalidKey { problem: p } if p == problem),
            "{error:?}"
        );
        let shown = format!("{error} {error:?}");
        assert!(text.trim().is_empty() || !shown.contains(text.trim()), "{shown}");
        assert!(!shown.contains("BwcH"), "no part of the key shows: {shown}");
    }
    assert_eq!(
        GrantStoreKey::from_base64(&short).expect_err("refused").to_string(),
        "invalid grant store key: it decodes to 16 bytes, not 32"
    );
}

#[test]
fn bad_key_files_are_named_in_the_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key_file = dir.path().join("grant-store.key");
    let secret_text = STANDARD.encode([5u8; 31]);
    fs::write(&key_file, &secret_text).expect("writes");

    let error = GrantStoreKey::from_file(&key_file).expect_err("refused");
    let shown = error.to_string();
    assert!(
        shown.contains(&key_file.display().to_string()) && shown.contains("31 bytes"),
        "{shown}"
    );
    assert!(!format!("{shown} {error:?}").contains(&secret_text), "{shown}");

    fs::write(&key_file, [0xff, 0xfe, 0x00]).expect("writes");
    let error = GrantStoreKey::from_file(&key_file).expect_err("refused");
    assert!(matches!(
        error,
        GrantStoreError::InvalidKeyFile {
            problem: KeyProblem::NotBase64,
            ..
        }
    ));

    let missing = dir.path().join("missing.key");
    let error = GrantStoreKey::from_file(&missing).expect_err("refused");
    assert!(matches!(error, GrantStoreError::ReadKeyFile { .. }));
    assert!(error.to_string().contains(&missing.display().to_string()));
}

#[test]
fn keys_and_stores_do_not_show_the_key_in_debug() {
    let key = GrantStoreKey::from_base64(&STANDARD.encode([3u8; KEY_LEN])).expect("parses");
    assert_eq!(format!("{key:?}"), "GrantStoreKey([redacted])");
    let dir = tempfile::tempdir().expect("tempdir");
    let shown = format!("{:?}", store(dir.path(), &key));
    assert!(shown.contains("[redacted]") && !shown.contains("AwMD"), "{shown}");
}

#[test]
fn a_store_cannot_be_opened_over_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("grants");
    fs::write(&file, "").expect("writes");
    let error = EncryptedGrantStore::open(&file, GrantStoreKey::generate()).expect_err("refused");
    assert!(matches!(error, GrantStoreError::CreateDir { .. }));
    assert!(error.to_string().contains(&file.display().to_string()), "{error}");
}
