//! The OPC UA server the tests run as a process of their own (`tserver_tests::opcua` starts it,
//! kills it and starts it again): async-opcua's server on 127.0.0.1 with the `Line1` variables
//! `tserver_tests::opcua` names, unsecured and Basic256Sha256 endpoints, and its certificate in
//! the PKI directory given, and `--load N` variables under `Load`. It prints one line once it
//! listens, takes `flaky <status>`, `garbage <kind>` and `load <rate> <seconds>` lines on
//! standard input, and stops when standard input closes or on SIGTERM.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context as _, anyhow};
use clap::Parser;
use opcua::crypto::SecurityPolicy;
use opcua::server::address_space::VariableBuilder;
use opcua::server::diagnostics::NamespaceMetadata;
use opcua::server::node_manager::memory::{SimpleNodeManager, simple_node_manager};
use opcua::server::{ANONYMOUS_USER_TOKEN_ID, ServerBuilder, ServerHandle, ServerUserToken};
use opcua::types::{
    ByteString, DataTypeId, DataValue, DateTime, Guid, MessageSecurityMode, NodeId, QualifiedName,
    StatusCode, VariableTypeId,
};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tserver_tests::opcua::{
    COUNT, FLAKY, FOLDER, FlakyStatus, GARBAGE, GARBAGE_VALUE, GUID_ID, GUID_VALUE, Garbage, LOAD_FOLDER,
    NAME, NAME_VALUE, NAMESPACE_URI, NUMERIC_ID, NUMERIC_VALUE, OPAQUE_BYTES, OPAQUE_VALUE, RUNNING,
    SETPOINT, TEMP, listening_line, load_final_value, load_variable,
};

/// The token id of the user name and password the server accepts.
const USER_TOKEN_ID: &str = "user";
/// How often the changing variables change.
const TICK: Duration = Duration::from_millis(100);
/// How often a load sets its next batch of values.
const LOAD_TICK: Duration = Duration::from_millis(10);
/// The most changes a load makes, whatever its rate and length.
const MOST_LOAD_CHANGES: u64 = 100_000_000;

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
    /// How many load variables (`Load.V00000`...) it serves.
    #[arg(long, default_value_t = 0)]
    load: usize,
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
    let load_nodes = Arc::new(add_load_variables(&node_manager, namespace, args.load)?);
    let (set_flaky, flaky) = watch::channel(FlakyStatus::Cycle);
    tokio::spawn(tick(Arc::clone(&node_manager), handle.clone(), nodes, flaky));
    let running = tokio::spawn(server.run_with(listener));
    println!("{}", listening_line(port, namespace));

    let mut commands = read_commands();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut control = Control {
        set_flaky,
        node_manager,
        handle: handle.clone(),
        garbage: NodeId::new(namespace, GARBAGE),
        load_nodes,
        load: None,
    };
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                Some(line) => control.apply(&line),
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
    let mut builder = ServerBuilder::new();
    // Room for every load variable and the others in one subscription; creating them stays at
    // the default 1,000 per call, as many servers have it.
    let limits = &mut builder.limits_mut().subscriptions;
    limits.max_monitored_items_per_sub = limits.max_monitored_items_per_sub.max(args.load + 100);
    builder
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
    let variables: [(NodeId, &str, DataTypeId, opcua::types::Variant, bool); 10] = [
        (id(TEMP), "Temp", DataTypeId::Double, 20.0.into(), false),
        (id(COUNT), "Count", DataTypeId::Int32, 0i32.into(), false),
        (id(RUNNING), "Running", DataTypeId::Boolean, true.into(), false),
        (id(SETPOINT), "Setpoint", DataTypeId::Double, 0.0.into(), true),
        (id(NAME), "Name", DataTypeId::String, NAME_VALUE.into(), false),
        (id(FLAKY), "Flaky", DataTypeId::Double, 0.0.into(), false),
        (
            id(GARBAGE),
            "Garbage",
            DataTypeId::Double,
            GARBAGE_VALUE.into(),
            false,
        ),
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
        (
            NodeId::new(namespace, ByteString::from(OPAQUE_BYTES.to_vec())),
            "Level",
            DataTypeId::Double,
            OPAQUE_VALUE.into(),
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

/// The `Load` folder under Objects and its `count` Doubles, all 0; their node ids in order.
fn add_load_variables(
    node_manager: &SimpleNodeManager,
    namespace: u16,
    count: usize,
) -> anyhow::Result<Vec<NodeId>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    let folder = NodeId::new(namespace, LOAD_FOLDER);
    let mut space = node_manager.address_space().write();
    space.add_folder(
        &folder,
        QualifiedName::new(namespace, LOAD_FOLDER),
        LOAD_FOLDER,
        &NodeId::objects_folder_id(),
    );
    (0..count)
        .map(|index| {
            let name = load_variable(index);
            let node = NodeId::new(namespace, name.as_str());
            let inserted =
                VariableBuilder::new(&node, QualifiedName::new(namespace, name.as_str()), name.as_str())
                    .data_type(DataTypeId::Double)
                    .value(0.0)
                    .has_type_definition(VariableTypeId::BaseDataVariableType)
                    .organized_by(&folder)
                    .insert(&mut *space);
            if inserted {
                Ok(node)
            } else {
                Err(anyhow!("the variable {node} is not valid"))
            }
        })
        .collect()
}

/// What the commands on standard input act on.
struct Control {
    set_flaky: watch::Sender<FlakyStatus>,
    node_manager: Arc<SimpleNodeManager>,
    handle: ServerHandle,
    garbage: NodeId,
    load_nodes: Arc<Vec<NodeId>>,
    /// The load running, if one is.
    load: Option<JoinHandle<()>>,
}

impl Control {
    /// Carries out one command line; an unknown one is reported and ignored.
    fn apply(&mut self, line: &str) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let known = match words.as_slice() {
            ["flaky", word] => FlakyStatus::from_word(word)
                .map(|status| {
                    self.set_flaky.send_replace(status);
                })
                .is_some(),
            ["garbage", word] => Garbage::from_word(word)
                .map(|garbage| self.set_garbage(garbage))
                .is_some(),
            ["load", rate, seconds] => match (rate.parse(), seconds.parse()) {
                (Ok(rate), Ok(seconds)) => {
                    self.start_load(rate, seconds);
                    true
                }
                _ => false,
            },
            _ => false,
        };
        if !known {
            eprintln!(
                "unknown command {line:?} (known: flaky cycle|good|uncertain|bad, garbage none|nan|text, load RATE SECONDS)"
            );
        }
    }

    /// Starts a load, stopping the one running.
    fn start_load(&mut self, rate: u32, seconds: f64) {
        if let Some(running) = self.load.take() {
            running.abort();
        }
        let load = load(
            Arc::clone(&self.node_manager),
            self.handle.clone(),
            Arc::clone(&self.load_nodes),
            (rate, seconds),
        );
        self.load = Some(tokio::spawn(load));
    }

    fn set_garbage(&self, garbage: Garbage) {
        let value: opcua::types::Variant = match garbage {
            Garbage::None => GARBAGE_VALUE.into(),
            Garbage::NaN => f64::NAN.into(),
            Garbage::Text => "not a number".into(),
        };
        let values = [(&self.garbage, None, unsampled(value))];
        let _ = self
            .node_manager
            .set_values(self.handle.subscriptions(), values.into_iter());
    }
}

/// `rate` changes a second for `seconds` over `nodes` in turn, in a batch every [`LOAD_TICK`],
/// each value the time it was set in microseconds since the Unix epoch; then every node's
/// final value. Bounded by count (`rate * seconds`, at most [`MOST_LOAD_CHANGES`]) and by
/// time (twice `seconds` and one more).
async fn load(
    node_manager: Arc<SimpleNodeManager>,
    handle: ServerHandle,
    nodes: Arc<Vec<NodeId>>,
    (rate, seconds): (u32, f64),
) {
    if nodes.is_empty() {
        eprintln!("no load variables: start with --load N");
        return;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a bounded count of changes"
    )]
    let total = ((f64::from(rate) * seconds.max(0.0)) as u64).min(MOST_LOAD_CHANGES);
    let per_tick = (u64::from(rate) * LOAD_TICK.as_millis() as u64 / 1000).max(1);
    let until = Instant::now() + Duration::from_secs_f64(seconds.max(0.0) * 2.0 + 1.0);
    let mut interval = tokio::time::interval(LOAD_TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut done = 0_u64;
    let mut next = 0_usize;
    while done < total && Instant::now() < until {
        interval.tick().await;
        let batch = per_tick.min(total - done);
        let stamp = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_micros() as f64);
        let values = (0..batch).map(|offset| {
            let node = &nodes[(next + offset as usize) % nodes.len()];
            (node, None, unsampled(stamp))
        });
        if node_manager.set_values(handle.subscriptions(), values).is_err() {
            return;
        }
        next = (next + batch as usize) % nodes.len();
        done += batch;
    }
    let finals = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| (node, None, unsampled(load_final_value(index))));
    let _ = node_manager.set_values(handle.subscriptions(), finals);
}

/// A value with its server timestamp only: async-opcua's server holds back a value with a
/// source timestamp within the sampling interval of the one before until the item's next
/// change, so the last of a quick burst would never be sent; one without is sent at once.
fn unsampled(value: impl Into<opcua::types::Variant>) -> DataValue {
    DataValue {
        value: Some(value.into()),
        server_timestamp: Some(DateTime::now()),
        ..DataValue::default()
    }
}
