//! Electronic signatures at the terminal: when the server answers that an act takes
//! signatures, the person at the terminal signs (their password entered again, with the
//! meaning the act gives it) and, for a witnessed tag, a second operator beside them signs as
//! witness; the act is then sent once more with them. Passwords are read without echo from a
//! terminal, or as lines of standard input from a pipe.

use std::future::Future;
use std::io::{BufRead, Write};

use anyhow::{Context, bail};
use service_client::{ClientError, ErrorCode, Signature, SignatureMeaning};

/// Who signs at this terminal, when an act takes a signature.
#[derive(Debug, Clone, Copy)]
pub struct Signer<'a> {
    /// The logged-in user.
    pub user: &'a str,
    /// Whether standard input is a terminal (passwords are then read without echo).
    pub terminal: bool,
}

/// Sends an act by way of `send`, first with no signature; when the server refuses it for
/// want of signatures, asks `signer` for them (their own meaning `meaning`, and a witness's
/// when one is taken) and sends it once more with them.
pub async fn sign_if_asked<T, Sent>(
    signer: Signer<'_>,
    meaning: SignatureMeaning,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    mut send: impl FnMut(Vec<Signature>) -> Sent,
) -> anyhow::Result<T>
where
    Sent: Future<Output = Result<T, ClientError>>,
{
    match send(Vec::new()).await {
        Ok(done) => Ok(done),
        Err(refused) => match signatures_for(&refused, signer, meaning, input, output)? {
            Some(signatures) => Ok(send(signatures).await?),
            None => Err(refused.into()),
        },
    }
}

/// The signatures an act the server refused for want of them takes, asked for at the
/// terminal: the signer's own, meaning `meaning`, and a witness's (meaning reviewed) when the
/// server's `message` says one is taken. `None` when the refusal was not for signatures.
fn signatures_for(
    refused: &ClientError,
    Signer { user, terminal }: Signer<'_>,
    meaning: SignatureMeaning,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<Option<Vec<Signature>>> {
    let ClientError::Server {
        code: ErrorCode::SignatureRequired,
        message,
    } = refused
    else {
        return Ok(None);
    };
    writeln!(output, "{message}")?;
    let mut signatures = vec![Signature {
        user: user.to_owned(),
        password: read_secret(
            &format!("password of {user} (signing: {}): ", words(meaning)),
            input,
            output,
            terminal,
        )?,
        meaning: meaning.into(),
    }];
    if message.contains("a witness's") {
        write!(output, "witness (another operator's user name): ")?;
        output.flush()?;
        let witness = read_line(input)?;
        if witness.is_empty() {
            bail!("no witness named: nothing was done");
        }
        let password = read_secret(
            &format!("password of {witness} (signing: reviewed): "),
            input,
            output,
            terminal,
        )?;
        signatures.push(Signature {
            user: witness,
            password,
            meaning: SignatureMeaning::Reviewed.into(),
        });
    }
    Ok(Some(signatures))
}

/// A meaning in the words the prompt shows.
fn words(meaning: SignatureMeaning) -> &'static str {
    match meaning {
        SignatureMeaning::Approved => "approved",
        SignatureMeaning::Performed => "performed",
        SignatureMeaning::Reviewed => "reviewed",
        SignatureMeaning::Unspecified => "unspecified",
    }
}

/// A password: without echo from a terminal, else the next line of `input`.
fn read_secret(
    prompt: &str,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    terminal: bool,
) -> anyhow::Result<String> {
    if terminal {
        return crate::terminal::read_hidden(prompt);
    }
    write!(output, "{prompt}")?;
    output.flush()?;
    let line = read_line(input)?;
    writeln!(output)?;
    Ok(line)
}

/// The next line of `input`, without its line end.
fn read_line(input: &mut dyn BufRead) -> anyhow::Result<String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .context("cannot read the signature from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}
