//! Overview: a display generated from the plant model (the plant overview, or a folder's
//! display of its equipment), each tag described as Browse describes it, with how it is drawn.

use tserver_proto::v1::{
    DisplayPoint, ErrorCode, OverviewReply, OverviewRequest, OverviewTile, server_frame,
};

use super::to_proto::{CallError, short, tag_node};
use plant::objects::ObjectModel;
use plant::overview::{self, DisplayGroup, DisplayLevel, PointLook};

pub(crate) fn apply(
    request: &OverviewRequest,
    objects: &ObjectModel,
) -> Result<server_frame::Body, CallError> {
    let Some(display) = overview::overview(objects, &request.folder) else {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!("overview: {:?} is no folder of the plant", short(&request.folder)),
        ));
    };
    Ok(server_frame::Body::Overview(OverviewReply {
        folder: display.folder,
        description: display.description,
        level: match display.level {
            DisplayLevel::Plant => 1,
            DisplayLevel::Folder => 2,
        },
        tiles: display
            .groups
            .into_iter()
            .map(|group| tile(group, objects))
            .collect(),
        tiles_left_off: u32::try_from(display.groups_left_off).unwrap_or(u32::MAX),
    }))
}

fn tile(group: DisplayGroup, objects: &ObjectModel) -> OverviewTile {
    let point = |point: overview::DisplayPoint| {
        let tag = tag_node(&point.tag, objects.alarms_of(&point.tag.definition().name));
        let mut shown = DisplayPoint {
            tag: Some(tag),
            label: point.label,
            ..DisplayPoint::default()
        };
        match point.look {
            PointLook::Analog { normal } => {
                shown.normal_low = normal.map(|(low, _)| low);
                shown.normal_high = normal.map(|(_, high)| high);
            }
            PointLook::State { words, normal } => {
                if let Some([off, on]) = words {
                    shown.false_word = off;
                    shown.true_word = on;
                }
                shown.normal_state = normal.map(|normal| normal.to_text()).unwrap_or_default();
            }
        }
        shown
    };
    OverviewTile {
        path: group.path,
        description: group.description,
        values: group.values.into_iter().map(point).collect(),
        states: group.states.into_iter().map(point).collect(),
        alarms: group.alarms,
        tags_left_off: u32::try_from(group.tags_left_off).unwrap_or(u32::MAX),
    }
}
