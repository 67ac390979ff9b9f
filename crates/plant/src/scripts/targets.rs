//! Whether a script's `tag:` or `alarm:` trigger names something the plant has: checked when a
//! script is stored (a trigger that can never fire is refused, with the nearest name), and
//! shown in `status`, logged at load and told after an import when a plant change removed it.

use plant_model::ExpandedPlant;
use solution_scripts::Trigger;

/// Why `trigger` can never fire on a plant whose `tags` are these names and whose `alarms`
/// these (each alarm's name and its tag's), or `None` when it can (or names nothing).
///
/// A `tag:` trigger names a tag as panels do (case and composition aside); an `alarm:` trigger
/// an alarm by its name or by its tag's, as the runner matches them.
pub(crate) fn unreachable_target<'p, T, A>(
    trigger: &Trigger,
    tags: impl Fn() -> T,
    alarms: impl Fn() -> A,
) -> Option<String>
where
    T: Iterator<Item = &'p str>,
    A: Iterator<Item = (&'p str, &'p str)>,
{
    match trigger {
        Trigger::Tag(name) => {
            let wanted = plant_model::fold(name);
            if tags().any(|tag| plant_model::fold(tag) == wanted) {
                return None;
            }
            let hint = plant_model::nearest(name, tags())
                .map(|near| format!(" (did you mean tag:{near}?)"))
                .unwrap_or_default();
            Some(format!(
                "tag:{name} can never fire: the plant has no tag {name}{hint}"
            ))
        }
        Trigger::Alarm(Some(name)) => {
            let names = || alarms().flat_map(|(alarm, tag)| [alarm, tag]);
            if names().any(|known| known.eq_ignore_ascii_case(name)) {
                return None;
            }
            let hint = plant_model::nearest(name, names())
                .map(|near| format!(" (did you mean alarm:{near}?)"))
                .unwrap_or_default();
            Some(format!(
                "alarm:{name} can never fire: the plant has no alarm {name}, nor a tag with alarms of that name{hint}"
            ))
        }
        Trigger::Startup | Trigger::Every(_) | Trigger::Alarm(None) | Trigger::Class => None,
    }
}

/// Why `trigger` can never fire on the plant as stored (a `tag:` or `alarm:` trigger that
/// names nothing it has), or `None` when it can.
pub fn unreachable_in(trigger: &Trigger, plant: &ExpandedPlant) -> Option<String> {
    unreachable_target(
        trigger,
        || plant.tags.iter().map(|tag| tag.name.as_str()),
        || {
            plant
                .alarms
                .iter()
                .map(|alarm| (alarm.name.as_str(), alarm.tag.as_str()))
        },
    )
}
