//! The plant's documents as the live plant holds them: the search library built from the
//! stored documents, with the equipment instances (name, type, UNS path) a search can be
//! about. Replaced whole when an import changes the plant; while a large library is indexed
//! at start, a placeholder says so.

use plant_model::{Equipment, PlantDocument};

use crate::documents::{DocumentLibrary, DocumentScope, LibraryDocument};

/// The documents, indexed, and the instances of the plant file.
#[derive(Debug, Default)]
pub struct PlantLibrary {
    documents: DocumentLibrary,
    instances: Vec<Instance>,
    /// Its documents are still being indexed (it holds none yet).
    indexing: bool,
}

/// An equipment instance of the plant file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// Its name, e.g. `Pump1`.
    pub name: String,
    /// Its type, e.g. `Pump`.
    pub kind: String,
    /// Its UNS folder, e.g. `Plant/Area1/Pump1`.
    pub path: String,
}

impl PlantLibrary {
    /// The plant's `equipment` while its documents are still being indexed: a search says so.
    pub fn indexing(equipment: &[Equipment]) -> Self {
        Self {
            documents: DocumentLibrary::default(),
            instances: instances(equipment),
            indexing: true,
        }
    }

    /// Whether the documents are still being indexed.
    pub fn is_indexing(&self) -> bool {
        self.indexing
    }

    /// Indexes `documents` (cutting them into passages) beside the plant's `equipment`.
    pub fn new(documents: Vec<PlantDocument>, equipment: &[Equipment]) -> Self {
        let documents = documents
            .into_iter()
            .map(|document| LibraryDocument {
                path: document.path,
                title: document.title,
                text: document.text,
                scope: DocumentScope {
                    types: document.types,
                    equipment: document.equipment,
                    folders: document.folders,
                },
            })
            .collect();
        Self {
            documents: DocumentLibrary::new(documents),
            instances: instances(equipment),
            indexing: false,
        }
    }

    /// The documents, for search.
    pub fn documents(&self) -> &DocumentLibrary {
        &self.documents
    }

    /// The equipment instances of the plant file, in file order.
    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }
}

/// The instances of the plant file, as a search names them.
fn instances(equipment: &[Equipment]) -> Vec<Instance> {
    equipment
        .iter()
        .map(|instance| Instance {
            name: instance.name.clone(),
            kind: instance.kind.clone(),
            path: instance.path.clone(),
        })
        .collect()
}
