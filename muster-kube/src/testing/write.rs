//! The write verbs (create, replace, patch, apply, delete) with the API server's rules for
//! names, resourceVersion preconditions, the status subresource, `metadata.generation`,
//! finalizers, admission (CEL) and field ownership.

use serde_json::{Map, Value, json};

use super::{
    apply::{self, Writer},
    cel, event_rules,
    patch::{self, PatchKind},
    resource::ResourceType,
    status::{ApiError, FieldError},
    store::{Key, Store},
};

/// Metadata the server keeps from the stored object whatever a write sends.
const SERVER_METADATA: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "resourceVersion",
    "managedFields",
];

const NAME_RULE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
    characters, '-' or '.', and must start and end with an alphanumeric character (e.g. \
    'example.com', regex used for validation is \
    '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

/// One write: where it goes and who makes it.
#[derive(Debug, Clone)]
pub(crate) struct WriteRequest<'a> {
    pub(crate) type_index: usize,
    /// Empty for cluster-scoped types.
    pub(crate) namespace: &'a str,
    /// Empty for a create.
    pub(crate) name: &'a str,
    /// `Some("status")` for writes to the status subresource.
    pub(crate) subresource: Option<&'a str>,
    /// The field manager (`fieldManager`, or derived from the user agent).
    pub(crate) manager: &'a str,
    /// `metadata.creationTimestamp` and `managedFields[].time` of this write.
    pub(crate) now: String,
}

impl WriteRequest<'_> {
    fn key(&self, name: &str) -> Key {
        Key {
            type_index: self.type_index,
            namespace: self.namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

/// What a delete did.
#[derive(Debug)]
pub(crate) enum Deletion {
    /// Removed; the `Status` (Success) the server answers with.
    Gone(Value),
    /// Finalizers hold it: `deletionTimestamp` is set, the object is answered.
    Pending(Value),
}

/// How the new object's `managedFields` come about.
#[derive(Debug, Clone, Copy)]
enum Ownership<'a> {
    /// An update: changed fields move to this writer.
    Update(Writer<'a>),
    /// Already computed (server-side apply).
    Computed,
    /// Direct store access: kept as stored, pruned to what exists.
    Keep,
}

fn metadata(object: &Value) -> Option<&Map<String, Value>> {
    object.get("metadata").and_then(Value::as_object)
}

fn meta_str<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    metadata(object)?.get(key)?.as_str().filter(|s| !s.is_empty())
}

fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = match object {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    };
    let metadata = map.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !metadata.is_object() {
        *metadata = Value::Object(Map::new());
    }
    match metadata {
        Value::Object(map) => map,
        _ => unreachable!("made an object above"),
    }
}

fn writer<'a>(req: &'a WriteRequest<'_>, api_version: &'a str) -> Writer<'a> {
    Writer {
        manager: req.manager,
        subresource: req.subresource,
        api_version,
        now: &req.now,
    }
}

fn check_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    if crate::executions::is_resource_name(name) {
        return Ok(());
    }
    let detail = if name.len() > 253 {
        "must be no more than 253 characters"
    } else {
        NAME_RULE
    };
    Err(ApiError::invalid(
        rt,
        name,
        &[FieldError::invalid("metadata.name", &format!("\"{name}\""), detail)],
    ))
}

/// `apiVersion` and `kind` of a body must be the URL's when given.
fn check_type(rt: &ResourceType, body: &Value, required: bool) -> Result<(), ApiError> {
    let api_version = body.get("apiVersion").and_then(Value::as_str);
    let kind = body.get("kind").and_then(Value::as_str);
    if required && (api_version.is_none() || kind.is_none()) {
        return Err(ApiError::bad_request(
            "apiVersion and kind must be set in an apply configuration",
        ));
    }
    if let Some(found) = api_version
        && found != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({found}) does not match the expected API version ({})",
            rt.api_version()
        )));
    }
    if let Some(found) = kind
        && found != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({found}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    Ok(())
}

/// A body naming another object than the URL does is refused.
fn check_same_object(req: &WriteRequest<'_>, body: &Value) -> Result<(), ApiError> {
    if let Some(name) = meta_str(body, "name")
        && name != req.name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            req.name
        )));
    }
    if let Some(namespace) = meta_str(body, "namespace")
        && namespace != req.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// A `metadata.resourceVersion` in the write must be the stored one.
fn check_resource_version(rt: &ResourceType, name: &str, body: &Value, old: &Value) -> Result<(), ApiError> {
    match meta_str(body, "resourceVersion") {
        Some(rv) if Some(rv) != meta_str(old, "resourceVersion") => Err(ApiError::conflict(rt, name)),
        _ => Ok(()),
    }
}

/// Sets what the server owns on a new object: type, name, namespace, uid, creation time,
/// generation.
fn stamp_new(store: &mut Store, rt: &ResourceType, req: &WriteRequest<'_>, name: &str, object: &mut Value) {
    let uid = store.new_uid();
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(rt.api_version()));
        map.insert("kind".into(), json!(rt.kind));
    }
    let metadata = metadata_mut(object);
    for key in SERVER_METADATA {
        metadata.remove(*key);
    }
    metadata.insert("name".into(), json!(name));
    if rt.namespaced {
        metadata.insert("namespace".into(), json!(req.namespace));
    } else {
        metadata.remove("namespace");
    }
    metadata.insert("uid".into(), json!(uid));
    metadata.insert("creationTimestamp".into(), json!(req.now));
    if rt.custom {
        metadata.insert("generation".into(), json!(1));
    }
}

/// Copies what the server owns from the stored object into a written one.
fn keep_server_fields(rt: &ResourceType, old: &Value, object: &mut Value) {
    if let Some(map) = object.as_object_mut() {
        map.insert("apiVersion".into(), json!(rt.api_version()));
        map.insert("kind".into(), json!(rt.kind));
    }
    let stored = metadata(old).cloned().unwrap_or_default();
    let metadata = metadata_mut(object);
    for key in SERVER_METADATA.iter().chain(&["name", "namespace"]) {
        match stored.get(*key) {
            Some(value) => metadata.insert((*key).to_owned(), value.clone()),
            None => metadata.remove(*key),
        };
    }
}

/// With a status subresource, writes to the main resource keep the stored `.status` and
/// writes to `/status` keep everything else.
fn scope_to_subresource(rt: &ResourceType, subresource: Option<&str>, old: Option<&Value>, candidate: Value) -> Value {
    if !rt.status_subresource {
        return candidate;
    }
    let old_status = old.and_then(|o| o.get("status")).cloned();
    match (subresource, old) {
        (Some(_), Some(old)) => {
            let mut scoped = old.clone();
            if let Some(map) = scoped.as_object_mut() {
                match candidate.get("status") {
                    Some(status) => map.insert("status".into(), status.clone()),
                    None => map.remove("status"),
                };
            }
            scoped
        }
        _ => {
            let mut scoped = candidate;
            if let Some(map) = scoped.as_object_mut() {
                match old_status {
                    Some(status) => map.insert("status".into(), status),
                    None => map.remove("status"),
                };
            }
            scoped
        }
    }
}

/// The part of an object whose changes bump `metadata.generation`.
fn generation_part(rt: &ResourceType, object: &Value) -> Value {
    let mut part = object.clone();
    if let Some(map) = part.as_object_mut() {
        map.remove("metadata");
        if rt.status_subresource {
            map.remove("status");
        }
    }
    part
}

/// Admission, ownership, generation, finalizers, no-op detection and the commit.
fn save(
    store: &mut Store,
    key: Key,
    old: Option<&Value>,
    mut new: Value,
    ownership: Ownership<'_>,
) -> Result<Value, ApiError> {
    let rt = store.resource_type(key.type_index).clone();
    if let Some(schema) = store.schemas.get(&key.type_index) {
        cel::admit(&rt, schema, &mut new, old)?;
    }
    match ownership {
        Ownership::Update(writer) => apply::record_update(old, &mut new, &writer),
        Ownership::Computed => {}
        Ownership::Keep => {
            if metadata(&new).is_some_and(|m| !m.contains_key("managedFields"))
                && let Some(fields) = old.and_then(|o| o.pointer("/metadata/managedFields"))
            {
                metadata_mut(&mut new).insert("managedFields".into(), fields.clone());
            }
            let entries = apply::read_entries(&new);
            apply::finish(&mut new, &entries, entries.clone());
        }
    }
    if rt.custom {
        let generation = match old {
            None => 1,
            Some(old) => {
                let previous = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                if generation_part(&rt, old) == generation_part(&rt, &new) {
                    previous
                } else {
                    previous + 1
                }
            }
        };
        metadata_mut(&mut new).insert("generation".into(), json!(generation));
    }
    let deleting = metadata(&new).is_some_and(|m| m.contains_key("deletionTimestamp"));
    let finalizers_left = new
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if deleting && !finalizers_left {
        store.commit(key.clone(), Some(new));
        return store
            .commit(key, None)
            .ok_or_else(|| ApiError::internal("object vanished while finalizing"));
    }
    if old == Some(&new) {
        return Ok(new);
    }
    store
        .commit(key, Some(new))
        .ok_or_else(|| ApiError::internal("commit stored nothing"))
}

/// `POST`: create, with `generateName`, name rules and `AlreadyExists`.
pub(crate) fn create(store: &mut Store, req: &WriteRequest<'_>, mut body: Value) -> Result<Value, ApiError> {
    let rt = store.resource_type(req.type_index).clone();
    if req.subresource.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    if !body.is_object() {
        return Err(ApiError::bad_request("the body of a create must be an object"));
    }
    check_type(&rt, &body, false)?;
    if meta_str(&body, "resourceVersion").is_some() {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    if let Some(namespace) = meta_str(&body, "namespace")
        && rt.namespaced
        && namespace != req.namespace
    {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let name = match (meta_str(&body, "name"), meta_str(&body, "generateName")) {
        (Some(name), _) => name.to_owned(),
        (None, Some(prefix)) => format!("{prefix}{}", store.random_suffix()),
        (None, None) => {
            return Err(ApiError::invalid(
                &rt,
                "",
                &[FieldError::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
    };
    check_name(&rt, &name)?;
    if event_rules::applies(&rt) {
        event_rules::check_create(&rt, &name, &body)?;
    }
    let key = req.key(&name);
    if store.get(&key).is_some() {
        return Err(ApiError::already_exists(&rt, &name));
    }
    stamp_new(store, &rt, req, &name, &mut body);
    if rt.status_subresource
        && let Some(map) = body.as_object_mut()
    {
        map.remove("status");
    }
    let api_version = rt.api_version();
    save(store, key, None, body, Ownership::Update(writer(req, &api_version)))
}

fn stored(store: &Store, rt: &ResourceType, key: &Key) -> Result<Value, ApiError> {
    store
        .get(key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(rt, &key.name))
}

/// `PUT`: replace, with the resourceVersion precondition (required for custom resources).
pub(crate) fn replace(store: &mut Store, req: &WriteRequest<'_>, mut body: Value) -> Result<Value, ApiError> {
    let rt = store.resource_type(req.type_index).clone();
    let key = req.key(req.name);
    let old = stored(store, &rt, &key)?;
    if !body.is_object() {
        return Err(ApiError::bad_request("the body of a replace must be an object"));
    }
    check_type(&rt, &body, false)?;
    check_same_object(req, &body)?;
    if rt.custom && meta_str(&body, "resourceVersion").is_none() {
        return Err(ApiError::invalid(
            &rt,
            req.name,
            &[FieldError::invalid(
                "metadata.resourceVersion",
                "0x0",
                "must be specified for an update",
            )],
        ));
    }
    check_resource_version(&rt, req.name, &body, &old)?;
    keep_server_fields(&rt, &old, &mut body);
    let scoped = scope_to_subresource(&rt, req.subresource, Some(&old), body);
    let api_version = rt.api_version();
    save(
        store,
        key,
        Some(&old),
        scoped,
        Ownership::Update(writer(req, &api_version)),
    )
}

/// `PATCH`: merge, JSON, strategic (built-in types only) or server-side apply.
pub(crate) fn patch(
    store: &mut Store,
    req: &WriteRequest<'_>,
    kind: PatchKind,
    body: Value,
    force: bool,
) -> Result<Value, ApiError> {
    if kind == PatchKind::Apply {
        return server_side_apply(store, req, body, force);
    }
    let rt = store.resource_type(req.type_index).clone();
    if kind == PatchKind::Strategic && rt.custom {
        return Err(ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
        ));
    }
    let key = req.key(req.name);
    let old = stored(store, &rt, &key)?;
    let mut candidate = old.clone();
    match kind {
        PatchKind::Json => patch::json_patch(&mut candidate, &body)?,
        _ => patch::merge_patch(&mut candidate, &body),
    }
    check_resource_version(&rt, req.name, &candidate, &old)?;
    check_same_object(req, &candidate)?;
    keep_server_fields(&rt, &old, &mut candidate);
    let scoped = scope_to_subresource(&rt, req.subresource, Some(&old), candidate);
    let api_version = rt.api_version();
    save(
        store,
        key,
        Some(&old),
        scoped,
        Ownership::Update(writer(req, &api_version)),
    )
}

fn server_side_apply(store: &mut Store, req: &WriteRequest<'_>, body: Value, force: bool) -> Result<Value, ApiError> {
    let rt = store.resource_type(req.type_index).clone();
    if req.manager.is_empty() {
        return Err(ApiError {
            code: 422,
            reason: "Invalid",
            message:
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
                    .into(),
            details: Some(json!({"group": "meta.k8s.io", "kind": "PatchOptions",
                "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]})),
        });
    }
    if !body.is_object() {
        return Err(ApiError::bad_request("an apply configuration must be an object"));
    }
    check_type(&rt, &body, true)?;
    check_same_object(req, &body)?;
    let key = req.key(req.name);
    let old = store.get(&key).cloned();
    if let Some(rv) = meta_str(&body, "resourceVersion")
        && old.as_ref().and_then(|o| meta_str(o, "resourceVersion")) != Some(rv)
    {
        return Err(ApiError::conflict(&rt, req.name));
    }
    let mut applied = body;
    if rt.status_subresource
        && let Some(map) = applied.as_object_mut()
    {
        if req.subresource.is_some() {
            map.retain(|k, _| k == "status");
        } else {
            map.remove("status");
        }
    }
    let base = match &old {
        Some(old) => old.clone(),
        None if req.subresource.is_some() => return Err(ApiError::not_found(&rt, req.name)),
        None => {
            check_name(&rt, req.name)?;
            let mut fresh = json!({});
            stamp_new(store, &rt, req, req.name, &mut fresh);
            fresh
        }
    };
    let api_version = rt.api_version();
    let writer = writer(req, &api_version);
    let mut result = apply::apply(old.as_ref(), base, &applied, &writer, force)?;
    let fields = result.pointer("/metadata/managedFields").cloned();
    if let Some(old) = &old {
        keep_server_fields(&rt, old, &mut result);
    }
    let mut scoped = scope_to_subresource(&rt, req.subresource, old.as_ref(), result);
    match fields {
        Some(fields) => metadata_mut(&mut scoped).insert("managedFields".into(), fields),
        None => metadata_mut(&mut scoped).remove("managedFields"),
    };
    save(store, key, old.as_ref(), scoped, Ownership::Computed)
}

/// `DELETE` with optional `preconditions` (uid, resourceVersion) in the `DeleteOptions` body.
pub(crate) fn delete(store: &mut Store, req: &WriteRequest<'_>, options: &Value) -> Result<Deletion, ApiError> {
    let rt = store.resource_type(req.type_index).clone();
    let key = req.key(req.name);
    let old = stored(store, &rt, &key)?;
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let wanted = options
            .pointer(&format!("/preconditions/{field}"))
            .and_then(Value::as_str);
        let actual = meta_str(&old, field).unwrap_or_default();
        if let Some(wanted) = wanted
            && wanted != actual
        {
            return Err(ApiError::conflict_because(
                &rt,
                req.name,
                &format!("Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"),
            ));
        }
    }
    let has_finalizers = old
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    if has_finalizers {
        if metadata(&old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
            return Ok(Deletion::Pending(old));
        }
        let mut marked = old.clone();
        let metadata = metadata_mut(&mut marked);
        metadata.insert("deletionTimestamp".into(), json!(req.now));
        metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
        if rt.custom {
            let generation = metadata.get("generation").and_then(Value::as_i64).unwrap_or(1);
            metadata.insert("generation".into(), json!(generation + 1));
        }
        let stored = store
            .commit(key, Some(marked))
            .ok_or_else(|| ApiError::internal("commit stored nothing"))?;
        return Ok(Deletion::Pending(stored));
    }
    store.commit(key, None);
    let mut details = Map::new();
    details.insert("name".into(), json!(req.name));
    if !rt.group.is_empty() {
        details.insert("group".into(), json!(rt.group));
    }
    details.insert("kind".into(), json!(rt.plural));
    details.insert("uid".into(), json!(meta_str(&old, "uid").unwrap_or_default()));
    Ok(Deletion::Gone(json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })))
}

/// Direct store access: stores `object` as given (status included), stamping what is
/// missing; the type comes from its `apiVersion` and `kind`.
pub(crate) fn put_raw(store: &mut Store, mut object: Value, now: String) -> Result<Value, ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    let type_index = store
        .registry
        .find_kind(api_version, kind)
        .ok_or_else(|| ApiError::bad_request(format!("no resource type serves {api_version} {kind}")))?;
    let rt = store.resource_type(type_index).clone();
    let name = meta_str(&object, "name")
        .ok_or_else(|| ApiError::bad_request("metadata.name is required"))?
        .to_owned();
    let namespace = if rt.namespaced {
        meta_str(&object, "namespace").unwrap_or("default").to_owned()
    } else {
        String::new()
    };
    let req = WriteRequest {
        type_index,
        namespace: &namespace,
        name: &name,
        subresource: None,
        manager: "",
        now,
    };
    let key = req.key(&name);
    let old = store.get(&key).cloned();
    match &old {
        Some(old) => {
            let stored = metadata(old).cloned().unwrap_or_default();
            let metadata = metadata_mut(&mut object);
            for field in ["uid", "creationTimestamp", "generation"] {
                if let (false, Some(value)) = (metadata.contains_key(field), stored.get(field)) {
                    metadata.insert(field.to_owned(), value.clone());
                }
            }
        }
        None => {
            let keep = metadata(&object).cloned().unwrap_or_default();
            stamp_new(store, &rt, &req, &name, &mut object);
            let metadata = metadata_mut(&mut object);
            for field in [
                "uid",
                "creationTimestamp",
                "managedFields",
                "finalizers",
                "deletionTimestamp",
            ] {
                if let Some(value) = keep.get(field) {
                    metadata.insert(field.to_owned(), value.clone());
                }
            }
        }
    }
    if rt.namespaced {
        metadata_mut(&mut object).insert("namespace".into(), json!(namespace));
    }
    metadata_mut(&mut object).remove("resourceVersion");
    if let Some(old) = &old
        && let Some(rv) = metadata(old).and_then(|m| m.get("resourceVersion")).cloned()
    {
        metadata_mut(&mut object).insert("resourceVersion".into(), rv);
    }
    save(store, key, old.as_ref(), object, Ownership::Keep)
}
