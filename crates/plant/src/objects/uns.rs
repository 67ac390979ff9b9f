//! The Unified Namespace tree: folders derived from tag paths, for browsing and listing
//! equipment instances, plus the name-mask matcher tools use.

use std::collections::{BTreeMap, BTreeSet};

/// One folder of the UNS: its sub-folders and the tags directly inside it (by path).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Folder {
    /// Names of the sub-folders, sorted.
    pub folders: BTreeSet<String>,
    /// Paths of the tags directly inside, sorted.
    pub tags: BTreeSet<String>,
}

/// Every folder of the UNS by path; the root is `""`.
#[derive(Debug, Default)]
pub(super) struct FolderTree {
    folders: BTreeMap<String, Folder>,
}

impl FolderTree {
    /// Files a tag path (`Plant/Area1/Pump1/MotorCurrent`) under its folders.
    pub(super) fn add_tag(&mut self, path: &str) {
        let mut parent = String::new();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let Some((_, folders)) = segments.split_last() else {
            return;
        };
        for segment in folders {
            let child = join_path(&parent, segment);
            self.folders
                .entry(parent)
                .or_default()
                .folders
                .insert((*segment).to_owned());
            parent = child;
        }
        self.folders
            .entry(parent)
            .or_default()
            .tags
            .insert(path.to_owned());
    }

    /// The folder at exactly `path`, with its stored path.
    pub(super) fn get(&self, path: &str) -> Option<(&str, &Folder)> {
        self.folders
            .get_key_value(path)
            .map(|(path, folder)| (path.as_str(), folder))
    }

    /// Every folder path, sorted (the root first).
    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &Folder)> {
        self.folders.iter()
    }
}

/// `parent/name`, or `name` at the root.
pub fn join_path(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

/// Whether `path` lies inside the folder `folder` (the root holds everything), without
/// allocating: `Plant/Area1` holds `Plant/Area1/Pump1/Flow` but not `Plant/Area10/Level`.
pub fn is_below(folder: &str, path: &str) -> bool {
    folder.is_empty()
        || path
            .strip_prefix(folder)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A UNS path as users and models write it, made canonical: surrounding spaces and slashes
/// removed, so `/Plant/Area1/` is `Plant/Area1` and `/` is the root.
pub fn normalize_path(path: &str) -> &str {
    path.trim().trim_matches('/')
}

/// Whether `name` matches `mask`, where `*` matches any run of characters and `?` any one
/// character, ignoring ASCII case. At worst mask length × name length steps: hostile masks
/// cannot cause exponential backtracking.
pub fn mask_matches(mask: &str, name: &str) -> bool {
    let mask: Vec<char> = mask.chars().map(|c| c.to_ascii_lowercase()).collect();
    let name: Vec<char> = name.chars().map(|c| c.to_ascii_lowercase()).collect();
    let (mut m, mut n) = (0, 0);
    // The last `*` seen and the name position it was tried at: on a mismatch the star takes
    // one more character, which is the classic greedy wildcard match.
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match mask.get(m) {
            Some('*') => {
                star = Some((m, n));
                m += 1;
            }
            Some(&c) if c == '?' || c == name[n] => {
                m += 1;
                n += 1;
            }
            _ => match star {
                Some((star_at, tried)) => {
                    m = star_at + 1;
                    n = tried + 1;
                    star = Some((star_at, tried + 1));
                }
                None => return false,
            },
        }
    }
    mask[m..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_derived_from_tag_paths() {
        let mut tree = FolderTree::default();
        tree.add_tag("Plant/Area1/Pump1/MotorCurrent");
        tree.add_tag("Plant/Area1/Pump1/Motor1/Temperature");
        tree.add_tag("Plant/Area2/Tank2/Level");
        let (_, root) = tree.get("").expect("root");
        assert_eq!(root.folders.iter().collect::<Vec<_>>(), ["Plant"]);
        let (_, pump) = tree.get("Plant/Area1/Pump1").expect("pump folder");
        assert_eq!(pump.folders.iter().collect::<Vec<_>>(), ["Motor1"]);
        assert_eq!(
            pump.tags.iter().collect::<Vec<_>>(),
            ["Plant/Area1/Pump1/MotorCurrent"]
        );
        assert_eq!(tree.iter().count(), 7);
    }

    #[test]
    fn masks_match_like_shell_globs_without_case() {
        for (mask, name, expected) in [
            ("*", "Pump1", true),
            ("Pump*", "pump12", true),
            ("P?mp1", "Pump1", true),
            ("*1", "Tank1", true),
            ("*1", "Tank2", false),
            ("T*k*2", "Tank2", true),
            ("", "", true),
            ("", "x", false),
            ("Pump", "Pump1", false),
            ("**a", "bbbb", false),
        ] {
            assert_eq!(mask_matches(mask, name), expected, "{mask} vs {name}");
        }
        let hostile = "*a".repeat(200);
        assert!(!mask_matches(&hostile, &"a".repeat(150)));
    }

    #[test]
    fn below_means_inside_the_folder() {
        assert!(is_below("", "Plant/Area1/Pump1/Flow"));
        assert!(is_below("Plant/Area1", "Plant/Area1/Pump1/Flow"));
        assert!(!is_below("Plant/Area1", "Plant/Area10/Level"));
        assert!(!is_below("Plant/Area1", "Plant/Area1"));
    }

    #[test]
    fn paths_are_normalized() {
        assert_eq!(normalize_path(" /Plant/Area1/ "), "Plant/Area1");
        assert_eq!(normalize_path("/"), "");
    }
}
