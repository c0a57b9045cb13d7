//! The command line, defined once: `main` dispatches on it, and the shell
//! completions and man pages are generated from the same definitions, so
//! help, completion and manual cannot disagree.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::home;
use crate::term::ColorChoice;

#[derive(Parser)]
#[command(
    name = "drydock",
    version,
    about = "Find out why a Docker container is broken and fix it safely"
)]
pub struct Cli {
    /// Colour: auto (a terminal and NO_COLOR unset), always or never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Write the CA, certificates, approver key, agent token and configs into $DRYDOCK_HOME.
    Init {
        /// Replace an existing home's keys and configs.
        #[arg(long)]
        force: bool,
        /// Where the daemons will run: `local` (`drydock up`), `compose`
        /// (deploy/compose.yaml: the executor's certificate names the
        /// service `executor`, the agent listens on TCP) or `systemd`
        /// (deploy/systemd: the agent listens on TCP). `compose` and
        /// `systemd` withhold every environment value but an allow list
        /// (`redact.env: all`). Sets what `init` prints as the next step.
        #[arg(long, value_enum, default_value_t = home::Layout::Local)]
        layout: home::Layout,
        #[arg(long, default_value_t = home::DEFAULT_EXECUTOR_PORT)]
        executor_port: u16,
        /// The agent's TCP port (with --agent-tcp, --agent-tls or a
        /// production --layout); compose publishes the same port.
        #[arg(long, env = "DRYDOCK_AGENT_PORT", default_value_t = home::DEFAULT_AGENT_PORT)]
        agent_port: u16,
        /// Extra DNS names for the executor's certificate (for example the compose service name).
        #[arg(long = "executor-name")]
        executor_names: Vec<String>,
        /// The approver id the executor knows this operator's key by.
        #[arg(long, default_value = home::DEFAULT_APPROVER_ID)]
        approver_id: String,
        /// A container-name glob drydock may see and act on (repeatable, for
        /// example 'shop-*'); without it, every container on the host
        /// except drydock's own.
        #[arg(long = "target")]
        targets: Vec<String>,
        /// The agent listens on plain TCP (127.0.0.1:--agent-port) instead of
        /// a unix socket in $DRYDOCK_HOME/run: for the compose layout, where
        /// the CLI reaches a published port.
        #[arg(long)]
        agent_tcp: bool,
        /// The agent serves HTTPS on --agent-port, on every interface, with a
        /// certificate for NAME from drydock's CA; cli.yaml pins that CA.
        /// For an agent the CLI reaches over the network.
        #[arg(long, value_name = "NAME", conflicts_with = "agent_tcp")]
        agent_tls: Option<String>,
        /// Do not watch container events (agent.yaml `watch.enabled: false`);
        /// by default the agent watches and opens requests that ask a person.
        #[arg(long)]
        no_watch: bool,
        /// How the approver signs: `file` (a new key in approver.key) or
        /// `ssh` (a key an ssh-agent holds, $SSH_AUTH_SOCK: its secret,
        /// or a FIDO security key's, never touches this disk).
        #[arg(long, value_enum, default_value_t = ApproverKind::File)]
        approver: ApproverKind,
        /// With --approver ssh: the key's `.pub` file (default: the first
        /// Ed25519 or P-256 key the ssh-agent holds).
        #[arg(long, value_name = "FILE")]
        ssh_key: Option<std::path::PathBuf>,
    },
    /// The web console on 127.0.0.1, served by this process (where the
    /// approver key is): containers, requests, approvals, grants.
    Ui {
        /// Port on 127.0.0.1 (default: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Do not open a browser (by default one is opened when there is a desktop).
        #[arg(long)]
        no_open: bool,
    },
    /// Serve drydock to AI assistants over MCP (stdio): diagnosis tools and
    /// repair proposals; it cannot approve, sign or grant.
    Mcp,
    /// Start the executor and the agent in the background.
    Up,
    /// Stop both daemons.
    Down,
    /// Ask drydock about a broken service: diagnose, plan, approve, fix, verify.
    Ask {
        /// The exact container (name or id) instead of discovery from the
        /// message; `NAME@HOST` on one of several hosts.
        #[arg(long)]
        container: Option<String>,
        /// Look on this host only (a name from the agent's `hosts:`).
        #[arg(long)]
        host: Option<String>,
        /// Diagnose only: never propose a change.
        #[arg(long)]
        diagnose_only: bool,
        /// Approve the proposed plan without asking (still signed with the local approver key).
        #[arg(long)]
        yes: bool,
        /// Print only the final request as one JSON object.
        #[arg(long)]
        json: bool,
        /// Add the words to this request instead of opening a new one: a
        /// running request reads them at its next phase, a finished one is
        /// diagnosed again. They never approve anything.
        #[arg(long, value_name = "REQ", value_parser = crate::text::plain_id, conflicts_with_all = ["container", "host", "diagnose_only"])]
        to: Option<String>,
        /// What is wrong, in your words: "backend is down".
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
    },
    /// Update a container to the image its tag names now in its registry:
    /// shown with both versions, signed by you, pulled by digest, and put
    /// back by the executor unless it runs healthy through its window.
    Update {
        /// The container (name or id); `NAME@HOST` on one of several hosts.
        container: String,
        /// Look on this host only (a name from the agent's `hosts:`).
        #[arg(long)]
        host: Option<String>,
        /// Approve the update without asking (still signed with the local approver key).
        #[arg(long)]
        yes: bool,
        /// Print only the final request as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Build a container's image from its build context (a git checkout
    /// the executor allows) at a commit, then run it: the commit, its tree
    /// and the Dockerfile signed by you, built from the commit's own files
    /// (never the checkout's), and put back by the executor unless the new
    /// image runs healthy through its window.
    Build {
        /// The container (name or id); `NAME@HOST` on one of several hosts.
        container: String,
        /// The commit to build: an id (7 digits or more), a branch or a
        /// tag of the checkout; its HEAD when not given.
        #[arg(long, value_name = "REV", value_parser = revision)]
        at: Option<String>,
        /// Look on this host only (a name from the agent's `hosts:`).
        #[arg(long)]
        host: Option<String>,
        /// Approve the build and the update without asking (still signed with the local approver key).
        #[arg(long)]
        yes: bool,
        /// Print only the final request as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Follow an existing request until it finishes.
    Follow {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
        #[arg(long)]
        yes: bool,
    },
    /// Approve a pending approval (signs its claims with your key).
    Approve {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Reject a pending approval; nothing is changed.
    Reject {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
    },
    /// List pending approvals.
    Approvals,
    /// List the containers whose tag names a newer image in its registry.
    Updates {
        /// Ask every registry now instead of listing the last check.
        #[arg(long)]
        check: bool,
        /// Print the list as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// List recent requests.
    Requests {
        #[arg(long, value_parser = crate::text::parse_status)]
        status: Option<drydock_vocab::Status>,
        /// Only the requests on this host (several hosts only).
        #[arg(long)]
        host: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show a request as `ask` renders it: its timeline, diagnosis, plan and outcome.
    Show {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
        /// Print the request as one JSON object instead.
        #[arg(long)]
        json: bool,
    },
    /// Cancel an unfinished request (an action already sent may still complete).
    Cancel {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
    },
    /// Check the installation: one verdict line per check, non-zero exit on any failure.
    Doctor,
    /// Automation grants: pre-authorise a narrow class of repairs that watch
    /// requests may make without asking (the executor enforces each one).
    Grant {
        #[command(subcommand)]
        command: GrantCommand,
    },
    /// Operators' notes on a container or service, shown in its diagnoses
    /// as evidence (and to a model as data, never as instructions).
    Note {
        #[command(subcommand)]
        command: NoteCommand,
    },
    /// A diagnose-only look on a cadence; a webhook (`schedule_changed`)
    /// fires when its answer changes, not on every run.
    Schedule {
        #[command(subcommand)]
        command: ScheduleCommand,
    },
    /// Other Docker hosts' executors, from this home's CA.
    Host {
        #[command(subcommand)]
        command: HostCommand,
    },
    /// The executor's audit log (local layout): verify the chain, export or tail rows.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Back up the local layout's stores (the audit store with its segments
    /// and revocations, and the agent's store) into a new or empty folder,
    /// while the daemons run.
    Backup {
        /// The folder to write.
        dir: PathBuf,
    },
    /// Restore a backup `drydock backup` wrote (the daemons stopped); the
    /// stores it replaces are moved into $DRYDOCK_HOME/replaced-<time>.
    Restore {
        /// The folder `drydock backup` wrote.
        dir: PathBuf,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write man pages (drydock.1 and one per subcommand) into a folder, or print drydock.1.
    Man {
        /// The folder to write into; without it, drydock.1 goes to standard output.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Run the whole loop on a local demo service (builds what it needs).
    Demo {
        /// Approve the fix without asking.
        #[arg(long)]
        yes: bool,
        /// Keep the demo container and the daemons running afterwards.
        #[arg(long)]
        keep: bool,
    },
}

#[derive(Subcommand)]
pub enum AuditCommand {
    /// Verify the hash chain and its signed checkpoints (with pki/audit.pub);
    /// exit 1 and say what is wrong if the store was altered.
    Verify {
        /// A checkpoint recorded earlier, as SEQ:HASH (verify prints the
        /// last one): a store truncated or rewritten since then fails.
        #[arg(long)]
        expect: Option<String>,
    },
    /// Print every row as one JSON object per line.
    Export,
    /// Print the newest rows as JSON lines.
    Tail {
        /// How many rows.
        #[arg(long, short = 'n', default_value_t = 20)]
        lines: u32,
    },
}

/// The clap command, for completions and man pages.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_definitions_are_consistent() {
        super::command().debug_assert();
    }
}

#[derive(Subcommand, Debug)]
pub enum HostCommand {
    /// Issue another host's executor certificate (naming the host) and
    /// write its config (requiring its host name in every approval and
    /// grant) into a folder to copy there.
    Add {
        /// The host's name: the agent dials it, and approvals name it.
        name: String,
        /// Another name or IP address the agent may dial (repeatable); the
        /// first IP is also where the executor listens.
        #[arg(long = "address")]
        addresses: Vec<String>,
        /// How the executor runs on that host (not this home's layout).
        #[arg(long, value_enum, default_value = "local")]
        layout: crate::home::HostLayout,
        /// The folder to write (default `$DRYDOCK_HOME/hosts/NAME`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Issue new files over an earlier `host add` of this name.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum GrantCommand {
    /// Make and sign a grant: shows it in words and asks (or signs with --yes), then prints its id.
    Create(Box<CreateArgs>),
    /// List grants with their status (active, expired, revoked).
    List {
        #[arg(long)]
        json: bool,
    },
    /// Revoke a grant at the executor (refused from its next use on) and in the agent.
    Revoke {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum NoteCommand {
    /// Attach a note to a container (`NAME`), a compose service
    /// (`PROJECT/SERVICE`) or a Swarm service; prints its id.
    Add {
        target: String,
        /// The note (the words after the target, joined).
        #[arg(required = true, num_args = 1..)]
        text: Vec<String>,
    },
    /// The notes, on one target or all.
    List {
        target: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove a note by its id.
    Remove {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Look on a cadence: `drydock schedule add --every 1h "is the shop healthy?"`.
    Add {
        /// The cadence (`30s`, `15m`, `1h`, `1d`), at least 10 s.
        #[arg(long, value_parser = crate::text::parse_every)]
        every: u64,
        /// Look on this host only (a name from the agent's `hosts:`).
        #[arg(long)]
        host: Option<String>,
        /// What to look at, as you would ask it.
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
    },
    /// The schedules, each with its last run and answer.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Remove a schedule by its id.
    Remove {
        #[arg(value_parser = crate::text::plain_id)]
        id: String,
    },
}

/// What `drydock grant create` was asked for.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CreateArgs {
    /// start, restart or force_update (repeatable); or update alone, with
    /// --window; never stop or a rollback.
    #[arg(long = "action", required = true)]
    pub actions: Vec<String>,
    /// A compose project the containers belong to (repeatable).
    #[arg(long = "project")]
    pub projects: Vec<String>,
    /// A Swarm stack the services belong to (repeatable; for force_update).
    #[arg(long = "stack")]
    pub stacks: Vec<String>,
    /// A container (or Swarm service) name glob, like shop-web-* (repeatable).
    #[arg(long = "name")]
    pub names: Vec<String>,
    /// KEY=VALUE a container's labels must hold (repeatable; all must hold).
    #[arg(long = "label")]
    pub labels: Vec<String>,
    /// A fault class the repair may be for (repeatable; default any).
    #[arg(long = "class")]
    pub classes: Vec<String>,
    /// At most N repairs per container per WINDOW, like 2/1h.
    #[arg(long)]
    pub max: String,
    /// At most this many repairs in all (default 10 × N).
    #[arg(long)]
    pub max_total: Option<u32>,
    /// How long the grant stands, like 7d (at most the executor's automation.max_grant_ttl).
    #[arg(long)]
    pub expires: String,
    /// The hours of the day it may be used, HH:MM-HH:MM in the executor
    /// host's local time (required with --action update), like 02:00-05:00.
    #[arg(long)]
    pub window: Option<String>,
    /// The host whose executor honours it, when the agent serves several.
    #[arg(long)]
    pub host: Option<String>,
    /// Sign without asking.
    #[arg(long)]
    pub yes: bool,
}

/// `--at`: a commit id, a branch or a tag.
fn revision(s: &str) -> Result<String, String> {
    if drydock_proto::approval::is_revision(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "`{s}` is not a revision: a commit id, a branch or a tag of letters, digits, `.`, `_`, `-` and `/`"
        ))
    }
}

/// `drydock init --approver`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApproverKind {
    File,
    Ssh,
}
