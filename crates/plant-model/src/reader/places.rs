//! Where each part of the model read was written, found again in the file's tree, so the
//! checks across parts report each problem at its line and field.

use std::collections::HashMap;
use std::ops::Range;

use super::{Reader, item, lookup};
use crate::document::Node;
use crate::names;

/// Where each part of a model was written, found again by field path for the checks that
/// look across parts (the reader keeps no spans in the model itself). Indices are the
/// model's; each is turned back into the index of the entry in the file.
pub(crate) struct Places<'n> {
    root: &'n Node,
    kept: HashMap<String, Vec<usize>>,
    dropped: HashMap<String, Vec<Option<String>>>,
}

impl<'n> Places<'n> {
    /// The places of `root`, with what `reader` kept and left out of each list.
    pub(crate) fn new(root: &'n Node, reader: &mut Reader<'_>) -> Self {
        Self {
            root,
            kept: std::mem::take(&mut reader.kept),
            dropped: std::mem::take(&mut reader.dropped),
        }
    }

    /// The file index of the model's entry `index` of the list `list` (`tags`,
    /// `types[0].alarms`).
    pub(super) fn file_index(&self, list: &str, index: usize) -> usize {
        self.kept
            .get(list)
            .and_then(|kept| kept.get(index))
            .copied()
            .unwrap_or(index)
    }

    /// `section[index]` as the file has it.
    pub(crate) fn field(&self, section: &str, index: usize) -> String {
        format!("{section}[{}]", self.file_index(section, index))
    }

    /// `types[type_index].section[index]` as the file has it.
    pub(crate) fn member_field(&self, type_index: usize, section: &str, index: usize) -> String {
        self.nested_field("types", type_index, section, index)
    }

    /// Whether the list `list` had entries left out.
    pub(crate) fn dropped_any(&self, list: &str) -> bool {
        self.dropped.get(list).is_some_and(|dropped| !dropped.is_empty())
    }

    /// Whether an entry left out of `list` may have been named `name` (it was, ignoring case,
    /// or its name could not be read).
    pub(crate) fn dropped_named(&self, list: &str, name: &str) -> bool {
        self.dropped.get(list).is_some_and(|dropped| {
            dropped.iter().any(|left| {
                left.as_ref()
                    .is_none_or(|left| names::fold(left) == names::fold(name))
            })
        })
    }

    /// The node at `section[index].key` (`key` empty: the entry itself), or the file start.
    pub(crate) fn span(&self, section: &str, index: usize, key: &str) -> Range<usize> {
        self.span_at(section, index, &[key])
    }

    /// The node at `section[index]` and then the keys of `path` (`["initial", "Temp"]`),
    /// falling back to the deepest of them that is there.
    pub(crate) fn span_at(&self, section: &str, index: usize, path: &[&str]) -> Range<usize> {
        let Some(mut node) =
            lookup(self.root, section).and_then(|list| item(list, self.file_index(section, index)))
        else {
            return 0..0;
        };
        for key in path.iter().filter(|key| !key.is_empty()) {
            match lookup(node, key) {
                Some(inner) => node = inner,
                None => break,
            }
        }
        node.span.clone()
    }

    /// The node at `section[index].key[position]` (an entry of a list of strings), or the
    /// deepest of them that is there.
    pub(crate) fn span_at_item(
        &self,
        section: &str,
        index: usize,
        key: &str,
        position: usize,
    ) -> Range<usize> {
        let Some(entry) =
            lookup(self.root, section).and_then(|list| item(list, self.file_index(section, index)))
        else {
            return 0..0;
        };
        match lookup(entry, key) {
            Some(list) => item(list, position).unwrap_or(list).span.clone(),
            None => entry.span.clone(),
        }
    }

    /// The same inside a type: `types[type_index].section[index].key`.
    pub(crate) fn member_span(
        &self,
        type_index: usize,
        section: &str,
        index: usize,
        key: &str,
    ) -> Range<usize> {
        self.nested_span("types", type_index, section, index, key)
    }

    /// The same inside any entry: `parent[parent_index].section[index].key`.
    pub(crate) fn nested_span(
        &self,
        parent: &str,
        parent_index: usize,
        section: &str,
        index: usize,
        key: &str,
    ) -> Range<usize> {
        let file_parent = self.file_index(parent, parent_index);
        let Some(entry) = lookup(self.root, parent).and_then(|entries| item(entries, file_parent)) else {
            return 0..0;
        };
        let Some(list) = lookup(entry, section) else {
            return entry.span.clone();
        };
        let index = self.file_index(&format!("{parent}[{file_parent}].{section}"), index);
        item(list, index)
            .and_then(|entry| {
                if key.is_empty() {
                    Some(entry)
                } else {
                    lookup(entry, key)
                }
            })
            .map_or(0..0, |node| node.span.clone())
    }

    /// `parent[parent_index].section[index]` as the file has it.
    pub(crate) fn nested_field(
        &self,
        parent: &str,
        parent_index: usize,
        section: &str,
        index: usize,
    ) -> String {
        let file_parent = self.file_index(parent, parent_index);
        let list = format!("{parent}[{file_parent}].{section}");
        format!("{list}[{}]", self.file_index(&list, index))
    }
}
