//! Proposals: actions the assistant, an MCP client or a script asks an operator to carry out
//! (a tag write, an alarm acknowledgement), kept pending until a person decides, they expire,
//! or their connection closes. The board only keeps them: proposing acts on nothing, and a
//! decision is carried out by the one who claims the proposal, through the operator's own
//! write path.
//!
//! Invariants: a proposal is decided at most once (claiming moves it out of pending under the
//! board's lock, so of two decisions at once one gets it); a claim dropped without settling
//! puts it back; at most [`MAX_PER_TURN`] proposals come from one chat turn,
//! [`MAX_PENDING_PER_ORIGIN`] wait from one connection, MCP session or script, and
//! [`MAX_PENDING`] in all.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use localai::tools::{ProposalId, ToolCaller};
use plant_model::TagValue;
use tokio::sync::watch;
use uuid::Uuid;

/// How long a proposal waits for a decision.
pub const PROPOSAL_LIFETIME: Duration = Duration::from_secs(5 * 60);
/// The most proposals one chat turn makes.
pub const MAX_PER_TURN: usize = 3;
/// The most proposals pending from one connection, MCP session or script.
pub const MAX_PENDING_PER_ORIGIN: usize = 10;
/// The most proposals pending in all.
pub const MAX_PENDING: usize = 256;
/// Decided, expired and withdrawn proposals kept to answer a late decision in words.
const SETTLED_KEPT: usize = 64;

/// What a proposal would do once approved.
#[derive(Debug, Clone, PartialEq)]
pub enum ProposedAction {
    /// Write `proposed` to `tag` (which held `current` when proposed).
    Write {
        /// The tag's name, as defined.
        tag: String,
        /// Its value when proposed.
        current: TagValue,
        /// The value to write, fitted to the tag's type.
        proposed: TagValue,
    },
    /// Acknowledge `alarm`.
    AcknowledgeAlarm {
        /// The alarm's name, as defined.
        alarm: String,
    },
    /// Shelve `alarm` for `duration`, the proposal's reason its reason.
    ShelveAlarm {
        /// The alarm's name, as defined.
        alarm: String,
        /// For how long, once approved.
        duration: std::time::Duration,
    },
}

/// Where a proposal stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProposalState {
    /// Waiting for a person.
    Pending,
    /// Claimed by a decision being carried out.
    Deciding,
    /// Approved by `by`; `outcome` says what carrying it out did.
    Approved {
        /// Who approved it.
        by: String,
        /// What happened, in words (`written`, `sent to the field`, why it was refused).
        outcome: String,
    },
    /// Declined by `by`.
    Declined {
        /// Who declined it.
        by: String,
        /// Why, in their words (may be empty).
        comment: String,
    },
    /// Nobody decided within its lifetime.
    Expired,
    /// Its connection closed first.
    Withdrawn,
}

/// One proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// Its id: `p-` and 12 hex digits of a random number, so an id cannot be guessed.
    pub id: String,
    /// What it would do.
    pub action: ProposedAction,
    /// Why the proposer thinks it should be done.
    pub reason: String,
    /// Who proposed it.
    pub proposer: ToolCaller,
    /// When it was made, and when it expires.
    pub made_at: SystemTime,
    /// When it expires unless decided.
    pub expires_at: SystemTime,
    /// Where it stands.
    pub state: ProposalState,
}

/// Why a proposal was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProposalRefusal {
    /// The chat turn made its [`MAX_PER_TURN`] proposals already.
    #[error("this turn made {MAX_PER_TURN} proposals already; wait for the operator's decisions")]
    TurnFull,
    /// The origin has [`MAX_PENDING_PER_ORIGIN`] proposals pending.
    #[error(
        "{MAX_PENDING_PER_ORIGIN} proposals from here are waiting already; wait for the operator's decisions"
    )]
    OriginFull,
    /// The board holds [`MAX_PENDING`] proposals.
    #[error("{MAX_PENDING} proposals are waiting already; wait for the operators' decisions")]
    BoardFull,
}

/// Why a proposal cannot be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotPending {
    /// No proposal of that id on this server (it may have been decided long ago).
    #[error("no proposal {0} is known on this server")]
    Unknown(String),
    /// Another decision is being carried out.
    #[error("proposal {0} is being decided by someone else")]
    BeingDecided(String),
    /// It was decided, expired or withdrawn.
    #[error("proposal {id} is no longer pending: {state}")]
    Settled {
        /// The proposal.
        id: String,
        /// What became of it, in words.
        state: String,
    },
}

/// The pending proposals of one server.
#[derive(Debug)]
pub struct ProposalBoard {
    state: Mutex<BoardState>,
    revision: watch::Sender<u64>,
    lifetime: Duration,
}

#[derive(Debug, Default)]
struct BoardState {
    /// Pending and being decided, oldest first.
    open: Vec<Proposal>,
    /// The latest settled, newest last.
    settled: VecDeque<Proposal>,
    /// Proposals made per chat turn: (connection, turn) -> count, for the latest turns only.
    per_turn: VecDeque<((Uuid, u64), usize)>,
    /// Expired by any look at the board (a listing, a claim, a new proposal) and not yet
    /// handed to [`ProposalBoard::expire`]'s caller, who tells their turns; the latest
    /// [`MAX_PENDING`] at most.
    expired_untold: Vec<Proposal>,
}

impl Default for ProposalBoard {
    fn default() -> Self {
        Self::with_lifetime(PROPOSAL_LIFETIME)
    }
}

impl BoardState {
    /// Proposal `id`, open or among the latest settled.
    fn find(&self, id: &str) -> Option<&Proposal> {
        self.open
            .iter()
            .chain(self.settled.iter().rev())
            .find(|proposal| proposal.id == id)
    }
}

impl ProposalBoard {
    /// A board whose proposals wait `lifetime` for a decision.
    pub fn with_lifetime(lifetime: Duration) -> Self {
        Self {
            state: Mutex::new(BoardState::default()),
            revision: watch::Sender::new(0),
            lifetime,
        }
    }

    /// A receiver that changes whenever the pending list does.
    pub fn revision(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    /// Takes a proposal (already checked as its action would be) from `proposer`, made `now`.
    pub fn submit(
        &self,
        proposer: ToolCaller,
        action: ProposedAction,
        reason: &str,
        now: SystemTime,
    ) -> Result<Proposal, ProposalRefusal> {
        let mut state = self.lock();
        state.expire(now);
        if state.open.len() >= MAX_PENDING {
            return Err(ProposalRefusal::BoardFull);
        }
        let origin = proposer.origin();
        let from_origin = state
            .open
            .iter()
            .filter(|proposal| proposal.proposer.origin() == origin)
            .count();
        if from_origin >= MAX_PENDING_PER_ORIGIN {
            return Err(ProposalRefusal::OriginFull);
        }
        if let ToolCaller::ChatTurn { connection, turn, .. } = &proposer {
            let key = (*connection, *turn);
            match state.per_turn.iter_mut().find(|(made, _)| *made == key) {
                Some((_, count)) if *count >= MAX_PER_TURN => return Err(ProposalRefusal::TurnFull),
                Some((_, count)) => *count += 1,
                None => {
                    if state.per_turn.len() == MAX_PENDING {
                        state.per_turn.pop_front();
                    }
                    state.per_turn.push_back((key, 1));
                }
            }
        }
        let proposal = Proposal {
            id: format!("p-{:012x}", Uuid::new_v4().as_u128() & 0xffff_ffff_ffff),
            action,
            reason: reason.to_owned(),
            proposer,
            made_at: now,
            expires_at: now + self.lifetime,
            state: ProposalState::Pending,
        };
        state.open.push(proposal.clone());
        drop(state);
        self.revision.send_modify(|revision| *revision += 1);
        Ok(proposal)
    }

    /// The proposals waiting for a decision at `now` (and those being decided), oldest first.
    pub fn pending(&self, now: SystemTime) -> Vec<Proposal> {
        let mut state = self.lock();
        if state.expire(now) {
            self.revision.send_modify(|revision| *revision += 1);
        }
        state.open.clone()
    }

    /// Proposal `id` as it stands: pending, being decided, or one of the latest settled.
    pub fn get(&self, id: &str) -> Option<Proposal> {
        self.lock().find(id).cloned()
    }

    /// The proposals a chat turn's tools made, as they stand now, in the order made (the ones
    /// no longer known left out): how a turn's proposals are joined to the board, streamed
    /// one by one or listed in its reply.
    pub fn made(&self, ids: &[ProposalId]) -> Vec<Proposal> {
        let state = self.lock();
        ids.iter()
            .filter_map(|id| state.find(id.as_str()).cloned())
            .collect()
    }

    /// Claims proposal `id` for a decision at `now`: no one else can decide it until the claim
    /// is settled or dropped (then it is pending again).
    pub fn claim(self: &Arc<Self>, id: &str, now: SystemTime) -> Result<Claim, NotPending> {
        let mut state = self.lock();
        if state.expire(now) {
            self.revision.send_modify(|revision| *revision += 1);
        }
        match state.open.iter_mut().find(|proposal| proposal.id == id) {
            Some(proposal) if proposal.state == ProposalState::Deciding => {
                Err(NotPending::BeingDecided(id.to_owned()))
            }
            Some(proposal) => {
                proposal.state = ProposalState::Deciding;
                Ok(Claim {
                    board: Arc::clone(self),
                    proposal: proposal.clone(),
                    settled: false,
                })
            }
            None => Err(
                match state.settled.iter().rev().find(|proposal| proposal.id == id) {
                    Some(settled) => NotPending::Settled {
                        id: id.to_owned(),
                        state: state_words(&settled.state),
                    },
                    None => NotPending::Unknown(id.to_owned()),
                },
            ),
        }
    }

    /// Expires what waited past its lifetime at `now`; returns every proposal expired since
    /// the last call, here or by another look at the board, so each is told once.
    pub fn expire(&self, now: SystemTime) -> Vec<Proposal> {
        let mut state = self.lock();
        let expired_now = state.expire(now);
        let untold = std::mem::take(&mut state.expired_untold);
        drop(state);
        if expired_now {
            self.revision.send_modify(|revision| *revision += 1);
        }
        untold
    }

    /// Withdraws the pending proposals made on `connection`, which closed.
    pub fn connection_closed(&self, connection: Uuid) -> Vec<Proposal> {
        let mut state = self.lock();
        let (gone, kept): (Vec<Proposal>, Vec<Proposal>) =
            std::mem::take(&mut state.open).into_iter().partition(|proposal| {
                proposal.proposer.connection() == Some(connection) && proposal.state == ProposalState::Pending
            });
        state.open = kept;
        let gone: Vec<Proposal> = gone
            .into_iter()
            .map(|mut proposal| {
                proposal.state = ProposalState::Withdrawn;
                state.keep_settled(proposal.clone());
                proposal
            })
            .collect();
        state.per_turn.retain(|((made_on, _), _)| *made_on != connection);
        drop(state);
        if !gone.is_empty() {
            self.revision.send_modify(|revision| *revision += 1);
        }
        gone
    }

    fn lock(&self) -> MutexGuard<'_, BoardState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends a claim: settled as `state`, or (`None`) pending again.
    fn release(&self, id: &str, state: Option<ProposalState>) -> Option<Proposal> {
        let mut board = self.lock();
        let position = board.open.iter().position(|proposal| proposal.id == id)?;
        let settled = match state {
            None => {
                board.open[position].state = ProposalState::Pending;
                None
            }
            Some(state) => {
                let mut proposal = board.open.remove(position);
                proposal.state = state;
                board.keep_settled(proposal.clone());
                Some(proposal)
            }
        };
        drop(board);
        self.revision.send_modify(|revision| *revision += 1);
        settled
    }
}

impl BoardState {
    /// Moves the pending proposals past their time at `now` to the settled ones (and to the
    /// untold); returns whether any expired.
    fn expire(&mut self, now: SystemTime) -> bool {
        let (expired, open): (Vec<Proposal>, Vec<Proposal>) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|proposal| proposal.state == ProposalState::Pending && proposal.expires_at <= now);
        self.open = open;
        let any = !expired.is_empty();
        for mut proposal in expired {
            proposal.state = ProposalState::Expired;
            self.keep_settled(proposal.clone());
            self.expired_untold.push(proposal);
        }
        if let Some(over) = self.expired_untold.len().checked_sub(MAX_PENDING) {
            self.expired_untold.drain(..over);
        }
        any
    }

    fn keep_settled(&mut self, proposal: Proposal) {
        if self.settled.len() == SETTLED_KEPT {
            self.settled.pop_front();
        }
        self.settled.push_back(proposal);
    }
}

/// The right to decide one proposal, held by the decision carrying it out.
#[derive(Debug)]
pub struct Claim {
    board: Arc<ProposalBoard>,
    proposal: Proposal,
    settled: bool,
}

impl Claim {
    /// The proposal claimed.
    pub fn proposal(&self) -> &Proposal {
        &self.proposal
    }

    /// Settles the proposal as `state` (approved or declined); returns it as it now stands.
    pub fn settle(mut self, state: ProposalState) -> Proposal {
        self.settled = true;
        self.board
            .release(&self.proposal.id, Some(state.clone()))
            .unwrap_or_else(|| Proposal {
                state,
                ..self.proposal.clone()
            })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.settled {
            self.board.release(&self.proposal.id, None);
        }
    }
}

/// What a proposal would do, in words: `write 80 to Tank1.Setpoint (now 65)`.
pub fn action_words(action: &ProposedAction) -> String {
    match action {
        ProposedAction::Write {
            tag,
            current,
            proposed,
        } => format!(
            "write {} to {tag} (it was {} when proposed)",
            proposed.to_json(),
            current.to_json()
        ),
        ProposedAction::AcknowledgeAlarm { alarm } => format!("acknowledge alarm {alarm}"),
        ProposedAction::ShelveAlarm { alarm, duration } => {
            format!(
                "shelve alarm {alarm} for {}",
                crate::objects::span_words(*duration)
            )
        }
    }
}

/// What the proposer's next chat turn is told of a settled proposal.
pub fn settled_note(proposal: &Proposal) -> String {
    format!(
        "your proposal {} to {}: {}",
        proposal.id,
        action_words(&proposal.action),
        state_words(&proposal.state)
    )
}

/// What became of a proposal, in words.
pub fn state_words(state: &ProposalState) -> String {
    match state {
        ProposalState::Pending => "pending".to_owned(),
        ProposalState::Deciding => "being decided".to_owned(),
        ProposalState::Approved { by, outcome } => format!("approved by {by}: {outcome}"),
        ProposalState::Declined { by, comment } if comment.is_empty() => format!("declined by {by}"),
        ProposalState::Declined { by, comment } => format!("declined by {by}: {comment:?}"),
        ProposalState::Expired => "expired without a decision".to_owned(),
        ProposalState::Withdrawn => "withdrawn: its connection closed".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(connection: u128, turn: u64) -> ToolCaller {
        ToolCaller::ChatTurn {
            connection: Uuid::from_u128(connection),
            user: "alice".into(),
            turn,
        }
    }

    fn write(value: f64) -> ProposedAction {
        ProposedAction::Write {
            tag: "Tank1.InletValve".to_owned(),
            current: TagValue::Number(35.0),
            proposed: TagValue::Number(value),
        }
    }

    fn board() -> Arc<ProposalBoard> {
        Arc::new(ProposalBoard::default())
    }

    #[test]
    fn a_proposal_waits_is_claimed_once_and_settles_once() {
        let board = board();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let made = board
            .submit(turn(1, 1), write(20.0), "overfilling", now)
            .expect("taken");
        assert!(made.id.starts_with("p-") && made.id.len() == 14, "{}", made.id);
        assert_eq!(made.expires_at, now + PROPOSAL_LIFETIME);
        assert_eq!(board.pending(now), std::slice::from_ref(&made));

        let claim = board.claim(&made.id, now).expect("claimed");
        assert_eq!(
            board.claim(&made.id, now).expect_err("one decision"),
            NotPending::BeingDecided(made.id.clone())
        );
        drop(claim);
        assert_eq!(
            board.pending(now)[0].state,
            ProposalState::Pending,
            "a dropped claim gives it back"
        );

        let claim = board.claim(&made.id, now).expect("claimed again");
        let settled = claim.settle(ProposalState::Declined {
            by: "bob".to_owned(),
            comment: "level is falling".to_owned(),
        });
        assert_eq!(
            settled.state,
            ProposalState::Declined {
                by: "bob".to_owned(),
                comment: "level is falling".to_owned()
            }
        );
        assert!(board.pending(now).is_empty());
        assert_eq!(
            board.claim(&made.id, now).expect_err("decided"),
            NotPending::Settled {
                id: made.id.clone(),
                state: "declined by bob: \"level is falling\"".to_owned()
            }
        );
        assert_eq!(
            board.claim("p-000000000000", now).expect_err("unknown"),
            NotPending::Unknown("p-000000000000".to_owned())
        );
    }

    #[test]
    fn two_decisions_at_once_one_wins() {
        let board = board();
        let now = SystemTime::now();
        let made = board.submit(turn(1, 1), write(20.0), "", now).expect("taken");
        let claims: Vec<Result<Claim, NotPending>> = std::thread::scope(|scope| {
            let racers: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| board.claim(&made.id, now)))
                .collect();
            racers
                .into_iter()
                .map(|racer| racer.join().expect("no panic"))
                .collect()
        });
        let won: Vec<Claim> = claims.into_iter().filter_map(Result::ok).collect();
        assert_eq!(won.len(), 1);
    }

    #[test]
    fn limits_per_turn_origin_and_board_hold() {
        let board = board();
        let now = SystemTime::now();
        for _ in 0..MAX_PER_TURN {
            board.submit(turn(1, 1), write(1.0), "", now).expect("taken");
        }
        assert_eq!(
            board.submit(turn(1, 1), write(1.0), "", now),
            Err(ProposalRefusal::TurnFull)
        );
        for next in 2..=4 {
            for _ in 0..MAX_PER_TURN {
                let _ = board.submit(turn(1, next), write(1.0), "", now);
            }
        }
        assert_eq!(board.pending(now).len(), MAX_PENDING_PER_ORIGIN);
        assert_eq!(
            board.submit(turn(1, 5), write(1.0), "", now),
            Err(ProposalRefusal::OriginFull)
        );
        let mut connection = 2;
        while board.pending(now).len() < MAX_PENDING {
            let _ = board.submit(turn(connection, 1), write(1.0), "", now);
            connection += 1;
        }
        assert_eq!(
            board.submit(turn(connection, 1), write(1.0), "", now),
            Err(ProposalRefusal::BoardFull)
        );
    }

    #[test]
    fn an_expiry_a_listing_sees_first_is_still_handed_to_the_next_expire() {
        let board = board();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let made = board.submit(turn(1, 1), write(80.0), "why", now).expect("taken");
        let later = now + PROPOSAL_LIFETIME;
        assert!(board.pending(later).is_empty(), "the listing expired it");
        let told = board.expire(later);
        assert_eq!(
            told.iter()
                .map(|proposal| (proposal.id.as_str(), &proposal.state))
                .collect::<Vec<_>>(),
            [(made.id.as_str(), &ProposalState::Expired)],
            "told once, by the next expire"
        );
        assert!(board.expire(later).is_empty(), "and only once");
    }

    #[test]
    fn proposals_expire_and_leave_with_their_connection() {
        let board = board();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let old = board.submit(turn(1, 1), write(1.0), "", now).expect("taken");
        let later = now + Duration::from_secs(60);
        let young = board.submit(turn(2, 1), write(2.0), "", later).expect("taken");
        let script = ToolCaller::Script {
            script: "Tick".into(),
        };
        let scripted = board.submit(script, write(3.0), "", later).expect("taken");
        let mut revision = board.revision();
        revision.mark_unchanged();

        let expired = board.expire(now + PROPOSAL_LIFETIME);
        assert_eq!(expired.len(), 1);
        assert_eq!(
            (expired[0].id.as_str(), &expired[0].state),
            (old.id.as_str(), &ProposalState::Expired)
        );
        assert!(revision.has_changed().expect("open"), "the list changed");

        let withdrawn = board.connection_closed(Uuid::from_u128(2));
        assert_eq!(withdrawn.len(), 1);
        assert_eq!(withdrawn[0].id, young.id);
        assert_eq!(withdrawn[0].state, ProposalState::Withdrawn);
        let left: Vec<String> = board
            .pending(later)
            .into_iter()
            .map(|proposal| proposal.id)
            .collect();
        assert_eq!(
            left,
            [scripted.id],
            "a script's proposal has no connection to end with"
        );
        assert!(matches!(
            board.claim(&old.id, later),
            Err(NotPending::Settled { state, .. }) if state == "expired without a decision"
        ));
    }
}
