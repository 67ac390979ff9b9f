//! Sparkplug B topics: `spBv1.0/<group>/<kind>/<edge node>[/<device>]`.

use std::fmt;

/// The first level of every Sparkplug B topic.
pub const NAMESPACE: &str = "spBv1.0";

/// What a message is, from its topic's third level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// An edge node's birth certificate: every metric with its alias.
    NBirth,
    /// An edge node's values.
    NData,
    /// An edge node's death (its MQTT will, or said on leaving).
    NDeath,
    /// A command to an edge node.
    NCmd,
    /// A device's birth certificate.
    DBirth,
    /// A device's values.
    DData,
    /// A device's death.
    DDeath,
    /// A command to a device.
    DCmd,
}

impl MessageKind {
    /// The topic level naming this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NBirth => "NBIRTH",
            Self::NData => "NDATA",
            Self::NDeath => "NDEATH",
            Self::NCmd => "NCMD",
            Self::DBirth => "DBIRTH",
            Self::DData => "DDATA",
            Self::DDeath => "DDEATH",
            Self::DCmd => "DCMD",
        }
    }

    fn parse(level: &str) -> Option<Self> {
        Some(match level {
            "NBIRTH" => Self::NBirth,
            "NDATA" => Self::NData,
            "NDEATH" => Self::NDeath,
            "NCMD" => Self::NCmd,
            "DBIRTH" => Self::DBirth,
            "DDATA" => Self::DData,
            "DDEATH" => Self::DDeath,
            "DCMD" => Self::DCmd,
            _ => return None,
        })
    }

    /// Whether the message is about a device (and its topic names one).
    pub fn is_device(self) -> bool {
        matches!(self, Self::DBirth | Self::DData | Self::DDeath | Self::DCmd)
    }
}

/// A parsed Sparkplug B topic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topic {
    /// The group id.
    pub group: String,
    /// The message kind.
    pub kind: MessageKind,
    /// The edge node id.
    pub node: String,
    /// The device id, for device messages.
    pub device: Option<String>,
}

/// Why a topic is not a Sparkplug B message topic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// Not under `spBv1.0/`.
    #[error("not a Sparkplug B topic (it does not start with {NAMESPACE}/)")]
    Namespace,
    /// `STATE` (a host application's) or another kind this reader does not take.
    #[error("{0:?} is not an edge node or device message kind")]
    Kind(String),
    /// Too few or too many levels, or an empty one.
    #[error("expected {NAMESPACE}/<group>/<kind>/<edge node>[/<device>]")]
    Shape,
}

impl Topic {
    /// Parses `spBv1.0/<group>/<kind>/<node>[/<device>]`.
    pub fn parse(topic: &str) -> Result<Self, TopicError> {
        let mut levels = topic.split('/');
        if levels.next() != Some(NAMESPACE) {
            return Err(TopicError::Namespace);
        }
        let (Some(group), Some(kind), Some(node)) = (levels.next(), levels.next(), levels.next()) else {
            return Err(TopicError::Shape);
        };
        let kind = MessageKind::parse(kind).ok_or_else(|| TopicError::Kind(kind.to_owned()))?;
        let device = levels.next();
        if levels.next().is_some()
            || group.is_empty()
            || node.is_empty()
            || device.is_some_and(str::is_empty)
            || kind.is_device() != device.is_some()
        {
            return Err(TopicError::Shape);
        }
        Ok(Self {
            group: group.to_owned(),
            kind,
            node: node.to_owned(),
            device: device.map(str::to_owned),
        })
    }
}

impl fmt::Display for Topic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{NAMESPACE}/{}/{}/{}",
            self.group,
            self.kind.as_str(),
            self.node
        )?;
        if let Some(device) = &self.device {
            write!(f, "/{device}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_parse_and_print_back() {
        for text in [
            "spBv1.0/Plant/NBIRTH/Edge1",
            "spBv1.0/Plant/DDATA/Edge1/Pump1",
            "spBv1.0/Plant/NCMD/Edge1",
        ] {
            let topic = Topic::parse(text).expect(text);
            assert_eq!(topic.to_string(), text);
        }
        let device = Topic::parse("spBv1.0/G/DDEATH/E/D").expect("parses");
        assert_eq!(device.device.as_deref(), Some("D"));
        assert_eq!(device.kind, MessageKind::DDeath);
    }

    #[test]
    fn malformed_topics_say_what_is_wrong() {
        assert_eq!(Topic::parse("Plant/Area1/x"), Err(TopicError::Namespace));
        assert_eq!(
            Topic::parse("spBv1.0/G/STATE/host"),
            Err(TopicError::Kind("STATE".to_owned()))
        );
        for shape in [
            "spBv1.0/G/NDATA",
            "spBv1.0/G/NDATA/E/D",
            "spBv1.0/G/DDATA/E",
            "spBv1.0//NDATA/E",
            "spBv1.0/G/DDATA/E/D/x",
            "spBv1.0/G/DDATA/E/",
        ] {
            assert_eq!(Topic::parse(shape), Err(TopicError::Shape), "{shape}");
        }
    }
}
