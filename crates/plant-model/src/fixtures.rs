//! Plant files the tests of more than one crate read, kept in one place so a unit test and an
//! integration test ask the same question of the same file.

use std::fmt::Write as _;

/// A plant of one equipment type `Cell` with `members` bool tags and `instances` cells: a
/// small file that expands to `members * instances` tags (a million from about 100 KB).
pub fn cells(members: usize, instances: usize) -> String {
    let mut text = String::from("[[types]]\nname = \"Cell\"\n");
    for member in 0..members {
        let _ = write!(text, "[[types.tags]]\nname = \"T{member}\"\ntype = \"bool\"\n");
    }
    for instance in 0..instances {
        let _ = write!(
            text,
            "[[equipment]]\nname = \"C{instance}\"\ntype = \"Cell\"\npath = \"Plant/C{instance}\"\n"
        );
    }
    text
}
