//! `tserver sources`: the plant's sources (MQTT brokers, Modbus devices, OPC UA servers), what
//! the running server reports of them, and setting an OPC UA source up: trusting its server's
//! certificate and browsing what the server offers.

use std::fmt::Write as _;

use anyhow::Context;
use clap::Subcommand;

use plant::{OpcUaAccess, SKELETON_MAX_VARIABLES};
use store::{SolutionLocation, Store};

/// `tserver sources` actions.
#[derive(Debug, Subcommand)]
pub enum SourcesAction {
    /// The sources the plant declares (change them in the plant file and import it).
    List,
    /// What the running server reports of each source: connected or not, messages read,
    /// messages refused by kind, the last error (written by the server every 2 seconds).
    Status,
    /// Trusts the certificate an OPC UA source's server presents, so the source's secured
    /// sessions with it open; a running server uses it at its next try. On a terminal it is
    /// shown (subject, thumbprint, validity) and trusted only when confirmed; otherwise only
    /// with --thumbprint.
    Trust {
        /// The OPC UA source.
        source: String,
        /// Trust it only if its SHA-1 thumbprint is this (hex, as the server's tools show it);
        /// needed when no terminal can confirm it.
        #[arg(long)]
        thumbprint: Option<String>,
    },
    /// Lists what an OPC UA source's server offers under a node (the Objects folder without
    /// one): node id, browse name, class, data type, access level, description.
    Browse {
        /// The OPC UA source.
        source: String,
        /// The node, e.g. `ns=2;s=Line1`.
        node: Option<String>,
        /// Writes a plant file skeleton instead: a tag for each variable under the node.
        #[arg(long)]
        plant: bool,
    },
}

/// A report older than this is from a server that has stopped (it writes every 2 s).
const SOURCE_REPORT_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs a `tserver sources` action; returns what it prints.
pub(super) async fn sources_command(
    solution: &SolutionLocation,
    action: &SourcesAction,
) -> anyhow::Result<String> {
    let store = Store::open(solution).await?;
    let mut output = String::new();
    match action {
        SourcesAction::List => list(&store, &mut output).await?,
        SourcesAction::Status => status(&store, &mut output).await?,
        SourcesAction::Trust {
            source,
            thumbprint: Some(thumbprint),
        } => {
            let access = OpcUaAccess::of(&store, source).await?;
            let trusted = access.trust(thumbprint).await?;
            describe_trusted(&access, &trusted, &mut output)?;
        }
        SourcesAction::Trust { thumbprint: None, .. } => {
            anyhow::bail!("a certificate is trusted with --thumbprint or confirmed on a terminal")
        }
        SourcesAction::Browse { source, node, plant } => {
            let access = OpcUaAccess::of(&store, source).await?;
            if *plant {
                skeleton(&access, node.as_deref(), &mut output).await?;
            } else {
                browse(&access, node.as_deref(), &mut output).await?;
            }
        }
    }
    Ok(output)
}

/// The sources the plant declares.
async fn list(store: &Store, output: &mut String) -> anyhow::Result<()> {
    let model = store.plant_model().await?;
    if model.sources.is_empty() {
        writeln!(output, "no sources: the plant's values come from the runtime")?;
    }
    let expanded = model.expand();
    for source in &model.sources {
        let tags = expanded
            .tags
            .iter()
            .filter(|tag| {
                tag.source
                    .as_ref()
                    .is_some_and(|binding| binding.source_name() == source.name)
            })
            .count();
        let root = if source.root.is_empty() {
            String::new()
        } else {
            format!("  root {}", source.root)
        };
        writeln!(output, "{}  {}{root}  {tags} tags", source.name, source.url)?;
    }
    Ok(())
}

/// What the running server reports of each source.
async fn status(store: &Store, output: &mut String) -> anyhow::Result<()> {
    let reports = store.source_reports().await?;
    if reports.is_empty() {
        writeln!(
            output,
            "no reports: no server with sources has run on this solution"
        )?;
    }
    for report in reports {
        let age = report.reported_at.elapsed().unwrap_or_default();
        let when = if age > SOURCE_REPORT_FRESH {
            format!(
                "  (reported {} ago: the server is not running; this is how it left it)",
                humantime::format_duration(std::time::Duration::from_secs(age.as_secs()))
            )
        } else {
            String::new()
        };
        let fields: serde_json::Value = serde_json::from_str(&report.report)
            .with_context(|| format!("the report of source {} does not read", report.name))?;
        let connected = if fields["connected"].as_bool() == Some(true) {
            "connected"
        } else {
            "NOT connected"
        };
        let node = report
            .node
            .as_ref()
            .map_or_else(String::new, |node| format!(" on {node}"));
        // A polled source (Modbus) says how its polls go; a broker with Sparkplug edge nodes,
        // the rebirths it asked of them; other sources have nothing of either to say.
        let polls = fields["polls"].as_u64().unwrap_or(0);
        let rebirths = fields["rebirths_requested"].as_u64().unwrap_or(0);
        let activity = if polls > 0 {
            let micros = fields["poll_micros"].as_u64().unwrap_or(0) as f64;
            format!(", {polls} polls, {:.1} ms a cycle", micros / polls as f64 / 1e3)
        } else if rebirths > 0 {
            format!(", {rebirths} rebirths asked")
        } else {
            String::new()
        };
        let coalesced = match fields["coalesced"].as_u64() {
            Some(count) if count > 0 => format!(" ({count} replaced before they were read)"),
            _ => String::new(),
        };
        writeln!(
            output,
            "{}{node}: {connected}, {} tags, {} messages read{coalesced}, {} writes{activity}{when}",
            report.name, fields["tags"], fields["messages"], fields["writes"],
        )?;
        if let Some(errors) = fields["errors"].as_object()
            && !errors.is_empty()
        {
            let counts: Vec<String> = errors
                .iter()
                .map(|(kind, count)| format!("{kind} {count}"))
                .collect();
            writeln!(output, "  refused: {}", counts.join(", "))?;
        }
        if let Some(message) = fields["last_error"]["message"].as_str() {
            writeln!(
                output,
                "  last error at {}: {message}",
                fields["last_error"]["time"].as_str().unwrap_or("?")
            )?;
        }
    }
    Ok(())
}

/// `sources trust SOURCE` without a thumbprint: the certificate the server presents is shown,
/// and trusted only when the person at the terminal `input` comes from confirms it; without a
/// terminal nobody can, and the command says to give the thumbprint instead.
pub(super) fn trust_confirmed(
    solution: &SolutionLocation,
    source: &str,
    (input, terminal): (&mut dyn std::io::BufRead, bool),
    output: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    let (access, presented) = crate::own_runtime::on_own_runtime(|| async {
        let store = Store::open(solution).await?;
        let access = OpcUaAccess::of(&store, source).await?;
        let presented = access.presented().await?;
        Ok::<_, anyhow::Error>((access, presented))
    })?;
    let shown = format!(
        "the certificate of {}\n  subject     {}\n  thumbprint  {}\n  valid       {} to {}",
        access.url(),
        presented.subject,
        presented.thumbprint,
        presented.valid_from,
        presented.valid_until
    );
    if !terminal {
        anyhow::bail!(
            "nothing was trusted: {shown}\nno terminal to confirm it on; check the thumbprint with \
             the server's own tools, then give it: tserver sources {solution} trust {source} \
             --thumbprint {}",
            presented.thumbprint
        );
    }
    write!(output, "{shown}\ntrust it? [y/N] ")?;
    output.flush()?;
    let mut answer = String::new();
    input.read_line(&mut answer)?;
    if !matches!(answer.trim(), "y" | "Y" | "yes" | "Yes" | "YES") {
        writeln!(output, "nothing was trusted")?;
        return Ok(());
    }
    let trusted = access.trust_presented(&presented, &presented.thumbprint)?;
    let mut said = String::new();
    describe_trusted(&access, &trusted, &mut said)?;
    Ok(output.write_all(said.as_bytes())?)
}

/// What trusting `trusted` did.
fn describe_trusted(
    access: &OpcUaAccess,
    trusted: &plant::TrustedCertificate,
    output: &mut String,
) -> anyhow::Result<()> {
    let verb = if trusted.already {
        "already trusted"
    } else {
        "trusted"
    };
    writeln!(output, "{verb}: the certificate of {}", access.url())?;
    writeln!(output, "  subject     {}", trusted.subject)?;
    writeln!(output, "  thumbprint  {}", trusted.thumbprint)?;
    writeln!(
        output,
        "  valid       {} to {}",
        trusted.valid_from, trusted.valid_until
    )?;
    writeln!(output, "  kept in     {}", trusted.path.display())?;
    writeln!(
        output,
        "the source's own certificate, for the server to trust: {}",
        trusted.own_certificate.display()
    )?;
    Ok(())
}

/// What `access`'s server offers under `node`, as a table.
async fn browse(access: &OpcUaAccess, node: Option<&str>, output: &mut String) -> anyhow::Result<()> {
    let nodes = access.browse(node).await?;
    if nodes.is_empty() {
        writeln!(output, "nothing under {}", node.unwrap_or("the Objects folder"))?;
        return Ok(());
    }
    let header = [
        "NODE",
        "BROWSE NAME",
        "CLASS",
        "DATA TYPE",
        "ACCESS",
        "DESCRIPTION",
    ];
    let rows: Vec<[&str; 6]> = nodes
        .iter()
        .map(|found| {
            [
                found.node.as_str(),
                found.browse_name.as_str(),
                found.class.as_str(),
                found.data_type.as_deref().unwrap_or(""),
                found.access.as_deref().unwrap_or(""),
                found.description.as_str(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        writeln!(output, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

/// A plant file skeleton of the variables under `node` of `access`'s server.
async fn skeleton(access: &OpcUaAccess, node: Option<&str>, output: &mut String) -> anyhow::Result<()> {
    let skeleton = access.skeleton(node).await?;
    writeln!(
        output,
        "# Tags for the {} variables under {} of {}.",
        skeleton.model.tags.len(),
        node.unwrap_or("the Objects folder"),
        access.url()
    )?;
    writeln!(
        output,
        "# Add them to the plant file that declares the source, give them units, ranges and\n\
         # descriptions, and import it."
    )?;
    if skeleton.truncated {
        writeln!(
            output,
            "# Stopped at {SKELETON_MAX_VARIABLES} variables: browse a node further down for the rest."
        )?;
    }
    for skipped in &skeleton.skipped {
        writeln!(output, "# left out {skipped}")?;
    }
    output.push('\n');
    output.push_str(
        &skeleton
            .model
            .to_toml()
            .context("cannot write the skeleton as TOML")?,
    );
    Ok(())
}
