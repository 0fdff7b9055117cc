//! How the gateway supervises each downstream server's connection: the backoff between
//! attempts and the health-check interval ([`SupervisorConfig`]).
//!
//! ```
//! use std::time::Duration;
//! use muster_upstream::supervision::SupervisorConfig;
//!
//! let config = SupervisorConfig::default().with_initial_backoff(Duration::from_secs(1));
//! // Doubled for each further failure, capped at the maximum (2 minutes by default).
//! assert_eq!(config.backoff(3), Duration::from_secs(4));
//! assert_eq!(config.backoff(30), Duration::from_secs(120));
//! ```

use std::time::Duration;

/// How supervisors retry and check health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SupervisorConfig {
    /// The wait after the first failure; doubled for each further one.
    pub initial_backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
    /// How often a connected server is pinged.
    pub health_interval: Duration,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            initial_backoff: Duration::from_secs(30),
            max_backoff: Duration::from_secs(120),
            health_interval: Duration::from_secs(30),
        }
    }
}

impl SupervisorConfig {
    /// The defaults, overridden by `MUSTER_MCPSERVER_INITIAL_BACKOFF` and
    /// `MUSTER_MCPSERVER_MAX_BACKOFF` (`500ms`, `1s`, `2m`, `1h`; a bad value is logged and
    /// ignored).
    pub fn from_env() -> Self {
        let mut config = Self::default();
        let read = |name: &str| {
            let value = std::env::var(name).ok()?;
            match parse_duration(&value) {
                Some(d) => Some(d),
                None => {
                    tracing::warn!(variable = name, value = %value, "not a duration (e.g. 500ms, 1s, 2m); ignored");
                    None
                }
            }
        };
        if let Some(d) = read("MUSTER_MCPSERVER_INITIAL_BACKOFF") {
            config.initial_backoff = d;
        }
        if let Some(d) = read("MUSTER_MCPSERVER_MAX_BACKOFF") {
            config.max_backoff = d;
        }
        config.max_backoff = config.max_backoff.max(config.initial_backoff);
        config
    }

    /// Sets the first backoff.
    pub fn with_initial_backoff(mut self, d: Duration) -> Self {
        self.initial_backoff = d;
        self.max_backoff = self.max_backoff.max(d);
        self
    }

    /// Sets the backoff cap.
    pub fn with_max_backoff(mut self, d: Duration) -> Self {
        self.max_backoff = d.max(self.initial_backoff);
        self
    }

    /// Sets the health check interval.
    pub fn with_health_interval(mut self, d: Duration) -> Self {
        self.health_interval = d;
        self
    }

    /// The wait before the next attempt after `failures` consecutive failures (at least one).
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(16);
        self.initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff)
    }
}

/// Parses `500ms`, `30s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: f64 = number.parse().ok()?;
    let seconds = match unit.trim() {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_at_thirty_seconds_doubles_and_caps_at_two_minutes() {
        let c = SupervisorConfig::default();
        let secs: Vec<u64> = (1..=5).map(|n| c.backoff(n).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 120, 120]);
        let fast = SupervisorConfig::default()
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_millis(250));
        assert_eq!(fast.backoff(1), Duration::from_millis(100));
        assert_eq!(fast.backoff(3), Duration::from_millis(250));
        assert_eq!(fast.backoff(u32::MAX), Duration::from_millis(250));
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
    }
}
