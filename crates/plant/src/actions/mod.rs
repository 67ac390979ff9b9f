//! The one path by which anything acts on the plant: an operator's writes and
//! acknowledgements, a decision on a proposal, a script's writes. [`Runtime::act`] checks the
//! request, records its audit rows, and only then carries it out: carrying out takes an
//! [`Audited`] receipt, which only this module makes and only from a recorded audit, so no act
//! happens unaudited by construction, whoever calls.
//!
//! Each act is checked now (what it names, who asks) and gives back the work that audits and
//! carries it out, so a caller can answer a bad request at once and run the rest beside its
//! connection.

mod acknowledge;
mod alarm_acts;
mod decide;
mod handling;
mod signatures;
mod write;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::SystemTime;

use crate::Runtime;
use crate::proposals::Proposal;
use crate::tag_writes::GivenValue;
use store::{AuditAction, AuditEntry, Role};

pub use self::decide::MAX_COMMENT_CHARS;
pub use self::handling::MAX_REASON_CHARS;
pub use self::signatures::{GivenSignature, Meaning};
pub use self::write::MAX_WRITES;

/// Proof that an act's audit rows were recorded: what carrying an act out takes. Only this
/// module makes one, after the audit writer said the rows are stored.
#[derive(Debug)]
pub struct Audited(());

/// Who acts.
#[derive(Debug, Clone)]
pub enum Actor {
    /// A user logged in on a client connection (the framed protocol, the panel's WebSocket).
    User {
        /// The user's name.
        name: Arc<str>,
        /// What the user may do.
        role: Role,
        /// The connection's server-made GUID.
        connection: String,
        /// The client's address.
        peer: String,
    },
    /// A solution script: the integrator's code, which may write any tag. Audited as the user
    /// `script:<name>`.
    Script {
        /// The script's name.
        name: String,
    },
}

impl Actor {
    /// Whether the actor may act at all (a viewer may not).
    fn may_operate(&self) -> bool {
        self.may(Permitted::Operators)
    }

    /// Whether the actor may do what `permitted` lets do.
    fn may(&self, permitted: Permitted) -> bool {
        match (self, permitted) {
            (Self::User { role, .. }, Permitted::Operators) => role.can_operate(),
            (Self::User { role, .. }, Permitted::Admins) => *role == Role::Admin,
            (Self::Script { .. }, _) => true,
        }
    }

    /// The name the act is done under: the user, or `script:<name>`.
    fn acting_name(&self) -> String {
        match self {
            Self::User { name, .. } => name.to_string(),
            Self::Script { name } => format!("script:{name}"),
        }
    }

    /// An audit row of this actor's `action` on `target` at `time`, outcome `ok`.
    fn audit_entry(&self, action: AuditAction, target: &str, time: SystemTime) -> AuditEntry {
        let (connection, peer) = match self {
            Self::User { connection, peer, .. } => (connection.clone(), peer.clone()),
            Self::Script { .. } => ("script".to_owned(), "local".to_owned()),
        };
        AuditEntry {
            time,
            user: self.acting_name(),
            connection,
            peer,
            action,
            target: target.to_owned(),
            old_value: None,
            new_value: None,
            outcome: "ok".to_owned(),
            signatures: None,
        }
    }

    /// The refusal of an act a viewer asked for (after its audit), naming `act`.
    fn refusal(&self, act: &'static str) -> Result<(), ActError> {
        self.refusal_unless(Permitted::Operators, act)
    }

    /// The refusal of an act only those `permitted` may do, asked for by someone else (after
    /// its audit), naming `act`.
    fn refusal_unless(&self, permitted: Permitted, act: &'static str) -> Result<(), ActError> {
        match self {
            Self::User { role, .. } if !self.may(permitted) => Err(ActError::NotPermitted {
                role: role.as_str(),
                act,
                needs: match permitted {
                    Permitted::Operators => "an operator",
                    Permitted::Admins => "an admin",
                },
            }),
            _ => Ok(()),
        }
    }
}

/// Who may do an act.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Permitted {
    /// Operators and admins.
    Operators,
    /// Admins alone.
    Admins,
}

/// Something asked of the plant: checked, audited, then carried out by [`Runtime::act`].
/// Sealed: the acts are this module's.
pub trait Act: sealed::Sealed {
    /// What carrying it out gives back.
    type Done: Send + 'static;

    /// Checks the act by `actor` now; the work that audits it (rows bounded by `bound`) and
    /// carries it out.
    #[doc(hidden)]
    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<Self::Done>, ActError>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::WriteTags {}
    impl Sealed for super::AcknowledgeAlarm {}
    impl Sealed for super::DecideProposal {}
    impl Sealed for super::ShelveAlarm {}
    impl Sealed for super::UnshelveAlarm {}
    impl Sealed for super::RemoveFromService {}
    impl Sealed for super::ReturnToService {}
}

/// Write tags (1 to [`MAX_WRITES`]), each checked on its own; gives each write's outcome, in
/// the order asked.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteTags {
    /// The writes.
    pub writes: Vec<RequestedWrite>,
    /// The signatures the written tags take (none for unsigned tags).
    pub signatures: Vec<GivenSignature>,
}

impl WriteTags {
    /// Writes that take no signature.
    pub fn unsigned(writes: Vec<RequestedWrite>) -> Self {
        Self {
            writes,
            signatures: Vec::new(),
        }
    }
}

/// Acknowledge an alarm; gives whether it had anything to acknowledge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcknowledgeAlarm {
    /// The alarm's name.
    pub alarm: String,
    /// The acknowledger's signature, for an alarm the plant file marks `signed` (none for
    /// the others).
    pub signatures: Vec<GivenSignature>,
}

impl AcknowledgeAlarm {
    /// An acknowledgement that takes no signature.
    pub fn unsigned(alarm: impl Into<String>) -> Self {
        Self {
            alarm: alarm.into(),
            signatures: Vec::new(),
        }
    }
}

/// Shelve an alarm (active or not) for a while, with a reason; gives until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShelveAlarm {
    /// The alarm's name.
    pub alarm: String,
    /// For how long: 1 minute to `ShelvingMaxHours`.
    pub duration: std::time::Duration,
    /// Why (at most [`MAX_REASON_CHARS`] characters).
    pub reason: String,
    /// The shelver's signature, for an alarm the plant file marks `signed`.
    pub signatures: Vec<GivenSignature>,
}

/// Unshelve an alarm by hand; gives whether it was shelved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnshelveAlarm {
    /// The alarm's name.
    pub alarm: String,
}

/// The alarms a change of service is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceScope {
    /// One alarm, by name.
    Alarm(String),
    /// Every alarm on a tag below a UNS folder: an equipment's (`Plant/Area1/Pump1`, its
    /// instrument being replaced) or a whole area's.
    Folder(String),
}

/// Take alarms out of service (admins), with a reason; gives how many were in service. A
/// folder's alarms are one act: one audit row for each alarm it takes out, one signature when
/// any of them is `signed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoveFromService {
    /// Which alarms.
    pub alarms: ServiceScope,
    /// Why (at most [`MAX_REASON_CHARS`] characters).
    pub reason: String,
    /// The admin's signature, when any of the alarms is one the plant file marks `signed`.
    pub signatures: Vec<GivenSignature>,
}

/// Put alarms back in service (admins); gives how many were out of service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnToService {
    /// Which alarms.
    pub alarms: ServiceScope,
}

/// Approve or decline a pending proposal; gives the proposal as settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecideProposal {
    /// The proposal's id.
    pub id: String,
    /// Approve (carry it out) or decline.
    pub approve: bool,
    /// The decider's words (at most [`MAX_COMMENT_CHARS`] characters).
    pub comment: String,
    /// The signatures an approval takes (`SignedApprovals`, or a signed tag's write).
    pub signatures: Vec<GivenSignature>,
}

/// One tag write asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedWrite {
    /// The tag's dotted name or UNS path, as given.
    pub tag: String,
    /// The value as given, or why what was given is no value a tag takes.
    pub value: Result<GivenValue, String>,
}

/// What became of one requested write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDone {
    /// The object model has the value now.
    Written,
    /// Published to the field and acknowledged by its broker or device.
    SentToField,
    /// Not written: why.
    Refused(String),
    /// Sent, but its acknowledgement did not come: it may or may not have reached the field.
    NotConfirmed(String),
}

/// What a decision did.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The proposal, settled.
    pub proposal: Proposal,
    /// For an approved write, where it went.
    pub write: Option<WriteDone>,
}

/// Why an act was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ActError {
    /// The request itself is wrong (nothing audited: nothing was asked of the plant).
    #[error("{0}")]
    Invalid(String),
    /// The audit could not be recorded, so nothing was done.
    #[error("{refused}: the audit could not be recorded ({error})")]
    NotAudited {
        /// What did not happen.
        refused: &'static str,
        /// Why the audit failed.
        error: String,
    },
    /// The act takes electronic signatures the request lacks (nothing audited: nothing was
    /// asked of the plant yet); the message says which.
    #[error("{0}")]
    SignatureRequired(String),
    /// A signature did not verify (audited); the message says whose and why, never the
    /// password.
    #[error("nothing was done: {0}")]
    SignatureRefused(String),
    /// The actor's role may not act (audited).
    #[error("{} may not {act}; an admin can make the user {needs}", with_article(role))]
    NotPermitted {
        /// The actor's role.
        role: &'static str,
        /// What was refused.
        act: &'static str,
        /// The role that may: "an operator", "an admin".
        needs: &'static str,
    },
}

/// A role with its article: "a viewer", "an operator".
fn with_article(role: &str) -> String {
    let article = if role.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    };
    format!("{article} {role}")
}

/// One audit row an act brings, and whether it acts (rows that act are always recorded;
/// what changes nothing may be bounded by whoever asked).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// The row.
    pub entry: AuditEntry,
    /// Whether the row records something that will be done.
    pub acts: bool,
}

/// How the rows of refusals are bounded for the one who asks: a client connection keeps an
/// allowance of them, so no client fills the disk with refusals. The rows that act are kept.
pub trait AuditBound {
    /// The rows to record, in order, each still saying whether it acts (a row the bound adds,
    /// a count of what it left out, does not).
    fn bound(&self, rows: Vec<AuditRow>) -> Vec<AuditRow>;
}

/// Every row recorded, each cut to the audit's bounds (a script's few rows).
#[derive(Debug, Clone, Copy, Default)]
pub struct EveryRow;

impl AuditBound for EveryRow {
    fn bound(&self, rows: Vec<AuditRow>) -> Vec<AuditRow> {
        rows.into_iter()
            .map(|AuditRow { entry, acts }| AuditRow {
                entry: entry.cut_to_bounds(),
                acts,
            })
            .collect()
    }
}

/// The work of an act once checked: audit, then carry out.
pub type ActWork<T> = Pin<Box<dyn Future<Output = Result<T, ActError>> + Send>>;

impl Runtime {
    /// Checks `action` by `actor` now and returns the work that records its audit and then
    /// carries it out; the refusal rows are bounded by `bound`. An `Err` now is a request
    /// wrong in itself, audited as nothing.
    pub fn act<A: Act>(
        &self,
        actor: Actor,
        action: A,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<A::Done>, ActError> {
        action.check(self, actor, bound)
    }

    /// Checks and carries out `action` by `actor` at once, waiting for it; every audit row
    /// recorded.
    pub async fn act_now<A: Act>(&self, actor: Actor, action: A) -> Result<A::Done, ActError> {
        self.act(actor, action, &EveryRow)?.await
    }
}

/// Records `rows`; the receipt that lets the act be carried out, or why not (`refused` says
/// what did not happen).
async fn record(runtime: &Runtime, rows: Vec<AuditRow>, refused: &'static str) -> Result<Audited, ActError> {
    let entries = rows.into_iter().map(|row| row.entry).collect();
    match runtime.audit_log().record(entries).await {
        Ok(()) => Ok(Audited(())),
        Err(error) => {
            tracing::error!(%error, "{refused}: the audit could not be recorded");
            Err(ActError::NotAudited { refused, error })
        }
    }
}
