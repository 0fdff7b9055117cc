//! [`EventLog`]: the recent events in memory, a broadcast for followers, and the daily files.

use std::{
    collections::VecDeque,
    fs::{File, OpenOptions},
    io::{self, BufRead, BufReader, BufWriter, Write},
    path::{Path, PathBuf},
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{self, Receiver, SyncSender, TrySendError},
    },
    time::{Duration, Instant},
};

use chrono::{NaiveDate, Utc};
use tokio::sync::broadcast;

use super::{Event, EventBackend, EventQuery, EventQueryResult};

/// The folder of the event files inside the config directory.
pub const EVENTS_DIR: &str = "events";

/// How many events a follower may fall behind before it misses some.
const BROADCAST_CAPACITY: usize = 1024;

/// How many events may wait for the disk before new ones are kept in memory only.
const WRITE_QUEUE: usize = 8192;

/// How an [`EventLog`] keeps events.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventLogOptions {
    /// How many of the newest events are kept in memory for queries. Default 10,000.
    pub capacity: usize,
    /// How many days of event files are kept; older files are removed. Default 30.
    pub retention_days: u32,
}

impl Default for EventLogOptions {
    fn default() -> Self {
        Self {
            capacity: 10_000,
            retention_days: 30,
        }
    }
}

impl EventLogOptions {
    /// Keeps `capacity` events in memory (at least 1).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// Keeps `days` days of files.
    pub fn with_retention_days(mut self, days: u32) -> Self {
        self.retention_days = days;
        self
    }
}

/// muster's event log. Cheap to clone; every clone is the same log.
///
/// [`emit`](Self::emit) never waits for the disk: it appends to the in-memory window (the
/// newest [`EventLogOptions::capacity`] events), sends to the followers, and hands the event
/// to the log's writer thread. A log opened with [`EventLog::open`] writes
/// `<config dir>/events/events-YYYY-MM-DD.json` (UTC day of the event, one JSON object per
/// line, appended) and removes files older than [`EventLogOptions::retention_days`] when it
/// opens a new day's file.
///
/// The writer is a dedicated thread fed by a bounded queue rather than a tokio task: `emit`
/// works from any thread, inside a runtime or not, without blocking it; file I/O, blocking by
/// nature, never occupies a runtime worker; and the order of the file is the order of
/// `emit`. When the queue is full (the disk has stalled) an event is kept in memory and sent
/// to followers but not written, and a warning says so. A write error is logged with
/// `tracing` when it starts and when it ends, never raised to the emitter.
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Inner>,
}

struct Inner {
    window: Mutex<VecDeque<Event>>,
    capacity: usize,
    followers: broadcast::Sender<Event>,
    writer: Option<WriterHandle>,
    backend: Option<Arc<dyn EventBackend>>,
}

struct WriterHandle {
    dir: PathBuf,
    queue: SyncSender<Command>,
    dropping: AtomicBool,
    dropped: AtomicU64,
}

enum Command {
    Write(Box<Event>),
    Flush(mpsc::Sender<()>),
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("events", &self.len())
            .field("capacity", &self.inner.capacity)
            .field("dir", &self.dir())
            .field("backend", &self.inner.backend.is_some())
            .finish()
    }
}

impl EventLog {
    /// A log kept in memory only, with the default options.
    pub fn in_memory() -> Self {
        Self::in_memory_with(EventLogOptions::default())
    }

    /// A log kept in memory only.
    pub fn in_memory_with(options: EventLogOptions) -> Self {
        Self::build(VecDeque::new(), options.capacity, None, None)
    }

    /// A log kept in memory that also records every event with `backend` and answers
    /// [`query_recorded`](Self::query_recorded) (and so `core_events`) from it; see
    /// [`EventBackend`]. Kubernetes mode's log, with muster-kube's `KubeEvents`.
    pub fn with_backend(backend: Arc<dyn EventBackend>, options: EventLogOptions) -> Self {
        Self::build(VecDeque::new(), options.capacity, None, Some(backend))
    }

    /// The log of the config directory `config_dir`, with the default options: creates
    /// `events/`, removes expired files, and loads the newest events of the kept files so
    /// queries see the events of earlier runs.
    pub fn open(config_dir: impl AsRef<Path>) -> io::Result<Self> {
        Self::open_with(config_dir, EventLogOptions::default())
    }

    /// [`EventLog::open`] with `options`.
    pub fn open_with(config_dir: impl AsRef<Path>, options: EventLogOptions) -> io::Result<Self> {
        let capacity = options.capacity.max(1);
        let dir = config_dir.as_ref().join(EVENTS_DIR);
        std::fs::create_dir_all(&dir)?;
        let today = Utc::now().date_naive();
        remove_expired(&dir, today, options.retention_days);
        let window = load_recent(&dir, capacity)?;
        let (queue, receiver) = mpsc::sync_channel(WRITE_QUEUE);
        let writer_dir = dir.clone();
        let retention_days = options.retention_days;
        std::thread::Builder::new()
            .name("muster-events".into())
            .spawn(move || Writer::new(writer_dir, retention_days).run(receiver))?;
        let writer = WriterHandle {
            dir,
            queue,
            dropping: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        };
        Ok(Self::build(window, capacity, Some(writer), None))
    }

    fn build(
        window: VecDeque<Event>,
        capacity: usize,
        writer: Option<WriterHandle>,
        backend: Option<Arc<dyn EventBackend>>,
    ) -> Self {
        let (followers, _) = broadcast::channel(BROADCAST_CAPACITY);
        Self {
            inner: Arc::new(Inner {
                window: Mutex::new(window),
                capacity: capacity.max(1),
                followers,
                writer,
                backend,
            }),
        }
    }

    /// Records `event`: into the window, to every follower, (for a log on disk) to the
    /// writer, and to the backend ([`EventLog::with_backend`]), as the backend
    /// [prepared](EventBackend::prepare) it. Never blocks on I/O; callable from any thread or
    /// task.
    pub fn emit(&self, mut event: Event) {
        if let Some(backend) = &self.inner.backend {
            backend.prepare(&mut event);
        }
        tracing::debug!(
            kind = %event.involved_object.kind,
            name = %event.involved_object.name,
            reason = %event.reason,
            "event: {}",
            event.message
        );
        let mut window = self.window();
        // Everything under the one lock, so the window, the followers and the file see the
        // same order.
        if let Some(writer) = &self.inner.writer {
            writer.send(&event);
        }
        if let Some(backend) = &self.inner.backend {
            backend.record(&event);
        }
        let _no_followers = self.inner.followers.send(event.clone());
        if window.len() >= self.inner.capacity {
            window.pop_front();
        }
        window.push_back(event);
    }

    /// A receiver of every event emitted from now on. A follower that falls more than 1024
    /// events behind gets [`broadcast::error::RecvError::Lagged`] and continues with newer ones.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.followers.subscribe()
    }

    /// The newest events `query` selects, newest first, `query.limit` at most.
    pub fn query(&self, query: &EventQuery) -> Vec<Event> {
        self.query_with_total(query).events
    }

    /// [`EventLog::query`] together with the number of matches before the limit.
    pub fn query_with_total(&self, query: &EventQuery) -> EventQueryResult {
        // Newest emitted first, so later-emitted come first among equal times; filtered before
        // it is cloned.
        let window = self.window();
        EventQueryResult::from_matches(window.iter().rev().filter(|e| query.matches(e)).cloned(), query)
    }

    /// The events `query` selects where this log records them: from its
    /// [backend](EventLog::with_backend) when it has one (the events of every process recording
    /// there), else from its memory ([`EventLog::query_with_total`]). When the backend fails to
    /// answer, the answer comes from memory and a warning says why.
    pub async fn query_recorded(&self, query: &EventQuery) -> EventQueryResult {
        let Some(backend) = &self.inner.backend else {
            return self.query_with_total(query);
        };
        match backend.query(query).await {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(%error, "cannot read the recorded events; answering with this replica's own");
                self.query_with_total(query)
            }
        }
    }

    /// How many events the window holds.
    pub fn len(&self) -> usize {
        self.window().len()
    }

    /// Whether the window holds no event.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The folder of the event files; `None` for a log in memory.
    pub fn dir(&self) -> Option<&Path> {
        self.inner.writer.as_ref().map(|w| w.dir.as_path())
    }

    /// Blocks the calling thread until every event emitted so far is written to its file, or
    /// `timeout` passes; `true` when written. For shutdown and tests; from async code call it
    /// inside `spawn_blocking`. A log in memory has nothing to write.
    pub fn flush(&self, timeout: Duration) -> bool {
        let Some(writer) = &self.inner.writer else {
            return true;
        };
        let deadline = Instant::now() + timeout;
        let (ack, acked) = mpsc::channel();
        let mut command = Command::Flush(ack);
        loop {
            match writer.queue.try_send(command) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    command = back;
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        acked
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }

    fn window(&self) -> MutexGuard<'_, VecDeque<Event>> {
        self.inner.window.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl WriterHandle {
    fn send(&self, event: &Event) {
        match self.queue.try_send(Command::Write(Box::new(event.clone()))) {
            Ok(()) => {
                if self.dropping.swap(false, Ordering::Relaxed) {
                    let dropped = self.dropped.swap(0, Ordering::Relaxed);
                    tracing::warn!(
                        dropped,
                        "event log writer caught up; events in between were not written"
                    );
                }
            }
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        dir = %self.dir.display(),
                        "event log writer is behind; new events are kept in memory but not written"
                    );
                }
            }
            Err(TrySendError::Disconnected(_)) => {
                if !self.dropping.swap(true, Ordering::Relaxed) {
                    tracing::warn!(dir = %self.dir.display(), "event log writer has stopped; events are not written");
                }
            }
        }
    }
}

/// The writer thread's state: the open day file, and whether writing is failing.
struct Writer {
    dir: PathBuf,
    retention_days: u32,
    file: Option<(NaiveDate, BufWriter<File>)>,
    failing: bool,
}

impl Writer {
    fn new(dir: PathBuf, retention_days: u32) -> Self {
        Self {
            dir,
            retention_days,
            file: None,
            failing: false,
        }
    }

    fn run(mut self, queue: Receiver<Command>) {
        // Block for one command, then take what else is queued, then flush once: a burst of
        // events costs one flush.
        while let Ok(first) = queue.recv() {
            let mut acks = Vec::new();
            let mut next = Some(first);
            while let Some(command) = next {
                match command {
                    Command::Write(event) => self.write(&event),
                    Command::Flush(ack) => acks.push(ack),
                }
                next = queue.try_recv().ok();
            }
            self.flush();
            for ack in acks {
                let _gone = ack.send(());
            }
        }
        self.flush();
    }

    fn write(&mut self, event: &Event) {
        let day = event.timestamp.date_naive();
        let result = self.file_for(day).and_then(|file| {
            let line = serde_json::to_string(event).map_err(io::Error::other)?;
            file.write_all(line.as_bytes())?;
            file.write_all(b"\n")
        });
        self.record(result, day);
    }

    fn file_for(&mut self, day: NaiveDate) -> io::Result<&mut BufWriter<File>> {
        if self.file.as_ref().is_none_or(|(open, _)| *open != day) {
            if let Some((_, mut old)) = self.file.take() {
                let _logged_on_write = old.flush();
            }
            std::fs::create_dir_all(&self.dir)?;
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.dir.join(file_name(day)))?;
            remove_expired(&self.dir, Utc::now().date_naive(), self.retention_days);
            self.file = Some((day, BufWriter::new(file)));
        }
        match &mut self.file {
            Some((_, file)) => Ok(file),
            None => Err(io::Error::other("no event file open")),
        }
    }

    fn flush(&mut self) {
        if let Some((day, file)) = &mut self.file {
            let day = *day;
            let result = file.flush();
            self.record(result, day);
        }
    }

    /// Logs the start and the end of a run of failures; drops the file after a failure so
    /// the next event opens it anew.
    fn record(&mut self, result: io::Result<()>, day: NaiveDate) {
        match result {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::info!(dir = %self.dir.display(), "writing the event log works again");
            }
            Ok(()) => {}
            Err(error) => {
                self.file = None;
                if !self.failing {
                    self.failing = true;
                    tracing::warn!(
                        file = %self.dir.join(file_name(day)).display(),
                        %error,
                        "cannot write the event log; events stay in memory"
                    );
                }
            }
        }
    }
}

/// `events-YYYY-MM-DD.json`.
fn file_name(day: NaiveDate) -> String {
    format!("events-{}.json", day.format("%Y-%m-%d"))
}

/// The day of an event file's name, `None` for any other file.
fn file_day(name: &str) -> Option<NaiveDate> {
    let date = name.strip_prefix("events-")?.strip_suffix(".json")?;
    NaiveDate::parse_from_str(date, "%Y-%m-%d").ok()
}

/// The event files of `dir` with their days, newest first.
fn event_files(dir: &Path) -> io::Result<Vec<(NaiveDate, PathBuf)>> {
    let mut files: Vec<(NaiveDate, PathBuf)> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|entry| Some((file_day(entry.file_name().to_str()?)?, entry.path())))
        .collect();
    files.sort_by_key(|(day, _)| std::cmp::Reverse(*day));
    Ok(files)
}

/// Removes the event files more than `retention_days` days before `today`.
fn remove_expired(dir: &Path, today: NaiveDate, retention_days: u32) {
    let Some(cutoff) = today.checked_sub_days(chrono::Days::new(u64::from(retention_days))) else {
        return;
    };
    let files = match event_files(dir) {
        Ok(files) => files,
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot list the event files");
            return;
        }
    };
    for (day, path) in files.into_iter().filter(|(day, _)| *day < cutoff) {
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(file = %path.display(), %day, "removed an expired event file"),
            Err(error) => tracing::warn!(file = %path.display(), %error, "cannot remove an expired event file"),
        }
    }
}

/// The newest `capacity` events of the files in `dir`, oldest first. Lines that are not
/// events are skipped; an unreadable file is skipped with a warning.
fn load_recent(dir: &Path, capacity: usize) -> io::Result<VecDeque<Event>> {
    let mut days: Vec<Vec<Event>> = Vec::new();
    let mut loaded = 0;
    for (_, path) in event_files(dir)? {
        if loaded >= capacity {
            break;
        }
        match read_events(&path) {
            Ok(events) => {
                loaded += events.len();
                days.push(events);
            }
            Err(error) => tracing::warn!(file = %path.display(), %error, "cannot read an event file"),
        }
    }
    let mut events: Vec<Event> = days.into_iter().rev().flatten().collect();
    events.sort_by_key(|event| event.timestamp);
    let skip = events.len().saturating_sub(capacity);
    Ok(events.into_iter().skip(skip).collect())
}

fn read_events(path: &Path) -> io::Result<Vec<Event>> {
    let mut events = Vec::new();
    for (number, line) in BufReader::new(File::open(path)?).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Event>(&line) {
            Ok(event) => events.push(event),
            Err(error) => {
                tracing::debug!(file = %path.display(), line = number + 1, %error, "skipped a line that is not an event")
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use chrono::{DateTime, Days, TimeZone};

    use super::*;
    use crate::events::{EventType, reasons};

    const WAIT: Duration = Duration::from_secs(5);

    fn at(day: u32, h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 9, day, h, 0, 0)
            .single()
            .expect("valid time")
    }

    fn started(name: &str) -> Event {
        Event::mcp_server(name, reasons::MCP_SERVER_STARTED, format!("MCPServer {name} started"))
    }

    fn lines(path: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(path)
            .expect("readable")
            .lines()
            .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
            .collect()
    }

    #[test]
    fn queries_return_the_newest_matches_first_up_to_the_limit() {
        let log = EventLog::in_memory();
        for hour in 1..=5 {
            log.emit(started(&format!("s{hour}")).with_timestamp(at(21, hour)));
        }
        log.emit(Event::workflow("wf", reasons::WORKFLOW_CREATED, "created").with_timestamp(at(21, 6)));
        let found = log.query_with_total(&EventQuery::new().with_resource_type("MCPServer").with_limit(2));
        assert_eq!(found.total, 5);
        let names: Vec<&str> = found.events.iter().map(Event::name).collect();
        assert_eq!(names, ["s5", "s4"]);
        assert_eq!(log.query(&EventQuery::new()).len(), 6);
    }

    #[test]
    fn the_window_keeps_only_the_newest_events() {
        let log = EventLog::in_memory_with(EventLogOptions::default().with_capacity(3));
        for n in 0..5 {
            log.emit(started(&format!("s{n}")));
        }
        assert_eq!(log.len(), 3);
        let names: Vec<String> = log
            .query(&EventQuery::new())
            .iter()
            .map(|e| e.name().to_owned())
            .collect();
        assert_eq!(names, ["s4", "s3", "s2"]);
    }

    #[test]
    fn followers_receive_every_event_emitted_after_they_subscribe() {
        let log = EventLog::in_memory();
        log.emit(started("before"));
        let mut follower = log.subscribe();
        log.emit(started("after"));
        let received = follower.try_recv().expect("an event");
        assert_eq!(received.name(), "after");
        assert!(follower.try_recv().is_err());
    }

    #[test]
    fn emitting_works_from_many_threads() {
        let log = EventLog::in_memory();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    for n in 0..100 {
                        log.emit(started(&format!("t{t}-{n}")));
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.join().expect("no panic");
        }
        assert_eq!(log.len(), 400);
    }

    #[test]
    fn events_are_appended_to_the_file_of_their_utc_day() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = EventLog::open(dir.path()).expect("open");
        let today = Utc::now();
        log.emit(started("a").with_timestamp(today));
        log.emit(
            Event::mcp_server("a", reasons::MCP_SERVER_FAILED, "failed").with_details(
                crate::events::EventDetails::default()
                    .with_http_status(503)
                    .with_error("service unavailable"),
            ),
        );
        assert!(log.flush(WAIT));
        let file = dir.path().join(EVENTS_DIR).join(file_name(today.date_naive()));
        let written = lines(&file);
        assert_eq!(written.len(), 2);
        assert_eq!(written[0]["reason"], "MCPServerStarted");
        assert_eq!(written[0]["involvedObject"]["kind"], "MCPServer");
        assert_eq!(written[0]["involvedObject"]["name"], "a");
        assert_eq!(written[0]["namespace"], "default");
        assert_eq!(written[0]["type"], "Normal");
        assert_eq!(written[0]["source"], "muster");
        assert!(written[0].get("data").is_none());
        assert_eq!(written[1]["type"], "Warning");
        assert_eq!(written[1]["data"]["httpStatus"], 503);

        // A second log appends to the same file.
        drop(log);
        let again = EventLog::open(dir.path()).expect("reopen");
        again.emit(started("b"));
        assert!(again.flush(WAIT));
        assert_eq!(lines(&file).len(), 3);
    }

    #[test]
    fn a_reopened_log_answers_queries_about_earlier_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let now = Utc::now();
        {
            let log = EventLog::open(dir.path()).expect("open");
            log.emit(started("old").with_timestamp(now - chrono::TimeDelta::days(2)));
            log.emit(started("new").with_timestamp(now));
            assert!(log.flush(WAIT));
        }
        // A line Go muster wrote (local offset, count) and a line that is not an event.
        let today = dir.path().join(EVENTS_DIR).join(file_name(now.date_naive()));
        let mut file = OpenOptions::new().append(true).open(&today).expect("append");
        writeln!(file, "not json").expect("write");
        writeln!(
            file,
            r#"{{"timestamp":"{}","namespace":"default","involvedObject":{{"kind":"Workflow","name":"go","namespace":"default"}},"reason":"WorkflowCreated","message":"m","type":"Normal","source":"muster","count":3}}"#,
            (now - chrono::TimeDelta::hours(1)).with_timezone(&chrono::FixedOffset::east_opt(7200).expect("offset")).to_rfc3339()
        )
        .expect("write");
        drop(file);

        let log = EventLog::open(dir.path()).expect("reopen");
        let names: Vec<String> = log
            .query(&EventQuery::new())
            .iter()
            .map(|e| e.name().to_owned())
            .collect();
        assert_eq!(names, ["new", "go", "old"]);
        let go = log.query(&EventQuery::new().with_resource_name("go"));
        assert_eq!(go[0].count, 3);
        assert_eq!(go[0].event_type, EventType::Normal);
    }

    #[test]
    fn loading_keeps_only_the_newest_events_when_the_files_hold_more() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let log = EventLog::open(dir.path()).expect("open");
            for n in 0..10 {
                log.emit(started(&format!("s{n}")));
            }
            assert!(log.flush(WAIT));
        }
        let log = EventLog::open_with(dir.path(), EventLogOptions::default().with_capacity(4)).expect("reopen");
        assert_eq!(log.len(), 4);
        assert_eq!(log.query(&EventQuery::new())[0].name(), "s9");
    }

    #[test]
    fn files_older_than_the_retention_are_removed_and_others_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join(EVENTS_DIR);
        std::fs::create_dir_all(&events).expect("mkdir");
        let today = Utc::now().date_naive();
        let day = |n: u64| today.checked_sub_days(Days::new(n)).expect("in range");
        for n in [0, 30, 31, 45] {
            std::fs::write(events.join(file_name(day(n))), "").expect("write");
        }
        std::fs::write(events.join("events.log"), "legacy").expect("write");
        let _log = EventLog::open(dir.path()).expect("open");
        let mut left: Vec<String> = std::fs::read_dir(&events)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected = vec![file_name(day(30)), file_name(day(0)), "events.log".to_owned()];
        expected.sort();
        assert_eq!(left, expected);
    }

    #[test]
    fn a_failing_disk_never_reaches_the_emitter() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = EventLog::open(dir.path()).expect("open");
        // Replace the events folder by a file: every open of a day file fails from now on.
        std::fs::remove_dir_all(dir.path().join(EVENTS_DIR)).expect("rm");
        std::fs::write(dir.path().join(EVENTS_DIR), "in the way").expect("write");
        log.emit(started("a"));
        log.emit(started("b"));
        assert!(log.flush(WAIT));
        assert_eq!(log.query(&EventQuery::new()).len(), 2);
    }

    #[test]
    fn only_event_files_are_recognised() {
        assert_eq!(file_day("events-2026-09-21.json"), NaiveDate::from_ymd_opt(2026, 9, 21));
        assert_eq!(file_day("events-2026-13-01.json"), None);
        assert_eq!(file_day("events.log"), None);
        assert_eq!(file_day("events-2026-09-21.json.bak"), None);
    }
}
