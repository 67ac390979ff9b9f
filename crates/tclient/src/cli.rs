//! The `tclient` command line: ping, one chat turn, or a chat REPL; tags, alarms and tools.
//!
//! `chat` prints exactly the reply envelope JSON on one line on stdout; on a terminal it
//! prints the answer as it arrives instead, readably (`--no-stream`: the JSON line). `repl` is
//! interactive on a terminal (streaming likewise); with stdin not a terminal it reads one query
//! per line and prints one envelope line per query, all on one connection. In either, a line
//! `:clear` empties the conversation (ChatClear). After a turn that made proposals, a person at
//! a terminal is asked to approve or decline each; otherwise they are printed (on standard error
//! where standard output carries envelopes) with how to decide them.

use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use crate::alarm_handling::HandlingChange;
use crate::bench::{BenchArgs, Target};
use crate::history_views::{self, Aggregate, HistoryQuery, HistoryView};
use crate::plant_views;
use crate::proposals;
use crate::signing::{Signer, sign_if_asked};
use service_client::AlarmHandlingChange;
use service_client::{ChatEvent, ClientOptions, Decision, Envelope, FailoverClient, Proposal, ToolStatus};

/// tclient: talk to a TServer from the command line.
#[derive(Debug, Parser)]
#[command(name = "tclient", version, about)]
pub struct Cli {
    /// The server address, or several separated by commas (`a:3101,b:3101`): the client
    /// uses the first that answers and moves to the next when its server goes away, logging in
    /// and subscribing again there.
    #[arg(long, default_value = "127.0.0.1:3101", global = true)]
    pub addr: String,
    /// The user to log in as.
    #[arg(long, default_value = DEFAULT_USER, global = true)]
    pub user: String,
    /// Read the password from the first line of standard input. Otherwise it is
    /// TCLIENT_PASSWORD, or asked for without echo on a terminal (for a user other than
    /// guest), or empty.
    #[arg(long, global = true)]
    pub password_stdin: bool,
    /// Speak TLS, trusting the certificates in this PEM file (a private CA, or the server's
    /// self-signed certificate).
    #[arg(long, value_name = "PEM", global = true)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (default: the host of --addr).
    #[arg(long, value_name = "NAME", global = true, requires = "tls_ca")]
    pub tls_name: Option<String>,
    /// Seconds to wait for each reply.
    #[arg(long, default_value_t = 90.0, global = true)]
    pub timeout_secs: f64,
    /// On a terminal, wait for each whole reply instead of printing the answer as it arrives.
    #[arg(long, global = true)]
    pub no_stream: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `tclient` subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure one round trip.
    Ping,
    /// Send one chat turn and print its reply envelope as one JSON line.
    Chat {
        /// The question (plain text or a JSON query object).
        #[arg(required_unless_present = "clear")]
        text: Option<String>,
        /// Empty the conversation first (ChatClear); alone, only that.
        #[arg(long)]
        clear: bool,
    },
    /// Chat interactively (or one envelope line per input line when stdin is not a terminal).
    Repl,
    /// Load-test the server: ping, chat, tags or idle connections (see `tclient bench --help`).
    Bench(BenchArgs),
    /// Read or write tag values.
    Tags {
        /// What to do.
        #[command(subcommand)]
        action: TagsAction,
    },
    /// Act on alarms.
    Alarms {
        /// What to do.
        #[command(subcommand)]
        action: AlarmsAction,
    },
    /// Serve MCP on standard input and output, answering from the server's runtime tools (for
    /// MCP clients that launch a command, e.g. Claude Desktop). The password, if any, comes
    /// from the TCLIENT_PASSWORD environment variable (standard input carries MCP).
    Mcp,
    /// List and decide the actions proposed for a person's approval (writes, alarm
    /// acknowledgements).
    Proposals {
        /// What to do.
        #[command(subcommand)]
        action: ProposalsAction,
    },
    /// Use the runtime tools the assistant uses (when the solution offers them to clients:
    /// ModelOptions bit 0x02).
    Tools {
        /// What to do.
        #[command(subcommand)]
        action: ToolsAction,
    },
}

/// `tclient proposals` actions.
#[derive(Debug, Subcommand)]
pub enum ProposalsAction {
    /// Print the proposals waiting for a decision, oldest first, one line each.
    List,
    /// Approve a proposal (an operator's login): carry it out now, and print where it went.
    Approve {
        /// The proposal's id, e.g. `p-3f2a9c01b7de`.
        id: String,
        /// Why, told to whoever proposed it.
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Decline a proposal (an operator's login): nothing is done.
    Decline {
        /// The proposal's id, e.g. `p-3f2a9c01b7de`.
        id: String,
        /// Why, told to whoever proposed it.
        #[arg(long, default_value = "")]
        comment: String,
    },
}

/// `tclient tools` actions.
#[derive(Debug, Subcommand)]
pub enum ToolsAction {
    /// Print the tools offered now: name, category and the first line of the description.
    List,
    /// Call a tool and print its result as one JSON line (the exit status is 1 when the tool
    /// reports a failure).
    Call {
        /// The tool, e.g. `runtime_get_value`.
        name: String,
        /// Its arguments as a JSON object, e.g. '{"tag": "Pump1.MotorCurrent"}'.
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

/// `tclient tags` actions.
#[derive(Debug, Subcommand)]
pub enum TagsAction {
    /// Print the current values of tags (dotted names or UNS paths), one line each.
    Read {
        /// The tags.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Write tags (an operator's login): `NAME VALUE` pairs or `NAME=VALUE`, each value read
    /// as its tag's type.
    Write {
        /// `Pump1.Mode Manual`, `Filter01.BackwashRequest=true`, `Pump1.SpeedSetpoint 75`.
        #[arg(required = true, allow_hyphen_values = true)]
        assignments: Vec<String>,
    },
    /// Print tags as they change: each NAME a tag, each FOLDER every tag below it.
    Watch {
        /// Tag names, UNS paths or folders (e.g. `Plant/Area1`).
        #[arg(required = true)]
        items: Vec<String>,
        /// Leave out numeric changes smaller than this.
        #[arg(long, default_value_t = 0.0)]
        deadband: f64,
        /// The most updates a second per subscription (at most 100).
        #[arg(long, default_value_t = 10)]
        rate: u32,
        /// Stop after this many updates (default: until interrupted).
        #[arg(long)]
        updates: Option<u64>,
    },
    /// Print a tag's recorded history over a window, oldest first: a trend (default), every
    /// sample (`--raw`), or aggregates per interval (`--interval 1h --aggregate avg,max`).
    History {
        /// The tag (dotted name or UNS path).
        name: String,
        /// The window's start: how long ago (`1h`, `30m`, `2d`) or an RFC 3339 time.
        #[arg(long, default_value = "1h")]
        since: String,
        /// The window's end, likewise (default: now).
        #[arg(long)]
        until: Option<String>,
        /// Print CSV (RFC 3339 UTC times, a header row) instead of a table.
        #[arg(long)]
        csv: bool,
        /// Every sample of the window, never thinned, read a page at a time.
        #[arg(long, conflicts_with = "interval")]
        raw: bool,
        /// Aggregates per interval of this length (`15m`, `1h`, `1d`) instead of samples.
        #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
        interval: Option<Duration>,
        /// With --interval: the aggregates to print, comma-separated.
        #[arg(
            long,
            value_enum,
            value_delimiter = ',',
            requires = "interval",
            default_value = "avg,min,max"
        )]
        aggregate: Vec<Aggregate>,
        /// A trend's most samples (default 2000, at most 10000: a window holding more gives
        /// each bucket's first, lowest, highest and last sample), or --raw's page size.
        #[arg(long, default_value_t = 0, hide_default_value = true)]
        max_samples: u32,
    },
    /// Print what tags were at a past instant: each one's last recorded sample at or before it.
    At {
        /// The instant: how long ago (`2h`) or an RFC 3339 time.
        time: String,
        /// The tags (dotted names or UNS paths), at most 1000.
        #[arg(required = true)]
        names: Vec<String>,
        /// Print CSV (`tag,value,quality,recorded`) instead of lines.
        #[arg(long)]
        csv: bool,
    },
    /// Print a folder of the plant tree (default: the root): sub-folders, then tags with type,
    /// units, writability, range and description.
    Browse {
        /// The folder, e.g. `Plant/Area1`.
        #[arg(default_value = "")]
        folder: String,
    },
}

/// `tclient alarms` actions.
#[derive(Debug, Subcommand)]
pub enum AlarmsAction {
    /// Print the alarms that are not normal (unacknowledged first, then by priority, then the
    /// newest), with since when, the tag's value and the limit.
    List {
        /// Also print the alarm history, newest first.
        #[arg(long)]
        history: bool,
        /// The history's start: how long ago (`1h`, `2d`) or an RFC 3339 time (default: a
        /// day ago).
        #[arg(long)]
        since: Option<String>,
    },
    /// How the alarm system performed over a window (EEMUA 191's indicators): alarms per 10
    /// minutes, time in flood, the most frequent, chattering and stale alarms, the priority mix,
    /// time to acknowledge, and what was shelved, suppressed or out of service.
    Report {
        /// The window's start: how long ago (`7d`, `12h`) or an RFC 3339 time (default: 7 days
        /// before its end).
        #[arg(long)]
        since: Option<String>,
        /// The window's end (default: now).
        #[arg(long)]
        until: Option<String>,
    },
    /// Acknowledge an alarm (an operator's login).
    Ack {
        /// The alarm's name, e.g. `Tank1.Level.HiHi`.
        name: String,
    },
    /// Shelve an alarm, active or not, for a while (an operator's login): it is still
    /// evaluated but not annunciated until it unshelves, by hand or when the time is up.
    Shelve {
        /// The alarm's name.
        name: String,
        /// For how long: `30min`, `2h` (at most the solution's ShelvingMaxHours).
        #[arg(long = "for", value_name = "DURATION")]
        duration: String,
        /// Why (the shift after you reads it).
        #[arg(long)]
        reason: String,
    },
    /// Unshelve an alarm (it annunciates again if still in alarm).
    Unshelve {
        /// The alarm's name.
        name: String,
    },
    /// Take an alarm, or every alarm below a folder, out of service (an admin's login), e.g.
    /// while an instrument or a whole equipment is replaced.
    OutOfService {
        /// The alarm's name.
        #[arg(required_unless_present = "folder")]
        name: Option<String>,
        /// Instead of one alarm, every alarm on a tag below this UNS folder (an equipment's,
        /// e.g. `Plant/Area1/Pump1`), as one act.
        #[arg(long, conflicts_with = "name")]
        folder: Option<String>,
        /// Why.
        #[arg(long)]
        reason: String,
    },
    /// Put an alarm, or every alarm below a folder, back in service (an admin's login).
    InService {
        /// The alarm's name.
        #[arg(required_unless_present = "folder")]
        name: Option<String>,
        /// Instead of one alarm, every alarm out of service below this UNS folder.
        #[arg(long, conflicts_with = "name")]
        folder: Option<String>,
    },
}

/// The whole `tclient` program: parses the process's command line and runs it on a runtime of
/// its own (the binary is this one call, so tests can build it into a binary of theirs).
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let terminals = Terminals {
        input: std::io::stdin().is_terminal(),
        output: std::io::stdout().is_terminal(),
    };
    if matches!(cli.command, Command::Mcp) {
        // MCP owns standard input and output: nothing here may hold them.
        return runtime.block_on(run(&cli, &mut std::io::empty(), &mut std::io::sink(), terminals));
    }
    // A person at a terminal logging in as someone other than the passwordless guest, with no
    // password given otherwise, is asked for it (without echo); standard input then carries on
    // (a repl's questions).
    let mut cli = cli;
    if terminals.input
        && !cli.password_stdin
        && cli.user != DEFAULT_USER
        && std::env::var_os(PASSWORD_ENV).is_none()
    {
        let typed = crate::terminal::read_hidden(&format!("password of {}: ", cli.user))?;
        cli.password_stdin = true;
        let mut input = std::io::Read::chain(
            std::io::Cursor::new(format!("{typed}\n")),
            std::io::stdin().lock(),
        );
        return runtime.block_on(run(&cli, &mut input, &mut std::io::stdout().lock(), terminals));
    }
    runtime.block_on(run(
        &cli,
        &mut std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        terminals,
    ))
}

/// The user `--user` names unless told: the demo's passwordless guest.
const DEFAULT_USER: &str = "guest";

/// The line a REPL takes as "empty the conversation" rather than a question.
const CLEAR_COMMAND: &str = ":clear";

/// Where the password is taken from when `--password-stdin` is not given.
const PASSWORD_ENV: &str = "TCLIENT_PASSWORD";

/// Which of a command's input and output are terminals (a person), not pipes or files.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terminals {
    /// Input: `repl` is interactive.
    pub input: bool,
    /// Output: answers print as they arrive, readably, unless `--no-stream`.
    pub output: bool,
}

/// Runs the command.
pub async fn run(
    cli: &Cli,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    terminals: Terminals,
) -> anyhow::Result<()> {
    let call_timeout = Duration::try_from_secs_f64(cli.timeout_secs)
        .ok()
        .filter(|timeout| !timeout.is_zero())
        .with_context(|| {
            format!(
                "--timeout-secs must be a positive number, not {}",
                cli.timeout_secs
            )
        })?;
    let password = if matches!(cli.command, Command::Mcp) {
        if cli.password_stdin {
            bail!("tclient mcp reads MCP on standard input: give the password in TCLIENT_PASSWORD");
        }
        std::env::var(PASSWORD_ENV).unwrap_or_default()
    } else if cli.password_stdin {
        let mut line = String::new();
        input
            .read_line(&mut line)
            .context("cannot read the password from standard input")?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    } else {
        std::env::var(PASSWORD_ENV).unwrap_or_default()
    };
    let tls = match &cli.tls_ca {
        Some(ca) => Some(service_client::ClientTls {
            config: tserver_tls::client_config(ca).context("cannot set up TLS")?,
            server_name: cli.tls_name.clone(),
        }),
        None => None,
    };
    let options = ClientOptions {
        call_timeout,
        client_name: format!("tclient {}", env!("CARGO_PKG_VERSION")),
        tls,
        ..ClientOptions::default()
    };
    let addrs = server_addrs(&cli.addr)?;
    if let Command::Bench(args) = &cli.command {
        let [addr] = addrs.as_slice() else {
            bail!(
                "tclient bench measures one server: give one --addr, not {:?}",
                cli.addr
            );
        };
        let target = Target {
            addr: addr.clone(),
            user: cli.user.clone(),
            password,
            options,
        };
        let report = crate::bench::run(args, &target, output).await?;
        if report.calls() == 0 {
            bail!("no call succeeded");
        }
        return Ok(());
    }
    let client = FailoverClient::connect(&addrs, options).await?;
    client
        .login(&cli.user, &password)
        .await
        .map_err(|error| match error {
            // The server does not say which was wrong; a newcomer needs to know how to give both.
            service_client::ClientError::LoginRefused { .. } => anyhow::anyhow!(
                "{error} (as {:?}): give the user with --user NAME and its password typed when \
             asked, with --password-stdin or in TCLIENT_PASSWORD (`tserver users PATH add NAME` \
             makes one)",
                cli.user
            ),
            error => error.into(),
        })?;
    if matches!(cli.command, Command::Mcp) {
        // The bridge owns the client for as long as MCP runs on standard input.
        crate::mcp_bridge::serve_stdio(client).await?;
        return Ok(());
    }
    run_command(cli, &client, input, output, terminals).await
}

/// Carries out `cli`'s command (all but bench) on a logged-in `client`.
async fn run_command(
    cli: &Cli,
    client: &FailoverClient,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    terminals: Terminals,
) -> anyhow::Result<()> {
    let stream = terminals.output && !cli.no_stream;
    match &cli.command {
        Command::Ping => {
            let round_trip = client.ping().await?;
            writeln!(
                output,
                "pong from {} in {:.3} ms",
                client.current_addr().unwrap_or(&cli.addr),
                round_trip.as_secs_f64() * 1000.0
            )?;
        }
        Command::Chat { text, clear } => {
            chat_once(client, text.as_deref(), *clear, input, output, terminals, stream).await?;
        }
        Command::Repl if terminals.input => {
            chat_interactively(client, input, output, stream).await?;
        }
        // Bench and the MCP bridge ran above, holding their connections themselves.
        Command::Bench(_) | Command::Mcp => {}
        Command::Tags {
            action: TagsAction::Read { names },
        } => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut unread = Vec::new();
            for reading in client.read_tags(&names).await? {
                writeln!(output, "{}", describe_reading(&reading))?;
                if !reading.error.is_empty() {
                    unread.push(format!("{} ({})", reading.name, reading.error));
                }
            }
            // Every tag is printed; then a name that could not be read fails the command, so a
            // script sees it.
            if !unread.is_empty() {
                anyhow::bail!("not read: {}", unread.join(", "));
            }
        }
        Command::Tags {
            action: TagsAction::Write { assignments },
        } => {
            let signer = Signer {
                user: &cli.user,
                terminal: terminals.input,
            };
            write_tags(client, assignments, signer, input, output).await?;
        }
        Command::Tags {
            action:
                TagsAction::Watch {
                    items,
                    deadband,
                    rate,
                    updates,
                },
        } => watch_tags(client, items, *deadband, *rate, *updates, output).await?,
        Command::Tags {
            action:
                TagsAction::History {
                    name,
                    since,
                    until,
                    csv,
                    raw,
                    interval,
                    aggregate,
                    max_samples,
                },
        } => {
            let view = match interval {
                Some(interval) => HistoryView::Intervals(*interval, aggregate.clone()),
                None if *raw => HistoryView::Raw(*max_samples),
                None => HistoryView::Trend(*max_samples),
            };
            let query = HistoryQuery {
                name,
                since,
                until: until.as_deref(),
                view,
                csv: *csv,
            };
            history_views::tag_history(client, &query, output).await?;
        }
        Command::Tags {
            action: TagsAction::At { time, names, csv },
        } => history_views::values_at(client, time, names, *csv, output).await?,
        Command::Tags {
            action: TagsAction::Browse { folder },
        } => plant_views::browse(client, folder, output).await?,
        Command::Alarms {
            action: AlarmsAction::List { history, since },
        } => plant_views::list_alarms(client, *history, since.as_deref(), output).await?,
        Command::Tools {
            action: ToolsAction::List,
        } => {
            for tool in client.list_tools().await? {
                let summary = tool.description.lines().next().unwrap_or_default();
                writeln!(output, "{} [{:#04x}] {summary}", tool.name, tool.category)?;
            }
        }
        Command::Tools {
            action: ToolsAction::Call { name, arguments },
        } => call_tool(client, name, arguments, output).await?,
        Command::Alarms {
            action: AlarmsAction::Report { since, until },
        } => crate::alarm_report::report(client, (since.as_deref(), until.as_deref()), output).await?,
        Command::Alarms {
            action: AlarmsAction::Ack { name },
        } => {
            let signer = Signer {
                user: &cli.user,
                terminal: terminals.input,
            };
            acknowledge(client, name, signer, input, output).await?;
        }
        Command::Alarms { action } => {
            let signer = Signer {
                user: &cli.user,
                terminal: terminals.input,
            };
            let asked = handling_change(action)?;
            crate::alarm_handling::handle(client, asked, signer, input, output).await?;
        }
        Command::Proposals {
            action: ProposalsAction::List,
        } => proposals::list(client, output).await?,
        Command::Proposals {
            action: ProposalsAction::Approve { id, comment },
        } => {
            let signer = Signer {
                user: &cli.user,
                terminal: terminals.input,
            };
            proposals::approve(client, id, comment, signer, input, output).await?;
        }
        Command::Proposals {
            action: ProposalsAction::Decline { id, comment },
        } => proposals::decide(client, id, Decision::Decline, comment, output).await?,
        Command::Repl => chat_each_line(client, input, output).await?,
    }
    Ok(())
}

/// `chat [--clear] [TEXT]`: the turn printed as the envelope line (with `stream`, readably as
/// it arrives), then its proposals asked about at a terminal or printed with how to decide them.
async fn chat_once(
    client: &FailoverClient,
    text: Option<&str>,
    clear: bool,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    terminals: Terminals,
    stream: bool,
) -> anyhow::Result<()> {
    if clear {
        let cleared = client.chat_clear().await?;
        if text.is_none() {
            let said = if cleared {
                "conversation cleared"
            } else {
                "conversation cleared (it was empty)"
            };
            writeln!(output, "{said}")?;
        }
    }
    let Some(text) = text else { return Ok(()) };
    if stream {
        let (_, made) = chat_streamed_with_proposals(client, text, output).await?;
        return proposals::decide_at_the_terminal(client, &made, input, output, terminals.input).await;
    }
    let reply = client.chat_reply(text).await?;
    writeln!(output, "{}", reply.reply_json)?;
    output.flush()?;
    // Standard output carries the envelope only.
    let mut person = std::io::stderr().lock();
    proposals::decide_at_the_terminal(client, &reply.proposals, input, &mut person, terminals.input).await
}

/// `tools call NAME ARGUMENTS`: prints the tool's result; a result that reports a failure
/// fails the command.
async fn call_tool(
    client: &FailoverClient,
    name: &str,
    arguments: &str,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let arguments: serde_json::Value = serde_json::from_str(arguments)
        .with_context(|| format!("the arguments {arguments:?} are not JSON"))?;
    let reply = client.call_tool(name, &arguments).await?;
    writeln!(output, "{}", reply.content_json)?;
    if reply.is_error {
        let content: serde_json::Value = serde_json::from_str(&reply.content_json).unwrap_or_default();
        match content["error"]["message"].as_str() {
            Some(message) => anyhow::bail!("{name} reported a failure: {message}"),
            None => anyhow::bail!("{name} reported a failure"),
        }
    }
    Ok(())
}

/// `repl` with standard input not a terminal: one query per line, one envelope line each.
async fn chat_each_line(
    client: &FailoverClient,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            break;
        }
        let query = line.trim();
        if query.is_empty() {
            continue;
        }
        if query == CLEAR_COMMAND {
            // Standard output carries envelopes only.
            client.chat_clear().await?;
            eprintln!("tclient: conversation cleared");
            continue;
        }
        let reply = client.chat_reply(query).await?;
        writeln!(output, "{}", reply.reply_json)?;
        output.flush()?;
        // Nobody at a terminal to ask: the proposals go to standard error with how to decide
        // them, standard output carrying envelopes only.
        let mut person = std::io::stderr().lock();
        proposals::decide_at_the_terminal(client, &reply.proposals, input, &mut person, false).await?;
    }
    Ok(())
}

/// The addresses of `--addr`: one, or several separated by commas.
fn server_addrs(list: &str) -> anyhow::Result<Vec<String>> {
    let addrs: Vec<String> = list.split(',').map(|addr| addr.trim().to_owned()).collect();
    if let Some(position) = addrs.iter().position(String::is_empty) {
        bail!(
            "--addr {list:?}: address {} of {} is empty (give host:port, or several separated by commas)",
            position + 1,
            addrs.len()
        );
    }
    Ok(addrs)
}

/// One reading as a line: `name = value unit (quality)`, or `name: error`.
fn describe_reading(reading: &service_client::TagReading) -> String {
    if !reading.error.is_empty() {
        return format!("{}: {}", reading.name, reading.error);
    }
    let value = plant_views::value_text(reading.value.as_ref());
    let quality = plant_views::quality_word(reading.quality);
    let unit = plant_views::units_suffix(&reading.units);
    format!("{} = {value}{unit} ({quality})", reading.name)
}

/// `tags watch`: one subscription for the items that are tags, one per item that is a folder;
/// prints the current readings, then every update as it comes.
async fn watch_tags(
    client: &FailoverClient,
    items: &[String],
    deadband: f64,
    rate: u32,
    updates: Option<u64>,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let names: Vec<&str> = items.iter().map(String::as_str).collect();
    let readings = client.read_tags(&names).await?;
    let mut tags = Vec::new();
    let mut folders = Vec::new();
    for (item, reading) in items.iter().zip(&readings) {
        if reading.error.is_empty() {
            tags.push(item.clone());
        } else {
            folders.push(item.clone());
        }
    }
    let request = |names: Vec<String>, folder: String| service_client::SubscribeRequest {
        names,
        folder,
        deadband,
        max_rate: rate,
        alarms: false,
        proposals: false,
        alarms_only: false,
    };
    let mut subscriptions = Vec::new();
    if !tags.is_empty() {
        subscriptions.push(client.subscribe(request(tags, String::new())).await?);
    }
    for folder in folders {
        subscriptions.push(
            client
                .subscribe(request(Vec::new(), folder.clone()))
                .await
                .with_context(|| format!("{folder:?} is neither a tag nor a folder"))?,
        );
    }
    for subscription in &subscriptions {
        for reading in &subscription.initial().readings {
            writeln!(output, "{}", describe_reading(reading))?;
        }
    }
    output.flush()?;
    let (sender, mut merged) = tokio::sync::mpsc::unbounded_channel();
    for mut subscription in subscriptions {
        let sender = sender.clone();
        tokio::spawn(async move {
            while let Some(update) = subscription.next_update().await {
                if sender.send(update).is_err() {
                    break;
                }
            }
        });
    }
    drop(sender);
    let mut seen = 0;
    while updates.is_none_or(|limit| seen < limit) {
        let Some(update) = merged.recv().await else { break };
        seen += 1;
        for reading in &update.readings {
            writeln!(output, "{}", describe_reading(reading))?;
        }
        if update.skipped > 0 {
            writeln!(output, "  ({} changes merged into these values)", update.skipped)?;
        }
        output.flush()?;
    }
    Ok(())
}

/// The change of handling an `alarms` subcommand asks for.
fn handling_change(action: &AlarmsAction) -> anyhow::Result<HandlingChange<'_>> {
    // clap keeps exactly one of a name and a folder.
    let alarm_or_folder = |name: &'_ Option<String>, folder: &'_ Option<String>| -> Option<(String, bool)> {
        match (name, folder) {
            (Some(name), _) => Some((name.clone(), false)),
            (None, Some(folder)) => Some((folder.clone(), true)),
            (None, None) => None,
        }
    };
    let (name, change, duration, reason) = match action {
        AlarmsAction::Shelve {
            name,
            duration,
            reason,
        } => (
            name,
            AlarmHandlingChange::Shelve,
            Some(duration.as_str()),
            reason.as_str(),
        ),
        AlarmsAction::Unshelve { name } => (name, AlarmHandlingChange::Unshelve, None, ""),
        AlarmsAction::OutOfService { name, folder, reason } => {
            let (target, folder) =
                alarm_or_folder(name, folder).context("name the alarm or give --folder")?;
            return Ok(HandlingChange {
                target,
                folder,
                change: AlarmHandlingChange::RemoveFromService,
                duration: None,
                reason,
            });
        }
        AlarmsAction::InService { name, folder } => {
            let (target, folder) =
                alarm_or_folder(name, folder).context("name the alarm or give --folder")?;
            return Ok(HandlingChange {
                target,
                folder,
                change: AlarmHandlingChange::ReturnToService,
                duration: None,
                reason: "",
            });
        }
        AlarmsAction::List { .. } | AlarmsAction::Ack { .. } | AlarmsAction::Report { .. } => {
            bail!("not a change of an alarm's handling")
        }
    };
    Ok(HandlingChange {
        target: name.clone(),
        folder: false,
        change,
        duration,
        reason,
    })
}

/// `alarms ack NAME`: acknowledges the alarm, signed at the terminal when it takes a signature.
async fn acknowledge(
    client: &FailoverClient,
    name: &str,
    signer: Signer<'_>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let meaning = service_client::SignatureMeaning::Performed;
    let acknowledged = sign_if_asked(signer, meaning, input, output, |signatures| {
        client.acknowledge_alarm_signed(name, signatures)
    })
    .await?;
    if acknowledged {
        writeln!(output, "acknowledged {name}")?;
    } else {
        writeln!(output, "{name} had nothing to acknowledge")?;
    }
    Ok(())
}

/// `tags write NAME=VALUE...`: each value is read as its tag's type (read first), so `75` goes
/// to a number tag as a number and to a text tag as text. Fails when any write was refused,
/// after printing every outcome.
async fn write_tags(
    client: &FailoverClient,
    assignments: &[String],
    signer: Signer<'_>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut pairs = Vec::with_capacity(assignments.len());
    let mut arguments = assignments.iter();
    while let Some(argument) = arguments.next() {
        match argument.split_once('=') {
            Some((name, value)) => pairs.push((name.trim(), value)),
            None => {
                let value = arguments
                    .next()
                    .with_context(|| format!("{argument:?} has no value: write NAME VALUE or NAME=VALUE"))?;
                pairs.push((argument.trim(), value.as_str()));
            }
        }
    }
    let names: Vec<&str> = pairs.iter().map(|(name, _)| *name).collect();
    let readings = client.read_tags(&names).await?;
    let mut writes = Vec::with_capacity(pairs.len());
    for ((name, text), reading) in pairs.iter().zip(&readings) {
        let value = match &reading.value {
            _ if !reading.error.is_empty() => bail!("{name}: {}", reading.error),
            Some(service_client::TagValue::Boolean(_)) => match text.trim().to_ascii_lowercase().as_str() {
                "true" | "1" | "on" => service_client::WriteValue::Boolean(true),
                "false" | "0" | "off" => service_client::WriteValue::Boolean(false),
                _ => bail!("{name} is a bool tag: give true or false, not {text:?}"),
            },
            // One sentence each: the parser's own reason adds nothing a user needs.
            Some(service_client::TagValue::Integer(_)) => match text.trim().parse() {
                Ok(integer) => service_client::WriteValue::Integer(integer),
                Err(_) => bail!("{name} takes whole numbers: {} is not one", text.trim()),
            },
            Some(service_client::TagValue::Number(_)) => match text.trim().parse::<f64>() {
                Ok(number) if number.is_finite() => service_client::WriteValue::Number(number),
                _ => bail!("{name} takes numbers: {:?} is not one", text.trim()),
            },
            Some(service_client::TagValue::Text(_)) | None => {
                service_client::WriteValue::Text((*text).to_owned())
            }
        };
        writes.push(service_client::TagWrite {
            name: (*name).to_owned(),
            value: Some(value),
        });
    }
    let meaning = service_client::SignatureMeaning::Performed;
    let results = sign_if_asked(signer, meaning, input, output, |signatures| {
        client.write_tags_signed(writes.clone(), signatures)
    })
    .await?;
    let (mut refused, mut unconfirmed) = (0, 0);
    for result in &results {
        match result.outcome() {
            service_client::WriteOutcome::SentToField => writeln!(
                output,
                "{}: sent to the field (the tag shows the value when the field reports it back)",
                result.name
            )?,
            service_client::WriteOutcome::NotConfirmed => {
                unconfirmed += 1;
                writeln!(output, "{}: {}", result.name, result.error)?;
            }
            _ if !result.error.is_empty() => {
                refused += 1;
                writeln!(output, "{}: refused: {}", result.name, result.error)?;
            }
            _ => writeln!(output, "{}: written", result.name)?,
        }
    }
    match (refused, unconfirmed) {
        (0, 0) => Ok(()),
        (refused, 0) => bail!("{refused} of {} writes refused", results.len()),
        (0, unconfirmed) => bail!("{unconfirmed} of {} writes not confirmed", results.len()),
        (refused, unconfirmed) => bail!(
            "{refused} of {} writes refused, {unconfirmed} not confirmed",
            results.len()
        ),
    }
}

/// Chats with a person: prompts, sends each line as a chat turn and prints the envelope
/// readably (with `stream`, the answer as it arrives), then asks about each proposal the turn
/// made, until an empty line or the end of input. Returns the envelopes received.
pub async fn chat_interactively(
    client: &FailoverClient,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    stream: bool,
) -> anyhow::Result<Vec<Envelope>> {
    writeln!(
        output,
        "Connected. Ask about the plant; {CLEAR_COMMAND} starts a new conversation; an empty line or Ctrl-D quits."
    )?;
    let mut envelopes = Vec::new();
    let mut line = String::new();
    loop {
        write!(output, "you> ")?;
        output.flush()?;
        line.clear();
        if input.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        if line.trim() == CLEAR_COMMAND {
            client.chat_clear().await?;
            writeln!(output, "(conversation cleared)")?;
            continue;
        }
        let (envelope, made) = if stream {
            chat_streamed_with_proposals(client, line.trim(), output).await?
        } else {
            let reply = client.chat_reply(line.trim()).await?;
            let envelope = parse_envelope(&reply.reply_json)?;
            write_readable(&envelope, output)?;
            (envelope, reply.proposals)
        };
        envelopes.push(envelope);
        proposals::decide_at_the_terminal(client, &made, input, output, true).await?;
    }
    Ok(envelopes)
}

fn parse_envelope(json: &str) -> anyhow::Result<Envelope> {
    Envelope::from_json(json).with_context(|| format!("the server sent an invalid envelope: {json}"))
}

/// One chat turn printed for a person as it happens: each tool dispatch as it starts and
/// ends, the answer as the model writes it, then (from the envelope) the answer again if it
/// is not what streamed, the warnings, status and latency. Returns the envelope.
pub async fn chat_streamed(
    client: &FailoverClient,
    query: &str,
    output: &mut dyn Write,
) -> anyhow::Result<Envelope> {
    Ok(chat_streamed_with_proposals(client, query, output).await?.0)
}

/// [`chat_streamed`], also returning the proposals the turn made.
pub async fn chat_streamed_with_proposals(
    client: &FailoverClient,
    query: &str,
    output: &mut dyn Write,
) -> anyhow::Result<(Envelope, Vec<Proposal>)> {
    let mut stream = client.chat_stream(query).await?;
    // The answer text printed since the last tool dispatch, and whether a line is open.
    let mut streamed = String::new();
    let mut line_open = false;
    while let Some(event) = stream.next_event().await {
        match event {
            ChatEvent::Text(text) => {
                if !line_open {
                    write!(output, "ai> ")?;
                    line_open = true;
                }
                write!(output, "{text}")?;
                streamed.push_str(&text);
            }
            ChatEvent::ToolStarted(started) => {
                if line_open {
                    writeln!(output)?;
                }
                write!(
                    output,
                    "  [tool] {}({})",
                    started.name,
                    cut_chars(&started.arguments_json)
                )?;
                line_open = true;
                streamed.clear();
            }
            ChatEvent::ToolFinished(finished) => {
                let mark = if finished.ok { "ok" } else { "error" };
                writeln!(output, " -> {mark}, {} ms", finished.elapsed_ms)?;
                line_open = false;
            }
            ChatEvent::ProposalMade(proposal) => {
                if line_open {
                    writeln!(output)?;
                    line_open = false;
                }
                writeln!(output, "  [proposal] {}", proposals::describe(&proposal))?;
            }
        }
        output.flush()?;
    }
    if line_open {
        writeln!(output)?;
    }
    let reply = stream.reply().await?;
    let envelope = parse_envelope(&reply.reply_json)?;
    if envelope.text != streamed && !envelope.text.is_empty() {
        writeln!(output, "ai> {}", envelope.text)?;
    }
    write_footer(&envelope, output)?;
    output.flush()?;
    Ok((envelope, reply.proposals))
}

/// How much of a tool's arguments or result the readable form shows; the JSON form has all.
const READABLE_JSON_CHARS: usize = 160;

/// Prints an envelope for a person: each tool call (arguments and result cut to a line), the
/// answer, warnings, then status and latency.
pub fn write_readable(envelope: &Envelope, output: &mut dyn Write) -> std::io::Result<()> {
    let cut = |value: &serde_json::Value| cut_chars(&value.to_string());
    for entry in &envelope.tool_trace {
        let mark = match entry.status {
            ToolStatus::Ok => "ok",
            ToolStatus::Error => "error",
        };
        writeln!(
            output,
            "  [tool] {}({}) -> {} ({mark}, {} ms)",
            entry.name,
            cut(&entry.args),
            cut(&entry.result),
            entry.elapsed_ms
        )?;
    }
    if !envelope.text.is_empty() {
        writeln!(output, "ai> {}", envelope.text)?;
    }
    write_footer(envelope, output)
}

/// JSON text cut to a line for a person.
fn cut_chars(text: &str) -> String {
    match text.char_indices().nth(READABLE_JSON_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// An envelope's warnings, then its status and latency.
fn write_footer(envelope: &Envelope, output: &mut dyn Write) -> std::io::Result<()> {
    for warning in &envelope.warnings {
        writeln!(output, "  [warning] {warning}")?;
    }
    writeln!(
        output,
        "  [{} in {} ms]",
        envelope.status.as_str(),
        envelope.latency_ms
    )
}
