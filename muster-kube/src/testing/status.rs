//! `Status` answers: the API server's error bodies, with its messages, reasons and codes.
//!
//! The shapes follow `k8s.io/apimachinery/pkg/api/errors`: `NotFound`, `AlreadyExists` and
//! `Conflict` name the qualified resource (`mcpservers.muster.giantswarm.io "x"`), `Invalid`
//! names the qualified kind (`MCPServer.muster.giantswarm.io "x"`), and `details.kind` carries
//! the resource (plural) except for `Invalid`, where it is the kind.

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Map, Value, json};

use super::resource::ResourceType;

/// An error answer of the double, turned into a `Status` body.
#[derive(Debug, Clone)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) reason: &'static str,
    pub(crate) message: String,
    pub(crate) details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// `details` naming a resource: `{name, group, kind: <plural>}`, empty parts left out.
    fn resource_details(rt: &ResourceType, name: &str) -> Value {
        let mut details = Map::new();
        if !name.is_empty() {
            details.insert("name".into(), json!(name));
        }
        if !rt.group.is_empty() {
            details.insert("group".into(), json!(rt.group));
        }
        details.insert("kind".into(), json!(rt.plural));
        Value::Object(details)
    }

    pub(crate) fn not_found(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", rt.qualified_resource()),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// A URL that names no served resource.
    pub(crate) fn no_such_resource() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource").with_details(json!({}))
    }

    pub(crate) fn already_exists(rt: &ResourceType, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", rt.qualified_resource()),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// A write that lost an optimistic-concurrency race (stale `resourceVersion`).
    pub(crate) fn conflict(rt: &ResourceType, name: &str) -> Self {
        Self::conflict_because(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub(crate) fn conflict_because(rt: &ResourceType, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                rt.qualified_resource()
            ),
        )
        .with_details(Self::resource_details(rt, name))
    }

    /// A server-side apply conflict: `message` and the per-field `causes` are built by the
    /// apply module.
    pub(crate) fn apply_conflict(message: String, causes: Vec<Value>) -> Self {
        Self::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
    }

    /// `<qualified resource> ["name"] is forbidden: <why>`; `qualified` and `group`/`resource`
    /// describe what was asked for (for impersonation: `users`).
    pub(crate) fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}.{group}")
        };
        let message = if name.is_empty() {
            format!("{qualified} is forbidden: {why}")
        } else {
            format!("{qualified} \"{name}\" is forbidden: {why}")
        };
        let mut details = Map::new();
        if !name.is_empty() {
            details.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            details.insert("group".into(), json!(group));
        }
        details.insert("kind".into(), json!(resource));
        Self::new(403, "Forbidden", message).with_details(Value::Object(details))
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn unavailable() -> Self {
        Self::new(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request",
        )
    }

    /// 422 `Invalid` with one cause per field error `(field, cause type, body)`, where `body`
    /// is the error without its field (`Invalid value: "object": ...`).
    pub(crate) fn invalid(rt: &ResourceType, name: &str, errors: &[FieldError]) -> Self {
        let rendered: Vec<String> = errors.iter().map(FieldError::to_string).collect();
        let summary = match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.cause_type, "message": e.body, "field": e.field}))
            .collect();
        let mut details = Map::new();
        if !name.is_empty() {
            details.insert("name".into(), json!(name));
        }
        if !rt.group.is_empty() {
            details.insert("group".into(), json!(rt.group));
        }
        details.insert("kind".into(), json!(rt.kind));
        details.insert("causes".into(), Value::Array(causes));
        Self::new(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {summary}", rt.qualified_kind()),
        )
        .with_details(Value::Object(details))
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub(crate) fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: \
                 application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml \
                 (got {content_type:?})"
            ),
        )
    }

    /// 410 `Expired`: a watch or a continue token older than the kept history.
    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `Status` object (`kind: Status`, `status: Failure`).
    pub(crate) fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        });
        if let (Some(details), Some(map)) = (&self.details, status.as_object_mut()) {
            map.insert("details".into(), details.clone());
        }
        if let Some(map) = status.as_object_mut() {
            map.insert("code".into(), json!(self.code));
        }
        status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json_response(code, &self.to_status())
    }
}

/// A JSON body with the given status code.
pub(crate) fn json_response(code: StatusCode, body: &Value) -> Response {
    (code, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// One field error of an `Invalid` answer (`field.Error` in apimachinery).
#[derive(Debug, Clone)]
pub(crate) struct FieldError {
    /// The field path (`spec`, `metadata.resourceVersion`), or `<nil>` for the root.
    pub(crate) field: String,
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueForbidden`, ...
    pub(crate) cause_type: &'static str,
    /// The error without its field: `Invalid value: "object": command is required ...`.
    pub(crate) body: String,
}

impl FieldError {
    pub(crate) fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            cause_type: "FieldValueInvalid",
            body: format!("Invalid value: {value}: {detail}"),
        }
    }

    pub(crate) fn required(field: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            cause_type: "FieldValueRequired",
            body: format!("Required value: {detail}"),
        }
    }

    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            cause_type: "FieldValueForbidden",
            body: format!("Forbidden: {detail}"),
        }
    }

    pub(crate) fn duplicate(field: &str, detail: &str) -> Self {
        Self {
            field: field.to_owned(),
            cause_type: "FieldValueDuplicate",
            body: format!("Duplicate value: {detail}"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_status_has_the_api_servers_shape() {
        let err = ApiError::forbidden(
            "muster.giantswarm.io",
            "mcpservers",
            "x",
            "User \"alice\" cannot get resource \"mcpservers\" in API group \"muster.giantswarm.io\" in the namespace \"default\"",
        );
        assert_eq!(
            err.to_status(),
            json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
                "message":"mcpservers.muster.giantswarm.io \"x\" is forbidden: User \"alice\" cannot get resource \"mcpservers\" in API group \"muster.giantswarm.io\" in the namespace \"default\"",
                "reason":"Forbidden","details":{"name":"x","group":"muster.giantswarm.io","kind":"mcpservers"},"code":403})
        );
    }

    #[test]
    fn core_group_resources_are_named_without_a_group() {
        let secrets = ResourceType::new("", "v1", "secrets", "Secret").builtin();
        let err = ApiError::not_found(&secrets, "s");
        assert_eq!(err.message, "secrets \"s\" not found");
        assert_eq!(err.details, Some(json!({"name": "s", "kind": "secrets"})));
    }
}
