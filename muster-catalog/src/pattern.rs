//! Glob patterns on names and URIs (`x_kubernetes_*`, `board://*`), case-insensitive unless asked.
//!
//! `*` matches any run of characters (a `/` included, so `board://*` matches every board URI),
//! `?` one character, `[abc]` a class and `{a,b}` alternatives.
//!
//! ```
//! use muster_catalog::pattern::NamePattern;
//!
//! let p = NamePattern::new("x_kubernetes_*", false).unwrap();
//! assert!(p.matches("X_Kubernetes_get_pods"));
//! assert!(NamePattern::new("x_[", false).is_err());
//! ```

use globset::{GlobBuilder, GlobMatcher};

use crate::CatalogError;

/// A compiled glob pattern.
#[derive(Debug, Clone)]
pub struct NamePattern {
    matcher: GlobMatcher,
}

impl NamePattern {
    /// Compiles `pattern`; case-insensitive unless `case_sensitive`.
    pub fn new(pattern: &str, case_sensitive: bool) -> Result<Self, CatalogError> {
        let glob = GlobBuilder::new(pattern)
            .case_insensitive(!case_sensitive)
            .literal_separator(false)
            .backslash_escape(true)
            .build()
            .map_err(|e| CatalogError::InvalidPattern {
                pattern: pattern.to_owned(),
                reason: e.kind().to_string(),
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
        })
    }

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_is_case_insensitive_by_default_and_sensitive_on_request() {
        let insensitive = NamePattern::new("x_k8s_*", false).expect("valid");
        assert!(insensitive.matches("X_K8S_get"));
        let sensitive = NamePattern::new("x_k8s_*", true).expect("valid");
        assert!(!sensitive.matches("X_K8S_get"));
        assert!(sensitive.matches("x_k8s_get"));
    }

    #[test]
    fn a_star_crosses_slashes_so_uri_patterns_work() {
        let p = NamePattern::new("board://*", false).expect("valid");
        assert!(p.matches("board://team/a/b"));
        assert!(!p.matches("file://x"));
    }

    #[test]
    fn a_bad_pattern_is_reported_with_the_pattern() {
        let err = NamePattern::new("x_[", false).expect_err("invalid");
        assert!(err.to_string().starts_with("Invalid pattern \"x_[\": "), "{err}");
    }
}
