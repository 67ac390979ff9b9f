//! Reading a secret from the person at the terminal: a password typed without echo.

use anyhow::Context;

/// Asks for a value on standard error and reads it from the terminal on standard input without
/// echoing it (that terminal need not be the process's controlling one).
pub(crate) fn read_hidden(prompt: &str) -> anyhow::Result<String> {
    let config = rpassword::ConfigBuilder::new()
        .input_file_path("/dev/stdin")
        .output_file_path("/dev/stderr")
        .build();
    rpassword::prompt_password_with_config(prompt, config)
        .context("cannot read the password from the terminal")
}
