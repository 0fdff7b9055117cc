//! Whose a grant is: [`owner_of`], and which owners outlive a transport ([`is_durable_owner`]).
//!
//! A grant's owner follows the server's `grantScope`: the session that signed in (`session`, the
//! default; behind the front door the session is the caller's principal), or the person
//! (`subject`: the issuer and subject the front door authenticated, so every session of that
//! person reuses it until `core_auth_logout`). A caller without a principal has no subject, so a
//! `subject` grant falls back to its session.

use muster_core::{Principal, SessionId, crd::GrantScope};
use sha2::{Digest, Sha256};

/// What the owner of a person's (`subject`) grants starts with.
const SUBJECT_PREFIX: &str = "subject-";

/// What the gateway's session of a front-door principal starts with (it comes back after a
/// restart, unlike a transport session).
const PRINCIPAL_PREFIX: &str = "principal-";

/// The owner of a grant for a server of `scope`, obtained by `session` with `principal`: the
/// session, or for `subject` the person (`subject-` and a hash of issuer and subject).
pub fn owner_of(session: &SessionId, principal: Option<&Principal>, scope: GrantScope) -> String {
    match (scope, principal) {
        (GrantScope::Subject, Some(p)) => {
            let mut digest = Sha256::new();
            for part in [p.issuer.as_deref().unwrap_or_default(), p.subject.as_str()] {
                digest.update(part.as_bytes());
                digest.update([0]);
            }
            let hex: String = digest.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
            format!("{SUBJECT_PREFIX}{hex}")
        }
        _ => session.as_str().to_owned(),
    }
}

/// Whether grants of `owner` outlive a transport: a person (`subject`) or a principal's session,
/// which come back after a restart, unlike a transport session. Their grants are the ones a
/// store keeps across restarts; a transport session's go when it ends.
pub fn is_durable_owner(owner: &str) -> bool {
    owner.starts_with(SUBJECT_PREFIX) || owner.starts_with(PRINCIPAL_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person(sub: &str) -> Principal {
        Principal::new(sub).with_issuer("https://idp")
    }

    #[test]
    fn a_subject_grant_belongs_to_the_person_a_session_grant_to_the_session() {
        let (a, b) = (SessionId::new("a"), SessionId::new("b"));
        let alice = person("alice");
        let subject = owner_of(&a, Some(&alice), GrantScope::Subject);
        assert_eq!(subject, owner_of(&b, Some(&alice), GrantScope::Subject));
        assert_ne!(subject, owner_of(&a, Some(&person("bob")), GrantScope::Subject));
        assert_eq!(owner_of(&a, Some(&alice), GrantScope::Session), "a");
        // Without a principal there is no person: the session owns it.
        assert_eq!(owner_of(&a, None, GrantScope::Subject), "a");
        assert!(is_durable_owner(&subject) && !is_durable_owner("a") && is_durable_owner("principal-00"));
    }
}
