//! Electronic signatures on an act (21 CFR Part 11-style): a signature is its signer's
//! password entered again (a login, a cookie or a token is never one) with the meaning the
//! signer states, bound to the act's audit row by the hash of what was signed. A tag marked
//! `signed` takes the writer's signature, one marked `witness` a second, different operator's
//! as well; an alarm marked `signed` takes its acknowledger's; with `SignedApprovals` on,
//! approving a proposal takes the approver's.

use std::time::SystemTime;

use localai::secrets::SecretValue;
use plant_model::Signing;
use sha2::{Digest, Sha256};
use store::PasswordCheck;

use super::{ActError, AuditBound, AuditRow, Audited, record};
use crate::Runtime;
use store::AuditEntry;

/// What a signature says its signer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// The signer approves what is done.
    Approved,
    /// The signer does it.
    Performed,
    /// The signer has reviewed it (a witness).
    Reviewed,
}

impl Meaning {
    /// The meaning in the audit's words.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approved => "approved",
            Self::Performed => "performed",
            Self::Reviewed => "reviewed",
        }
    }
}

/// A signature as given with an act.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenSignature {
    /// Who signs.
    pub user: String,
    /// Their password, entered again for this signature.
    pub password: SecretValue,
    /// What the signature means.
    pub meaning: Meaning,
}

/// The signatures an act takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Needed {
    /// The actor's own.
    pub(super) actor: bool,
    /// A witness's: another operator's.
    pub(super) witness: bool,
}

impl Needed {
    /// What writing a tag of `signing` takes.
    pub(super) fn of(signing: Signing) -> Self {
        Self {
            actor: signing != Signing::Unsigned,
            witness: signing == Signing::WriterAndWitness,
        }
    }

    /// Both together: the most either takes.
    pub(super) fn and(self, other: Self) -> Self {
        Self {
            actor: self.actor || other.actor,
            witness: self.witness || other.witness,
        }
    }

    /// Whether any signature is taken.
    pub(super) fn any(self) -> bool {
        self.actor || self.witness
    }

    /// The signatures `given` by `actor` with the act whose audit rows are `rows`, checked now
    /// against what it takes, `what` naming the act: `None` when it takes none and none is
    /// given (an unsigned act, nearly every one, words and hashes nothing).
    pub(super) fn pending(
        self,
        what: impl FnOnce() -> String,
        actor: &str,
        given: Vec<GivenSignature>,
        (rows, bound): (&[AuditRow], &dyn AuditBound),
    ) -> Result<Option<PendingSignatures>, ActError> {
        if !self.any() && given.is_empty() {
            return Ok(None);
        }
        self.check_given(&what(), actor, &given)?;
        Ok(Some(PendingSignatures::new(given, rows, bound)))
    }

    /// Checks the signatures `given` by `actor` for `what` now: each taken one is there, and
    /// none more (their passwords are checked by [`verify`]).
    pub(super) fn check_given(
        self,
        what: &str,
        actor: &str,
        given: &[GivenSignature],
    ) -> Result<(), ActError> {
        if !self.any() {
            return if given.is_empty() {
                Ok(())
            } else {
                Err(ActError::Invalid(format!("{what} takes no signature; send none")))
            };
        }
        let takes = if self.witness {
            "your electronic signature and a witness's (another operator's)"
        } else {
            "your electronic signature"
        };
        let required = |problem: &str| {
            ActError::SignatureRequired(format!(
                "{what} takes {takes}: {problem}; sign with your password and the meaning (approved, performed or reviewed)"
            ))
        };
        let own = given
            .iter()
            .filter(|signature| same_user(&signature.user, actor))
            .count();
        let others = given.len() - own;
        match (own, others) {
            (0, _) => Err(required("yours is missing")),
            (1, 0) if self.witness => Err(required("the witness's is missing")),
            (1, 1) if self.witness => Ok(()),
            (1, 0) => Ok(()),
            _ if self.witness => Err(required("give exactly yours and one witness's")),
            _ => Err(required("give yours alone")),
        }
    }
}

/// The signatures given with an act, checked for presence now and verified when the act runs:
/// what they sign over, and the row a refused signature leaves in place of the act's.
pub(super) struct PendingSignatures {
    given: Vec<GivenSignature>,
    over: String,
    refusal: Vec<AuditRow>,
}

/// Signs `rows` with `signing`, if any, then records them first of all the act does: the
/// receipt, or the refusal recorded in their place (`refused` says what did not happen).
pub(super) async fn sign_and_record(
    runtime: &Runtime,
    signing: Option<PendingSignatures>,
    rows: Vec<AuditRow>,
    refused: &'static str,
) -> Result<Audited, ActError> {
    let rows = match signing {
        None => rows,
        Some(signing) => signing.sign(runtime, rows, refused).await?,
    };
    record(runtime, rows, refused).await
}

impl PendingSignatures {
    /// The signatures `given` with the act whose audit rows are `rows` (a refusal's row bounded
    /// now by `bound`, as every refusal is); they sign the rows that act, in their words.
    pub(super) fn new(given: Vec<GivenSignature>, rows: &[AuditRow], bound: &dyn AuditBound) -> Self {
        let words: Vec<String> = rows
            .iter()
            .filter(|row| row.acts)
            .map(|row| act_words(&row.entry))
            .collect();
        Self {
            given,
            over: signed_over(&words.join("\n")),
            refusal: refusal_rows(rows, bound),
        }
    }

    /// The signatures as given.
    pub(super) fn given(&self) -> &[GivenSignature] {
        &self.given
    }

    /// Verifies the signatures: the act's `rows`, each that acts carrying them, or (one
    /// refused) the refusal recorded in their place and why (`refused` says what did not
    /// happen).
    pub(super) async fn sign(
        self,
        runtime: &Runtime,
        mut rows: Vec<AuditRow>,
        refused: &'static str,
    ) -> Result<Vec<AuditRow>, ActError> {
        match verify(runtime, &self.given, &self.over).await {
            Ok(signed) => {
                for AuditRow { entry, acts } in &mut rows {
                    if *acts {
                        entry.signatures = Some(signed.clone());
                    }
                }
                Ok(rows)
            }
            Err(why) => {
                let mut refusal = self.refusal;
                for AuditRow { entry, .. } in &mut refusal {
                    if entry.outcome == SIGNATURE_REFUSED {
                        entry.outcome = store::cut_for_audit(&format!("refused: {why}"));
                    }
                }
                record(runtime, refusal, refused).await?;
                Err(ActError::SignatureRefused(why))
            }
        }
    }
}

/// An act as a signature covers it: what, on what, from which value to which.
fn act_words(entry: &AuditEntry) -> String {
    format!(
        "{} {} {} -> {}",
        entry.action.as_str(),
        entry.target,
        entry.old_value.as_deref().unwrap_or(""),
        entry.new_value.as_deref().unwrap_or("")
    )
}

/// The outcome a refused signature's row is given once the reason is known.
const SIGNATURE_REFUSED: &str = "refused: a signature did not verify";

/// The row an act whose signature is refused leaves instead of its own (one, whatever it
/// wrote), bounded now as every refusal is; its outcome says why once the signatures are
/// checked.
fn refusal_rows(rows: &[AuditRow], bound: &dyn AuditBound) -> Vec<AuditRow> {
    let Some(first) = rows.iter().find(|row| row.acts).or(rows.first()) else {
        return Vec::new();
    };
    let entry = AuditEntry {
        outcome: SIGNATURE_REFUSED.to_owned(),
        ..first.entry.clone()
    };
    bound.bound(vec![AuditRow { entry, acts: false }])
}

/// Whether two user names are one user (logins match names case-insensitively).
fn same_user(one: &str, other: &str) -> bool {
    one.to_lowercase() == other.to_lowercase()
}

/// The hash of what is signed (`act`, the act's words in the audit), as the signature row
/// shows it.
fn signed_over(act: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(act.as_bytes())))
}

/// Verifies each signature's password, and that a witness is another user who may operate:
/// the signatures as the audit row keeps them (`signer (meaning, time), ... over HASH`), or
/// why they are refused (never the password).
async fn verify(runtime: &Runtime, given: &[GivenSignature], over: &str) -> Result<String, String> {
    let mut signed = Vec::with_capacity(given.len());
    for signature in given {
        let check = runtime
            .store()
            .check_password(&signature.user, signature.password.expose())
            .await
            .map_err(|error| {
                format!(
                    "the signature of {} could not be checked: {error}",
                    signature.user
                )
            })?;
        let name = match check {
            PasswordCheck::Right { name, role } if role.can_operate() => name,
            PasswordCheck::Right { name, role } => {
                return Err(format!(
                    "the signature of {name} is refused: a {} may not sign an act",
                    role.as_str()
                ));
            }
            PasswordCheck::Wrong | PasswordCheck::UnknownUser => {
                return Err(format!(
                    "the signature of {} is refused: unknown user or wrong password",
                    signature.user
                ));
            }
            PasswordCheck::NoPassword => {
                return Err(format!(
                    "the signature of {} is refused: the user has no password to sign with",
                    signature.user
                ));
            }
        };
        signed.push(format!(
            "{name} ({}, {})",
            signature.meaning.as_str(),
            localai::iso8601_millis(SystemTime::now())
        ));
    }
    Ok(format!("{} over {over}", signed.join(", ")))
}
