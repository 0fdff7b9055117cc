//! Prints the configuration reference: every `config.yaml` key and every MCPServer, Workflow and
//! WorkflowExecution field, with its type, default and description, generated from the types'
//! JSON schemas (schemars) and their defaults.
//!
//! ```text
//! cargo run --example config_reference > docs/config-reference.md
//! ```
//!
//! `tests/config_reference.rs` regenerates it and fails when the checked-in file differs.

use std::io::Write as _;

mod reference;

fn main() -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(reference::config_reference().as_bytes())?;
    stdout.write_all(b"\n")?;
    stdout.flush()
}
