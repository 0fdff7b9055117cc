//! Sign-ins completed on another replica: the replica that issued the link (and so holds the
//! session) hears the [`SignInNotice`] the completing one published, connects the session with
//! the grant from the store, tells its client (`notifications/elicitation/complete`) and lets a
//! retry that waits for the sign-in go on.

use std::sync::{Arc, Weak};

use muster_auth::state::SignInNotice;
use muster_core::SessionId;
use tokio::sync::broadcast::error::RecvError;

use super::{SignInService, connect_as, outcome::Outcome};
use crate::{registry::Registry, upstream::Egress};

impl SignInService {
    /// Listens to the notices of sign-ins completed elsewhere while `registry` lives. Does nothing
    /// outside a Tokio runtime (without one, no other replica can reach this one either).
    pub(crate) fn hear_notices(self: &Arc<Self>, registry: Weak<Registry>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut notices = self.notices.subscribe();
        let service = Arc::downgrade(self);
        runtime.spawn(async move {
            loop {
                let notice = match notices.recv().await {
                    Ok(notice) => notice,
                    Err(RecvError::Lagged(missed)) => {
                        if let Some(service) = service.upgrade() {
                            service.grant_index.forget_all();
                        }
                        tracing::warn!(
                            missed,
                            "sign-in notices were missed; those sessions connect on their next request"
                        );
                        continue;
                    }
                    Err(RecvError::Closed) => return,
                };
                let (Some(service), Some(registry)) = (service.upgrade(), registry.upgrade()) else {
                    return;
                };
                service.signed_in_elsewhere(&registry, notice).await;
            }
        });
    }

    /// Acts on `notice` when the link it names was issued here: the session gets its connection
    /// with the grant kept, its client is told, and a waiting retry goes on.
    async fn signed_in_elsewhere(&self, registry: &Registry, notice: SignInNotice) {
        if notice.is_some_missed() {
            self.grant_index.forget_all();
            return;
        }
        // Whoever holds the session, the owner's grants changed for every replica.
        self.grant_index.forget(&notice.owner);
        if !self.outcomes.issued_here(&notice.state) {
            return;
        }
        let session = SessionId::new(&notice.session);
        let held = match self.store.grant(&notice.owner, &notice.server).await {
            Ok(Some(held)) => held,
            Ok(None) => return, // signed out meanwhile
            Err(e) => {
                tracing::warn!(server = notice.server, error = %e, "a sign-in completed elsewhere; its grant cannot be read yet");
                self.outcomes.settle(&notice.state, Outcome::SignedIn);
                return;
            }
        };
        if let Some(view) = registry.server(&notice.server) {
            let egress = Egress::of(&view.definition, &registry.config().aggregator);
            match connect_as(&*self.secrets, view.definition, &held.grant, None, egress).await {
                Ok(conn) => self.install_signed_in(registry, &session, &notice.server, &notice.owner, &held, conn),
                Err(e) => {
                    tracing::warn!(server = notice.server, error = %e, "a sign-in completed elsewhere; the session connects on its next request")
                }
            }
        }
        registry.notify_elicitation_complete(&session, &notice.state);
        self.outcomes.settle(&notice.state, Outcome::SignedIn);
    }
}
