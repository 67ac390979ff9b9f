//! `[[sources]]` and a tag's `source`: the MQTT brokers, Modbus TCP devices and OPC UA
//! servers values come from (each kind's own keys, refused on the others), and the binding
//! that names one of them from a tag (a topic or Sparkplug metric, a Modbus address, an OPC UA
//! node).

use super::{Fields, Reader, span_of};
use crate::document::Node;
use crate::model::{SourceBinding, SourceKind, SourceSpec};

/// The keys of `[[sources]]` only an MQTT source takes.
const MQTT_SOURCE_KEYS: &[&str] = &[
    "client_id",
    "ca_file",
    "keep_alive",
    "root",
    // A polled device's value is as old as the last poll: Bad when a poll fails is the rule.
    "stale_after",
];

/// The keys of `[[sources]]` only a Modbus source takes.
const MODBUS_SOURCE_KEYS: &[&str] = &["unit", "poll_interval", "timeout", "max_gap"];

/// The keys of `[[sources]]` only an OPC UA source takes.
const OPCUA_SOURCE_KEYS: &[&str] = &[
    "security",
    "mode",
    "sampling_interval",
    "publishing_interval",
    "deadband",
];

/// The keys of `[[sources]]` an MQTT and an OPC UA source take (a Modbus device has no login).
const CREDENTIAL_KEYS: &[&str] = &["username", "password"];

/// Every key of `[[sources]]`.
const SOURCE_KEYS: &[&str] = &[
    "name",
    "url",
    "stale_after",
    "client_id",
    "username",
    "password",
    "ca_file",
    "keep_alive",
    "root",
    "unit",
    "poll_interval",
    "timeout",
    "max_gap",
    "security",
    "mode",
    "sampling_interval",
    "publishing_interval",
    "deadband",
];

/// OPC UA security policies a source may ask for.
const SECURITY_POLICIES: [&str; 2] = ["None", "Basic256Sha256"];

/// OPC UA message security modes a secured source may ask for.
const SECURITY_MODES: [&str; 2] = ["Sign", "SignAndEncrypt"];

impl Reader<'_> {
    /// A `[[sources]]` entry: an MQTT broker, a Modbus TCP device or an OPC UA server, its kind
    /// told by its URL's scheme.
    pub(super) fn source_spec(&mut self, node: &Node, path: &str) -> Option<SourceSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let url_span = span_of(&fields, "url");
        let url = self.required_string(&mut fields, "url");
        let kind = url.as_deref().and_then(SourceKind::of_url);
        if let Some(url) = &url {
            let rest = url.split_once("://").map_or("", |(_, rest)| rest);
            // Only an OPC UA server's address has a path (its endpoint's).
            let host = match kind {
                Some(SourceKind::OpcUa) => rest.split('/').next().unwrap_or_default(),
                _ => rest.trim_end_matches('/'),
            };
            if kind.is_none() || host.is_empty() || host.contains('/') || host.contains('@') {
                self.error(
                    url_span.unwrap_or_else(|| fields.span.clone()),
                    fields.field("url"),
                    format!(
                        "{url:?} is not a source address: mqtt://host[:port] or mqtts://host[:port] for \
                         an MQTT broker, modbus://host[:port] for a Modbus TCP device, \
                         opc.tcp://host[:port][/path] for an OPC UA server; credentials in username \
                         and password"
                    ),
                );
            }
        }
        let client_id = self.string(&mut fields, "client_id").unwrap_or_default();
        let username_span = span_of(&fields, "username");
        let username = self.string(&mut fields, "username").unwrap_or_default();
        let password_span = span_of(&fields, "password");
        let password = self.string(&mut fields, "password").unwrap_or_default();
        if !password.is_empty() && !password.starts_with("/secret:") {
            self.error(
                password_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("password"),
                "give a /secret:<Name> token (tserver secrets PATH set <Name>), never the password itself",
            );
        }
        let ca_file = self.string(&mut fields, "ca_file").unwrap_or_default();
        let keep_alive = self.seconds(&mut fields, "keep_alive", 5..=3600, 30);
        let root_span = span_of(&fields, "root");
        let root = self.string(&mut fields, "root").unwrap_or_default();
        if root.contains(['+', '#', '\0']) {
            self.error(
                root_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("root"),
                format!("{root:?} is not a topic prefix: no + or # wildcards"),
            );
        }
        let stale_after = self.seconds(&mut fields, "stale_after", 0..=86_400, 0);
        let unit = self
            .whole(&mut fields, "unit", 0..=255, "a unit id")
            .map(|unit| unit.unwrap_or(1));
        let poll_interval = self
            .whole(&mut fields, "poll_interval", 10..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(1000));
        let timeout = self
            .whole(&mut fields, "timeout", 10..=60_000, "milliseconds")
            .map(|timeout| timeout.unwrap_or(1000));
        let max_gap = self
            .whole(&mut fields, "max_gap", 0..=120, "addresses")
            .map(|gap| gap.unwrap_or(0));
        let (security, mode) = self.security(&mut fields);
        if kind == Some(SourceKind::OpcUa) && security == "None" && !username.is_empty() {
            self.error(
                username_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("username"),
                "a user name and password over security \"None\" travel on a channel that \
                 neither signs nor encrypts, where anyone on the network can read the password: \
                 ask for security = \"Basic256Sha256\" with mode = \"SignAndEncrypt\" (or \
                 \"Sign\"), or leave username and password out for an anonymous session",
            );
        }
        let sampling_interval = self
            .whole(&mut fields, "sampling_interval", 0..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(500));
        let publishing_interval = self
            .whole(&mut fields, "publishing_interval", 10..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(500));
        let deadband = self.deadband(&mut fields);
        self.refuse_other_kinds_fields(&fields, kind);
        self.done(fields, SOURCE_KEYS);
        Some(SourceSpec {
            name: name?,
            url: url?,
            client_id,
            username,
            password,
            ca_file,
            keep_alive: keep_alive?,
            root,
            stale_after: stale_after?,
            unit: u8::try_from(unit?).ok()?,
            poll_interval: u64::try_from(poll_interval?).ok()?,
            timeout: u64::try_from(timeout?).ok()?,
            max_gap: u16::try_from(max_gap?).ok()?,
            security,
            mode,
            sampling_interval: u64::try_from(sampling_interval?).ok()?,
            publishing_interval: u64::try_from(publishing_interval?).ok()?,
            deadband: deadband?.unwrap_or(0.0),
        })
    }

    /// Reports the fields only sources of other kinds take (a `unit` on a broker, a `root` on
    /// a Modbus device, a `password` on a Modbus device).
    fn refuse_other_kinds_fields(&mut self, fields: &Fields<'_>, kind: Option<SourceKind>) {
        let Some(kind) = kind else { return };
        let owners: [(&[&str], &[SourceKind], &str); 4] = [
            (
                MQTT_SOURCE_KEYS,
                &[SourceKind::Mqtt],
                "an MQTT source's (mqtt://, mqtts://)",
            ),
            (
                MODBUS_SOURCE_KEYS,
                &[SourceKind::Modbus],
                "a Modbus source's (modbus://)",
            ),
            (
                OPCUA_SOURCE_KEYS,
                &[SourceKind::OpcUa],
                "an OPC UA source's (opc.tcp://)",
            ),
            (
                CREDENTIAL_KEYS,
                &[SourceKind::Mqtt, SourceKind::OpcUa],
                "an MQTT or OPC UA source's",
            ),
        ];
        for (keys, takers, theirs) in owners {
            if takers.contains(&kind) {
                continue;
            }
            for key in keys {
                if let Some(span) = span_of(fields, key) {
                    self.error(span, fields.field(key), format!("is {theirs}, not this source's"));
                }
            }
        }
    }

    /// A tag's `source`: a broker's topic or Sparkplug metric, a Modbus device's address, or an
    /// OPC UA server's node.
    pub(super) fn source(&mut self, node: &Node, path: &str) -> Option<SourceBinding> {
        let mut fields = self.table(node, path)?;
        // In the order written, so the second one written is the one reported.
        let mut named: Vec<(usize, &str)> = ["broker", "device", "server"]
            .into_iter()
            .filter_map(|key| Some((span_of(&fields, key)?.start, key)))
            .collect();
        named.sort_unstable();
        if let Some(&(_, second)) = named.get(1) {
            self.error(
                span_of(&fields, second).unwrap_or_else(|| fields.span.clone()),
                fields.field(second),
                "a tag has one source: broker (an MQTT source), device (a Modbus source) or server \
                 (an OPC UA source)",
            );
        }
        if span_of(&fields, "device").is_some() {
            return self.modbus_binding(fields);
        }
        if span_of(&fields, "server").is_some() {
            return self.opcua_binding(fields);
        }
        let broker = self.name(&mut fields, "broker");
        let topic = self.mqtt_name(&mut fields, "topic");
        let command_topic = self.mqtt_name(&mut fields, "command_topic");
        let sparkplug = self.mqtt_name(&mut fields, "sparkplug");
        let metric = self.string(&mut fields, "metric");
        if let Some(ids) = &sparkplug {
            let levels = ids.split('/').count();
            if !(2..=3).contains(&levels) || ids.split('/').any(str::is_empty) {
                self.error(
                    span_of(&fields, "sparkplug").unwrap_or_else(|| fields.span.clone()),
                    fields.field("sparkplug"),
                    format!("{ids:?} is not an edge node or device: Group/Node or Group/Node/Device"),
                );
            }
            if metric.is_none() {
                self.missing(&fields, "metric");
            }
            for key in ["topic", "command_topic"] {
                if let Some(span) = span_of(&fields, key) {
                    self.error(
                        span,
                        fields.field(key),
                        "a Sparkplug metric has no topic of its own (values come in DATA messages, writes go out as NCMD/DCMD)",
                    );
                }
            }
        } else if let Some(span) = span_of(&fields, "metric") {
            self.error(
                span,
                fields.field("metric"),
                "metric names a Sparkplug B metric: give sparkplug = \"Group/Node[/Device]\" too",
            );
        }
        self.done(
            fields,
            &["broker", "topic", "command_topic", "sparkplug", "metric"],
        );
        Some(SourceBinding {
            broker: broker?,
            topic,
            command_topic,
            sparkplug,
            metric,
            ..SourceBinding::default()
        })
    }

    /// `source = { device = ..., <table> = ADDRESS, format, word_order, scale, offset }`.
    fn modbus_binding(&mut self, mut fields: Fields<'_>) -> Option<SourceBinding> {
        const TABLES: [&str; 4] = ["coil", "discrete_input", "input_register", "holding_register"];
        let device = self.name(&mut fields, "device");
        let mut addresses = [None; 4];
        for (slot, key) in addresses.iter_mut().zip(TABLES) {
            *slot = self
                .whole(&mut fields, key, 0..=65_535, "an address")
                .flatten()
                .and_then(|address| u16::try_from(address).ok());
        }
        // In the order written, so the second one written is the one reported.
        let mut given: Vec<(usize, &str)> = TABLES
            .iter()
            .filter_map(|key| Some((span_of(&fields, key)?.start, *key)))
            .collect();
        given.sort_unstable();
        let given: Vec<&str> = given.into_iter().map(|(_, key)| key).collect();
        match given.as_slice() {
            [] => self.error(
                fields.span.clone(),
                fields.path.clone(),
                format!(
                    "a Modbus binding gives its address as one of {}",
                    TABLES.join(", ")
                ),
            ),
            [_] => {}
            [first, second, ..] => self.error(
                span_of(&fields, second).unwrap_or_else(|| fields.span.clone()),
                fields.field(second),
                format!("a tag is at one address: {first} is given already"),
            ),
        }
        let format = self.string(&mut fields, "format");
        let word_order = self.string(&mut fields, "word_order");
        let scale = self.number(&mut fields, "scale");
        let offset = self.number(&mut fields, "offset");
        let binding = SourceBinding {
            device: device?,
            coil: addresses[0],
            discrete_input: addresses[1],
            input_register: addresses[2],
            holding_register: addresses[3],
            format,
            word_order,
            scale,
            offset,
            ..SourceBinding::default()
        };
        if let Some(Err(problem)) = binding.modbus_point() {
            self.error(
                span_of(&fields, problem.key).unwrap_or_else(|| fields.span.clone()),
                fields.field(problem.key),
                problem.message,
            );
        }
        self.done(
            fields,
            &[
                "device",
                "coil",
                "discrete_input",
                "input_register",
                "holding_register",
                "format",
                "word_order",
                "scale",
                "offset",
            ],
        );
        Some(binding)
    }

    /// `source = { server = ..., node = NODE_ID, sampling_interval, deadband }`.
    fn opcua_binding(&mut self, mut fields: Fields<'_>) -> Option<SourceBinding> {
        let server = self.name(&mut fields, "server");
        let node = self.required_string(&mut fields, "node");
        let sampling_interval = self
            .whole(&mut fields, "sampling_interval", 0..=3_600_000, "milliseconds")
            .map(|interval| interval.and_then(|interval| u64::try_from(interval).ok()));
        let deadband = self.deadband(&mut fields);
        let binding = SourceBinding {
            server: server?,
            node,
            sampling_interval: sampling_interval?,
            deadband: deadband?,
            ..SourceBinding::default()
        };
        if let Some(Err(problem)) = binding.opcua_node() {
            self.error(
                span_of(&fields, problem.key).unwrap_or_else(|| fields.span.clone()),
                fields.field(problem.key),
                problem.message,
            );
        }
        self.done(fields, &["server", "node", "sampling_interval", "deadband"]);
        binding.node.is_some().then_some(binding)
    }

    /// An absolute deadband: `Some(None)` when absent, `None` when not a number from 0 up.
    fn deadband(&mut self, fields: &mut Fields<'_>) -> Option<Option<f64>> {
        let span = span_of(fields, "deadband");
        let Some(deadband) = self.number(fields, "deadband") else {
            return if span.is_some() { None } else { Some(None) };
        };
        if deadband.is_finite() && deadband >= 0.0 {
            return Some(Some(deadband));
        }
        self.error(
            span.unwrap_or_else(|| fields.span.clone()),
            fields.field("deadband"),
            format!("must be a finite number from 0 up, not {deadband}"),
        );
        None
    }

    /// OPC UA's security policy and mode: the mode goes with `Basic256Sha256` only.
    fn security(&mut self, fields: &mut Fields<'_>) -> (String, String) {
        let security_span = span_of(fields, "security");
        let security = self
            .string(fields, "security")
            .unwrap_or_else(|| "None".to_owned());
        let mode_span = span_of(fields, "mode");
        let mode = self.string(fields, "mode").unwrap_or_default();
        if !SECURITY_POLICIES.contains(&security.as_str()) {
            self.error(
                security_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("security"),
                format!("{security:?} is none of {}", SECURITY_POLICIES.join(", ")),
            );
        } else if security == "None" {
            if let Some(span) = mode_span {
                self.error(
                    span,
                    fields.field("mode"),
                    "security \"None\" signs and encrypts nothing: drop mode, or ask for \
                     security = \"Basic256Sha256\"",
                );
            }
        } else if mode_span.is_none() {
            self.error(
                security_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("mode"),
                format!(
                    "security {security:?} needs a mode: one of {}",
                    SECURITY_MODES.join(", ")
                ),
            );
        } else if !mode.is_empty() && !SECURITY_MODES.contains(&mode.as_str()) {
            self.error(
                mode_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("mode"),
                format!("{mode:?} is none of {}", SECURITY_MODES.join(", ")),
            );
        }
        (security, mode)
    }

    /// A topic or topic level: not empty, no wildcards (`+`, `#`), no NUL.
    fn mqtt_name(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let span = span_of(fields, key);
        let text = self.string(fields, key)?;
        if text.is_empty() || text.contains(['+', '#', '\0']) {
            self.error(
                span.unwrap_or_else(|| fields.span.clone()),
                fields.field(key),
                format!("{text:?} is not a topic: not empty, and no + or # wildcards"),
            );
            return None;
        }
        Some(text)
    }
}
