//! The downstream of the compose example: a small rmcp server (`add_note`, `list_notes`,
//! `delete_note`) served over streamable HTTP on a loopback port of this same process.
//!
//! muster-gateway connects to downstream servers from their MCPServer definitions (stdio, HTTP,
//! SSE), so an in-process server is reached through loopback HTTP rather than an in-memory
//! transport.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::{
    ErrorData as McpError, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig},
    schemars::{self, JsonSchema},
    tool, tool_handler, tool_router,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService, streamable_http_server::session::local::LocalSessionManager,
    },
};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Deserialize, JsonSchema)]
struct AddNote {
    /// The note's text.
    text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
struct NoteId {
    /// The note's id, as `add_note` answered it.
    id: usize,
}

/// The notes server: one list of notes shared by every session.
#[derive(Debug, Clone)]
pub(crate) struct Notes {
    notes: Arc<Mutex<Vec<Option<String>>>>,
    tools: Arc<ToolRouter<Notes>>,
}

#[tool_router(router = notes_router)]
impl Notes {
    #[tool(description = "Add a note.\nAnswers the new note's id.")]
    fn add_note(&self, Parameters(args): Parameters<AddNote>) -> String {
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        notes.push(Some(args.text));
        format!("note {}", notes.len() - 1)
    }

    #[tool(description = "List every note with its id.", annotations(read_only_hint = true))]
    fn list_notes(&self) -> String {
        let notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        let listed: Vec<String> = notes
            .iter()
            .enumerate()
            .filter_map(|(id, note)| note.as_ref().map(|text| format!("{id}: {text}")))
            .collect();
        if listed.is_empty() {
            "no notes".to_owned()
        } else {
            listed.join("\n")
        }
    }

    #[tool(
        description = "Delete a note by its id.",
        annotations(read_only_hint = false, destructive_hint = true)
    )]
    fn delete_note(&self, Parameters(args): Parameters<NoteId>) -> Result<CallToolResult, McpError> {
        let mut notes = self.notes.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(match notes.get_mut(args.id).and_then(Option::take) {
            Some(_) => CallToolResult::success(vec![ContentBlock::text(format!("deleted note {}", args.id))]),
            None => CallToolResult::error(vec![ContentBlock::text(format!("no note {}", args.id))]),
        })
    }
}

#[tool_handler(router = self.tools)]
impl ServerHandler for Notes {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("notes", env!("CARGO_PKG_VERSION")))
    }
}

/// The notes server, serving on a loopback port until [`Downstream::stop`].
#[derive(Debug)]
pub(crate) struct Downstream {
    /// Its MCP endpoint, `http://127.0.0.1:<port>/mcp`.
    pub(crate) url: String,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Downstream {
    /// Ends its sessions and stops serving.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Starts the notes server on `127.0.0.1:0`.
pub(crate) async fn serve() -> std::io::Result<Downstream> {
    let notes = Notes {
        notes: Arc::default(),
        tools: Arc::new(Notes::notes_router()),
    };
    let stop = CancellationToken::new();
    let config = StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(move || Ok(notes.clone()), LocalSessionManager::default().into(), config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let app = axum::Router::new().nest_service("/mcp", service);
    let shutdown = stop.clone().cancelled_owned();
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).with_graceful_shutdown(shutdown).await;
    });
    Ok(Downstream { url, stop, task })
}
