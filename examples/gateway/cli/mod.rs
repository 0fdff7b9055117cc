//! The client commands: `list`, `get`, `call`, `check`, `events` and `auth` against a running
//! gateway.
//!
//! ```text
//! gateway list <tools|mcpservers|workflows|executions|services|resources|prompts>
//! gateway get <tool|mcpserver|workflow|execution|service|resource|prompt> <name>
//! gateway call <tool> [--arg key=value]... [--json '{...}']
//! gateway check <mcpserver|workflow> <name>
//! gateway events [--resource-type T] [--resource-name N] [--type Normal|Warning] [--since 1h] [-f]
//! gateway auth <status|login|logout> [--server S | --all]
//! gateway context <list|current|use|add|update|rename|delete|show>
//! ```
//!
//! Each command opens one MCP session with the gateway at `--endpoint` (`MUSTER_ENDPOINT`), else
//! at the endpoint of `--context` or the current context ([`context`]), else at
//! `http://127.0.0.1:8090/mcp`, as the agent bridge does ([`crate::connect`]), calls the
//! meta-tools muster maps it to, prints the answer with `-o table|wide|json|yaml`
//! ([`output`]) and exits 0 when done, 1 on an error, 2 when a sign-in is needed and 3 when one
//! failed ([`error`]). Errors go to stderr and say what to do next.

mod auth;
mod call;
mod client;
pub(crate) mod context;
pub(crate) mod error;
mod events;
mod output;
mod resources;
mod spinner;

use std::{process::ExitCode, time::Duration};

use clap::{Args, Subcommand};

use self::{
    client::Client,
    error::CliError,
    events::EventFilters,
    output::Out,
    resources::{CheckKind, GetKind, ListFilters, ListKind},
};
use crate::agent::parse_duration;

/// How every client command reaches the gateway and prints.
#[derive(Debug, Clone, Args)]
pub(crate) struct ClientOpts {
    /// The gateway's MCP endpoint [default: the current context's, else http://127.0.0.1:8090/mcp].
    #[arg(long, env = "MUSTER_ENDPOINT", global = true)]
    pub(crate) endpoint: Option<String>,
    /// The context (a named endpoint, see `gateway context`) to use instead of the current one.
    #[arg(long, env = "MUSTER_CONTEXT", global = true)]
    pub(crate) context: Option<String>,
    /// Output format: aligned columns fitting the terminal (table, wide: more columns), or the
    /// structured data (json, yaml).
    #[arg(short, long, value_enum, default_value_t = Format::Table, global = true)]
    pub(crate) output: Format,
    /// An access token for a gateway that requires one (aggregator.oauth.server), sent as
    /// `Authorization: Bearer`.
    #[arg(long, env = "MUSTER_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<String>,
    /// How long to wait for each answer of the gateway (e.g. 30s, 5m); a call still running then
    /// is cancelled.
    #[arg(long, default_value = "5m", value_parser = parse_duration, global = true)]
    pub(crate) timeout: Duration,
}

const LIST_HELP: &str = "Examples:
  gateway list tools
  gateway list tools --filter 'x_demo_*' -o wide
  gateway list mcpservers -o json
  gateway list executions --workflow demo-tour --status failed
  gateway list services --endpoint http://127.0.0.1:9000/mcp";

const GET_HELP: &str = "Examples:
  gateway get mcpserver demo
  gateway get tool x_demo_add -o yaml
  gateway get workflow demo-tour -o wide
  gateway get execution 3f6c9a1e-... --step greet
  gateway get resource demo://greeting --server demo";

const CALL_HELP: &str = "Examples:
  gateway call x_demo_echo --arg message=hello
  gateway call x_demo_add --arg a=40 --arg b=2 -o json
  gateway call workflow_demo-tour --json '{\"who\": \"you\"}'
  gateway call core_service_restart --arg name=demo

An --arg value that parses as JSON is that JSON (a=40 is a number, on=true a boolean); anything
else is a string. --arg wins over a key of --json. Exit code 1 when the tool reports an error,
2 when its server needs you to sign in (`gateway auth login --server <name>`).";

const CHECK_HELP: &str = "Examples:
  gateway check mcpserver demo
  gateway check workflow demo-tour -o json

Exit code 0 when ready, 1 when not, 2 when the server waits for you to sign in.";

const EVENTS_HELP: &str = "Examples:
  gateway events
  gateway events --resource-type MCPServer --resource-name demo --since 1h
  gateway events --type Warning -o json
  gateway events -f                # follow: print new events as they happen (Ctrl-C ends)";

const AUTH_HELP: &str = "Examples:
  gateway auth status
  gateway auth login --server github
  gateway auth login --all
  gateway auth logout --server github

login prints the sign-in link (it opens nothing) and waits until you completed it. Without
--token, a sign-in lasts only as long as the command's own session; with the gateway's front
door (aggregator.oauth.server) and --token, it is yours across commands.";

/// The client commands, as subcommands of `gateway`.
#[derive(Debug, Subcommand)]
pub(crate) enum ClientCommand {
    /// List tools, MCP servers, workflows, executions, services, resources or prompts.
    #[command(after_help = LIST_HELP)]
    List {
        /// What to list.
        #[arg(value_enum)]
        kind: ListKind,
        /// tools: only names matching this glob (e.g. 'x_demo_*').
        #[arg(long)]
        filter: Option<String>,
        /// executions: only executions of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// executions: only this status (inprogress, completed, failed).
        #[arg(long)]
        status: Option<String>,
        /// executions: the most to list (default 50).
        #[arg(long)]
        limit: Option<u32>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Show one tool, MCP server, workflow, execution, service, resource or prompt.
    #[command(after_help = GET_HELP)]
    Get {
        /// What it is.
        #[arg(value_enum)]
        kind: GetKind,
        /// Its name (an execution's id, a resource's URI).
        name: String,
        /// execution: only this step.
        #[arg(long)]
        step: Option<String>,
        /// resource: the server exposing the URI, when several do.
        #[arg(long)]
        server: Option<String>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Call a tool through the gateway and print its result.
    #[command(after_help = CALL_HELP)]
    Call {
        /// The tool's name (see `gateway list tools`).
        tool: String,
        /// An argument, key=value (repeatable).
        #[arg(short, long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
        /// The arguments as a JSON object.
        #[arg(long, value_name = "JSON")]
        json: Option<String>,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Check whether an MCP server is ready or a workflow can run.
    #[command(after_help = CHECK_HELP)]
    Check {
        /// What to check.
        #[arg(value_enum)]
        kind: CheckKind,
        /// Its name.
        name: String,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Show what happened to MCP servers and workflows, and follow it with -f.
    #[command(after_help = EVENTS_HELP)]
    Events {
        /// Only events of this kind of resource (MCPServer, Workflow).
        #[arg(long)]
        resource_type: Option<String>,
        /// Only events of the resource with this name.
        #[arg(long)]
        resource_name: Option<String>,
        /// Only events in this namespace.
        #[arg(long)]
        namespace: Option<String>,
        /// Only events of this type (Normal, Warning).
        #[arg(long = "type", value_name = "TYPE")]
        event_type: Option<String>,
        /// Only events at or after this time: a duration back from now (30m, 2h, 7d), an RFC 3339
        /// time, a date or "YYYY-MM-DD HH:MM:SS" (UTC).
        #[arg(long)]
        since: Option<String>,
        /// Only events at or before this time (same forms as --since).
        #[arg(long)]
        until: Option<String>,
        /// The most events to show first.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Keep printing new events as they happen, until interrupted.
        #[arg(short, long)]
        follow: bool,
        #[command(flatten)]
        opts: ClientOpts,
    },
    /// Sign in to, sign out of, and see your sign-ins to MCP servers that need one.
    #[command(after_help = AUTH_HELP)]
    Auth {
        #[command(subcommand)]
        command: AuthCommand,
        #[command(flatten)]
        opts: ClientOpts,
    },
}

/// `auth` subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum AuthCommand {
    /// Your sign-in state on every MCP server (core_auth_status).
    #[command(after_help = "Examples:\n  gateway auth status\n  gateway auth status --server github -o json")]
    Status {
        /// Only this server.
        #[arg(long, short)]
        server: Option<String>,
    },
    /// Print the link that signs you in to a server, and wait until you used it.
    #[command(
        after_help = "Examples:\n  gateway auth login --server github\n  gateway auth login --all\n  \
                      gateway auth login --server github --no-wait -o json\n\n\
                      Exit code 0 once signed in (or when already signed in), 3 when the sign-in failed or did \
                      not complete in time."
    )]
    Login {
        /// The server to sign in to.
        #[arg(long, short, required_unless_present = "all", conflicts_with = "all")]
        server: Option<String>,
        /// Every server waiting for your sign-in.
        #[arg(long)]
        all: bool,
        /// Print the link and end without waiting.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the sign-in.
        #[arg(long, default_value = "5m", value_parser = parse_duration)]
        wait: Duration,
    },
    /// Sign out of a server (core_auth_logout).
    #[command(after_help = "Examples:\n  gateway auth logout --server github\n  gateway auth logout --all")]
    Logout {
        /// The server to sign out of.
        #[arg(long, short, required_unless_present = "all", conflicts_with = "all")]
        server: Option<String>,
        /// Every server you are signed in to.
        #[arg(long)]
        all: bool,
    },
}

pub(crate) use self::output::Format;

/// Runs a `context` subcommand; its exit code.
pub(crate) fn run_context(command: &context::ContextCommand, format: Format) -> ExitCode {
    match context::run(command, &Out::detect(format)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => e.report(),
    }
}

/// A line on stderr, for notes beside the output.
pub(crate) fn note(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = std::io::Write::write_fmt(&mut stderr, format_args!("{text}\n"));
}

impl ClientCommand {
    fn opts(&self) -> &ClientOpts {
        match self {
            Self::List { opts, .. }
            | Self::Get { opts, .. }
            | Self::Call { opts, .. }
            | Self::Check { opts, .. }
            | Self::Events { opts, .. }
            | Self::Auth { opts, .. } => opts,
        }
    }
}

/// Runs a client command; its exit code.
pub(crate) async fn run(command: ClientCommand) -> ExitCode {
    match run_command(&command).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => e.report(),
    }
}

async fn run_command(command: &ClientCommand) -> Result<u8, CliError> {
    let opts = command.opts();
    let out = Out::detect(opts.output);
    // Arguments are checked before anything is sent.
    let call_arguments = match command {
        ClientCommand::Call { args, json, .. } => Some(call::arguments(json.as_deref(), args)?),
        _ => None,
    };
    let client = Client::connect(opts).await?;
    let result = match command {
        ClientCommand::List {
            kind,
            filter,
            workflow,
            status,
            limit,
            ..
        } => {
            let filters = ListFilters {
                filter: filter.clone(),
                workflow: workflow.clone(),
                status: status.clone(),
                limit: *limit,
            };
            resources::list(&client, &out, *kind, &filters).await
        }
        ClientCommand::Get {
            kind,
            name,
            step,
            server,
            ..
        } => {
            let detail = resources::Detail {
                step: step.as_deref(),
                server: server.as_deref(),
            };
            resources::get(&client, &out, *kind, name, detail).await
        }
        ClientCommand::Call { tool, .. } => call::call(&client, &out, tool, call_arguments.unwrap_or_default()).await,
        ClientCommand::Check { kind, name, .. } => resources::check(&client, &out, *kind, name).await,
        ClientCommand::Events {
            resource_type,
            resource_name,
            namespace,
            event_type,
            since,
            until,
            limit,
            follow,
            ..
        } => {
            let filters = EventFilters {
                resource_type: resource_type.clone(),
                resource_name: resource_name.clone(),
                namespace: namespace.clone(),
                event_type: event_type.clone(),
                since: since.clone(),
                until: until.clone(),
                limit: Some(*limit),
            };
            events::events(&client, &out, &filters, *follow).await
        }
        ClientCommand::Auth { command, .. } => match command {
            AuthCommand::Status { server } => auth::status(&client, &out, server.as_deref()).await,
            AuthCommand::Login {
                server, no_wait, wait, ..
            } => {
                let wait = (!no_wait).then_some(*wait);
                let token_given = opts.token.as_deref().is_some_and(|t| !t.trim().is_empty());
                match server {
                    Some(server) => auth::login(&client, &out, server, wait, token_given).await,
                    None => auth::login_all(&client, &out, wait, token_given).await,
                }
            }
            AuthCommand::Logout { server, .. } => match server {
                Some(server) => auth::logout(&client, &out, server).await,
                None => auth::logout_all(&client, &out).await,
            },
        },
    };
    client.close().await;
    result
}
