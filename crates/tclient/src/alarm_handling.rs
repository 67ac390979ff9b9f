//! `alarms shelve|unshelve|out-of-service|in-service`: how an alarm is handled, changed over
//! the wire's HandleAlarm; a signed alarm's shelving or removal is signed at the terminal.

use std::io::{BufRead, Write};
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context, bail};
use service_client::{AlarmHandlingChange, FailoverClient, HandleAlarmRequest, SignatureMeaning};

use crate::signing::{Signer, sign_if_asked};

/// A change of an alarm's handling asked for on the command line.
#[derive(Debug, Clone)]
pub struct HandlingChange<'a> {
    /// The alarm's name, or the folder's path.
    pub target: String,
    /// Whether `target` is a folder: every alarm below it (a change of service only).
    pub folder: bool,
    /// Which change.
    pub change: AlarmHandlingChange,
    /// `--for` of a shelving.
    pub duration: Option<&'a str>,
    /// `--reason` of a shelving or a removal from service.
    pub reason: &'a str,
}

/// Carries out `asked` and prints what became of it.
pub async fn handle(
    client: &FailoverClient,
    asked: HandlingChange<'_>,
    signer: Signer<'_>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let HandlingChange {
        target,
        folder,
        change,
        duration,
        reason,
    } = asked;
    let name = target.as_str();
    let minutes = match duration {
        Some(duration) => minutes_of(duration)?,
        None => 0,
    };
    let (alarm, folder) = if folder {
        (String::new(), target.clone())
    } else {
        (target.clone(), String::new())
    };
    let request = HandleAlarmRequest {
        alarm,
        change: change.into(),
        shelve_minutes: minutes,
        reason: reason.to_owned(),
        signatures: Vec::new(),
        folder,
    };
    let reply = sign_if_asked(signer, SignatureMeaning::Performed, input, output, |signatures| {
        client.handle_alarm(HandleAlarmRequest {
            signatures,
            ..request.clone()
        })
    })
    .await?;
    let name = if request.folder.is_empty() {
        name.to_owned()
    } else {
        format!("{} alarms below {name}", reply.count)
    };
    let said = match (change, reply.changed) {
        (AlarmHandlingChange::Shelve, _) => {
            let until =
                UNIX_EPOCH + Duration::from_millis(u64::try_from(reply.shelved_until_ms).unwrap_or(0));
            format!(
                "shelved {name} until {}",
                humantime::format_rfc3339_seconds(until)
            )
        }
        (AlarmHandlingChange::Unshelve, true) => format!("unshelved {name}"),
        (AlarmHandlingChange::Unshelve, false) => format!("{name} was not shelved"),
        (AlarmHandlingChange::RemoveFromService, true) => format!("took {name} out of service"),
        (AlarmHandlingChange::RemoveFromService, false) => format!("{name} was out of service already"),
        (AlarmHandlingChange::ReturnToService, true) => format!("put {name} back in service"),
        (AlarmHandlingChange::ReturnToService, false) => format!("{name} was in service"),
        (AlarmHandlingChange::Unspecified, _) => bail!("no change asked for"),
    };
    writeln!(output, "{said}")?;
    Ok(())
}

/// `--for`: a duration (`30min`, `2h`) as whole minutes, at least one.
fn minutes_of(text: &str) -> anyhow::Result<u32> {
    let duration = humantime::parse_duration(text.trim())
        .with_context(|| format!("--for {text:?}: give a duration such as 30min or 2h"))?;
    let minutes = duration.as_secs().div_ceil(60);
    if minutes == 0 {
        bail!("--for {text:?}: shelve for at least a minute");
    }
    u32::try_from(minutes).with_context(|| format!("--for {text:?} is too long"))
}
