//! Fuzz target: the Sparkplug B decoder on arbitrary payloads of every message kind, after a
//! real birth (so data by alias, deaths and device messages all meet live state). Whatever
//! the bytes, a message is read or refused; nothing panics, and a refused message leaves the
//! node's birth usable.
#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use prost::Message as _;
use sparkplug::proto::Payload;
use sparkplug::edge::{EdgeNode, Reading};
use sparkplug::{MetricValue, SparkplugDecoder, Target};

const KINDS: [&str; 8] = ["NBIRTH", "NDATA", "NDEATH", "NCMD", "DBIRTH", "DDATA", "DDEATH", "DCMD"];

fuzz_target!(|input: &[u8]| {
    let Some((&selector, payload)) = input.split_first() else {
        return;
    };
    let now = Instant::now();
    let mut edge = EdgeNode::new("G", "E");
    let mut decoder = SparkplugDecoder::new();
    let metrics = [Reading::double("Level", 1, 1.0), Reading::boolean("Run", 2, true)];
    let (topic, birth) = edge.birth(&metrics, 0);
    decoder.decode(&topic, &birth, now).expect("a real birth reads");
    let (topic, birth) = edge.device_birth("D", &metrics, 0);
    decoder.decode(&topic, &birth, now).expect("a real device birth reads");

    let kind = KINDS[usize::from(selector % 8)];
    let topic = if kind.starts_with('D') {
        format!("spBv1.0/G/{kind}/E/D")
    } else {
        format!("spBv1.0/G/{kind}/E")
    };
    if let Ok(decoded) = decoder.decode(&topic, payload, now) {
        assert_eq!(decoded.kind.as_str(), kind, "the kind is the topic's");
        let wire = Payload::decode(payload).expect("what the decoder read is a payload");
        assert!(
            decoded.metrics.len() + decoded.problems.len() <= wire.metrics.len(),
            "every metric read or refused at most once"
        );
        if matches!(kind, "NDEATH" | "NCMD" | "DCMD" | "DDEATH") {
            assert!(decoded.metrics.is_empty(), "{kind} carries no values");
        }
    }
    // Whatever came before, a new birth makes data by alias readable again.
    let (topic, birth) = edge.birth(&metrics, 0);
    decoder.decode(&topic, &birth, now).expect("a real birth reads");
    let (topic, data) = edge.data(None, &[Reading::double("", 1, 7.0)], 0);
    let decoded = decoder.decode(&topic, &data, now).expect("real data reads");
    assert_eq!(decoded.metrics.len(), 1, "{decoded:?}");
    assert_eq!(decoded.metrics[0].name, "Level");
    assert_eq!(decoded.metrics[0].value, MetricValue::Float(7.0));
    let target = Target {
        group: "G".to_owned(),
        node: "E".to_owned(),
        device: None,
    };
    let datatype = decoder.datatype_of(&target, "Level");
    assert!(
        sparkplug::write_command(&target, "Level", &MetricValue::Float(2.0), datatype, 0).is_some(),
        "a number writes to a Double metric"
    );
});
