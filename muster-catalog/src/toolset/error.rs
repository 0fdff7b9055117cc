//! Why a toolset is refused: every message is the documented one.

/// Why a declared toolset or a configured preset is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsetError {
    /// The request declared the header with no selector.
    #[error("toolset [] is empty; use \"preset:none\" for an agent without tools")]
    Empty,
    /// More selectors than allowed inline.
    #[error("toolset [{}] has {} selectors, more than the 32 allowed inline; define a preset", selectors.join(", "), selectors.len())]
    TooMany {
        /// The selectors as declared.
        selectors: Vec<String>,
    },
    /// A selector is reserved, presets-only or malformed.
    #[error("toolset [{}]: {reason}", selectors.join(", "))]
    Invalid {
        /// The selectors as declared.
        selectors: Vec<String>,
        /// What is wrong, naming the selector.
        reason: String,
    },
    /// A selector names a preset that does not exist.
    #[error("toolset [{}] names unknown preset {preset:?}; known presets: {}", selectors.join(", "), known.join(", "))]
    UnknownPreset {
        /// The selectors as declared.
        selectors: Vec<String>,
        /// The preset named.
        preset: String,
        /// The presets that exist.
        known: Vec<String>,
    },
    /// A configured preset is invalid (the gateway refuses to start).
    #[error("toolset preset {preset:?}: {reason}")]
    BadPreset {
        /// The preset.
        preset: String,
        /// What is wrong.
        reason: String,
    },
}
