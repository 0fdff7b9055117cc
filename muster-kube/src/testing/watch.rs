//! Watch streams: newline-delimited `{"type": ..., "object": ...}` events over a chunked body.
//!
//! A watch starts, under the store's lock, by subscribing to new changes and collecting what
//! comes before them: the current objects as `ADDED` (`resourceVersion` absent or `0`, or
//! `sendInitialEvents=true`, which ends them with a bookmark annotated
//! `k8s.io/initial-events-end`), or the kept history after the given resourceVersion. A
//! resourceVersion older than the history answers one `ERROR` event carrying a 410 `Expired`
//! Status and ends the stream, which is what kube's watcher re-lists on.
//!
//! Selectors apply to each change as the API server's watch cache applies them: an object that
//! starts matching arrives as `ADDED`, one that stops matching as `DELETED`. Bookmarks (when the
//! client allows them) come on demand and at the configured interval. A stream ends at
//! `timeoutSeconds`, when the double drops its watches or becomes unavailable, or when it falls
//! too far behind (the client then resumes from its last resourceVersion).

use std::{convert::Infallible, time::Duration};

use axum::body::{Body, Bytes};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::{
    resource::ResourceType,
    store::{Change, ChangeKind, Filter, Signal, Store},
};

/// The parameters of one watch request.
#[derive(Debug, Clone)]
pub(crate) struct WatchParams {
    pub(crate) filter: Filter,
    /// `None` for an absent resourceVersion or `0`: start with the current objects.
    pub(crate) resource_version: Option<u64>,
    pub(crate) send_initial_events: bool,
    pub(crate) bookmarks: bool,
    pub(crate) timeout: Duration,
    /// `PartialObjectMetadata` was asked for in `Accept`.
    pub(crate) partial: bool,
}

/// How an object goes out: whole, or as `PartialObjectMetadata`.
pub(crate) fn present(object: &Value, partial: bool) -> Value {
    if !partial {
        return object.clone();
    }
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn line(event_type: &str, object: Value) -> Bytes {
    let mut text = json!({"type": event_type, "object": object}).to_string();
    text.push('\n');
    Bytes::from(text)
}

fn bookmark(rt: &ResourceType, partial: bool, resource_version: u64, initial_end: bool) -> Bytes {
    let (api_version, kind) = if partial {
        ("meta.k8s.io/v1".to_owned(), "PartialObjectMetadata".to_owned())
    } else {
        (rt.api_version(), rt.kind.clone())
    };
    let mut metadata = json!({"resourceVersion": resource_version.to_string(), "creationTimestamp": null});
    if initial_end && let Some(map) = metadata.as_object_mut() {
        map.insert("annotations".into(), json!({"k8s.io/initial-events-end": "true"}));
    }
    line(
        "BOOKMARK",
        json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}),
    )
}

/// The event a change is for this watch, if any (watch-cache semantics for selectors).
fn event_for(change: &Change, params: &WatchParams) -> Option<Bytes> {
    let filter = &params.filter;
    let now = filter.matches(change.type_index, &change.namespace, &change.object);
    let before = change
        .previous
        .as_ref()
        .is_some_and(|p| filter.matches(change.type_index, &change.namespace, p));
    let (event_type, object) = match (change.kind, before, now) {
        (ChangeKind::Added, _, true) => ("ADDED", change.object.clone()),
        (ChangeKind::Modified, true, true) => ("MODIFIED", change.object.clone()),
        (ChangeKind::Modified, false, true) => ("ADDED", change.object.clone()),
        (ChangeKind::Modified, true, false) => {
            // The object as it last matched, at this change's resourceVersion.
            let mut last = change.previous.clone().unwrap_or(Value::Null);
            if let Some(metadata) = last.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("resourceVersion".into(), json!(change.resource_version.to_string()));
            }
            ("DELETED", last)
        }
        (ChangeKind::Deleted, _, true) => ("DELETED", change.object.clone()),
        _ => return None,
    };
    Some(line(event_type, present(&object, params.partial)))
}

/// Starts a watch; call with the store locked so no change falls between the initial events
/// and the subscription.
pub(crate) fn start(
    store: &Store,
    params: WatchParams,
    mut epoch: watch::Receiver<u64>,
    bookmark_interval: Option<Duration>,
) -> Body {
    let mut signals = store.subscribe();
    let rt = store.resource_type(params.filter.type_index).clone();
    let mut initial = Vec::new();
    let mut ended = false;
    let current = store.resource_version();
    match params.resource_version {
        Some(rv) if !params.send_initial_events => match store.changes_since(rv, params.filter.type_index) {
            Ok(changes) => initial.extend(changes.iter().filter_map(|c| event_for(c, &params))),
            Err(expired) => {
                initial.push(line("ERROR", expired.to_status()));
                ended = true;
            }
        },
        _ => {
            for object in store.matching(&params.filter) {
                initial.push(line("ADDED", present(&object, params.partial)));
            }
            if params.send_initial_events && params.bookmarks {
                initial.push(bookmark(&rt, params.partial, current, true));
            }
        }
    }

    let (tx, rx) = mpsc::channel::<Result<Bytes, Infallible>>(64);
    tokio::spawn(async move {
        for event in initial {
            if tx.send(Ok(event)).await.is_err() {
                return;
            }
        }
        if ended {
            return;
        }
        let deadline = tokio::time::sleep(params.timeout);
        tokio::pin!(deadline);
        let period = bookmark_interval.unwrap_or(Duration::from_secs(3600));
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut seen = current;
        loop {
            let event = tokio::select! {
                () = &mut deadline => break,
                changed = epoch.changed() => {
                    let _ = changed;
                    break;
                }
                () = tx.closed() => break,
                _ = ticker.tick(), if bookmark_interval.is_some() && params.bookmarks => {
                    Some(bookmark(&rt, params.partial, seen, false))
                }
                signal = signals.recv() => match signal {
                    Ok(Signal::Change(change)) => {
                        seen = seen.max(change.resource_version);
                        event_for(&change, &params)
                    }
                    Ok(Signal::Bookmark(rv)) => {
                        seen = seen.max(rv);
                        params.bookmarks.then(|| bookmark(&rt, params.partial, seen, false))
                    }
                    // Too far behind, or the double is gone: end, the client resumes.
                    Err(broadcast::error::RecvError::Lagged(_) | broadcast::error::RecvError::Closed) => break,
                },
            };
            if let Some(event) = event
                && tx.send(Ok(event)).await.is_err()
            {
                break;
            }
        }
    });
    Body::from_stream(ReceiverStream::new(rx))
}
