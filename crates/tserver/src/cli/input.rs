//! What admin commands read from their standard input: a password or a secret value, from its
//! first line, or typed on a terminal without echo.

use std::io::BufRead;

use anyhow::{Context, bail};

/// Reads a password from the first line of `input`, unless the user is to be passwordless.
pub(super) fn read_password(no_password: bool, input: &mut dyn BufRead) -> anyhow::Result<Option<String>> {
    if no_password {
        return Ok(None);
    }
    let hint = "; pipe one in, or pass --no-password for a passwordless user";
    read_first_line(input, "password", hint).map(Some)
}

/// Reads the first line of `input` (without its line ending); an empty line is refused.
pub(super) fn read_first_line(input: &mut dyn BufRead, what: &str, hint: &str) -> anyhow::Result<String> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .with_context(|| format!("cannot read the {what} from standard input"))?;
    let value = line.trim_end_matches(['\n', '\r']);
    if value.is_empty() {
        bail!("no {what} given (the first line of standard input is empty){hint}");
    }
    Ok(value.to_owned())
}

/// Asks for a value on standard error and reads it from the terminal on standard input without
/// echoing it (that terminal need not be the process's controlling one).
pub(super) fn read_hidden(prompt: &str) -> anyhow::Result<String> {
    let config = rpassword::ConfigBuilder::new()
        .input_file_path("/dev/stdin")
        .output_file_path("/dev/stderr")
        .build();
    rpassword::prompt_password_with_config(prompt, config).context("cannot read it from the terminal")
}
