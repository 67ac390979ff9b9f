//! Browsing an OPC UA source's server: what a node organizes (node id, browse name, class,
//! data type, access level, description), and a plant file skeleton of the variables under a
//! node, so an engineer does not type hundreds of node ids by hand.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use futures::StreamExt;
use opcua::client::Session;
use opcua::client::browser::{BrowseFilter, BrowseResultItem};
use opcua::types::{
    AttributeId, BrowseDescription, DataTypeId, DataValue, NodeClass, NodeId, ReadValueId, ReferenceTypeId,
    TimestampsToReturn, Variant,
};
use plant_model::{PlantModel, SourceBinding, TagSpec, TagType};

use super::opcua_access::{OpcUaAccess, OpcUaAccessError};
use super::opcua_client::words;

/// The most variables a skeleton holds; past it the engineer browses a node further down.
pub const SKELETON_MAX_VARIABLES: usize = 10_000;

/// The bits of a variable's (user) access level this reads (OPC UA Part 3, AccessLevelType).
const CURRENT_READ: u8 = 1;
const CURRENT_WRITE: u8 = 2;

/// How deep under the node a skeleton looks.
const SKELETON_MAX_DEPTH: usize = 16;

/// Nodes whose attributes one Read asks for (servers limit the values of one Read).
const READ_CHUNK: usize = 250;

/// One node a browse found.
#[derive(Debug, Clone, PartialEq)]
pub struct BrowsedNode {
    /// Its node id as plant files write it (`ns=2;s=Line1.Temp`).
    pub node: String,
    /// Its browse name, without the namespace.
    pub browse_name: String,
    /// `Object`, `Variable`, `Method`...
    pub class: String,
    /// A variable's data type (`Double`, `Int32`, or the node id of a type of the server's).
    pub data_type: Option<String>,
    /// A variable's access for the source's user: `read`, `write`, `read-write` or `none`.
    pub access: Option<String>,
    /// What the server says it is.
    pub description: String,
}

/// Tags for the variables under a node, and what was left out.
#[derive(Debug, Clone, Default)]
pub struct Skeleton {
    /// A plant model of the tags alone (bound to the source).
    pub model: PlantModel,
    /// Each variable left out and why (no tag type fits its data type, an array...).
    pub skipped: Vec<String>,
    /// Whether [`SKELETON_MAX_VARIABLES`] stopped the walk.
    pub truncated: bool,
}

/// What a variable's attributes say.
#[derive(Debug, Clone, Default)]
struct VariableFacts {
    data_type: Option<NodeId>,
    scalar: bool,
    access: Option<u8>,
    description: String,
}

/// A variable the walk found, with the browse names leading to it.
#[derive(Debug)]
struct Found {
    node: NodeId,
    segments: Vec<String>,
}

impl OpcUaAccess {
    /// What `node` (the Objects folder without one) organizes, in the server's order.
    #[crate::compiled_once]
    pub async fn browse(&self, node: Option<&str>) -> Result<Vec<BrowsedNode>, OpcUaAccessError> {
        let start = parse_node(node)?;
        self.with_session(async |session| {
            // A node the server does not know browses as empty; its browse name says so.
            self.start_segments(session, &start).await?;
            let filter = BrowseFilter::new_hierarchical();
            let stream = session
                .browser()
                .handler(|_: &BrowseResultItem| Vec::<BrowseDescription>::new())
                .run(vec![filter.new_description_from_node(start.clone())]);
            tokio::pin!(stream);
            let mut references = Vec::new();
            while let Some(item) = stream.next().await {
                let item = item.map_err(|error| self.service_failed(error))?;
                check_status(&item)?;
                references.extend(item.into_results().1);
            }
            let variables: Vec<NodeId> = references
                .iter()
                .filter(|reference| reference.node_class == NodeClass::Variable)
                .map(|reference| reference.node_id.node_id.clone())
                .collect();
            let facts = self.read_facts(session, &variables).await?;
            Ok(references
                .into_iter()
                .map(|reference| {
                    let node = reference.node_id.node_id;
                    let facts = facts.get(&node).cloned().unwrap_or_default();
                    BrowsedNode {
                        browse_name: reference.browse_name.name.as_ref().to_owned(),
                        class: format!("{:?}", reference.node_class),
                        data_type: facts.data_type.as_ref().map(data_type_name),
                        access: facts.access.map(access_words),
                        description: facts.description,
                        node: node.to_string(),
                    }
                })
                .collect())
        })
        .await
    }

    /// Tags for the variables under `node` (the Objects folder without one), named by their
    /// browse names below it (`Line1.Temp` at `Line1/Temp`), typed by their data types and
    /// writable where the source's user may write them. The server's own nodes (namespace 0)
    /// and properties are left out.
    #[crate::compiled_once]
    pub async fn skeleton(&self, node: Option<&str>) -> Result<Skeleton, OpcUaAccessError> {
        let start = parse_node(node)?;
        self.with_session(async |session| {
            let (found, truncated) = self.walk(session, &start).await?;
            let nodes: Vec<NodeId> = found.iter().map(|found| found.node.clone()).collect();
            let facts = self.read_facts(session, &nodes).await?;
            let mut skeleton = Skeleton {
                truncated,
                ..Skeleton::default()
            };
            let mut names = HashSet::new();
            for variable in found {
                let facts = facts.get(&variable.node).cloned().unwrap_or_default();
                match self.tag_of(&variable, &facts, &mut names) {
                    Ok(tag) => skeleton.model.tags.push(tag),
                    Err(why) => skeleton.skipped.push(format!("{}: {why}", variable.node)),
                }
            }
            Ok(skeleton)
        })
        .await
    }

    /// The variables under `start`, each with its browse path below it, in the order found;
    /// and whether the walk stopped at [`SKELETON_MAX_VARIABLES`].
    async fn walk(
        &self,
        session: &Arc<Session>,
        start: &NodeId,
    ) -> Result<(Vec<Found>, bool), OpcUaAccessError> {
        let filter = BrowseFilter::new_hierarchical();
        let policy = move |item: &BrowseResultItem| -> Vec<BrowseDescription> {
            if item.depth() >= SKELETON_MAX_DEPTH {
                return Vec::new();
            }
            item.references()
                .iter()
                .filter(|reference| {
                    followed(reference.node_id.node_id.namespace, &reference.reference_type_id)
                })
                .map(|reference| filter.new_description_from_node(reference.node_id.node_id.clone()))
                .collect()
        };
        let stream = session.browser().handler(policy).run(vec![
            BrowseFilter::new_hierarchical().new_description_from_node(start.clone()),
        ]);
        tokio::pin!(stream);
        let mut paths: HashMap<NodeId, Vec<String>> =
            HashMap::from([(start.clone(), self.start_segments(session, start).await?)]);
        let mut found = Vec::new();
        while let Some(item) = stream.next().await {
            let item = item.map_err(|error| self.service_failed(error))?;
            check_status(&item)?;
            let (parent, references) = item.into_results();
            let above = paths.get(&parent).cloned().unwrap_or_default();
            for reference in references {
                let node = reference.node_id.node_id;
                if !followed(node.namespace, &reference.reference_type_id) || paths.contains_key(&node) {
                    continue;
                }
                let mut segments = above.clone();
                segments.push(reference.browse_name.name.as_ref().to_owned());
                if reference.node_class == NodeClass::Variable {
                    if found.len() == SKELETON_MAX_VARIABLES {
                        return Ok((found, true));
                    }
                    found.push(Found {
                        node: node.clone(),
                        segments: segments.clone(),
                    });
                }
                paths.insert(node, segments);
            }
        }
        Ok((found, false))
    }

    /// The first part of the names under `start`: its browse name, none for the Objects folder.
    async fn start_segments(
        &self,
        session: &Arc<Session>,
        start: &NodeId,
    ) -> Result<Vec<String>, OpcUaAccessError> {
        if *start == NodeId::objects_folder_id() {
            return Ok(Vec::new());
        }
        let read = ReadValueId {
            node_id: start.clone(),
            attribute_id: AttributeId::BrowseName as u32,
            ..Default::default()
        };
        let values = session
            .read(&[read], TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|error| self.service_failed(error))?;
        let value = values.into_iter().next().unwrap_or_default();
        match value.value {
            Some(Variant::QualifiedName(name)) => Ok(vec![name.name.as_ref().to_owned()]),
            _ => Err(OpcUaAccessError::Node(start.to_string(), words(value.status()))),
        }
    }

    /// The data type, value rank, access for the source's user and description of each of
    /// `nodes`.
    async fn read_facts(
        &self,
        session: &Arc<Session>,
        nodes: &[NodeId],
    ) -> Result<HashMap<NodeId, VariableFacts>, OpcUaAccessError> {
        const ATTRIBUTES: [AttributeId; 4] = [
            AttributeId::DataType,
            AttributeId::ValueRank,
            AttributeId::UserAccessLevel,
            AttributeId::Description,
        ];
        let mut facts = HashMap::with_capacity(nodes.len());
        for chunk in nodes.chunks(READ_CHUNK) {
            let reads: Vec<ReadValueId> = chunk
                .iter()
                .flat_map(|node| {
                    ATTRIBUTES.iter().map(|attribute| ReadValueId {
                        node_id: node.clone(),
                        attribute_id: *attribute as u32,
                        ..Default::default()
                    })
                })
                .collect();
            let values = session
                .read(&reads, TimestampsToReturn::Neither, 0.0)
                .await
                .map_err(|error| self.service_failed(error))?;
            for (node, values) in chunk.iter().zip(values.chunks(ATTRIBUTES.len())) {
                facts.insert(node.clone(), facts_of(values));
            }
        }
        Ok(facts)
    }

    /// The tag of `variable`, named uniquely among `names`, or why it has none.
    fn tag_of(
        &self,
        variable: &Found,
        facts: &VariableFacts,
        names: &mut HashSet<String>,
    ) -> Result<TagSpec, String> {
        let Some(data_type) = &facts.data_type else {
            return Err("the server did not tell its data type".to_owned());
        };
        if !facts.scalar {
            return Err(format!("it holds an array of {}", data_type_name(data_type)));
        }
        let kind = tag_type_of(data_type)
            .ok_or_else(|| format!("no tag type holds {}", data_type_name(data_type)))?;
        let segments: Vec<String> = variable
            .segments
            .iter()
            .map(|segment| name_part(segment))
            .collect();
        let (name, path) = (segments.join("."), segments.join("/"));
        let numbered = |text: &str, n: usize| {
            if n == 1 {
                text.to_owned()
            } else {
                format!("{text}_{n}")
            }
        };
        let n = (1..)
            .find(|n| names.insert(numbered(&name, *n).to_lowercase()))
            .unwrap_or(1);
        Ok(TagSpec {
            name: numbered(&name, n),
            path: numbered(&path, n),
            kind,
            unit: String::new(),
            description: facts.description.clone(),
            initial: None,
            min: None,
            max: None,
            history: plant_model::History::default(),
            writable: facts.access.is_some_and(|access| access & CURRENT_WRITE != 0),
            proposable: false,
            signed: false,
            witness: false,
            values: Vec::new(),
            source: Some(Box::new(SourceBinding {
                server: self.spec.name.clone(),
                node: Some(variable.node.to_string()),
                ..SourceBinding::default()
            })),
            simulate: None,
            display: None,
        })
    }
}

/// `text` as a node id, the Objects folder without one.
fn parse_node(text: Option<&str>) -> Result<NodeId, OpcUaAccessError> {
    match text {
        None => Ok(NodeId::objects_folder_id()),
        Some(text) => NodeId::from_str(text.trim()).map_err(|_| {
            OpcUaAccessError::Node(
                text.to_owned(),
                "not a node id: write ns=<index>;i=<number>, s=<text>, g=<guid> or b=<base64>".to_owned(),
            )
        }),
    }
}

/// A browse the server refused (of an unknown node, say).
fn check_status(item: &BrowseResultItem) -> Result<(), OpcUaAccessError> {
    let status = item.status();
    if status.is_good() {
        return Ok(());
    }
    Err(OpcUaAccessError::Node(
        item.parent_id().to_string(),
        words(status),
    ))
}

/// Whether a walk goes to a node in `namespace` along `reference`: not into the server's own
/// nodes (namespace 0, its diagnostics), nor along properties (a variable's metadata).
fn followed(namespace: u16, reference: &NodeId) -> bool {
    namespace != 0 && *reference != (0, ReferenceTypeId::HasProperty as u32)
}

/// What the four attributes read for a node say.
fn facts_of(values: &[DataValue]) -> VariableFacts {
    let value = |index: usize| values.get(index).and_then(|value| value.value.as_ref());
    VariableFacts {
        data_type: match value(0) {
            Some(Variant::NodeId(data_type)) => Some((**data_type).clone()),
            _ => None,
        },
        // -1 is a scalar; a server that does not say is taken at its word for a scalar.
        scalar: !matches!(value(1), Some(Variant::Int32(rank)) if *rank != -1),
        access: match value(2) {
            Some(Variant::Byte(bits)) => Some(*bits),
            _ => None,
        },
        description: match value(3) {
            Some(Variant::LocalizedText(text)) => text.text.as_ref().to_owned(),
            _ => String::new(),
        },
    }
}

/// A data type's name: the standard type's (`Double`), else its node id.
fn data_type_name(data_type: &NodeId) -> String {
    standard_type(data_type).map_or_else(|| data_type.to_string(), |id| format!("{id:?}"))
}

fn standard_type(data_type: &NodeId) -> Option<DataTypeId> {
    if data_type.namespace != 0 {
        return None;
    }
    data_type
        .as_u32()
        .and_then(|number| DataTypeId::try_from(number).ok())
}

/// The tag type that holds values of `data_type` (as the source reads them), if one does.
fn tag_type_of(data_type: &NodeId) -> Option<TagType> {
    Some(match standard_type(data_type)? {
        DataTypeId::Boolean => TagType::Bool,
        DataTypeId::SByte
        | DataTypeId::Byte
        | DataTypeId::Int16
        | DataTypeId::UInt16
        | DataTypeId::Int32
        | DataTypeId::UInt32
        | DataTypeId::Int64
        | DataTypeId::UInt64 => TagType::Integer,
        DataTypeId::Float | DataTypeId::Double => TagType::Number,
        DataTypeId::String | DataTypeId::LocalizedText | DataTypeId::DateTime => TagType::String,
        _ => return None,
    })
}

/// `access` in words.
fn access_words(access: u8) -> String {
    match (access & CURRENT_READ != 0, access & CURRENT_WRITE != 0) {
        (true, true) => "read-write",
        (true, false) => "read",
        (false, true) => "write",
        (false, false) => "none",
    }
    .to_owned()
}

/// A browse name as one part of a tag name and path: spaces, dots and slashes (which separate
/// parts) become `_`, and an empty one `_`.
fn name_part(browse_name: &str) -> String {
    let part: String = browse_name
        .trim()
        .chars()
        .map(|c| {
            if c.is_whitespace() || c == '.' || c == '/' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if part.is_empty() { "_".to_owned() } else { part }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browse_names_become_name_parts() {
        assert_eq!(name_part("Temp"), "Temp");
        assert_eq!(name_part(" Motor Current "), "Motor_Current");
        assert_eq!(name_part("a.b/c"), "a_b_c");
        assert_eq!(name_part(""), "_");
    }

    #[test]
    fn standard_data_types_map_to_tag_types() {
        let id = |data_type: DataTypeId| NodeId::from(data_type);
        assert_eq!(tag_type_of(&id(DataTypeId::Double)), Some(TagType::Number));
        assert_eq!(tag_type_of(&id(DataTypeId::UInt16)), Some(TagType::Integer));
        assert_eq!(tag_type_of(&id(DataTypeId::Boolean)), Some(TagType::Bool));
        assert_eq!(tag_type_of(&id(DataTypeId::LocalizedText)), Some(TagType::String));
        assert_eq!(tag_type_of(&id(DataTypeId::ByteString)), None);
        assert_eq!(tag_type_of(&NodeId::new(2, 3001)), None, "a server's own type");
        assert_eq!(data_type_name(&id(DataTypeId::Double)), "Double");
        assert_eq!(data_type_name(&NodeId::new(2, 3001)), "ns=2;i=3001");
    }

    #[test]
    fn access_levels_read_in_words() {
        assert_eq!(access_words(CURRENT_READ), "read");
        assert_eq!(access_words(CURRENT_READ | CURRENT_WRITE), "read-write");
        assert_eq!(access_words(CURRENT_WRITE | 4), "write", "other bits aside");
        assert_eq!(access_words(0), "none");
    }
}
