//! A spinner on stderr for anything that waits longer than a second.
//!
//! [`waiting`] runs a future; when it has not finished after [`DELAY`] and stderr is a
//! terminal, a spinner with what is being waited for (and the latest progress the gateway
//! reported, when it reports any) turns on stderr until it finishes, and the line is cleared
//! again. Nothing is drawn when stderr is no terminal, so scripts and logs see none of it.

use std::{
    future::Future,
    io::{IsTerminal, Write},
    time::Duration,
};

use tokio::sync::watch;

/// How long a request may take before the spinner shows.
const DELAY: Duration = Duration::from_secs(1);

/// The frames, one every [`FRAME`].
const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const FRAME: Duration = Duration::from_millis(100);

/// Runs `work`; a spinner saying `what` (and the latest of `progress`) turns on stderr while it
/// takes longer than a second, when stderr is a terminal.
pub(crate) async fn waiting<F: Future>(
    what: &str,
    progress: Option<watch::Receiver<Option<String>>>,
    work: F,
) -> F::Output {
    if !std::io::stderr().is_terminal() {
        return work.await;
    }
    tokio::pin!(work);
    tokio::select! {
        out = &mut work => return out,
        () = tokio::time::sleep(DELAY) => {}
    }
    let mut ticker = tokio::time::interval(FRAME);
    let mut frame = 0;
    let out = loop {
        tokio::select! {
            out = &mut work => break out,
            _ = ticker.tick() => {
                let latest = progress.as_ref().and_then(|p| p.borrow().clone());
                draw(&line(FRAMES[frame % FRAMES.len()], what, latest.as_deref()));
                frame += 1;
            }
        }
    };
    draw("");
    out
}

/// The spinner's line: the frame, what is waited for, and the progress when there is some.
fn line(frame: char, what: &str, progress: Option<&str>) -> String {
    match progress {
        Some(p) if !p.is_empty() => format!("{frame} {what} ({p})"),
        _ => format!("{frame} {what}"),
    }
}

/// Replaces the current stderr line with `text`.
fn draw(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "\r\x1b[2K{text}");
    let _ = stderr.flush();
}

/// Progress as the spinner shows it: `3/10 message`, `3 message`, or the message alone.
pub(crate) fn describe_progress(progress: f64, total: Option<f64>, message: Option<&str>) -> String {
    let amount = match total {
        Some(total) if total > 0.0 => format!("{}/{}", trim(progress), trim(total)),
        _ => trim(progress),
    };
    match message {
        Some(m) if !m.is_empty() => format!("{amount} {m}"),
        _ => amount,
    }
}

fn trim(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_what_is_waited_for_and_the_progress() {
        assert_eq!(line('⠋', "calling x_demo_sleep", None), "⠋ calling x_demo_sleep");
        assert_eq!(
            line('⠙', "calling x_demo_sleep", Some("2/5 slept 2s")),
            "⠙ calling x_demo_sleep (2/5 slept 2s)"
        );
    }

    #[test]
    fn progress_reads_as_done_of_total() {
        assert_eq!(describe_progress(2.0, Some(5.0), Some("slept 2s")), "2/5 slept 2s");
        assert_eq!(describe_progress(0.5, None, None), "0.5");
        assert_eq!(describe_progress(1.98846542, Some(3.0), None), "2.0/3");
        assert_eq!(describe_progress(3.0, Some(0.0), Some("")), "3");
    }

    #[tokio::test]
    async fn without_a_terminal_the_work_just_runs() {
        // Tests run with stderr captured: no terminal, nothing drawn, the output comes back.
        assert_eq!(waiting("x", None, async { 7 }).await, 7);
    }
}
