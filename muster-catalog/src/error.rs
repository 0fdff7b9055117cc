//! The one error type of the catalogue: every message is the one muster documents.

/// Why a discovery request could not be answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// An argument has the wrong type or value (`limit must be at least 1`).
    #[error("{message}")]
    InvalidArgument {
        /// The documented message, naming the argument.
        message: String,
    },
    /// A glob pattern does not parse.
    #[error("Invalid pattern \"{pattern}\": {reason}")]
    InvalidPattern {
        /// The pattern as given.
        pattern: String,
        /// Why it does not parse.
        reason: String,
    },
    /// No tool of that name is in the caller's catalogue.
    #[error("Tool not found: {name}")]
    ToolNotFound {
        /// The name asked for.
        name: String,
    },
    /// No resource with that URI is in the caller's catalogue (on that server).
    #[error("Resource not found: {uri}")]
    ResourceNotFound {
        /// The URI asked for.
        uri: String,
    },
    /// Several servers expose the URI and the request did not say which.
    #[error("Resource {uri} is exposed by servers {}; the \"server\" argument is required", servers.join(", "))]
    AmbiguousResource {
        /// The URI asked for.
        uri: String,
        /// The servers that expose it.
        servers: Vec<String>,
    },
    /// The toolset of the request (or of the `toolset` argument) is refused.
    #[error(transparent)]
    Toolset(#[from] crate::toolset::ToolsetError),
    /// The request's toolset leaves the tool out.
    #[error("tool \"{name}\" is outside the toolset [{}]", selectors.join(", "))]
    ToolOutsideToolset {
        /// The tool asked for.
        name: String,
        /// The request's selectors.
        selectors: Vec<String>,
    },
    /// The request's toolset leaves the resource out (it follows its server).
    #[error("resource \"{uri}\" is outside the toolset [{}]", selectors.join(", "))]
    ResourceOutsideToolset {
        /// The URI asked for.
        uri: String,
        /// The request's selectors.
        selectors: Vec<String>,
    },
    /// The request's toolset leaves the prompt out (it follows its server).
    #[error("prompt \"{name}\" is outside the toolset [{}]", selectors.join(", "))]
    PromptOutsideToolset {
        /// The prompt asked for.
        name: String,
        /// The request's selectors.
        selectors: Vec<String>,
    },
    /// No prompt of that name is in the caller's catalogue.
    #[error("Prompt not found: {name}")]
    PromptNotFound {
        /// The name asked for.
        name: String,
    },
}

impl CatalogError {
    /// `InvalidArgument` with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::InvalidArgument {
            message: message.into(),
        }
    }
}
