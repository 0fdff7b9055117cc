//! Where the gauges come from: a [`MetricsSource`] answers with a [`GaugeSnapshot`] at each
//! scrape. The gateway's registry is one.

use muster_core::crd::MCPServerState;

/// What the gauges show at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GaugeSnapshot {
    /// Every defined server and its state.
    pub upstreams: Vec<(String, MCPServerState)>,
    /// Tools in the shared catalogue.
    pub catalog_tools: usize,
    /// Resources in the shared catalogue.
    pub catalog_resources: usize,
    /// Prompts in the shared catalogue.
    pub catalog_prompts: usize,
    /// MCP client sessions connected now.
    pub sessions: usize,
}

/// Answers the gauges at each scrape. Keep it quick: it runs while the scrape waits, and must
/// not block on anything but short-lived locks.
pub trait MetricsSource: Send + Sync + 'static {
    /// The gauges now.
    fn gauge_snapshot(&self) -> GaugeSnapshot;
}
