//! What the load generator reads from `/proc`: a process's CPU time (`utime + stime` of
//! `/proc/<pid>/stat`, all its threads, exited ones included), its resident set (`VmRSS`), its
//! open file descriptors, and its children.

use std::{fs, sync::OnceLock, time::Duration};

/// Clock ticks per second of `/proc/<pid>/stat` (`getconf CLK_TCK`; 100 on Linux).
fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3, the state, is index 0).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: split after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// The CPU time `pid` has used so far, user and system, all threads (`None`: no such process).
pub(crate) fn cpu_time(pid: u32) -> Option<Duration> {
    let fields = stat_fields(&pid.to_string())?;
    // utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let ticks = utime + stime;
    let per_sec = clock_ticks();
    Some(Duration::from_secs(ticks / per_sec) + Duration::from_nanos((ticks % per_sec) * 1_000_000_000 / per_sec))
}

/// The CPU time of this process.
pub(crate) fn own_cpu_time() -> Duration {
    cpu_time(std::process::id()).unwrap_or_default()
}

/// `VmRSS` of `pid`, in KiB.
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// How many file descriptors `pid` has open (its sockets among them).
pub(crate) fn fd_count(pid: u32) -> Option<usize> {
    Some(fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count())
}

/// The pids of `parent`'s live children.
pub(crate) fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parent = parent.to_string();
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            stat_fields(pid).is_some_and(|f| f.first().is_some_and(|s| s != "Z") && f.get(1) == Some(&parent))
        })
        .filter_map(|pid| pid.parse().ok())
        .collect()
}
