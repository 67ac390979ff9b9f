//! Live plant data from MQTT brokers: the plant file's `[[sources]]`, each a task holding one
//! connection (rumqttc), reading the plain UNS messages of the tags bound to it into the plant
//! with honest quality. While a broker is unreachable its tags are Bad, keeping their last value
//! and its time; the task reconnects with a growing pause and subscribes again.
//!
//! Sources and bindings are read when the server starts serving (`tserver serve`); a plant
//! import that changes them takes effect at the next start.

mod mqtt;
pub(crate) mod payload;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use plant_model::{PlantModel, SourceSpec};
use tokio_util::sync::CancellationToken;

use crate::objects::TagKind;
use crate::plant::Plant;
use crate::solution::{SolutionDb, SolutionError};

/// A tag fed by a source.
#[derive(Debug, Clone)]
pub(crate) struct Binding {
    /// The tag's dotted name.
    pub(crate) tag: String,
    pub(crate) kind: TagKind,
}

/// What one source has done, for `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceStatus {
    /// The source's name.
    pub name: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// Messages read into the plant.
    pub messages: u64,
    /// Messages refused, by kind (`wrong_type`, `bad_json`, `too_large`, `not_text`,
    /// `unbound`) and connection failures (`connection`).
    pub errors: BTreeMap<String, u64>,
    /// The last error, and when.
    pub last_error: Option<(SystemTime, String)>,
    /// Tags bound to it.
    pub tags: usize,
}

/// The shared status of every source, updated by their tasks.
#[derive(Debug, Default, Clone)]
pub(crate) struct SourceBoard {
    statuses: Arc<Mutex<Vec<SourceStatus>>>,
}

impl SourceBoard {
    /// Every source's status now.
    pub(crate) fn statuses(&self) -> Vec<SourceStatus> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<SourceStatus>> {
        // Plain counters changed in single steps: a panic elsewhere leaves them usable.
        self.statuses.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, status: SourceStatus) -> usize {
        let mut statuses = self.lock();
        statuses.push(status);
        statuses.len() - 1
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut SourceStatus)) {
        if let Some(status) = self.lock().get_mut(index) {
            change(status);
        }
    }
}

/// The topic each tag of `source` is on, with the tag.
fn bindings_of(model: &PlantModel, source: &SourceSpec) -> HashMap<String, Binding> {
    model
        .expand()
        .tags
        .into_iter()
        .filter_map(|tag| {
            let binding = tag.source.as_ref()?;
            if binding.broker != source.name {
                return None;
            }
            let topic = binding
                .topic
                .clone()
                .unwrap_or_else(|| source.topic_of(&tag.path));
            Some((
                topic,
                Binding {
                    kind: TagKind::of(tag.kind),
                    tag: tag.name,
                },
            ))
        })
        .collect()
}

/// Starts a task per source of the solution's plant; they stop with `shutdown`. A source that
/// cannot start (a secret that does not resolve) is logged and counted, and the others run.
pub(crate) fn start(
    db: &SolutionDb,
    plant: &Plant,
    board: &SourceBoard,
    shutdown: &CancellationToken,
) -> Result<usize, SolutionError> {
    let model = db.plant_model()?;
    for source in &model.sources {
        let bindings = bindings_of(&model, source);
        let index = board.register(SourceStatus {
            name: source.name.clone(),
            tags: bindings.len(),
            ..SourceStatus::default()
        });
        let password = match source.password.strip_prefix(localai::secrets::TOKEN_PREFIX) {
            None => None,
            Some(name) => match db.secret(name) {
                Ok(Some(secret)) => Some(secret.expose().to_owned()),
                Ok(None) => {
                    let reason = format!("the password names secret {name:?}, which is not stored");
                    tracing::error!(source = %source.name, %reason, "source not started");
                    board.update(index, |status| {
                        status.last_error = Some((SystemTime::now(), reason))
                    });
                    continue;
                }
                Err(error) => {
                    tracing::error!(source = %source.name, %error, "source not started");
                    board.update(index, |status| {
                        status.last_error = Some((SystemTime::now(), error.to_string()))
                    });
                    continue;
                }
            },
        };
        let task = mqtt::SourceTask::new(
            source.clone(),
            password,
            bindings,
            plant.clone(),
            board.clone(),
            index,
        );
        tokio::spawn(task.run(shutdown.child_token()));
    }
    Ok(model.sources.len())
}
