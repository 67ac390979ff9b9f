//! The audit trail as a hash chain: each row stores the hash of the row before it and its own
//! hash over that and its contents, so a row changed, removed or inserted after it was
//! recorded breaks the chain where it happened. Pruning past the retention keeps a checkpoint
//! (the last pruned row's id and hash, signed with a key derived from the solution's secrets
//! key), from which the rest still verifies.
//!
//! The hashes are SHA-256 and need no key, so anyone with a copy of the rows can verify them;
//! the checkpoint's signature is an HMAC-SHA256, so only a holder of the secrets key can make
//! one. What the chain cannot show is the newest rows removed together: `audit verify`
//! prints the head (its newest row and hash) to be noted elsewhere and compared later.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::AuditEntry;

/// A SHA-256 hash.
pub type ChainHash = [u8; 32];

/// The hash the first row of a chain links to.
pub const GENESIS: ChainHash = [0; 32];

/// Separates this use of SHA-256 from any other, and names the encoding's version.
const ROW_DOMAIN: &[u8] = b"tserver audit row v1\0";

/// What a checkpoint's signature covers besides its row id and hash.
const CHECKPOINT_DOMAIN: &[u8] = b"tserver audit checkpoint v1\0";

/// The hash of a row linking to `previous`: over the previous hash and every field, each
/// length-prefixed (an absent value apart from an empty one).
pub fn row_hash(previous: &ChainHash, entry: &AuditEntry) -> ChainHash {
    let mut hasher = Sha256::new();
    hasher.update(ROW_DOMAIN);
    hasher.update(previous);
    hasher.update(super::millis(entry.time).to_be_bytes());
    for field in [
        Some(entry.user.as_str()),
        Some(entry.connection.as_str()),
        Some(entry.peer.as_str()),
        Some(entry.action.as_str()),
        Some(entry.target.as_str()),
        entry.old_value.as_deref(),
        entry.new_value.as_deref(),
        Some(entry.outcome.as_str()),
        entry.signatures.as_deref(),
    ] {
        match field {
            None => hasher.update([0]),
            Some(text) => {
                hasher.update([1]);
                hasher.update(u64::try_from(text.len()).unwrap_or(u64::MAX).to_be_bytes());
                hasher.update(text.as_bytes());
            }
        }
    }
    hasher.finalize().into()
}

/// The hashes of `entries` appended after a row whose hash is `head`, in order: each row's
/// (previous, own) pair.
pub(crate) fn link<'e>(
    head: ChainHash,
    entries: impl IntoIterator<Item = &'e AuditEntry>,
) -> Vec<(ChainHash, ChainHash)> {
    let mut previous = head;
    entries
        .into_iter()
        .map(|entry| {
            let own = row_hash(&previous, entry);
            let pair = (previous, own);
            previous = own;
            pair
        })
        .collect()
}

/// The key checkpoints are signed with, derived from the secrets key so that it is never the
/// key that seals the secrets.
fn checkpoint_key(secrets_key: &[u8]) -> Hmac<Sha256> {
    let mut derive = <Hmac<Sha256> as Mac>::new_from_slice(secrets_key).expect("HMAC takes any key length");
    derive.update(b"tserver audit checkpoint key");
    let key = derive.finalize().into_bytes();
    <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("HMAC takes any key length")
}

/// The signature of a checkpoint through row `through` whose hash is `hash`.
pub(crate) fn sign_checkpoint(secrets_key: &[u8], through: i64, hash: &ChainHash) -> Vec<u8> {
    let mut mac = checkpoint_key(secrets_key);
    mac.update(CHECKPOINT_DOMAIN);
    mac.update(&through.to_be_bytes());
    mac.update(hash);
    mac.finalize().into_bytes().to_vec()
}

/// Whether `signature` is the checkpoint's, under `secrets_key`.
fn checkpoint_signed(secrets_key: &[u8], checkpoint: &Checkpoint) -> bool {
    let mut mac = checkpoint_key(secrets_key);
    mac.update(CHECKPOINT_DOMAIN);
    mac.update(&checkpoint.through.to_be_bytes());
    mac.update(&checkpoint.hash);
    checkpoint
        .signature
        .as_deref()
        .is_some_and(|signature| mac.verify_slice(signature).is_ok())
}

/// A stored row as verification reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainedRow {
    /// The row's id (the chain's order).
    pub id: i64,
    /// Its contents.
    pub entry: AuditEntry,
    /// The hash of the row before it, as stored (`None` for a row recorded before the chain).
    pub previous: Option<Vec<u8>>,
    /// Its own hash, as stored.
    pub hash: Option<Vec<u8>>,
}

/// What pruning left: the last pruned row and its hash, signed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The id of the last row removed.
    pub through: i64,
    /// That row's hash: the first row kept links to it.
    pub hash: ChainHash,
    /// The HMAC of `through` and `hash`; `None` when no secrets key was at hand.
    pub signature: Option<Vec<u8>>,
}

/// An audit trail that verifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainVerified {
    /// Rows checked.
    pub rows: u64,
    /// Rows recorded before this build kept a chain (the oldest, unchained).
    pub unchained: u64,
    /// The checkpoint the chain starts from, when rows were pruned.
    pub from_checkpoint: Option<i64>,
    /// The newest row and its hash.
    pub head: Option<(i64, ChainHash)>,
}

/// Where an audit trail stops verifying: the first place, in the chain's order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    /// A row's contents no longer match its hash.
    #[error("row {id} was changed after it was recorded: its contents do not match its hash")]
    Changed {
        /// The row.
        id: i64,
    },
    /// A row was put in between: the row after it links to the row before it.
    #[error("row {id} was inserted: the row after it links to the row before it")]
    Inserted {
        /// The row.
        id: i64,
    },
    /// The newest row matches nothing: changed, or added at the end.
    #[error("row {id}, the newest, was changed or added after it was recorded: it does not match its hash")]
    ChangedOrAdded {
        /// The row.
        id: i64,
    },
    /// Rows between two rows are gone.
    #[error(
        "rows were removed between row {after} and row {before}: row {before} links to a row that is not there"
    )]
    Removed {
        /// The last row before the gap (0: the chain's start).
        after: i64,
        /// The first row after it.
        before: i64,
    },
    /// The first row kept does not link to the pruning checkpoint, or its oldest rows are gone.
    #[error("row {id} does not link to {start}: rows before it were removed")]
    RemovedAtStart {
        /// The first row.
        id: i64,
        /// What it should link to, in words.
        start: String,
    },
    /// The pruning checkpoint is not signed with this solution's key.
    #[error(
        "the checkpoint left by pruning (through row {through}) is not signed with this solution's secrets key: it was not made by this solution's server"
    )]
    CheckpointForged {
        /// The row it says was pruned last.
        through: i64,
    },
    /// There is a checkpoint, and no key to check it with.
    #[error("the checkpoint left by pruning (through row {through}) cannot be checked: {reason}")]
    CheckpointUncheckable {
        /// The row it says was pruned last.
        through: i64,
        /// Why there is no key.
        reason: String,
    },
}

/// Walks a trail's rows, in id order, and says where it first breaks.
#[derive(Debug)]
pub struct ChainWalk {
    /// The hash the next row must link to; `None` until the first chained row.
    expected: Option<ChainHash>,
    /// The hash the row before the last links to (a row inserted after it shows by the next
    /// row linking here).
    before_last: Option<ChainHash>,
    /// The last row accepted (0 before any).
    last_id: i64,
    /// A row that did not verify, held to see whether the row after it links past it.
    suspect: Option<(ChainedRow, ChainBreak)>,
    from_checkpoint: Option<i64>,
    rows: u64,
    unchained: u64,
    broken: Option<ChainBreak>,
}

impl ChainWalk {
    /// A walk from the chain's start, or from the latest pruning `checkpoint`, whose signature
    /// is checked with `secrets_key` (or why there is none).
    pub fn new(checkpoint: Option<&Checkpoint>, secrets_key: Result<&[u8], String>) -> Self {
        let mut walk = Self {
            expected: None,
            before_last: None,
            last_id: 0,
            suspect: None,
            from_checkpoint: checkpoint.map(|checkpoint| checkpoint.through),
            rows: 0,
            unchained: 0,
            broken: None,
        };
        if let Some(checkpoint) = checkpoint {
            walk.expected = Some(checkpoint.hash);
            walk.last_id = checkpoint.through;
            walk.broken = match secrets_key {
                Ok(key) if checkpoint_signed(key, checkpoint) => None,
                Ok(_) => Some(ChainBreak::CheckpointForged {
                    through: checkpoint.through,
                }),
                Err(reason) => Some(ChainBreak::CheckpointUncheckable {
                    through: checkpoint.through,
                    reason,
                }),
            };
        }
        walk
    }

    /// Whether the walk has found a break (the rest need not be read).
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Takes the next row, in id order.
    pub fn take(&mut self, row: ChainedRow) {
        if self.broken.is_some() {
            return;
        }
        self.rows += 1;
        if self.from_checkpoint.is_some_and(|through| row.id <= through) {
            // Pruning removed every row up to there: this one was put back.
            self.broken = Some(ChainBreak::Inserted { id: row.id });
            return;
        }
        if let Some((suspect, found)) = self.suspect.take() {
            // The row after a suspect linking to what the suspect should have linked to: the
            // suspect was put in between.
            let links_past =
                stored_hash(row.previous.as_deref()) == Some(self.expected_link()) && self.verifies(&row);
            self.broken = Some(if links_past {
                ChainBreak::Inserted { id: suspect.id }
            } else {
                found
            });
            return;
        }
        let (Some(previous), Some(hash)) = (
            stored_hash(row.previous.as_deref()),
            stored_hash(row.hash.as_deref()),
        ) else {
            if self.expected.is_none() && row.previous.is_none() && row.hash.is_none() {
                // Recorded before this build kept a chain.
                self.unchained += 1;
                self.last_id = row.id;
                return;
            }
            let id = row.id;
            self.suspect = Some((row, ChainBreak::Changed { id }));
            return;
        };
        if !self.verifies(&row) {
            let id = row.id;
            self.suspect = Some((row, ChainBreak::Changed { id }));
            return;
        }
        if previous != self.expected_link() {
            self.broken = Some(if Some(previous) == self.before_last {
                ChainBreak::Inserted { id: self.last_id }
            } else if self.expected.is_none() || (self.from_checkpoint.is_some() && self.rows == 1) {
                ChainBreak::RemovedAtStart {
                    id: row.id,
                    start: match self.from_checkpoint {
                        Some(through) => format!("the checkpoint left by pruning (through row {through})"),
                        None => "the chain's start".to_owned(),
                    },
                }
            } else {
                ChainBreak::Removed {
                    after: self.last_id,
                    before: row.id,
                }
            });
            return;
        }
        self.before_last = self.expected;
        self.expected = Some(hash);
        self.last_id = row.id;
    }

    /// The verdict once every row was taken.
    pub fn finish(mut self) -> Result<ChainVerified, ChainBreak> {
        if let Some((suspect, _)) = self.suspect.take() {
            self.broken
                .get_or_insert(ChainBreak::ChangedOrAdded { id: suspect.id });
        }
        match self.broken {
            Some(broken) => Err(broken),
            None => Ok(ChainVerified {
                rows: self.rows,
                unchained: self.unchained,
                from_checkpoint: self.from_checkpoint,
                head: self.expected.map(|hash| (self.last_id, hash)),
            }),
        }
    }

    /// What the next row must link to.
    fn expected_link(&self) -> ChainHash {
        self.expected.unwrap_or(GENESIS)
    }

    /// Whether a row's own hash matches its contents and the link it stores.
    fn verifies(&self, row: &ChainedRow) -> bool {
        match (
            stored_hash(row.previous.as_deref()),
            stored_hash(row.hash.as_deref()),
        ) {
            (Some(previous), Some(hash)) => row_hash(&previous, &row.entry) == hash,
            _ => false,
        }
    }
}

/// A stored hash, when it is one.
fn stored_hash(bytes: Option<&[u8]>) -> Option<ChainHash> {
    bytes.and_then(|bytes| bytes.try_into().ok())
}

/// A hash as text (lowercase hex), to be noted and compared.
pub fn hash_hex(hash: &ChainHash) -> String {
    hex::encode(hash)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::AuditAction;

    fn entry(n: u64) -> AuditEntry {
        AuditEntry {
            time: UNIX_EPOCH + Duration::from_secs(1_800_000_000 + n),
            user: "ops".to_owned(),
            connection: "c".to_owned(),
            peer: "p".to_owned(),
            action: AuditAction::Write,
            target: format!("Tag{n}"),
            old_value: None,
            new_value: Some(n.to_string()),
            outcome: "ok".to_owned(),
            signatures: None,
        }
    }

    /// Rows 1..=count chained from `head`.
    fn chain(count: i64, head: ChainHash) -> Vec<ChainedRow> {
        let entries: Vec<AuditEntry> = (1..=count).map(|n| entry(n.unsigned_abs())).collect();
        link(head, &entries)
            .into_iter()
            .zip(entries)
            .zip(1..)
            .map(|(((previous, hash), entry), id)| ChainedRow {
                id,
                entry,
                previous: Some(previous.to_vec()),
                hash: Some(hash.to_vec()),
            })
            .collect()
    }

    fn verdict(
        rows: Vec<ChainedRow>,
        checkpoint: Option<&Checkpoint>,
        key: &[u8],
    ) -> Result<ChainVerified, ChainBreak> {
        let mut walk = ChainWalk::new(checkpoint, Ok(key));
        for row in rows {
            walk.take(row);
        }
        walk.finish()
    }

    const KEY: &[u8] = &[7; 32];

    #[test]
    fn an_untouched_chain_verifies_to_its_head() {
        let rows = chain(5, GENESIS);
        let head = stored_hash(rows[4].hash.as_deref()).expect("a hash");
        let verified = verdict(rows, None, KEY).expect("verifies");
        assert_eq!(
            (verified.rows, verified.unchained, verified.head),
            (5, 0, Some((5, head)))
        );
    }

    #[test]
    fn a_changed_row_is_named() {
        let mut rows = chain(5, GENESIS);
        rows[2].entry.outcome = "refused".to_owned();
        assert_eq!(verdict(rows, None, KEY), Err(ChainBreak::Changed { id: 3 }));
        let mut rows = chain(5, GENESIS);
        rows[1].hash = None;
        assert_eq!(verdict(rows, None, KEY), Err(ChainBreak::Changed { id: 2 }));
    }

    #[test]
    fn removed_rows_are_named_by_their_neighbours() {
        let mut rows = chain(6, GENESIS);
        rows.drain(2..4);
        assert_eq!(
            verdict(rows, None, KEY),
            Err(ChainBreak::Removed { after: 2, before: 5 })
        );
        let mut rows = chain(3, GENESIS);
        rows.remove(0);
        assert!(
            matches!(
                verdict(rows, None, KEY),
                Err(ChainBreak::RemovedAtStart { id: 2, .. })
            ),
            "the oldest row removed without a checkpoint"
        );
    }

    #[test]
    fn an_inserted_row_is_named_whether_or_not_it_was_hashed() {
        // Hashed as the writer would, linked to the row before it.
        let rows = chain(4, GENESIS);
        let previous = stored_hash(rows[1].hash.as_deref()).expect("a hash");
        let forged = ChainedRow {
            id: 3,
            entry: entry(99),
            previous: Some(previous.to_vec()),
            hash: Some(row_hash(&previous, &entry(99)).to_vec()),
        };
        let mut tampered: Vec<ChainedRow> = rows.clone();
        tampered.insert(2, forged.clone());
        for (id, row) in tampered.iter_mut().enumerate() {
            row.id = i64::try_from(id).expect("small") + 1;
        }
        assert_eq!(verdict(tampered, None, KEY), Err(ChainBreak::Inserted { id: 3 }));
        // Not hashed at all.
        let mut tampered = rows.clone();
        tampered.insert(
            2,
            ChainedRow {
                previous: None,
                hash: None,
                ..forged
            },
        );
        for (id, row) in tampered.iter_mut().enumerate() {
            row.id = i64::try_from(id).expect("small") + 1;
        }
        assert_eq!(verdict(tampered, None, KEY), Err(ChainBreak::Inserted { id: 3 }));
        // At the end nothing follows: changed or added.
        let mut tampered = rows;
        tampered.push(ChainedRow {
            id: 5,
            entry: entry(5),
            previous: None,
            hash: None,
        });
        assert_eq!(
            verdict(tampered, None, KEY),
            Err(ChainBreak::ChangedOrAdded { id: 5 })
        );
    }

    #[test]
    fn rows_from_before_the_chain_are_counted_and_the_chain_starts_after_them() {
        let mut rows: Vec<ChainedRow> = (1..=2)
            .map(|id| ChainedRow {
                id,
                entry: entry(id.unsigned_abs()),
                previous: None,
                hash: None,
            })
            .collect();
        for mut row in chain(3, GENESIS) {
            row.id += 2;
            rows.push(row);
        }
        let verified = verdict(rows, None, KEY).expect("verifies");
        assert_eq!((verified.rows, verified.unchained), (5, 2));
    }

    #[test]
    fn a_pruned_chain_verifies_from_its_signed_checkpoint_and_a_forged_one_does_not() {
        let rows = chain(6, GENESIS);
        let through_hash = stored_hash(rows[2].hash.as_deref()).expect("a hash");
        let kept: Vec<ChainedRow> = rows[3..].to_vec();
        let checkpoint = Checkpoint {
            through: 3,
            hash: through_hash,
            signature: Some(sign_checkpoint(KEY, 3, &through_hash)),
        };
        let verified = verdict(kept.clone(), Some(&checkpoint), KEY).expect("verifies");
        assert_eq!((verified.rows, verified.from_checkpoint), (3, Some(3)));
        // Signed with another key, or not at all.
        let forged = Checkpoint {
            signature: Some(sign_checkpoint(&[8; 32], 3, &through_hash)),
            ..checkpoint.clone()
        };
        assert_eq!(
            verdict(kept.clone(), Some(&forged), KEY),
            Err(ChainBreak::CheckpointForged { through: 3 })
        );
        let unsigned = Checkpoint {
            signature: None,
            ..checkpoint.clone()
        };
        assert_eq!(
            verdict(kept.clone(), Some(&unsigned), KEY),
            Err(ChainBreak::CheckpointForged { through: 3 })
        );
        // More pruned than the checkpoint says.
        assert!(matches!(
            verdict(kept[1..].to_vec(), Some(&checkpoint), KEY),
            Err(ChainBreak::RemovedAtStart { id: 5, .. })
        ));
        // No key to check it with.
        let mut walk = ChainWalk::new(Some(&checkpoint), Err("no secrets key".to_owned()));
        for row in kept {
            walk.take(row);
        }
        assert!(matches!(
            walk.finish(),
            Err(ChainBreak::CheckpointUncheckable { through: 3, .. })
        ));
    }

    #[test]
    fn each_field_and_the_link_change_the_hash() {
        let base = entry(1);
        let hash = row_hash(&GENESIS, &base);
        assert_ne!(row_hash(&[1; 32], &base), hash);
        let changed = [
            AuditEntry {
                user: "x".to_owned(),
                ..base.clone()
            },
            AuditEntry {
                old_value: Some(String::new()),
                ..base.clone()
            },
            AuditEntry {
                new_value: None,
                ..base.clone()
            },
            AuditEntry {
                signatures: Some("ops (performed)".to_owned()),
                ..base.clone()
            },
            AuditEntry {
                time: base.time + Duration::from_millis(1),
                ..base.clone()
            },
            // The same bytes split differently between two fields.
            AuditEntry {
                connection: "cp".to_owned(),
                peer: String::new(),
                ..base.clone()
            },
        ];
        for entry in changed {
            assert_ne!(row_hash(&GENESIS, &entry), hash, "{entry:?}");
        }
    }
}
