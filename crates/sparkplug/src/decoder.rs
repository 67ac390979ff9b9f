//! The host application's view of its edge nodes: each node's birth (its metrics' names,
//! aliases and types, and its `bdSeq`), its devices' births, the sequence number every message
//! must continue, and deaths. A message it cannot trust asks for a rebirth, at most once per
//! [`REBIRTH_PAUSE`] per node.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use prost::Message as _;

use crate::proto::Payload;
use crate::proto::payload::Metric as WireMetric;
use crate::topic::{MessageKind, Topic, TopicError};
use crate::value::{MetricValue, ValueProblem};

/// The largest payload decoded (a birth certificate of many thousand metrics fits).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// Edge nodes followed at once; messages of further nodes are refused.
pub const MAX_NODES: usize = 10_000;

/// Devices followed per edge node.
pub const MAX_DEVICES: usize = 10_000;

/// After asking a node for a rebirth, the decoder waits this long before asking again.
pub const REBIRTH_PAUSE: Duration = Duration::from_secs(5);

/// The metric whose value is the birth/death session number.
const BD_SEQ: &str = "bdSeq";

/// Whose metrics a message carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The group id.
    pub group: String,
    /// The edge node id.
    pub node: String,
    /// The device id, when the message is a device's.
    pub device: Option<String>,
}

/// One metric of a message, its name resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    /// The metric's name (from the message, or from the birth that declared its alias).
    pub name: String,
    /// Its value.
    pub value: MetricValue,
    /// When it was taken, in milliseconds since the Unix epoch (the metric's own time, else
    /// the payload's).
    pub timestamp: Option<u64>,
}

/// A metric that could not be read (the rest of its message still is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricProblem {
    /// An alias no birth of this node or device declared.
    #[error("alias {0} was not declared in a birth certificate")]
    UnknownAlias(u64),
    /// Neither a name nor an alias.
    #[error("a metric has neither a name nor an alias")]
    NoName,
    /// A birth metric without a name.
    #[error("a birth certificate declares a metric without a name")]
    UnnamedBirth,
    /// A data type this reader does not take.
    #[error(
        "metric {name:?} has data type {datatype}, which is not read (datasets, templates, arrays, bytes)"
    )]
    Unsupported {
        /// The metric.
        name: String,
        /// Its data type number.
        datatype: i32,
    },
    /// The value field does not match the data type.
    #[error("metric {name:?} carries a value that does not match its data type")]
    Mismatch {
        /// The metric.
        name: String,
    },
}

/// Why the decoder wants a node to publish its birth again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebirthReason {
    /// A message's `seq` is not the one after the last.
    SequenceGap {
        /// The number expected.
        expected: u8,
        /// The number received.
        received: u64,
    },
    /// A message without `seq`.
    MissingSequence,
    /// Data from a node whose birth was not seen (the server started after it, or it died).
    UnknownNode,
    /// Data or death of a device whose birth was not seen.
    UnknownDevice(String),
}

impl std::fmt::Display for RebirthReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SequenceGap { expected, received } => {
                write!(f, "sequence gap: expected seq {expected}, received {received}")
            }
            Self::MissingSequence => f.write_str("a message without seq"),
            Self::UnknownNode => f.write_str("data from an edge node whose birth was not seen"),
            Self::UnknownDevice(device) => {
                write!(f, "a message of device {device:?}, whose birth was not seen")
            }
        }
    }
}

/// Why a message was not read at all.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Over [`MAX_PAYLOAD_BYTES`].
    #[error("the payload is {0} bytes; at most {MAX_PAYLOAD_BYTES} are read")]
    TooLarge(usize),
    /// Not a Sparkplug B message topic.
    #[error("topic: {0}")]
    Topic(#[from] TopicError),
    /// Not a Sparkplug B payload.
    #[error("the payload is not a Sparkplug B protobuf: {0}")]
    Payload(#[from] prost::DecodeError),
    /// [`MAX_NODES`] or [`MAX_DEVICES`] are followed already.
    #[error("already following {0} edge nodes or devices; this one is not")]
    TooMany(usize),
}

/// What one message says.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The message kind.
    pub kind: MessageKind,
    /// Whose message it is.
    pub target: Target,
    /// The metrics read (births and data; empty for deaths and commands).
    pub metrics: Vec<Metric>,
    /// Metrics that could not be read.
    pub problems: Vec<MetricProblem>,
    /// Set when the caller should publish [`crate::rebirth_request`] to the node now.
    pub rebirth: Option<RebirthReason>,
    /// The node's or device's metrics are no longer current: a death, or data the decoder
    /// cannot trust until a rebirth.
    pub offline: bool,
    /// An NDEATH of an earlier session (its `bdSeq` is not the current birth's): ignored.
    pub stale_death: bool,
}

/// A metric name and type declared by a birth, under an alias.
#[derive(Debug, Clone)]
struct Declared {
    name: String,
    datatype: i32,
}

#[derive(Debug, Default)]
struct Aliases {
    declared: HashMap<u64, Declared>,
    types: HashMap<String, i32>,
}

#[derive(Debug, Default)]
struct DeviceState {
    aliases: Aliases,
}

/// Whether a write can reach an edge node or device, as far as the decoder has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// Born and not dead since.
    Alive,
    /// No birth of the node seen since the decoder started (the host's connection).
    NeverBorn,
    /// The node's death (NDEATH) came after its birth.
    Dead,
    /// The node is alive, but the device has no birth since the node's (or it died: DDEATH).
    DeviceNotBorn,
}

#[derive(Debug, Default)]
struct NodeState {
    /// Born and not dead since.
    online: bool,
    /// Its death came after its last birth.
    dead: bool,
    bd_seq: Option<u64>,
    next_seq: u8,
    aliases: Aliases,
    /// Devices born since the node's birth.
    devices: HashMap<String, DeviceState>,
    rebirth_asked: Option<Instant>,
}

/// Follows the edge nodes of the groups a host application subscribes to.
#[derive(Debug, Default)]
pub struct SparkplugDecoder {
    nodes: HashMap<(String, String), NodeState>,
}

impl SparkplugDecoder {
    /// A decoder that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one message published on `topic` at `now`.
    pub fn decode(&mut self, topic: &str, payload: &[u8], now: Instant) -> Result<Decoded, DecodeError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(DecodeError::TooLarge(payload.len()));
        }
        let topic = Topic::parse(topic)?;
        let payload = Payload::decode(payload)?;
        let mut decoded = Decoded {
            kind: topic.kind,
            target: Target {
                group: topic.group,
                node: topic.node,
                device: topic.device,
            },
            metrics: Vec::new(),
            problems: Vec::new(),
            rebirth: None,
            offline: false,
            stale_death: false,
        };
        if matches!(topic.kind, MessageKind::NCmd | MessageKind::DCmd) {
            // Commands (ours among them) change nothing a host reads.
            return Ok(decoded);
        }
        let key = (decoded.target.group.clone(), decoded.target.node.clone());
        let count = self.nodes.len();
        let node = match self.nodes.entry(key) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(_) if count >= MAX_NODES => {
                return Err(DecodeError::TooMany(MAX_NODES));
            }
            std::collections::hash_map::Entry::Vacant(entry) => entry.insert(NodeState::default()),
        };
        match topic.kind {
            MessageKind::NBirth => node.birth(&payload, &mut decoded),
            MessageKind::NDeath => node.death(&payload, &mut decoded),
            _ => node.follow(&payload, &mut decoded)?,
        }
        if let Some(reason) = decoded.rebirth.take()
            && node
                .rebirth_asked
                .is_none_or(|asked| now.duration_since(asked) >= REBIRTH_PAUSE)
        {
            node.rebirth_asked = Some(now);
            decoded.rebirth = Some(reason);
        }
        Ok(decoded)
    }

    /// Whether `target` (an edge node, or a device of one) is alive now.
    pub fn liveness(&self, target: &Target) -> Liveness {
        let Some(node) = self.nodes.get(&(target.group.clone(), target.node.clone())) else {
            return Liveness::NeverBorn;
        };
        if !node.online {
            return if node.dead {
                Liveness::Dead
            } else {
                Liveness::NeverBorn
            };
        }
        match &target.device {
            Some(device) if !node.devices.contains_key(device) => Liveness::DeviceNotBorn,
            _ => Liveness::Alive,
        }
    }

    /// The data type a birth declared for metric `name` of `target`, to write it back as the
    /// field expects.
    pub fn datatype_of(&self, target: &Target, name: &str) -> Option<i32> {
        let node = self.nodes.get(&(target.group.clone(), target.node.clone()))?;
        let aliases = match &target.device {
            None => &node.aliases,
            Some(device) => &node.devices.get(device)?.aliases,
        };
        aliases.types.get(name).copied()
    }
}

impl NodeState {
    fn birth(&mut self, payload: &Payload, decoded: &mut Decoded) {
        // A new session: every device must be born again after its node.
        *self = Self {
            online: true,
            bd_seq: bd_seq(payload),
            next_seq: next_after(payload.seq.unwrap_or(0)),
            ..Self::default()
        };
        self.aliases.declare(payload, decoded);
    }

    fn death(&mut self, payload: &Payload, decoded: &mut Decoded) {
        if let (Some(current), Some(dying)) = (self.bd_seq, bd_seq(payload))
            && current != dying
        {
            decoded.stale_death = true;
            return;
        }
        self.online = false;
        self.dead = true;
        self.devices.clear();
        decoded.offline = true;
    }

    /// NDATA and every device message: continue the sequence, then read.
    fn follow(&mut self, payload: &Payload, decoded: &mut Decoded) -> Result<(), DecodeError> {
        if !self.online {
            decoded.rebirth = Some(RebirthReason::UnknownNode);
            decoded.offline = true;
            return Ok(());
        }
        match payload.seq {
            None => decoded.rebirth = Some(RebirthReason::MissingSequence),
            Some(received) if received != u64::from(self.next_seq) => {
                decoded.rebirth = Some(RebirthReason::SequenceGap {
                    expected: self.next_seq,
                    received,
                });
                self.next_seq = next_after(received);
            }
            Some(received) => self.next_seq = next_after(received),
        }
        let Some(device) = decoded.target.device.clone() else {
            self.aliases.read(payload, decoded);
            return Ok(());
        };
        match decoded.kind {
            MessageKind::DBirth => {
                let count = self.devices.len();
                if count >= MAX_DEVICES && !self.devices.contains_key(&device) {
                    return Err(DecodeError::TooMany(MAX_DEVICES));
                }
                let state = self.devices.entry(device).or_default();
                *state = DeviceState::default();
                state.aliases.declare(payload, decoded);
            }
            MessageKind::DDeath => {
                if self.devices.remove(&device).is_none() {
                    decoded
                        .rebirth
                        .get_or_insert(RebirthReason::UnknownDevice(device));
                }
                decoded.offline = true;
            }
            _ => match self.devices.get(&device) {
                Some(state) => state.aliases.read(payload, decoded),
                None => {
                    decoded
                        .rebirth
                        .get_or_insert(RebirthReason::UnknownDevice(device));
                    decoded.offline = true;
                }
            },
        }
        Ok(())
    }
}

impl Aliases {
    /// A birth: every metric names itself, and may declare an alias.
    fn declare(&mut self, payload: &Payload, decoded: &mut Decoded) {
        for metric in &payload.metrics {
            let Some(name) = metric.name.clone() else {
                decoded.problems.push(MetricProblem::UnnamedBirth);
                continue;
            };
            let datatype = metric.datatype.map_or_else(
                || metric.value.as_ref().map_or(0, MetricValue::implied_type),
                |kind| i32::try_from(kind).unwrap_or(i32::MAX),
            );
            if let Some(alias) = metric.alias {
                self.declared.insert(
                    alias,
                    Declared {
                        name: name.clone(),
                        datatype,
                    },
                );
            }
            self.types.insert(name.clone(), datatype);
            push_value(payload, metric, name, datatype, decoded);
        }
    }

    /// Data: metrics by alias or by name, typed as their birth said.
    fn read(&self, payload: &Payload, decoded: &mut Decoded) {
        for metric in &payload.metrics {
            let (name, declared_type) = match (&metric.name, metric.alias) {
                (Some(name), _) => (name.clone(), self.types.get(name).copied()),
                (None, Some(alias)) => match self.declared.get(&alias) {
                    Some(declared) => (declared.name.clone(), Some(declared.datatype)),
                    None => {
                        decoded.problems.push(MetricProblem::UnknownAlias(alias));
                        continue;
                    }
                },
                (None, None) => {
                    decoded.problems.push(MetricProblem::NoName);
                    continue;
                }
            };
            let datatype = metric
                .datatype
                .and_then(|kind| i32::try_from(kind).ok())
                .or(declared_type)
                .unwrap_or_else(|| metric.value.as_ref().map_or(0, MetricValue::implied_type));
            push_value(payload, metric, name, datatype, decoded);
        }
    }
}

fn push_value(payload: &Payload, metric: &WireMetric, name: String, datatype: i32, decoded: &mut Decoded) {
    match MetricValue::read(datatype, metric.value.as_ref(), metric.is_null.unwrap_or(false)) {
        Ok(value) => decoded.metrics.push(Metric {
            name,
            value,
            timestamp: metric.timestamp.or(payload.timestamp),
        }),
        Err(ValueProblem::Unsupported(datatype)) => {
            decoded
                .problems
                .push(MetricProblem::Unsupported { name, datatype });
        }
        Err(ValueProblem::Mismatch) => decoded.problems.push(MetricProblem::Mismatch { name }),
    }
}

/// The `bdSeq` metric of a birth or death.
fn bd_seq(payload: &Payload) -> Option<u64> {
    use crate::proto::payload::metric::Value;
    payload
        .metrics
        .iter()
        .find(|metric| metric.name.as_deref() == Some(BD_SEQ))
        .and_then(|metric| match metric.value {
            Some(Value::LongValue(value)) => Some(value),
            Some(Value::IntValue(value)) => Some(u64::from(value)),
            _ => None,
        })
}

/// The sequence number after `seq` (0..=255, wrapping).
fn next_after(seq: u64) -> u8 {
    u8::try_from(seq.wrapping_add(1) % 256).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::{EdgeNode, Reading};
    use crate::proto::DataType;
    use crate::proto::payload::metric::Value;

    fn readings() -> Vec<Reading> {
        vec![
            Reading::double("Pump1/Current", 1, 12.5),
            Reading::boolean("Pump1/Running", 2, true),
        ]
    }

    fn decode(decoder: &mut SparkplugDecoder, message: &(String, Vec<u8>), now: Instant) -> Decoded {
        decoder.decode(&message.0, &message.1, now).expect("decodes")
    }

    fn names_and_values(decoded: &Decoded) -> Vec<(String, MetricValue)> {
        decoded
            .metrics
            .iter()
            .map(|metric| (metric.name.clone(), metric.value.clone()))
            .collect()
    }

    #[test]
    fn liveness_follows_births_and_deaths_of_nodes_and_devices() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        let target = |device: Option<&str>| Target {
            group: "Plant".to_owned(),
            node: "Edge1".to_owned(),
            device: device.map(str::to_owned),
        };
        assert_eq!(decoder.liveness(&target(None)), Liveness::NeverBorn);
        decode(&mut decoder, &edge.birth(&readings(), 1_000), now);
        assert_eq!(decoder.liveness(&target(None)), Liveness::Alive);
        assert_eq!(decoder.liveness(&target(Some("Pump1"))), Liveness::DeviceNotBorn);
        decode(&mut decoder, &edge.device_birth("Pump1", &readings(), 1_001), now);
        assert_eq!(decoder.liveness(&target(Some("Pump1"))), Liveness::Alive);
        decode(&mut decoder, &edge.device_death("Pump1", 1_002), now);
        assert_eq!(decoder.liveness(&target(Some("Pump1"))), Liveness::DeviceNotBorn);
        assert_eq!(decoder.liveness(&target(None)), Liveness::Alive);
        decode(&mut decoder, &edge.death(), now);
        assert_eq!(decoder.liveness(&target(None)), Liveness::Dead);
        assert_eq!(decoder.liveness(&target(Some("Pump1"))), Liveness::Dead);
        decode(&mut decoder, &edge.birth(&readings(), 2_000), now);
        assert_eq!(decoder.liveness(&target(None)), Liveness::Alive);
    }

    #[test]
    fn data_by_alias_reads_as_the_birth_named_it() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        let birth = decode(&mut decoder, &edge.birth(&readings(), 1_000), now);
        assert_eq!(birth.kind, MessageKind::NBirth);
        assert!(birth.metrics.iter().any(|metric| metric.name == "Pump1/Current"));
        let data = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 13.0)], 2_000),
            now,
        );
        assert_eq!(
            names_and_values(&data),
            [("Pump1/Current".to_owned(), MetricValue::Float(13.0))]
        );
        assert_eq!(data.metrics[0].timestamp, Some(2_000));
        assert_eq!(data.rebirth, None);
        assert_eq!(
            decoder.datatype_of(&data.target, "Pump1/Current"),
            Some(DataType::Double as i32)
        );
    }

    #[test]
    fn a_sequence_gap_asks_for_a_rebirth_once_per_pause_and_still_reads_the_data() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        decode(&mut decoder, &edge.birth(&readings(), 0), now);
        edge.lose(3);
        let gap = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 1.0)], 0),
            now,
        );
        assert_eq!(
            gap.rebirth,
            Some(RebirthReason::SequenceGap {
                expected: 1,
                received: 4
            })
        );
        assert_eq!(gap.metrics.len(), 1, "the data itself is current");
        edge.lose(1);
        let again = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 2.0)], 0),
            now,
        );
        assert_eq!(again.rebirth, None, "asked already, within the pause");
        edge.lose(1);
        let later = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 3.0)], 0),
            now + REBIRTH_PAUSE,
        );
        assert!(matches!(later.rebirth, Some(RebirthReason::SequenceGap { .. })));
        // In sequence again: nothing to ask.
        let fine = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 4.0)], 0),
            now,
        );
        assert_eq!(fine.rebirth, None);
    }

    #[test]
    fn data_before_any_birth_is_not_trusted_and_asks_for_one() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        let data = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 1, 1.0)], 0),
            now,
        );
        assert_eq!(data.rebirth, Some(RebirthReason::UnknownNode));
        assert!(data.offline && data.metrics.is_empty());
        let device = decode(
            &mut decoder,
            &edge.data(Some("D1"), &[Reading::double("", 1, 1.0)], 0),
            now,
        );
        assert_eq!(device.rebirth, None, "asked for this node already");
    }

    #[test]
    fn deaths_end_node_and_device_sessions_and_an_old_will_is_ignored() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        let old_will = edge.will();
        decode(&mut decoder, &edge.birth(&readings(), 0), now);
        decode(&mut decoder, &edge.device_birth("Pump1", &readings(), 0), now);
        let device_data = decode(
            &mut decoder,
            &edge.data(Some("Pump1"), &[Reading::double("", 1, 7.0)], 0),
            now,
        );
        assert_eq!(device_data.target.device.as_deref(), Some("Pump1"));
        assert_eq!(device_data.metrics.len(), 1);
        let ddeath = decode(&mut decoder, &edge.device_death("Pump1", 0), now);
        assert!(ddeath.offline);
        let after = decode(
            &mut decoder,
            &edge.data(Some("Pump1"), &[Reading::double("", 1, 7.0)], 0),
            now,
        );
        assert_eq!(
            after.rebirth,
            Some(RebirthReason::UnknownDevice("Pump1".to_owned()))
        );
        assert!(after.metrics.is_empty());

        let death = decode(&mut decoder, &edge.death(), now);
        assert!(death.offline && !death.stale_death);
        // A new session, then the will of the old one delivered late: ignored.
        decode(&mut decoder, &edge.birth(&readings(), 0), now);
        let stale = decode(&mut decoder, &old_will, now);
        assert!(!stale.offline, "bdSeq 0 is not the current session's");
        assert!(stale.stale_death);
    }

    #[test]
    fn unknown_aliases_and_bad_payloads_are_told_apart() {
        let now = Instant::now();
        let mut edge = EdgeNode::new("Plant", "Edge1");
        let mut decoder = SparkplugDecoder::new();
        decode(&mut decoder, &edge.birth(&readings(), 0), now);
        let data = decode(
            &mut decoder,
            &edge.data(None, &[Reading::double("", 99, 1.0)], 0),
            now,
        );
        assert_eq!(data.problems, [MetricProblem::UnknownAlias(99)]);
        assert!(matches!(
            decoder.decode("spBv1.0/Plant/NDATA/Edge1", b"\xff\xff\xff", now),
            Err(DecodeError::Payload(_))
        ));
        assert!(matches!(
            decoder.decode("Plant/Edge1", b"", now),
            Err(DecodeError::Topic(TopicError::Namespace))
        ));
        let huge = vec![0_u8; MAX_PAYLOAD_BYTES + 1];
        assert!(matches!(
            decoder.decode("spBv1.0/Plant/NDATA/Edge1", &huge, now),
            Err(DecodeError::TooLarge(_))
        ));
        let mismatch = Reading {
            name: String::new(),
            alias: 2,
            value: (DataType::Boolean, Value::StringValue("yes".into())),
        };
        let data = decode(&mut decoder, &edge.data(None, &[mismatch], 0), now);
        assert_eq!(
            data.problems,
            [MetricProblem::Mismatch {
                name: "Pump1/Running".to_owned()
            }]
        );
    }

    #[test]
    fn commands_write_as_the_birth_declared() {
        let target = Target {
            group: "Plant".to_owned(),
            node: "Edge1".to_owned(),
            device: Some("Pump1".to_owned()),
        };
        let (topic, payload) = crate::write_command(
            &target,
            "Speed",
            &MetricValue::Integer(-5),
            Some(DataType::Int16 as i32),
            9,
        )
        .expect("fits");
        assert_eq!(topic, "spBv1.0/Plant/DCMD/Edge1/Pump1");
        let written = Payload::decode(payload.as_slice()).expect("decodes");
        let read = MetricValue::read(
            i32::try_from(written.metrics[0].datatype.expect("typed")).expect("small"),
            written.metrics[0].value.as_ref(),
            false,
        );
        assert_eq!(read, Ok(MetricValue::Integer(-5)));
        assert!(
            crate::write_command(
                &target,
                "Speed",
                &MetricValue::Integer(70_000),
                Some(DataType::Int16 as i32),
                9
            )
            .is_none()
        );
        let (topic, payload) = crate::rebirth_request("Plant", "Edge1", 5);
        assert_eq!(topic, "spBv1.0/Plant/NCMD/Edge1");
        let request = Payload::decode(payload.as_slice()).expect("decodes");
        assert_eq!(request.metrics[0].name.as_deref(), Some(crate::REBIRTH_METRIC));
        assert_eq!(request.metrics[0].value, Some(Value::BooleanValue(true)));
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_on_any_topic_never_panic(topic in "spBv1\\.0/[a-z]{1,3}/(NBIRTH|NDATA|NDEATH|DBIRTH|DDATA|DDEATH|NCMD)/[a-z]{1,3}(/[a-z]{1,2})?", bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut decoder = SparkplugDecoder::new();
            let _ = decoder.decode(&topic, &bytes, Instant::now());
        }
    }
}
