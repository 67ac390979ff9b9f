//! The OPC UA server the tests run as a process of their own (`tserver_tests::opcua` starts it,
//! kills it and starts it again): async-opcua's server on 127.0.0.1 with the `Line1` variables
//! `tserver_tests::opcua` names, unsecured and Basic256Sha256 endpoints, and its certificate in
//! the PKI directory given. It prints one line once it listens, takes `flaky <status>` lines on
//! standard input, and stops when standard input closes or on SIGTERM.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use clap::Parser;
use opcua::crypto::SecurityPolicy;
use opcua::server::address_space::VariableBuilder;
use opcua::server::diagnostics::NamespaceMetadata;
use opcua::server::node_manager::memory::{SimpleNodeManager, simple_node_manager};
use opcua::server::{ANONYMOUS_USER_TOKEN_ID, ServerBuilder, ServerHandle, ServerUserToken};
use opcua::types::{
    DataTypeId, DataValue, DateTime, Guid, MessageSecurityMode, NodeId, QualifiedName, StatusCode,
    VariableTypeId,
};
use tokio::sync::{mpsc, watch};
use tserver_tests::opcua::{
    COUNT, FLAKY, FOLDER, FlakyStatus, GUID_ID, GUID_VALUE, NAME, NAME_VALUE, NAMESPACE_URI, NUMERIC_ID,
    NUMERIC_VALUE, RUNNING, SETPOINT, TEMP, listening_line,
};

/// The token id of the user name and password the server accepts.
const USER_TOKEN_ID: &str = "user";
/// How often the changing variables change.
const TICK: Duration = Duration::from_millis(100);

#[derive(Debug, Parser)]
#[command(about = "An OPC UA server for the tests")]
struct Args {
    /// The port on 127.0.0.1 (0: a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Its certificate and key (made on the first start) and the client certificates it trusts.
    #[arg(long)]
    pki_dir: PathBuf,
    /// The user name clients may sign in with.
    #[arg(long)]
    user: String,
    /// Its password.
    #[arg(long)]
    password: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // Silent unless asked: the tests read its standard output and keep its standard error.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{}", args.port))?;
    let port = listener.local_addr()?.port();
    let (server, handle) = build(&args, port)?;
    let node_manager = handle
        .node_managers()
        .get_of_type::<SimpleNodeManager>()
        .context("the server has the simple node manager")?;
    let namespace = handle
        .get_namespace_index(NAMESPACE_URI)
        .context("the server has the tests' namespace")?;
    let nodes = add_variables(&node_manager, namespace)?;
    let (set_flaky, flaky) = watch::channel(FlakyStatus::Cycle);
    tokio::spawn(tick(node_manager, handle.clone(), nodes, flaky));
    let running = tokio::spawn(server.run_with(listener));
    println!("{}", listening_line(port, namespace));

    let mut commands = read_commands();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(line) => apply(&line, &set_flaky),
                None => break,
            },
            _ = terminate.recv() => break,
        }
    }
    handle.cancel();
    running
        .await?
        .map_err(|error| anyhow!("the server failed: {error}"))
}

/// The server: its identity and certificate, its endpoints and users, the tests' namespace.
fn build(args: &Args, port: u16) -> anyhow::Result<(opcua::server::Server, ServerHandle)> {
    let url = format!("opc.tcp://127.0.0.1:{port}/");
    let anyone: &[&str] = &[ANONYMOUS_USER_TOKEN_ID, USER_TOKEN_ID];
    let users: &[&str] = &[USER_TOKEN_ID];
    ServerBuilder::new()
        .application_name("tserver-tests OPC UA server")
        .application_uri("urn:tserver-tests:opcua-server")
        .product_uri("urn:tserver-tests")
        .host("127.0.0.1")
        .port(port)
        .discovery_urls(vec![url])
        .pki_dir(&args.pki_dir)
        .create_sample_keypair(true)
        .trust_client_certs(true)
        .add_user_token(
            USER_TOKEN_ID,
            ServerUserToken::user_pass(args.user.as_str(), args.password.as_str()),
        )
        .add_endpoint(
            "none",
            ("/", SecurityPolicy::None, MessageSecurityMode::None, anyone),
        )
        .add_endpoint(
            "basic256sha256_sign",
            (
                "/",
                SecurityPolicy::Basic256Sha256,
                MessageSecurityMode::Sign,
                users,
            ),
        )
        .add_endpoint(
            "basic256sha256_sign_encrypt",
            (
                "/",
                SecurityPolicy::Basic256Sha256,
                MessageSecurityMode::SignAndEncrypt,
                users,
            ),
        )
        .default_endpoint("none")
        .with_node_manager(simple_node_manager(
            NamespaceMetadata {
                namespace_uri: NAMESPACE_URI.to_owned(),
                ..Default::default()
            },
            "tserver-tests",
        ))
        .build()
        .map_err(|error| anyhow!("the server's configuration: {error}"))
}

/// The node ids of the variables that change.
#[derive(Debug)]
struct Changing {
    temp: NodeId,
    count: NodeId,
    flaky: NodeId,
}

/// The `Line1` folder under Objects and its variables.
fn add_variables(node_manager: &SimpleNodeManager, namespace: u16) -> anyhow::Result<Changing> {
    let id = |name: &str| NodeId::new(namespace, name);
    let folder = id(FOLDER);
    let guid = Guid::from_str(GUID_ID).map_err(|error| anyhow!("{GUID_ID}: {error}"))?;
    let mut space = node_manager.address_space().write();
    space.add_folder(
        &folder,
        QualifiedName::new(namespace, FOLDER),
        FOLDER,
        &NodeId::objects_folder_id(),
    );
    let variables: [(NodeId, &str, DataTypeId, opcua::types::Variant, bool); 8] = [
        (id(TEMP), "Temp", DataTypeId::Double, 20.0.into(), false),
        (id(COUNT), "Count", DataTypeId::Int32, 0i32.into(), false),
        (id(RUNNING), "Running", DataTypeId::Boolean, true.into(), false),
        (id(SETPOINT), "Setpoint", DataTypeId::Double, 0.0.into(), true),
        (id(NAME), "Name", DataTypeId::String, NAME_VALUE.into(), false),
        (id(FLAKY), "Flaky", DataTypeId::Double, 0.0.into(), false),
        (
            NodeId::new(namespace, NUMERIC_ID),
            "Pressure",
            DataTypeId::Double,
            NUMERIC_VALUE.into(),
            false,
        ),
        (
            NodeId::new(namespace, guid),
            "Flow",
            DataTypeId::Double,
            GUID_VALUE.into(),
            false,
        ),
    ];
    for (node, browse_name, data_type, value, writable) in variables {
        let mut builder =
            VariableBuilder::new(&node, QualifiedName::new(namespace, browse_name), browse_name)
                .data_type(data_type)
                .value(value)
                .has_type_definition(VariableTypeId::BaseDataVariableType)
                .organized_by(&folder);
        if writable {
            // Sets the user access level too, which the server checks on a write.
            builder = builder.writable();
        }
        if !builder.insert(&mut *space) {
            return Err(anyhow!("the variable {node} is not valid"));
        }
    }
    Ok(Changing {
        temp: id(TEMP),
        count: id(COUNT),
        flaky: id(FLAKY),
    })
}

/// Changes Temp, Count and Flaky every [`TICK`], Flaky's status as `flaky` says.
async fn tick(
    node_manager: Arc<SimpleNodeManager>,
    handle: ServerHandle,
    nodes: Changing,
    flaky: watch::Receiver<FlakyStatus>,
) {
    let mut interval = tokio::time::interval(TICK);
    let mut step: i32 = 0;
    loop {
        interval.tick().await;
        step = step.wrapping_add(1);
        let now = DateTime::now();
        let seconds = step / 10;
        let status = match *flaky.borrow() {
            FlakyStatus::Cycle => match seconds.rem_euclid(3) {
                0 => StatusCode::Good,
                1 => StatusCode::UncertainLastUsableValue,
                _ => StatusCode::BadNoCommunication,
            },
            FlakyStatus::Good => StatusCode::Good,
            FlakyStatus::Uncertain => StatusCode::UncertainLastUsableValue,
            FlakyStatus::Bad => StatusCode::BadNoCommunication,
        };
        let temp = 20.0 + 5.0 * (f64::from(step) / 10.0).sin();
        let values = [
            (&nodes.temp, None, DataValue::new_at(temp, now)),
            (&nodes.count, None, DataValue::new_at(step, now)),
            (
                &nodes.flaky,
                None,
                DataValue::new_at_status(f64::from(seconds), now, status),
            ),
        ];
        if node_manager
            .set_values(handle.subscriptions(), values.into_iter())
            .is_err()
        {
            return;
        }
    }
}

/// Standard input's lines, from a thread of its own (a blocking read would keep the runtime
/// from shutting down); the channel closes when standard input does.
fn read_commands() -> mpsc::UnboundedReceiver<String> {
    let (send, commands) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::stdin().lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    commands
}

/// Carries out one command line; an unknown one is reported and ignored.
fn apply(line: &str, set_flaky: &watch::Sender<FlakyStatus>) {
    match line
        .trim()
        .strip_prefix("flaky ")
        .and_then(FlakyStatus::from_word)
    {
        Some(status) => {
            set_flaky.send_replace(status);
        }
        None => eprintln!("unknown command {line:?} (known: flaky cycle|good|uncertain|bad)"),
    }
}
