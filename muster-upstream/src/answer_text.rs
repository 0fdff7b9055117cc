//! How what a server answered reads in an error message: its body trimmed ([`trimmed`]), and
//! the `: …` tails of [`UpstreamError`](crate::UpstreamError) and the SSE transport's errors.
//!
//! ```ignore
//! assert_eq!(trimmed("  Service\n  Unavailable "), "Service Unavailable");
//! assert_eq!(said_text(""), "");
//! assert_eq!(challenge_text(None), " with no WWW-Authenticate challenge");
//! ```

/// The longest answer body kept in an error, in characters.
const SAID_CHARS: usize = 300;

/// `body` for an error message: whitespace runs collapsed to one space, cut at
/// [`SAID_CHARS`] characters.
pub(crate) fn trimmed(body: &str) -> String {
    let mut out = String::new();
    for (n, word) in body.split_whitespace().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(word);
        if out.chars().count() > SAID_CHARS {
            out = out.chars().take(SAID_CHARS).collect();
            out.push('…');
            break;
        }
    }
    out
}

/// `: <what the server said>`, or nothing when it said nothing.
pub(crate) fn said_text(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!(": {said}")
    }
}

/// `: <challenge>`, or a note that the answer carried none.
pub(crate) fn challenge_text(challenge: Option<&str>) -> String {
    match challenge {
        Some(challenge) => format!(": {challenge}"),
        None => " with no WWW-Authenticate challenge".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_server_said_is_trimmed_and_bounded() {
        assert_eq!(trimmed("  a\n\n b\tc  "), "a b c");
        let long = "x".repeat(1000);
        let kept = trimmed(&long);
        assert_eq!(kept.chars().count(), SAID_CHARS + 1);
        assert!(kept.ends_with('…'));
    }
}
