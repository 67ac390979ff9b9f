//! Browse: the direct children of one UNS folder, for a panel's plant tree: its sub-folders,
//! then its tags with what a display needs to show them and to check a write before sending it.

use tserver_proto::v1::{BrowseReply, BrowseRequest, ErrorCode, PlantNode, PlantNodeKind, server_frame};

use super::to_proto::{CallError, short, tag_node};
use plant::objects::{ObjectModel, join_path};

/// The most children one reply carries (stated in `proto/tserver.proto`); a larger folder is
/// answered cut, and says so.
pub(crate) const MAX_NODES: usize = 2000;

pub(crate) fn apply(request: &BrowseRequest, objects: &ObjectModel) -> Result<server_frame::Body, CallError> {
    let Some((path, folder)) = objects.folder(&request.folder) else {
        let what = if objects.tag(&request.folder).is_some() {
            "is a tag, not a folder"
        } else {
            "is no folder of the plant"
        };
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!("browse: folder {:?} {what}", short(&request.folder)),
        ));
    };
    let folders = folder.folders.iter().map(|name| {
        let child = join_path(path, name);
        let has_children = objects
            .folder(&child)
            .is_some_and(|(_, inside)| !inside.folders.is_empty() || !inside.tags.is_empty());
        PlantNode {
            description: objects.folder_description(&child).to_owned(),
            path: child,
            name: name.clone(),
            kind: PlantNodeKind::Folder as i32,
            has_children,
            ..PlantNode::default()
        }
    });
    let tags = folder
        .tags
        .iter()
        .filter_map(|tag_path| objects.tag(tag_path))
        .map(|tag| tag_node(tag, objects.alarms_of(&tag.definition().name)));
    let nodes: Vec<PlantNode> = folders.chain(tags).take(MAX_NODES).collect();
    Ok(server_frame::Body::Browse(BrowseReply {
        folder: path.to_owned(),
        truncated: folder.folders.len() + folder.tags.len() > nodes.len(),
        nodes,
    }))
}
