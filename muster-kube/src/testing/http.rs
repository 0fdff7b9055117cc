//! The HTTP face: URL routing, the request pipeline (availability, authentication,
//! impersonation, authorization), the verbs, discovery and the request log.
//!
//! Paths served, as the real API server lays them out:
//! `/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]`,
//! `/apis/{group}/{version}/namespaces/{ns}/{plural}[/{name}[/status]]`, the same without
//! `namespaces/{ns}` for cluster-scoped types and for list/watch across namespaces, and
//! discovery: `/version`, `/api`, `/apis`, `/apis/{group}`, `/api/v1`, `/apis/{group}/{version}`.

use std::{collections::HashMap, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::{Query, Request, State},
    response::{IntoResponse, Response},
};
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Value, json};

use super::{
    Shared,
    auth::{Attributes, AuditEntry, RequestRecord, UserInfo},
    lock,
    patch::PatchKind,
    resource::ResourceType,
    select::{FieldSelector, LabelSelector},
    status::{ApiError, json_response},
    store::Filter,
    watch::{self, WatchParams},
    write::{self, Deletion, WriteRequest},
};

/// Largest request body read (the real server's limit is 3 MiB).
const BODY_LIMIT: usize = 3 * 1024 * 1024;
/// `timeoutSeconds` when a watch names none (the real server picks 30 to 60 minutes).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// Who a request acts as.
#[derive(Debug)]
struct Caller {
    user: UserInfo,
    impersonated_by: Option<String>,
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let mut record = RequestRecord {
        method: request.method().to_string(),
        path: request.uri().path().to_owned(),
        query: request.uri().query().map(str::to_owned),
        user: None,
        impersonated_user: None,
        status: 0,
    };
    let response = match serve(&shared, request, &mut record).await {
        Ok(response) => response,
        Err(error) => error.into_response(),
    };
    record.status = response.status().as_u16();
    lock(&shared.auth).requests.push(record);
    response
}

async fn serve(shared: &Arc<Shared>, request: Request, record: &mut RequestRecord) -> Result<Response, ApiError> {
    if shared.is_unavailable() {
        return Err(ApiError::unavailable());
    }
    let caller = {
        let auth = lock(&shared.auth);
        let requester = auth.authenticate(request.headers())?;
        record.user = Some(requester.name.clone());
        match auth.impersonate(&requester, request.headers())? {
            Some(user) => {
                record.impersonated_user = Some(user.name.clone());
                Caller {
                    user,
                    impersonated_by: Some(requester.name),
                }
            }
            None => Caller {
                user: requester,
                impersonated_by: None,
            },
        }
    };
    let path = request.uri().path().to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["version"] => Ok(json_response(StatusCode::OK, &version())),
        ["api"] => Ok(json_response(
            StatusCode::OK,
            &json!({"kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string()}]}),
        )),
        ["apis"] => Ok(json_response(StatusCode::OK, &group_list(shared))),
        ["apis", group] => group_info(shared, group).map(|g| json_response(StatusCode::OK, &g)),
        ["api", version] => resource_list(shared, "", version),
        ["apis", group, version] => resource_list(shared, group, version),
        ["api", version, rest @ ..] => resource(shared, request, caller, "", version, rest).await,
        ["apis", group, version, rest @ ..] => resource(shared, request, caller, group, version, rest).await,
        _ => Err(ApiError::no_such_resource()),
    }
}

/// A resource URL after the group and version.
#[derive(Debug)]
struct Target {
    type_index: usize,
    rt: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn target(shared: &Shared, group: &str, version: &str, rest: &[&str]) -> Option<Target> {
    let (namespace, plural, name, subresource) = match rest {
        ["namespaces", ns, plural, more @ ..] if more.len() <= 2 => {
            (Some((*ns).to_owned()), *plural, more.first(), more.get(1))
        }
        [plural, more @ ..] if more.len() <= 2 => (None, *plural, more.first(), more.get(1)),
        _ => return None,
    };
    let store = lock(&shared.store);
    let type_index = store.registry.find(group, version, plural)?;
    let rt = store.resource_type(type_index).clone();
    let subresource = subresource.map(|s| (*s).to_owned());
    if namespace.is_some() && !rt.namespaced
        || namespace.is_none() && rt.namespaced && name.is_some()
        || subresource
            .as_deref()
            .is_some_and(|s| s != "status" || !rt.status_subresource)
    {
        return None;
    }
    Some(Target {
        type_index,
        rt,
        namespace,
        name: name.map(|n| (*n).to_owned()),
        subresource,
    })
}

fn flag(query: &HashMap<String, String>, name: &str) -> bool {
    query.get(name).is_some_and(|v| v == "true" || v == "1")
}

async fn resource(
    shared: &Arc<Shared>,
    request: Request,
    caller: Caller,
    group: &str,
    version: &str,
    rest: &[&str],
) -> Result<Response, ApiError> {
    let target = target(shared, group, version, rest).ok_or_else(ApiError::no_such_resource)?;
    let query: HashMap<String, String> = Query::<Vec<(String, String)>>::try_from_uri(request.uri())
        .map(|Query(pairs)| pairs.into_iter().collect())
        .map_err(|e| ApiError::bad_request(format!("invalid query: {e}")))?;
    let method = request.method().clone();
    let verb = match (&method, target.name.is_some()) {
        (&Method::GET, true) => "get",
        (&Method::GET, false) if flag(&query, "watch") => "watch",
        (&Method::GET, false) => "list",
        (&Method::POST, false) => "create",
        (&Method::PUT, true) => "update",
        (&Method::PATCH, true) => "patch",
        (&Method::DELETE, true) => "delete",
        (&Method::DELETE, false) if target.namespace.is_some() || !target.rt.namespaced => "deletecollection",
        _ => return Err(ApiError::method_not_allowed()),
    };
    if verb == "create" && target.rt.namespaced && target.namespace.is_none() {
        return Err(ApiError::no_such_resource());
    }
    if query.contains_key("dryRun") {
        return Err(ApiError::bad_request("the API server double does not support dryRun"));
    }
    let attrs = Attributes {
        verb,
        group: &target.rt.group,
        resource: &target.rt.plural,
        subresource: target.subresource.as_deref(),
        namespace: target.namespace.as_deref(),
        name: target.name.as_deref().unwrap_or_default(),
    };
    lock(&shared.auth).authorize(&caller.user, &attrs)?;

    let partial = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("as=PartialObjectMetadata"));
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    match verb {
        "get" => {
            let store = lock(&shared.store);
            let key = super::store::Key {
                type_index: target.type_index,
                namespace,
                name: name.clone(),
            };
            let object = store.get(&key).ok_or_else(|| ApiError::not_found(&target.rt, &name))?;
            Ok(json_response(StatusCode::OK, &watch::present(object, partial)))
        }
        "list" => list(shared, &target, &query, partial),
        "watch" => start_watch(shared, &target, &query, partial),
        _ => {
            let (headers, body) = (request.headers().clone(), read_json(request.into_body()).await?);
            write_verb(shared, &caller, &target, verb, &query, &headers, body)
        }
    }
}

async fn read_json(body: Body) -> Result<Value, ApiError> {
    let bytes = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body failed: {e}")))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "the API server double reads JSON bodies only (apply configurations too): {e}"
        ))
    })
}

fn filter(target: &Target, query: &HashMap<String, String>) -> Result<Filter, ApiError> {
    Ok(Filter {
        type_index: target.type_index,
        namespace: target.namespace.clone(),
        labels: LabelSelector::parse(query.get("labelSelector").map(String::as_str).unwrap_or_default())?,
        fields: FieldSelector::parse(
            query.get("fieldSelector").map(String::as_str).unwrap_or_default(),
            &target.rt,
        )?,
    })
}

fn list_body(rt: &ResourceType, items: Vec<Value>, metadata: Value, partial: bool) -> Value {
    let (api_version, kind) = if partial {
        ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadataList".to_owned())
    } else {
        (rt.api_version(), format!("{}List", rt.kind))
    };
    let items: Vec<Value> = items.iter().map(|o| watch::present(o, partial)).collect();
    json!({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items})
}

fn list(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    partial: bool,
) -> Result<Response, ApiError> {
    let filter = filter(target, query)?;
    let limit = match query.get("limit") {
        Some(limit) => Some(
            limit
                .parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {limit:?}")))?,
        ),
        None => None,
    };
    let page = lock(&shared.store).list(&filter, limit, query.get("continue").map(String::as_str))?;
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let (Some(token), Some(map)) = (page.continue_token, metadata.as_object_mut()) {
        map.insert("continue".into(), json!(token));
        map.insert("remainingItemCount".into(), json!(page.remaining));
    }
    Ok(json_response(
        StatusCode::OK,
        &list_body(&target.rt, page.items, metadata, partial),
    ))
}

fn start_watch(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    partial: bool,
) -> Result<Response, ApiError> {
    let resource_version = match query.get("resourceVersion").map(String::as_str) {
        None | Some("" | "0") => None,
        Some(rv) => Some(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {rv:?}")))?,
        ),
    };
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map_or(DEFAULT_WATCH_TIMEOUT, Duration::from_secs);
    let params = WatchParams {
        filter: filter(target, query)?,
        resource_version,
        send_initial_events: flag(query, "sendInitialEvents"),
        bookmarks: flag(query, "allowWatchBookmarks"),
        timeout,
        partial,
    };
    let body = {
        let store = lock(&shared.store);
        watch::start(&store, params, shared.epoch.subscribe(), shared.bookmark_interval)
    };
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// The field manager of a write: `fieldManager`, else the user agent up to its first `/`.
fn field_manager(query: &HashMap<String, String>, headers: &HeaderMap) -> String {
    if let Some(manager) = query.get("fieldManager") {
        return manager.clone();
    }
    headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .and_then(|ua| ua.split('/').next())
        .filter(|ua| !ua.is_empty())
        .unwrap_or("unknown")
        .to_owned()
}

fn write_verb(
    shared: &Shared,
    caller: &Caller,
    target: &Target,
    verb: &str,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Value,
) -> Result<Response, ApiError> {
    let manager = field_manager(query, headers);
    let namespace = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let request = WriteRequest {
        type_index: target.type_index,
        namespace: &namespace,
        name: &name,
        subresource: target.subresource.as_deref(),
        manager: &manager,
        now: super::now(),
    };
    let audit = |name: &str| AuditEntry {
        user: caller.user.name.clone(),
        impersonated_by: caller.impersonated_by.clone(),
        verb: verb.to_owned(),
        group: target.rt.group.clone(),
        resource: target.rt.plural.clone(),
        subresource: target.subresource.clone(),
        namespace: target.namespace.clone(),
        name: name.to_owned(),
    };
    let (code, answer, written) = {
        let mut store = lock(&shared.store);
        match verb {
            "create" => {
                let created = write::create(&mut store, &request, body)?;
                let name = created
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                (StatusCode::CREATED, created, vec![name])
            }
            "update" => (
                StatusCode::OK,
                write::replace(&mut store, &request, body)?,
                vec![name.clone()],
            ),
            "patch" => {
                let content_type = headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let kind = PatchKind::from_content_type(content_type)
                    .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
                let existed = store
                    .get(&super::store::Key {
                        type_index: target.type_index,
                        namespace: namespace.clone(),
                        name: name.clone(),
                    })
                    .is_some();
                let patched = write::patch(&mut store, &request, kind, body, flag(query, "force"))?;
                let code = if existed { StatusCode::OK } else { StatusCode::CREATED };
                (code, patched, vec![name.clone()])
            }
            "delete" => match write::delete(&mut store, &request, &body)? {
                Deletion::Gone(status) | Deletion::Pending(status) => (StatusCode::OK, status, vec![name.clone()]),
            },
            _ => {
                let filter = filter(target, query)?;
                let mut items = Vec::new();
                let mut names = Vec::new();
                for object in store.matching(&filter) {
                    let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) else {
                        continue;
                    };
                    let namespace = object
                        .pointer("/metadata/namespace")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let each = WriteRequest {
                        name,
                        namespace,
                        ..request.clone()
                    };
                    if let Deletion::Pending(updated) = write::delete(&mut store, &each, &body)? {
                        items.push(updated);
                    } else {
                        items.push(object.clone());
                    }
                    names.push(name.to_owned());
                }
                let metadata = json!({"resourceVersion": store.resource_version().to_string()});
                (StatusCode::OK, list_body(&target.rt, items, metadata, false), names)
            }
        }
    };
    let mut auth = lock(&shared.auth);
    auth.audit.extend(written.iter().map(|n| audit(n)));
    Ok(json_response(code, &answer))
}

fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-muster-double",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": versions, "preferredVersion": versions.first()})
}

fn groups(shared: &Shared) -> Vec<(String, Vec<String>)> {
    let store = lock(&shared.store);
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for rt in store.registry.all().iter().filter(|t| !t.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == rt.group) {
            Some((_, versions)) if !versions.contains(&rt.version) => versions.push(rt.version.clone()),
            Some(_) => {}
            None => groups.push((rt.group.clone(), vec![rt.version.clone()])),
        }
    }
    groups
}

fn group_list(shared: &Shared) -> Value {
    let groups: Vec<Value> = groups(shared).iter().map(|(g, v)| group_json(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn group_info(shared: &Shared, group: &str) -> Result<Value, ApiError> {
    let (name, versions) = groups(shared)
        .into_iter()
        .find(|(g, _)| g == group)
        .ok_or_else(ApiError::no_such_resource)?;
    let mut info = group_json(&name, &versions);
    if let Some(map) = info.as_object_mut() {
        map.insert("kind".into(), json!("APIGroup"));
        map.insert("apiVersion".into(), json!("v1"));
    }
    Ok(info)
}

fn resource_list(shared: &Shared, group: &str, version: &str) -> Result<Response, ApiError> {
    let store = lock(&shared.store);
    let mut resources = Vec::new();
    for rt in store
        .registry
        .all()
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        resources.push(json!({
            "name": rt.plural, "singularName": rt.kind.to_lowercase(), "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        }));
        if rt.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", rt.plural), "singularName": "", "namespaced": rt.namespaced,
                "kind": rt.kind, "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if resources.is_empty() {
        return Err(ApiError::no_such_resource());
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    ))
}
