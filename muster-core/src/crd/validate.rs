//! Validation results shared by every resource: [`FieldError`] and [`ValidationErrors`].
//!
//! Validation reports every violation of a document at once. Each violation names the
//! field it concerns with a path in the document (`spec.steps[2].forEach.parallelism`,
//! `spec.headers.Authorization`, `metadata.name`) and a message that stands on its own.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use url::Url;

/// One violated rule: where in the document, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
#[non_exhaustive]
pub struct FieldError {
    /// Path of the field in the document, e.g. `spec.steps[2].forEach.parallelism`.
    pub path: String,
    /// What is wrong with it, e.g. `step fetch: forEach.parallelism must be between 1 and 50 (is 0)`.
    pub message: String,
}

impl FieldError {
    /// A violation of the field at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Every rule a document violates, in document order.
///
/// Its `Display` lists the violations one per line as `<path>: <message>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, thiserror::Error)]
#[error("{}", Lines(&self.errors))]
pub struct ValidationErrors {
    errors: Vec<FieldError>,
}

/// Renders field errors one per line.
struct Lines<'a>(&'a [FieldError]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl ValidationErrors {
    /// No violation yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a violation of the field at `path`.
    pub fn push(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    /// Records every violation of `other`, after the ones already recorded.
    pub fn extend(&mut self, other: ValidationErrors) {
        self.errors.extend(other.errors);
    }

    /// Whether no violation was recorded.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// How many violations were recorded.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// The violations, in document order.
    pub fn errors(&self) -> &[FieldError] {
        &self.errors
    }

    /// Iterates over the violations, in document order.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.errors.iter()
    }

    /// Whether a violation of `path` with exactly `message` was recorded.
    pub fn contains(&self, path: &str, message: &str) -> bool {
        self.errors.iter().any(|e| e.path == path && e.message == message)
    }

    /// The violations rendered as `<path>: <message>`, one string each (the shape of a
    /// Workflow's `status.validationErrors`).
    pub fn to_lines(&self) -> Vec<String> {
        self.errors.iter().map(ToString::to_string).collect()
    }

    /// `Ok(())` when nothing was recorded, else `Err(self)`.
    pub fn into_result(self) -> Result<(), ValidationErrors> {
        if self.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl IntoIterator for ValidationErrors {
    type Item = FieldError;
    type IntoIter = std::vec::IntoIter<FieldError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a ValidationErrors {
    type Item = &'a FieldError;
    type IntoIter = std::slice::Iter<'a, FieldError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

/// Pattern of `toolPrefix` and `family.name`.
pub(crate) const NAME_PATTERN: &str = "^[a-zA-Z][a-zA-Z0-9_-]*$";
/// Pattern of `family.instanceArg`.
pub(crate) const INSTANCE_ARG_PATTERN: &str = "^[a-zA-Z][a-zA-Z0-9_]*$";
/// Pattern of workflow step ids.
pub(crate) const STEP_ID_PATTERN: &str = "^[a-zA-Z0-9_-]+$";
/// Pattern of a Kubernetes namespace (an RFC 1123 label).
pub(crate) const NAMESPACE_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

fn compile(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the validation patterns are valid regular expressions")
}

pub(crate) static NAME_RE: LazyLock<Regex> = LazyLock::new(|| compile(NAME_PATTERN));
pub(crate) static INSTANCE_ARG_RE: LazyLock<Regex> = LazyLock::new(|| compile(INSTANCE_ARG_PATTERN));
pub(crate) static STEP_ID_RE: LazyLock<Regex> = LazyLock::new(|| compile(STEP_ID_PATTERN));
pub(crate) static NAMESPACE_RE: LazyLock<Regex> = LazyLock::new(|| compile(NAMESPACE_PATTERN));

/// Whether an optional string is present and not blank.
pub(crate) fn is_set(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.trim().is_empty())
}

/// The length of `value` in characters when it is over `max`.
pub(crate) fn over_limit(value: &str, max: usize) -> Option<usize> {
    let len = value.chars().count();
    (len > max).then_some(len)
}

/// Why `value` is not an absolute `https` URL, if it is not one.
pub(crate) fn https_problem(value: &str) -> Option<&'static str> {
    match Url::parse(value) {
        Err(_) => Some("is not a valid URL"),
        Ok(url) if url.scheme() != "https" => Some("must use the https scheme"),
        Ok(url) if url.host_str().is_none_or(str::is_empty) => Some("must name a host"),
        Ok(_) => None,
    }
}

/// Records a violation at `path` when `value` is not an `https` URL.
pub(crate) fn check_https(errors: &mut ValidationErrors, path: &str, field: &str, value: &str) {
    if let Some(problem) = https_problem(value) {
        errors.push(path, format!("{field} {problem} (an https URL is required)"));
    }
}
