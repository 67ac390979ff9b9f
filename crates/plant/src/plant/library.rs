//! What the plant file gives beside its tags, as the live plant holds it: the search library
//! built from the stored documents, the equipment instances (name, type, UNS path) a search can
//! be about, and the site's prompts. Replaced whole when an import changes the plant; while a
//! large library is indexed at start, a placeholder says so.

use plant_model::{Equipment, PlantDocument, PromptSpec};

use crate::documents::{DocumentLibrary, DocumentScope, LibraryDocument};
use crate::prompts::{self, PlantPrompt, PromptError};

/// The documents, indexed, the instances of the plant file and its prompts.
#[derive(Debug, Default)]
pub struct PlantLibrary {
    documents: DocumentLibrary,
    instances: Vec<Instance>,
    /// The site's own prompts, in file order.
    prompts: Vec<PlantPrompt>,
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
    pub fn indexing(equipment: &[Equipment], prompts: &[PromptSpec]) -> Self {
        Self {
            documents: DocumentLibrary::default(),
            instances: instances(equipment),
            prompts: prompts.iter().map(PlantPrompt::of_site).collect(),
            indexing: true,
        }
    }

    /// Whether the documents are still being indexed.
    pub fn is_indexing(&self) -> bool {
        self.indexing
    }

    /// Indexes `documents` (cutting them into passages) beside the plant's `equipment` and
    /// `prompts`.
    pub fn new(documents: Vec<PlantDocument>, equipment: &[Equipment], prompts: &[PromptSpec]) -> Self {
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
            prompts: prompts.iter().map(PlantPrompt::of_site).collect(),
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

    /// The prompts offered: the built-in ones (each unless a site prompt has its name), then
    /// the site's.
    pub fn prompts(&self) -> impl Iterator<Item = &PlantPrompt> {
        prompts::offered(&self.prompts)
    }

    /// The prompt offered as `name`.
    pub fn prompt(&self, name: &str) -> Result<&PlantPrompt, PromptError> {
        prompts::named(&self.prompts, name)
    }

    /// The type the plant file declares for the equipment at `path`, if it declares one (a
    /// name's letters, `C` of `C1`, are no type).
    pub fn type_at(&self, path: &str) -> Option<&str> {
        self.instances
            .iter()
            .find(|instance| instance.path == path)
            .map(|instance| instance.kind.as_str())
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
