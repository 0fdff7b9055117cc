//! The names of the Valkey store's keys: the key prefix, a kind, and an id that is an HMAC of
//! what the key is for (a state, an owner and a server, an issuer, ...) under a key derived from
//! the encryption key. No state, session id, owner or issuer is in a key name, and nobody
//! without the encryption key can tell which key is whose.
//!
//! | key | type | holds | expiry |
//! |---|---|---|---|
//! | `<prefix>signin:pending:<id of state>` | string | the sealed pending sign-in (with its state) | its `expires_at` |
//! | `<prefix>signin:latest:<id of session, server>` | string | the id of the latest pending sign-in | the same |
//! | `<prefix>signin:client:<id of issuer>` | string | the sealed client registration | none |
//! | `<prefix>signin:grant:<id of owner, server>` | hash | `g`: generation, `s`: the sealed grant | none for a person or principal; a transport session's: the session grant TTL, from its last read |
//! | `<prefix>signin:grants:<id of owner>` | set | the server names of the owner's grants | as the owner's grants |
//! | `<prefix>signin:generation` | integer | the last generation given (INCR) | none |
//! | `<prefix>signin:attempts:<id of person>` | sorted set | sign-in attempts scored by their time (ms) | the window |
//! | `<prefix>signin:refresh:<id of owner, server>` | string | the token of the refresh that holds the lock | 10 s, renewed while held |
//! | `<prefix>exchange:<id of group>:<id of key>` | string | the sealed exchanged token (with its key) | its freshness |
//! | `<prefix>exchange-keys:<id of group>` | set | the entry keys of a group (`"<session>\0"`) | the longest entry's |
//! | `<prefix>exchange-lock:<id of key>` | string | the token of the exchange that holds the lock | 10 s, renewed while held |
//!
//! Sign-in notices are published on the channel `<prefix>signin:notices`.

use ring::hmac;

use crate::oauth::store::GrantStoreKey;

/// What the key names' HMAC key is derived with from the encryption key.
const NAMES_LABEL: &[u8] = b"muster valkey key names v1";

/// The names of one store's keys.
#[derive(Clone)]
pub(super) struct Keys {
    prefix: String,
    names: hmac::Key,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Keys {
    pub(super) fn new(prefix: &str, key: &GrantStoreKey) -> Self {
        Self {
            prefix: prefix.to_owned(),
            names: hmac::Key::new(hmac::HMAC_SHA256, &key.derive(NAMES_LABEL)),
        }
    }

    /// The hex HMAC of `parts` (each length-prefixed, so no two lists share it) under `kind`.
    pub(super) fn id(&self, kind: &str, parts: &[&str]) -> String {
        let mut context = hmac::Context::with_key(&self.names);
        for part in std::iter::once(kind).chain(parts.iter().copied()) {
            context.update(&(part.len() as u64).to_be_bytes());
            context.update(part.as_bytes());
        }
        hex(context.sign().as_ref())
    }

    fn name(&self, kind: &str, id: &str) -> String {
        format!("{}{kind}:{id}", self.prefix)
    }

    /// The id of a pending sign-in by its state.
    pub(super) fn state_id(&self, state: &str) -> String {
        self.id("state", &[state])
    }

    pub(super) fn pending(&self, state_id: &str) -> String {
        self.name("signin:pending", state_id)
    }

    pub(super) fn latest(&self, session: &str, server: &str) -> String {
        self.name("signin:latest", &self.id("latest", &[session, server]))
    }

    /// The registration key and the id its value is bound to.
    pub(super) fn registration(&self, issuer: &str) -> (String, String) {
        let id = self.id("client", &[issuer]);
        (self.name("signin:client", &id), id)
    }

    /// The grant key and the id its value is bound to.
    pub(super) fn grant(&self, owner: &str, server: &str) -> (String, String) {
        let id = self.id("grant", &[owner, server]);
        (self.name("signin:grant", &id), id)
    }

    pub(super) fn grants_of(&self, owner: &str) -> String {
        self.name("signin:grants", &self.id("owner", &[owner]))
    }

    pub(super) fn generation(&self) -> String {
        format!("{}signin:generation", self.prefix)
    }

    pub(super) fn attempts(&self, who: &str) -> String {
        self.name("signin:attempts", &self.id("attempts", &[who]))
    }

    pub(super) fn refresh(&self, owner: &str, server: &str) -> String {
        self.name("signin:refresh", &self.id("refresh", &[owner, server]))
    }

    /// The exchange entry key of `key`, the id its value is bound to, and its group's index.
    pub(super) fn exchange(&self, key: &str) -> (String, String, String) {
        let group = self.exchange_group(exchange_group_of(key));
        let id = self.id("exchange", &[key]);
        (
            format!("{}exchange:{group}:{id}", self.prefix),
            id,
            self.exchange_index(&group),
        )
    }

    /// The id of an exchange group (the part of a key up to its first `\0`, included).
    pub(super) fn exchange_group(&self, group: &str) -> String {
        self.id("exchange-group", &[group])
    }

    pub(super) fn exchange_index(&self, group_id: &str) -> String {
        self.name("exchange-keys", group_id)
    }

    /// The lock of the exchanges of `key` (not under `exchange:`, which [`Self::every_exchange`]
    /// matches).
    pub(super) fn exchange_lock(&self, key: &str) -> String {
        self.name("exchange-lock", &self.id("exchange-lock", &[key]))
    }

    /// The pub/sub channel of sign-in notices.
    pub(super) fn notices(&self) -> String {
        format!("{}signin:notices", self.prefix)
    }

    /// What every exchange entry key matches (for `SCAN MATCH`).
    pub(super) fn every_exchange(&self) -> String {
        format!("{}exchange:*", glob_escape(&self.prefix))
    }
}

/// The group of an exchange key: up to its first `\0`, included (`"<session>\0"`); the whole key
/// when it has none.
pub(super) fn exchange_group_of(key: &str) -> &str {
    key.find('\0').map_or(key, |at| &key[..=at])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `text` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_the_prefix_and_no_identifier_in_clear() {
        let keys = Keys::new("muster:", &GrantStoreKey::generate());
        let (grant, id) = keys.grant("session-secret-1", "github");
        assert!(grant.starts_with("muster:signin:grant:") && grant.ends_with(&id));
        assert!(!grant.contains("session-secret-1") && !grant.contains("github"));
        assert_ne!(
            keys.grant("ab", "c").0,
            keys.grant("a", "bc").0,
            "parts are length-prefixed"
        );
        let other = Keys::new("muster:", &GrantStoreKey::generate());
        assert_ne!(
            other.grant("session-secret-1", "github").0,
            grant,
            "names depend on the key"
        );
    }

    #[test]
    fn exchange_keys_of_one_session_share_a_group() {
        let keys = Keys::new("m:", &GrantStoreKey::generate());
        let (a, _, index_a) = keys.exchange("s1\0github");
        let (b, _, index_b) = keys.exchange("s1\0slack");
        let (_, _, index_c) = keys.exchange("s2\0github");
        assert_ne!(a, b);
        assert_eq!(index_a, index_b);
        assert_ne!(index_a, index_c);
        assert_eq!(index_a, keys.exchange_index(&keys.exchange_group("s1\0")));
        assert_eq!(exchange_group_of("nokey"), "nokey");
        assert_eq!(
            Keys::new("a*[b]:", &GrantStoreKey::generate()).every_exchange(),
            "a\\*\\[b\\]:exchange:*"
        );
    }
}
