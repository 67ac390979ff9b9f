//! One loaded solution: its database, live object model and Local AI service, plus the
//! in-process script API (`TK`) that server scripts use.

use std::path::Path;
use std::sync::Arc;

use localai::LocalAi;
use localai::secrets::SecretValue;
use localai::settings::SettingsRow;

use crate::objects::{ObjectModel, TagValue};
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
        let view = SolutionView {
            db: Arc::clone(&db),
            objects: Arc::clone(&objects),
        };
        let local_ai = LocalAi::new(Arc::new(view));
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

    /// The Local AI service of this solution (hooks attach here).
    pub fn local_ai(&self) -> &LocalAi {
        &self.local_ai
    }

    /// The script toolkit (`TK`) for scripts running in this process.
    pub fn toolkit(&self) -> Toolkit {
        Toolkit {
            local_ai: self.local_ai.clone(),
        }
    }
}

/// The in-process script API: what `TK.*` is to a server script.
#[derive(Debug, Clone)]
pub struct Toolkit {
    local_ai: LocalAi,
}

impl Toolkit {
    /// `TK.AIExecute(query)`: one atomic Local AI call, waiting for the envelope JSON.
    /// Safe from a plain thread, from `spawn_blocking` and from inside an async worker.
    pub fn ai_execute(&self, query: &str) -> String {
        self.local_ai.execute_atomic_blocking(query)
    }

    /// `TK.AIExecuteAsync(query)`: the same call for async scripts.
    pub async fn ai_execute_async(&self, query: &str) -> String {
        self.local_ai.execute_atomic(query).await
    }
}

/// What Local AI sees of the solution: settings and secrets from the database, tag values
/// from the live object model.
#[derive(Debug)]
struct SolutionView {
    db: Arc<SolutionDb>,
    objects: Arc<ObjectModel>,
}

impl localai::Solution for SolutionView {
    fn settings(&self) -> Result<SettingsRow, localai::SolutionError> {
        self.db
            .settings_row()
            .map_err(|error| localai::SolutionError(error.to_string()))
    }

    fn secret(&self, name: &str) -> Result<Option<SecretValue>, localai::SolutionError> {
        self.db
            .secret(name)
            .map_err(|error| localai::SolutionError(error.to_string()))
    }

    fn tag_text(&self, name: &str) -> Option<String> {
        let sample = self.objects.tag(name)?.current();
        Some(match &sample.value {
            TagValue::Number(value) => value.to_string(),
            TagValue::Integer(value) => value.to_string(),
            TagValue::Bool(value) => value.to_string(),
            TagValue::Text(value) => value.to_string(),
        })
    }
}
