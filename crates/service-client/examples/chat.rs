//! A display client in a dozen lines: log in, read a tag, ask the assistant.
//!
//! Start a demo server first (`tserver init demo.db --demo && tserver serve --solution demo.db`),
//! then: `cargo run -p service-client --example chat -- 127.0.0.1:3101 "What is wrong with Pump 1?"`

use service_client::{Client, ClientOptions, TagValue};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3101".to_owned());
    let question = args
        .next()
        .unwrap_or_else(|| "What is wrong with Pump 1?".to_owned());

    let client = Client::connect(addr.as_str(), ClientOptions::default()).await?;
    let login = client.login("guest", "").await?;
    println!(
        "logged in as {} on tserver {}",
        login.user_name, login.server_version
    );

    for reading in client
        .read_tags(&["Pump1.MotorCurrent", "Pump1.FlowRate"])
        .await?
    {
        match reading.value {
            Some(TagValue::Number(value)) => println!("{} = {value} {}", reading.name, reading.units),
            other => println!("{} = {other:?} ({})", reading.name, reading.error),
        }
    }

    let envelope = client.chat_envelope(&question).await?;
    println!("[{}] {}", envelope.status.as_str(), envelope.text);
    for warning in envelope.warnings {
        println!("warning: {warning}");
    }
    Ok(())
}
