//! Durations as people type them: Go's `time.ParseDuration` forms (`5m`, `90s`, `1h30m`,
//! `1.5s`, `250ms`), a bare number meaning seconds, and back again for messages.

use std::time::Duration;

/// Parses `5m`, `1h30m`, `1.5s`, `250ms` or a bare number of seconds.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let invalid = || format!("invalid duration {text:?} (examples: 30s, 5m, 1h30m, 250ms, or seconds: 90)");
    if text.is_empty() {
        return Err(invalid());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_to_duration(seconds).ok_or_else(invalid);
    }
    let mut total = 0.0_f64;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, tail) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += value * scale;
        rest = tail;
    }
    seconds_to_duration(total).ok_or_else(invalid)
}

/// A positive, finite number of seconds as a duration.
pub(crate) fn seconds_to_duration(seconds: f64) -> Option<Duration> {
    if seconds.is_finite() && seconds > 0.0 {
        Duration::try_from_secs_f64(seconds).ok()
    } else {
        None
    }
}

/// `5m`, `1m30s`, `2s`, `1.5s`, `250ms`: short, in the largest units that fit.
pub(crate) fn format(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1000 {
        return format!("{millis}ms");
    }
    if !millis.is_multiple_of(1000) && millis < 60_000 {
        return format!("{}s", duration.as_secs_f64());
    }
    let secs = duration.as_secs();
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_style_durations_and_bare_seconds_parse() {
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("90"), Ok(Duration::from_secs(90)));
    }

    #[test]
    fn nonsense_zero_and_negative_durations_are_refused() {
        for bad in ["", "5x", "m", "0", "-3", "0s", "1.2.3s"] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn durations_format_in_the_largest_units_that_fit() {
        assert_eq!(format(Duration::from_secs(300)), "5m");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(2)), "2s");
        assert_eq!(format(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format(Duration::from_millis(250)), "250ms");
        assert_eq!(format(Duration::from_secs(3600)), "1h");
    }
}
