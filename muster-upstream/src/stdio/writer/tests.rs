use std::{process::Stdio, time::Duration};

use super::*;

/// `sh -c script` with its stdin piped: the child, and a writer to it.
fn child(script: &str) -> (tokio::process::Child, Arc<StdinWriter>) {
    let mut child = tokio::process::Command::new("sh")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("sh starts");
    let stdin = child.stdin.take().expect("piped");
    (child, StdinWriter::new(stdin))
}

/// The lines of `file` once the child has written them and exited.
async fn lines_of(mut child: tokio::process::Child, file: &std::path::Path) -> Vec<String> {
    tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the child ends with its input")
        .expect("waited");
    std::fs::read_to_string(file)
        .expect("written")
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_written_at_once_by_many_tasks_all_arrive_whole_each_tasks_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("out");
    let (child, writer) = child(&format!("cat > '{}'", file.display()));
    let tasks: Vec<_> = (0..20)
        .map(|task: usize| {
            let writer = Arc::clone(&writer);
            tokio::spawn(async move {
                for k in 0..20_usize {
                    // Some lines larger than a pipe holds, so writes go out part by part.
                    let pad = if (task + k).is_multiple_of(7) { 100_000 } else { k * 10 };
                    let line = format!("{task} {k} {}\n", "x".repeat(pad));
                    writer.write_line(line.as_bytes()).await.expect("written");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("joined");
    }
    tokio::time::timeout(Duration::from_secs(10), writer.closed())
        .await
        .expect("closed");
    let lines = lines_of(child, &file).await;
    assert_eq!(lines.len(), 400);
    let mut next = [0usize; 20];
    for line in &lines {
        let mut parts = line.split(' ');
        let task: usize = parts.next().and_then(|t| t.parse().ok()).expect("a task");
        let k: usize = parts.next().and_then(|k| k.parse().ok()).expect("a line number");
        let pad = parts.next().expect("the pad");
        assert_eq!(parts.next(), None, "one line, not two run together");
        assert!(pad.bytes().all(|b| b == b'x'), "nothing inside it");
        let expected = if (task + k).is_multiple_of(7) { 100_000 } else { k * 10 };
        assert_eq!(pad.len(), expected, "line {task} {k} whole");
        assert_eq!(k, next[task], "task {task}'s lines in order");
        next[task] += 1;
    }
}

#[tokio::test]
async fn a_write_dropped_part_way_is_finished_before_the_next_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("out");
    // Reads nothing for a while: a line larger than the pipe blocks part way.
    let (child, writer) = child(&format!("sleep 1; cat > '{}'", file.display()));
    let big = format!("big {}\n", "x".repeat(1 << 20));
    let write = writer.write_line(big.as_bytes());
    assert!(
        tokio::time::timeout(Duration::from_millis(200), write).await.is_err(),
        "the write blocked"
    );
    writer.write_line(b"small\n").await.expect("written after the big one");
    tokio::time::timeout(Duration::from_secs(10), writer.closed())
        .await
        .expect("closed");
    let lines = lines_of(child, &file).await;
    assert_eq!(
        lines.len(),
        2,
        "{:?}",
        lines.iter().map(String::len).collect::<Vec<_>>()
    );
    assert_eq!(lines[0].len(), big.len() - 1);
    assert_eq!(lines[1], "small");
}

#[tokio::test]
async fn a_server_that_closed_its_input_fails_the_write_and_every_later_one() {
    let (_child, writer) = child("exec 0<&-; exec sleep 30");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let error = writer.write_line(b"one\n").await.expect_err("nobody reads");
    assert_eq!(error.kind(), io::ErrorKind::BrokenPipe);
    let later = writer.write_line(b"two\n").await.expect_err("closed");
    assert_eq!(later.kind(), io::ErrorKind::BrokenPipe);
}

#[tokio::test]
async fn closing_waits_for_a_blocked_flusher_and_later_writes_fail() {
    let (mut child, writer) = child("exec sleep 60");
    let big = vec![b'x'; 1 << 20];
    let blocked = {
        let writer = Arc::clone(&writer);
        tokio::spawn(async move { writer.write_line(&big).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(200), writer.closed())
            .await
            .is_err(),
        "the flusher has the pipe"
    );
    let later = writer.write_line(b"late\n").await.expect_err("closed");
    assert_eq!(later.kind(), io::ErrorKind::NotConnected);
    child.kill().await.expect("killed");
    let failed = tokio::time::timeout(Duration::from_secs(10), blocked)
        .await
        .expect("the blocked write ends")
        .expect("joined");
    assert!(failed.is_err(), "{failed:?}");
    tokio::time::timeout(Duration::from_secs(10), writer.closed())
        .await
        .expect("closed once the flusher let go");
}
