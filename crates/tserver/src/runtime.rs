//! One loaded solution: its database, live object model and Local AI service.

use std::path::Path;
use std::sync::Arc;

use localai::LocalAi;

use crate::objects::ObjectModel;
use crate::solution::{SolutionDb, SolutionError};

/// A solution loaded into the process. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Runtime {
    db: Arc<SolutionDb>,
    objects: Arc<ObjectModel>,
    local_ai: LocalAi,
}

impl Runtime {
    /// Opens the solution file and loads its object model.
    pub fn open(path: &Path) -> Result<Self, SolutionError> {
        let db = Arc::new(SolutionDb::open(path)?);
        let objects = Arc::new(ObjectModel::load(&db)?);
        let local_ai = LocalAi::new(Arc::clone(&db) as Arc<dyn localai::Solution>);
        Ok(Self {
            db,
            objects,
            local_ai,
        })
    }

    /// The solution database.
    pub fn db(&self) -> &Arc<SolutionDb> {
        &self.db
    }

    /// The live object model.
    pub fn objects(&self) -> &Arc<ObjectModel> {
        &self.objects
    }

    /// The Local AI service of this solution.
    pub fn local_ai(&self) -> &LocalAi {
        &self.local_ai
    }
}
