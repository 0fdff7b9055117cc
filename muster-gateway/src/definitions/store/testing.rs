//! A [`DefinitionStore`] kept in memory, for the tests of what writes through one.

use std::sync::Mutex;

use futures::future::{BoxFuture, FutureExt};
use muster_core::{
    CallContext,
    crd::{MCPServer, ObjectMeta, Workflow},
};

use super::{DefinitionStore, DefinitionStoreError, Stored};

/// The annotation the store stamps on what it holds, so a test sees which copy the registry
/// applied.
pub(crate) const STORED_ANNOTATION: &str = "test.muster/stored";

/// How the store answers every write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It writes.
    Writes,
    /// It refuses with this reason.
    Refuses(&'static str),
    /// It fails with this message.
    Fails(&'static str),
}

/// Records each write it is asked for (`put MCPServer api by ada`), and answers as told.
#[derive(Debug)]
pub(crate) struct RecordingStore {
    answer: Answer,
    writes: Mutex<Vec<String>>,
}

impl RecordingStore {
    pub(crate) fn new(answer: Answer) -> Self {
        Self {
            answer,
            writes: Mutex::default(),
        }
    }

    /// The writes asked for, in order.
    pub(crate) fn writes(&self) -> Vec<String> {
        self.writes.lock().expect("not poisoned").clone()
    }

    fn write<T: Send + 'static>(
        &self,
        what: String,
        caller: &CallContext,
        done: T,
    ) -> BoxFuture<'static, Result<T, DefinitionStoreError>> {
        let who = caller.principal.as_ref().map_or("anonymous", |p| p.subject.as_str());
        self.writes
            .lock()
            .expect("not poisoned")
            .push(format!("{what} by {who}"));
        let answer = match self.answer {
            Answer::Writes => Ok(done),
            Answer::Refuses(reason) => Err(DefinitionStoreError::refused(reason)),
            Answer::Fails(message) => Err(DefinitionStoreError::failed(message, "the disk is full")),
        };
        async move { answer }.boxed()
    }
}

fn stamped(metadata: &mut ObjectMeta) {
    metadata
        .annotations
        .insert(STORED_ANNOTATION.to_owned(), "yes".to_owned());
}

impl DefinitionStore for RecordingStore {
    fn put_mcpserver<'a>(
        &'a self,
        mut server: MCPServer,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<MCPServer>, DefinitionStoreError>> {
        let what = format!("put MCPServer {}", server.metadata.name);
        stamped(&mut server.metadata);
        self.write(what, caller, Stored::new(server))
    }

    fn delete_mcpserver<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        self.write(format!("delete MCPServer {name}"), caller, ())
    }

    fn put_workflow<'a>(
        &'a self,
        mut workflow: Workflow,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<Stored<Workflow>, DefinitionStoreError>> {
        let what = format!("put Workflow {}", workflow.metadata.name);
        stamped(&mut workflow.metadata);
        self.write(what, caller, Stored::new(workflow))
    }

    fn delete_workflow<'a>(
        &'a self,
        name: &'a str,
        caller: &'a CallContext,
    ) -> BoxFuture<'a, Result<(), DefinitionStoreError>> {
        self.write(format!("delete Workflow {name}"), caller, ())
    }
}
