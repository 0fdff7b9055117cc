//! Where `serve` and `standalone` take their definitions from, and where a gateway keeps what it
//! writes.
//!
//! | given | definitions | events, workflow run records | changes through the core tools |
//! |---|---|---|---|
//! | `--config-path DIR` (or `MUSTER_CONFIG_PATH`) | `DIR` (it must exist) | beside them, in `DIR` | written to `DIR` |
//! | nothing, and the default directory is a config directory | the default directory | beside them | written to it |
//! | nothing, and it is not | the built-in default: the demo server and the `demo-tour` workflow | the data directory | kept until the gateway stops |
//!
//! The default directory is `$XDG_CONFIG_HOME/muster`, else `~/.config/muster` (the one `gateway
//! context` keeps `contexts.yaml` in); it is a config directory when it holds `config.yaml`,
//! `mcpservers/` or `workflows/` (`contexts.yaml` alone does not make one). The data directory is
//! `$XDG_DATA_HOME/muster`, else `~/.local/share/muster`. Nothing is created where the
//! definitions would be read from.
//!
//! The built-in default is `examples/config` of this repository, built into the binary: its demo
//! server is `command: "@self"`, the running gateway executable, so it starts from any directory.

use std::path::{Path, PathBuf};

use muster::{
    core::{
        config::MusterConfig,
        crd::{MCPServer, Workflow},
    },
    gateway::{Gateway, GatewayOptions, supervisor::SupervisorConfig},
};
use serde::de::DeserializeOwned;

/// The built-in default's `config.yaml`.
const DEFAULT_CONFIG: &str = include_str!("../config/config.yaml");
/// The built-in default's MCPServers.
const DEFAULT_SERVERS: [(&str, &str); 1] = [("mcpservers/demo.yaml", include_str!("../config/mcpservers/demo.yaml"))];
/// The built-in default's Workflows.
const DEFAULT_WORKFLOWS: [(&str, &str); 1] = [(
    "workflows/demo-tour.yaml",
    include_str!("../config/workflows/demo-tour.yaml"),
)];

/// Where a gateway's definitions come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConfigSource {
    /// A config directory (filesystem mode).
    Dir(PathBuf),
    /// The built-in default; `searched` is where a config directory would have been read.
    BuiltIn { searched: PathBuf, data_dir: PathBuf },
}

/// `$XDG_CONFIG_HOME/muster`, else `~/.config/muster`.
pub(crate) fn muster_config_home() -> PathBuf {
    xdg_dir("XDG_CONFIG_HOME", ".config").join("muster")
}

/// `$XDG_DATA_HOME/muster`, else `~/.local/share/muster`.
pub(crate) fn muster_data_home() -> PathBuf {
    xdg_dir("XDG_DATA_HOME", ".local/share").join("muster")
}

/// The directory `variable` names when set and absolute (the XDG rule), else `$HOME/<fallback>`.
fn xdg_dir(variable: &str, fallback: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(fallback)))
        .unwrap_or_else(|| PathBuf::from(".").join(fallback))
}

/// Whether `dir` holds definitions (`config.yaml`, `mcpservers/` or `workflows/`).
fn is_config_dir(dir: &Path) -> bool {
    ["config.yaml", "mcpservers", "workflows"]
        .iter()
        .any(|entry| dir.join(entry).exists())
}

impl ConfigSource {
    /// The source `config_path` (`--config-path` or `MUSTER_CONFIG_PATH`) names, else the
    /// default directory when it is a config directory, else the built-in default. A directory
    /// named explicitly must exist.
    pub(crate) fn resolve(config_path: Option<PathBuf>) -> Result<Self, String> {
        match config_path {
            Some(dir) if dir.is_dir() => Ok(Self::Dir(dir)),
            Some(dir) => Err(format!(
                "the config directory {} does not exist; create it (with config.yaml, mcpservers/, workflows/), or \
                 leave --config-path and MUSTER_CONFIG_PATH out to serve {} or the built-in default",
                dir.display(),
                muster_config_home().display()
            )),
            None => {
                let home = muster_config_home();
                if is_config_dir(&home) {
                    Ok(Self::Dir(home))
                } else {
                    Ok(Self::BuiltIn {
                        searched: home,
                        data_dir: muster_data_home(),
                    })
                }
            }
        }
    }

    /// The gateway of this source, with the files left out (a config directory's bad files).
    /// A config directory is watched by the caller ([`Gateway::watch_config_dir`]).
    pub(crate) fn gateway(
        &self,
        supervision: SupervisorConfig,
    ) -> Result<(Gateway, Vec<String>), Box<dyn std::error::Error>> {
        match self {
            Self::Dir(dir) => {
                let (gateway, problems) = Gateway::from_config_dir(dir, supervision)
                    .map_err(|e| format!("cannot start from {}: {e}", dir.display()))?;
                Ok((gateway, problems.iter().map(ToString::to_string).collect()))
            }
            Self::BuiltIn { searched, data_dir } => {
                let (config, servers, workflows) = built_in()?;
                let options = GatewayOptions::default()
                    .with_supervision(supervision)
                    .with_data_dir(data_dir)?;
                tracing::info!(
                    "no config directory at {} (create one there, or pass --config-path): serving the built-in \
                     default, the demo server and the demo-tour workflow; events and workflow runs are kept in {}, \
                     changes made through the core tools last until the gateway stops",
                    searched.display(),
                    data_dir.display()
                );
                Ok((Gateway::with_options(config, servers, workflows, options)?, Vec::new()))
            }
        }
    }

    /// The configuration of a config directory that asks for Kubernetes mode
    /// (`kubernetes: true`), and what was wrong with its `config.yaml`: its definitions are then
    /// the cluster's, not the directory's. Only the `kubernetes` key is read to decide, so that
    /// filesystem mode reads (and warns about) the directory once.
    pub(crate) fn kubernetes_config(&self) -> Option<(MusterConfig, Vec<String>)> {
        #[derive(serde::Deserialize)]
        struct Mode {
            #[serde(default)]
            kubernetes: bool,
        }
        let Self::Dir(dir) = self else { return None };
        let text = std::fs::read_to_string(dir.join("config.yaml")).ok()?;
        let mode: Mode = serde_saphyr::from_str(&text).ok()?;
        if !mode.kubernetes {
            return None;
        }
        let loaded = muster::gateway::definitions::config_dir::load(dir).ok()?;
        Some((loaded.config, loaded.problems.iter().map(ToString::to_string).collect()))
    }

    /// What the `configuration loaded` log line names.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Dir(dir) => dir.display().to_string(),
            Self::BuiltIn { .. } => "built-in default".to_owned(),
        }
    }
}

/// The built-in default: `examples/config` as built into the binary.
pub(crate) fn built_in() -> Result<(MusterConfig, Vec<MCPServer>, Vec<Workflow>), String> {
    let config: MusterConfig = parse("config.yaml", DEFAULT_CONFIG)?;
    let servers = DEFAULT_SERVERS
        .iter()
        .map(|(file, text)| {
            let server: MCPServer = parse(file, text)?;
            server
                .validate()
                .map_err(|e| format!("built-in {file}: {}", e.to_lines().join("; ")))?;
            Ok(server)
        })
        .collect::<Result<_, String>>()?;
    let workflows = DEFAULT_WORKFLOWS
        .iter()
        .map(|(file, text)| parse(file, text))
        .collect::<Result<_, String>>()?;
    Ok((config, servers, workflows))
}

fn parse<T: DeserializeOwned>(file: &str, text: &str) -> Result<T, String> {
    serde_saphyr::from_str(text).map_err(|e| format!("built-in {file}: {e}"))
}
