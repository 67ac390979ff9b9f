//! The edge node's side, for field simulators (the tests' and the benchmark's): births, data
//! with the running sequence number, and deaths, encoded as an edge node publishes them.

use prost::Message as _;

use crate::proto::payload::Metric;
use crate::proto::payload::metric::Value;
use crate::proto::{DataType, Payload};
use crate::topic::{MessageKind, Topic};

/// One metric to publish: its name, alias and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The metric's name (sent in births; data messages send only the alias).
    pub name: String,
    /// Its alias.
    pub alias: u64,
    /// Its data type and value.
    pub value: (DataType, Value),
}

impl Reading {
    /// A Double metric.
    pub fn double(name: &str, alias: u64, value: f64) -> Self {
        Self {
            name: name.to_owned(),
            alias,
            value: (DataType::Double, Value::DoubleValue(value)),
        }
    }

    /// A Boolean metric.
    pub fn boolean(name: &str, alias: u64, value: bool) -> Self {
        Self {
            name: name.to_owned(),
            alias,
            value: (DataType::Boolean, Value::BooleanValue(value)),
        }
    }
}

/// An edge node's publishing state: its ids, its birth/death session and sequence numbers.
#[derive(Debug, Clone)]
pub struct EdgeNode {
    group: String,
    node: String,
    bd_seq: u64,
    seq: u64,
}

impl EdgeNode {
    /// Node `node` of group `group`, before its first birth.
    pub fn new(group: &str, node: &str) -> Self {
        Self {
            group: group.to_owned(),
            node: node.to_owned(),
            bd_seq: 0,
            seq: 0,
        }
    }

    fn topic(&self, kind: MessageKind, device: Option<&str>) -> String {
        Topic {
            group: self.group.clone(),
            kind,
            node: self.node.clone(),
            device: device.map(str::to_owned),
        }
        .to_string()
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.seq;
        self.seq = (self.seq + 1) % 256;
        seq
    }

    fn bd_seq_metric(&self) -> Metric {
        Metric {
            name: Some("bdSeq".to_owned()),
            datatype: Some(DataType::Int64 as u32),
            value: Some(Value::LongValue(self.bd_seq)),
            ..Metric::default()
        }
    }

    /// The NDEATH the node leaves as its MQTT will before connecting (topic, payload).
    pub fn will(&self) -> (String, Vec<u8>) {
        let payload = Payload {
            metrics: vec![self.bd_seq_metric()],
            ..Payload::default()
        };
        (self.topic(MessageKind::NDeath, None), payload.encode_to_vec())
    }

    /// The NBIRTH of a new session (seq starts again at 0) declaring `metrics`.
    pub fn birth(&mut self, metrics: &[Reading], now_ms: u64) -> (String, Vec<u8>) {
        self.seq = 0;
        let mut declared = vec![self.bd_seq_metric()];
        declared.extend(metrics.iter().map(|reading| declare(reading, now_ms)));
        let payload = Payload {
            timestamp: Some(now_ms),
            seq: Some(self.next_seq()),
            metrics: declared,
            ..Payload::default()
        };
        (self.topic(MessageKind::NBirth, None), payload.encode_to_vec())
    }

    /// A DBIRTH of `device` declaring `metrics`.
    pub fn device_birth(&mut self, device: &str, metrics: &[Reading], now_ms: u64) -> (String, Vec<u8>) {
        let payload = Payload {
            timestamp: Some(now_ms),
            seq: Some(self.next_seq()),
            metrics: metrics.iter().map(|reading| declare(reading, now_ms)).collect(),
            ..Payload::default()
        };
        (
            self.topic(MessageKind::DBirth, Some(device)),
            payload.encode_to_vec(),
        )
    }

    /// NDATA (or DDATA for `device`) carrying `metrics` by alias only.
    pub fn data(&mut self, device: Option<&str>, metrics: &[Reading], now_ms: u64) -> (String, Vec<u8>) {
        let payload = Payload {
            timestamp: Some(now_ms),
            seq: Some(self.next_seq()),
            metrics: metrics
                .iter()
                .map(|reading| Metric {
                    alias: Some(reading.alias),
                    timestamp: Some(now_ms),
                    value: Some(reading.value.1.clone()),
                    ..Metric::default()
                })
                .collect(),
            ..Payload::default()
        };
        let kind = if device.is_some() {
            MessageKind::DData
        } else {
            MessageKind::NData
        };
        (self.topic(kind, device), payload.encode_to_vec())
    }

    /// A DDEATH of `device`.
    pub fn device_death(&mut self, device: &str, now_ms: u64) -> (String, Vec<u8>) {
        let payload = Payload {
            timestamp: Some(now_ms),
            seq: Some(self.next_seq()),
            ..Payload::default()
        };
        (
            self.topic(MessageKind::DDeath, Some(device)),
            payload.encode_to_vec(),
        )
    }

    /// The NDEATH of the current session, said on leaving; the next birth starts a new session.
    pub fn death(&mut self) -> (String, Vec<u8>) {
        let death = self.will();
        self.bd_seq = (self.bd_seq + 1) % 256;
        death
    }

    /// Skips `count` sequence numbers, as lost messages would.
    pub fn lose(&mut self, count: u64) {
        self.seq = (self.seq + count) % 256;
    }
}

fn declare(reading: &Reading, now_ms: u64) -> Metric {
    Metric {
        name: Some(reading.name.clone()),
        alias: Some(reading.alias),
        timestamp: Some(now_ms),
        datatype: Some(reading.value.0 as u32),
        value: Some(reading.value.1.clone()),
        ..Metric::default()
    }
}
