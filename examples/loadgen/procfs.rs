//! What the load generator reads from `/proc`: a process's CPU time (`utime + stime` of
//! `/proc/<pid>/stat`, all its threads, exited ones included), its context switches (of its
//! live threads), its resident set (`VmRSS`), its open file descriptors (and their kinds), its
//! children and its command line.

use std::{collections::BTreeMap, fs, sync::OnceLock, time::Duration};

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

/// The context switches of `pid`'s live threads so far, voluntary (a thread waited: for I/O, a
/// lock, a wake-up) and not (it was preempted), from each `/proc/<pid>/task/<tid>/status`.
/// Threads that have exited are not counted (`None`: no such process).
pub(crate) fn context_switches(pid: u32) -> Option<u64> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut switches = 0;
    for task in tasks.flatten() {
        let Ok(status) = fs::read_to_string(task.path().join("status")) else {
            continue; // exited meanwhile
        };
        switches += switches_in(&status);
    }
    Some(switches)
}

/// The sum of the two context-switch counts of a `status` file.
fn switches_in(status: &str) -> u64 {
    status
        .lines()
        .filter_map(|l| {
            l.strip_prefix("voluntary_ctxt_switches:")
                .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
        })
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .sum()
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
    child_states(parent)
        .into_iter()
        .filter(|(_, state)| state != "Z")
        .map(|(pid, _)| pid)
        .collect()
}

/// How many of `parent`'s children are zombies (exited, not reaped).
pub(crate) fn zombie_children(parent: u32) -> usize {
    child_states(parent).iter().filter(|(_, state)| state == "Z").count()
}

/// `parent`'s children with their state (`R`, `S`, `Z`, ...).
fn child_states(parent: u32) -> Vec<(u32, String)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parent = parent.to_string();
    entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.bytes().all(|b| b.is_ascii_digit()))
        .filter_map(|pid| {
            let fields = stat_fields(&pid)?;
            if fields.get(1) != Some(&parent) {
                return None;
            }
            Some((pid.parse().ok()?, fields.first()?.clone()))
        })
        .collect()
}

/// The command line of `pid`, its arguments joined by spaces.
pub(crate) fn cmdline(pid: u32) -> Option<String> {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    Some(args.join(" "))
}

/// `pid`'s open file descriptors by kind: `socket`, `pipe`, `anon_inode:[eventpoll]` and the
/// like, `file` (a path), `/dev/null`.
pub(crate) fn fd_kinds(pid: u32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return kinds;
    };
    for entry in entries.filter_map(Result::ok) {
        let Ok(target) = fs::read_link(entry.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        let kind = if target.starts_with("socket:") {
            "socket".to_owned()
        } else if target.starts_with("pipe:") {
            "pipe".to_owned()
        } else if target.starts_with("anon_inode:") || target.starts_with("/dev/") {
            target
        } else {
            "file".to_owned()
        };
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_kinds_of_switch_are_counted() {
        let status = "Name:\tgateway\nvoluntary_ctxt_switches:\t120\nnonvoluntary_ctxt_switches:\t7\n";
        assert_eq!(super::switches_in(status), 127);
        assert_eq!(super::switches_in("Name:\tx\n"), 0);
        // This process has at least its main thread, which has switched by now.
        assert!(super::context_switches(std::process::id()).is_some());
    }
}
