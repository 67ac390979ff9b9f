//! `tserver tls create`: a private CA and a server certificate it signed, written as PEM files
//! ready for `tserver serve --tls-cert/--tls-key` and `tclient --tls-ca`.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// `tserver tls` actions.
#[derive(Debug, Subcommand)]
pub enum TlsAction {
    /// Write a new CA (ca.pem, ca-key.pem) and a server certificate it signed (server.pem,
    /// with the CA after it, and server-key.pem) into a directory.
    Create {
        /// A name clients connect by: a DNS name or an IP address (repeat for more).
        #[arg(long = "host", value_name = "NAME", required = true)]
        hosts: Vec<String>,
        /// Where to write the files (made if missing; files there are never overwritten).
        #[arg(long, value_name = "DIR", default_value = "tls")]
        dir: PathBuf,
        /// How long the server certificate is valid, in days (the CA: ten years).
        #[arg(long, default_value_t = 825, value_parser = clap::value_parser!(u16).range(1..=3650))]
        days: u16,
    },
}

/// How long the CA is valid.
const CA_DAYS: i64 = 3650;

/// The files `create` writes, in the order it writes them.
const FILES: [&str; 4] = ["ca.pem", "ca-key.pem", "server.pem", "server-key.pem"];

/// Runs a `tserver tls` action.
pub fn tls_command(action: &TlsAction, output: &mut dyn Write) -> anyhow::Result<()> {
    match action {
        TlsAction::Create { hosts, dir, days } => create(hosts, dir, i64::from(*days), output),
    }
}

fn create(hosts: &[String], dir: &Path, days: i64, output: &mut dyn Write) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create the directory {}", dir.display()))?;
    for file in FILES {
        let path = dir.join(file);
        anyhow::ensure!(
            !path.exists(),
            "{} exists already: remove it, or choose another --dir",
            path.display()
        );
    }
    let now = time::OffsetDateTime::now_utc();
    // A minute back, so a peer whose clock is a little behind accepts them at once.
    let from = now - time::Duration::minutes(1);

    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    ca.distinguished_name
        .push(DnType::CommonName, format!("TServer CA for {}", hosts.join(", ")));
    ca.not_before = from;
    ca.not_after = now + time::Duration::days(CA_DAYS);
    let ca_certificate = ca.self_signed(&ca_key)?;

    let server_key = KeyPair::generate()?;
    let mut server = CertificateParams::new(hosts.to_vec())
        .with_context(|| format!("{hosts:?} are not DNS names or IP addresses"))?;
    server
        .distinguished_name
        .push(DnType::CommonName, hosts.first().cloned().unwrap_or_default());
    server.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    server.not_before = from;
    server.not_after = now + time::Duration::days(days);
    let server_certificate = server.signed_by(&server_key, &Issuer::new(ca, &ca_key))?;

    let contents = [
        ca_certificate.pem(),
        ca_key.serialize_pem(),
        // The chain a server sends: its certificate, then the CA's.
        format!("{}{}", server_certificate.pem(), ca_certificate.pem()),
        server_key.serialize_pem(),
    ];
    for (file, text) in FILES.iter().zip(contents) {
        write_new(&dir.join(file), &text, file.ends_with("-key.pem"))?;
    }
    let path = |file: &str| dir.join(file).display().to_string();
    writeln!(
        output,
        "wrote {} (the CA: give it to clients), {} (keep it private: it signs more certificates), {} and {} for {} (valid {days} days)",
        path("ca.pem"),
        path("ca-key.pem"),
        path("server.pem"),
        path("server-key.pem"),
        hosts.join(", ")
    )?;
    writeln!(
        output,
        "serve:   tserver serve --solution SOLUTION --tls-cert {} --tls-key {}",
        path("server.pem"),
        path("server-key.pem")
    )?;
    writeln!(output, "connect: tclient --tls-ca {} ping", path("ca.pem"))?;
    Ok(())
}

/// Writes a file that must not exist yet; a key readable by its owner only.
fn write_new(path: &Path, text: &str, private: bool) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    if private {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}
