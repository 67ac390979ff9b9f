//! Positions in a list of entries, found by a key each entry holds or derives (a tag's name,
//! its path, either folded; a binding's topic): the table keeps positions only, where a map
//! would keep a copy of every key beside the entry that already holds it.

use std::borrow::Cow;
use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;
use hashbrown::hash_table::{Entry, HashTable};

/// The key of an entry: borrowed from it, or derived (a folded name).
pub(crate) type KeyOf<E> = for<'e> fn(&'e E) -> Cow<'e, str>;

/// Positions in a list of entries by a key of theirs; the caller passes the same list and key
/// function to every call.
#[derive(Default, Clone)]
pub(crate) struct KeyIndex {
    table: HashTable<usize>,
    hasher: DefaultHashBuilder,
}

impl std::fmt::Debug for KeyIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyIndex")
            .field("len", &self.table.len())
            .finish()
    }
}

impl KeyIndex {
    /// An index with room for `capacity` keys before it grows.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            table: HashTable::with_capacity(capacity),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// Files `entries[position]` under its key; an entry filed under the same key before is
    /// no longer found by it (as a map's insert replaces a value).
    pub(crate) fn insert<E>(&mut self, entries: &[E], position: usize, key_of: KeyOf<E>) {
        let Self { table, hasher } = self;
        let key = key_of(&entries[position]);
        let hash = hasher.hash_one(&*key);
        let found = table.entry(
            hash,
            |&other| key_of(&entries[other]) == key,
            |&other| hasher.hash_one(&*key_of(&entries[other])),
        );
        match found {
            Entry::Occupied(mut occupied) => *occupied.get_mut() = position,
            Entry::Vacant(vacant) => {
                vacant.insert(position);
            }
        }
    }

    /// The position of the entry filed under `key`.
    pub(crate) fn get<E>(&self, entries: &[E], key: &str, key_of: KeyOf<E>) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(key), |&position| {
                key_of(&entries[position]) == key
            })
            .copied()
    }

    /// How many keys are filed.
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key is filed.
    pub(crate) fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The position of every entry filed, in no order.
    pub(crate) fn positions(&self) -> impl Iterator<Item = usize> + '_ {
        self.table.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(entry: &(String, u32)) -> Cow<'_, str> {
        Cow::Borrowed(&entry.0)
    }

    fn folded(entry: &(String, u32)) -> Cow<'_, str> {
        Cow::Owned(entry.0.to_lowercase())
    }

    fn entries(count: u32) -> Vec<(String, u32)> {
        (0..count).map(|n| (format!("Tag{n}"), n)).collect()
    }

    #[test]
    fn finds_each_entry_by_its_key_through_growth() {
        let entries = entries(1_000);
        let mut index = KeyIndex::default();
        for position in 0..entries.len() {
            index.insert(&entries, position, name);
        }
        assert_eq!(index.len(), 1_000);
        for (position, (key, _)) in entries.iter().enumerate() {
            assert_eq!(index.get(&entries, key, name), Some(position));
        }
        assert_eq!(index.get(&entries, "Tag1000", name), None);
        assert_eq!(index.get(&entries, "tag7", name), None);
        let mut positions: Vec<usize> = index.positions().collect();
        positions.sort_unstable();
        assert_eq!(positions, (0..1_000).collect::<Vec<_>>());
    }

    #[test]
    fn a_derived_key_is_matched_as_derived() {
        let entries = entries(50);
        let mut index = KeyIndex::with_capacity(entries.len());
        for position in 0..entries.len() {
            index.insert(&entries, position, folded);
        }
        assert_eq!(index.get(&entries, "tag42", folded), Some(42));
        assert_eq!(index.get(&entries, "Tag42", folded), None);
    }

    #[test]
    fn a_second_entry_under_a_key_takes_it_over() {
        let entries = vec![
            ("Pump".to_owned(), 1),
            ("Valve".to_owned(), 2),
            ("Pump".to_owned(), 3),
        ];
        let mut index = KeyIndex::default();
        for position in 0..entries.len() {
            index.insert(&entries, position, name);
        }
        assert_eq!(index.len(), 2);
        assert_eq!(index.get(&entries, "Pump", name), Some(2));
        assert!(!index.is_empty());
    }
}
