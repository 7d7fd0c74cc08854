//! The lock most Cassandra users write instead of a queue: one row per lock, taken with a
//! lightweight transaction (Paxos), for comparison with the queue lock on a real cluster.
//!
//! * take: `INSERT ... (lock_id, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?`;
//! * renew (a task while held): `UPDATE ... USING TTL ? SET owner = ? WHERE lock_id = ?
//!   IF owner = ?`;
//! * release: `DELETE ... WHERE lock_id = ? IF owner = ?`;
//! * wait: retry the take with exponential backoff and full jitter ([`Backoff`]).
//!
//! Written the way a careful user would: prepared statements, consistency QUORUM for the
//! commit and SERIAL for the Paxos phase, no driver retries, and the unknown outcome of a
//! timed-out conditional write resolved by reading the row back at SERIAL (a read at
//! SERIAL finishes any Paxos round in flight, so what it returns is what the write did).
//! Paxos exists only on real Cassandra (and ScyllaDB), so this lock runs only there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use lock_storage_cassandra::{RequestFault, request_fault, scylla};
use scylla::client::session::Session;
use scylla::errors::ExecutionError;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency, Statement};
use scylla::value::Row;
use tokio::time::Instant as TokioInstant;

/// The table of the lightweight-transaction lock, in the keyspace the caller names.
pub const TABLE: &str = "lwt_locks";

/// Exponential backoff with full jitter: before retry `attempt` (0 for the first), wait a
/// uniformly random time between zero and `min(cap, base · 2^attempt)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Backoff {
    /// The ceiling of the first wait.
    pub base: Duration,
    /// The largest ceiling.
    pub cap: Duration,
}

impl Backoff {
    /// The ceiling of the wait before retry `attempt`: `min(cap, base · 2^attempt)`.
    pub fn ceiling(self, attempt: u32) -> Duration {
        self.base
            .saturating_mul(1_u32 << attempt.min(31))
            .min(self.cap)
    }

    /// The wait before retry `attempt`, given 64 random bits: `random / 2^64` of the
    /// ceiling (full jitter).
    pub fn delay(self, attempt: u32, random: u64) -> Duration {
        let ceiling = self.ceiling(attempt).as_nanos();
        let nanos = (ceiling * u128::from(random)) >> 64;
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// How the lightweight-transaction lock is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LwtConfig {
    /// The TTL of the lock's row: how long a crashed holder keeps the lock.
    pub lease_ttl: Duration,
    /// How often the holder renews the row's TTL.
    pub renew_every: Duration,
    /// The backoff between attempts to take a held lock.
    pub backoff: Backoff,
    /// The client-side timeout of each request (above the server's CAS timeouts, so that
    /// those arrive as errors the client can classify).
    pub request_timeout: Duration,
    /// How long [`LwtLocker::lock`] tries before giving up.
    pub acquire_timeout: Duration,
    /// How many times a release whose outcome is unknown is retried.
    pub release_attempts: u32,
}

impl Default for LwtConfig {
    /// lock-core's lease (10 s, renewed every 3 s) and a backoff of 2 ms doubling up to
    /// 250 ms, the range of the queue lock's polls (1 ms to 250 ms).
    fn default() -> Self {
        LwtConfig {
            lease_ttl: Duration::from_secs(10),
            renew_every: Duration::from_secs(3),
            backoff: Backoff {
                base: Duration::from_millis(2),
                cap: Duration::from_millis(250),
            },
            request_timeout: Duration::from_secs(5),
            acquire_timeout: Duration::from_secs(120),
            release_attempts: 5,
        }
    }
}

/// What went wrong with the lightweight-transaction lock.
#[derive(Debug, thiserror::Error)]
pub enum LwtError {
    /// The table could not be created.
    #[error("creating the table with `{statement}`: {error}")]
    Schema {
        /// The statement.
        statement: String,
        /// The driver's error.
        error: Box<ExecutionError>,
    },
    /// A statement could not be prepared.
    #[error("preparing `{statement}`: {error}")]
    Prepare {
        /// The statement.
        statement: String,
        /// The driver's error.
        error: Box<scylla::errors::PrepareError>,
    },
    /// A request was refused for a reason retrying cannot fix (syntax, permissions).
    #[error("{operation} was refused: {error}")]
    Refused {
        /// What was being done.
        operation: &'static str,
        /// The driver's error.
        error: Box<ExecutionError>,
    },
    /// The answer did not have the shape of a lightweight transaction's.
    #[error("unexpected answer to {operation}: {detail}")]
    Answer {
        /// What was being done.
        operation: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// The lock was not taken within the acquire timeout.
    #[error("lock {lock_id}: not taken within {waited:?} ({attempts} attempts)")]
    GaveUp {
        /// The lock.
        lock_id: String,
        /// How long it tried.
        waited: Duration,
        /// How many conditional inserts it sent.
        attempts: u32,
    },
    /// The holder found another owner in the row, or none (its lease expired while it
    /// held).
    #[error("lock {lock_id}: the lease was lost, the row names {found}")]
    LeaseLost {
        /// The lock.
        lock_id: String,
        /// Whom the row named.
        found: String,
    },
    /// A release kept timing out and the row still names this owner.
    #[error("lock {lock_id}: release not confirmed after {attempts} attempts")]
    ReleaseUnconfirmed {
        /// The lock.
        lock_id: String,
        /// How many deletes were sent.
        attempts: u32,
    },
}

/// The answer to a conditional write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CasAnswer {
    /// The condition held and the write is committed.
    Applied,
    /// The condition failed; the row's owner as Paxos saw it (`None`: no row).
    NotApplied {
        /// The owner in the row.
        owner: Option<String>,
    },
    /// The request timed out or its connection broke: the write may or may not be
    /// committed, now or later.
    Unknown,
    /// The request failed without writing anything (a replica unavailable, a read phase
    /// timed out): try again after a pause.
    Failed,
}

/// What a locker does after an answer about the lock's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// This owner holds the lock.
    Hold,
    /// Another owner holds it: back off and try again.
    BackOff,
    /// The row is free: try again at once.
    Retry,
    /// The outcome is unknown: read the row back at SERIAL.
    ReadBack,
}

/// What to do after the conditional insert that takes the lock answered `answer`. A
/// not-applied answer that names `owner` itself means an earlier attempt whose outcome was
/// unknown did commit: the lock is held.
pub fn after_insert(owner: &str, answer: &CasAnswer) -> Next {
    match answer {
        CasAnswer::Applied => Next::Hold,
        CasAnswer::NotApplied { owner: holder } => after_read_back(owner, holder.as_deref()),
        CasAnswer::Unknown => Next::ReadBack,
        CasAnswer::Failed => Next::BackOff,
    }
}

/// What to do once a read at SERIAL found `holder` in the lock's row.
pub fn after_read_back(owner: &str, holder: Option<&str>) -> Next {
    match holder {
        Some(holder) if holder == owner => Next::Hold,
        Some(_) => Next::BackOff,
        None => Next::Retry,
    }
}

/// What a release does once the row is known to name `holder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The row still names this owner: delete again.
    Retry,
    /// The lock is released.
    Done,
    /// The lease had expired before the release: another owner may have held the lock
    /// at the same time.
    LeaseLost,
}

/// What a release does once a not-applied delete or a read at SERIAL found `holder` in
/// the row. `uncertain`: an earlier delete of this release timed out, so it may be what
/// emptied the row (and someone may have taken the lock since); `lost`: the renewal found
/// the lease gone.
pub fn after_release(owner: &str, holder: Option<&str>, uncertain: bool, lost: bool) -> Release {
    match holder {
        Some(holder) if holder == owner => Release::Retry,
        _ if uncertain && !lost => Release::Done,
        _ => Release::LeaseLost,
    }
}

/// The counts of every lightweight-transaction locker of a run, shared.
#[derive(Debug, Default)]
pub struct LwtTally {
    conditional: AtomicU64,
    reads: AtomicU64,
    not_applied: AtomicU64,
    unknown: AtomicU64,
    failed: AtomicU64,
}

/// A snapshot of an [`LwtTally`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct LwtCounts {
    /// Conditional writes sent (takes, renewals, releases): each is a Paxos round among
    /// the replicas.
    pub conditional: u64,
    /// Reads at SERIAL sent to resolve unknown outcomes.
    pub reads: u64,
    /// Conditional takes that found the lock held (contention).
    pub not_applied: u64,
    /// Requests that timed out or lost their connection (outcome unknown).
    pub unknown: u64,
    /// Requests that failed otherwise (unavailable, overloaded, read timeouts).
    pub failed: u64,
}

impl LwtCounts {
    /// Every CQL request.
    pub fn total(&self) -> u64 {
        self.conditional + self.reads
    }
}

impl LwtTally {
    /// The counts so far.
    pub fn counts(&self) -> LwtCounts {
        LwtCounts {
            conditional: self.conditional.load(Ordering::Relaxed),
            reads: self.reads.load(Ordering::Relaxed),
            not_applied: self.not_applied.load(Ordering::Relaxed),
            unknown: self.unknown.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}

/// The prepared statements of the lock, shared by the lockers of one session.
#[derive(Clone, Debug)]
pub struct LwtStatements {
    take: PreparedStatement,
    renew: PreparedStatement,
    release: PreparedStatement,
    read: PreparedStatement,
}

impl LwtStatements {
    /// Creates `keyspace.lwt_locks` if it is missing. `keyspace` must be a validated CQL
    /// name (as `CassandraConfig` checks).
    pub async fn create_table(session: &Session, keyspace: &str) -> Result<(), LwtError> {
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {keyspace}.{TABLE} (lock_id text PRIMARY KEY, owner text)"
        );
        let mut statement = Statement::new(create.as_str());
        statement.set_request_timeout(Some(Duration::from_secs(60)));
        session
            .query_unpaged(statement, ())
            .await
            .map_err(|error| LwtError::Schema {
                statement: create.clone(),
                error: Box::new(error),
            })?;
        Ok(())
    }

    /// Prepares the statements on `session` (the table must exist, see
    /// [`LwtStatements::create_table`]).
    pub async fn prepare(
        session: &Session,
        keyspace: &str,
        config: &LwtConfig,
    ) -> Result<Self, LwtError> {
        let table = format!("{keyspace}.{TABLE}");
        let prepare = async |text: String, consistency: Consistency| {
            let mut prepared =
                session
                    .prepare(text.as_str())
                    .await
                    .map_err(|error| LwtError::Prepare {
                        statement: text.clone(),
                        error: Box::new(error),
                    })?;
            prepared.set_consistency(consistency);
            prepared.set_serial_consistency(Some(SerialConsistency::Serial));
            prepared.set_request_timeout(Some(config.request_timeout));
            prepared.set_is_idempotent(false);
            Ok::<_, LwtError>(prepared)
        };
        Ok(LwtStatements {
            take: prepare(
                format!(
                    "INSERT INTO {table} (lock_id, owner) VALUES (?, ?) IF NOT EXISTS USING TTL ?"
                ),
                Consistency::Quorum,
            )
            .await?,
            renew: prepare(
                format!("UPDATE {table} USING TTL ? SET owner = ? WHERE lock_id = ? IF owner = ?"),
                Consistency::Quorum,
            )
            .await?,
            release: prepare(
                format!("DELETE FROM {table} WHERE lock_id = ? IF owner = ?"),
                Consistency::Quorum,
            )
            .await?,
            read: prepare(
                format!("SELECT owner FROM {table} WHERE lock_id = ?"),
                Consistency::Serial,
            )
            .await?,
        })
    }
}

/// Reads a conditional write's answer: `[applied]`, and the row's `owner` when not applied.
fn cas_answer(operation: &'static str, result: QueryResult) -> Result<CasAnswer, LwtError> {
    let answer = |detail: String| LwtError::Answer { operation, detail };
    let rows = result
        .into_rows_result()
        .map_err(|error| answer(error.to_string()))?;
    let specs = rows.column_specs();
    let applied_at = specs
        .get_by_name("[applied]")
        .map(|(index, _)| index)
        .ok_or_else(|| answer("no [applied] column".into()))?;
    let owner_at = specs.get_by_name("owner").map(|(index, _)| index);
    let row: Row = rows
        .maybe_first_row()
        .map_err(|error| answer(error.to_string()))?
        .ok_or_else(|| answer("no row".into()))?;
    let column = |index: usize| row.columns.get(index).and_then(Option::as_ref);
    let applied = column(applied_at)
        .and_then(|value| value.as_boolean())
        .ok_or_else(|| answer("[applied] is not a boolean".into()))?;
    if applied {
        return Ok(CasAnswer::Applied);
    }
    let owner = owner_at
        .and_then(column)
        .and_then(|value| value.as_text())
        .cloned();
    Ok(CasAnswer::NotApplied { owner })
}

/// One process's lightweight-transaction locker: an owner id, a session, the statements.
pub struct LwtLocker {
    session: Arc<Session>,
    statements: LwtStatements,
    config: LwtConfig,
    owner: String,
    seed: u64,
    draws: AtomicU64,
    tally: Arc<LwtTally>,
}

/// A held lightweight-transaction lock. Release it with [`LwtGuard::release`]; while it
/// lives a task renews the row's TTL (dropping the guard stops the renewal, and the row
/// then expires after the lease TTL).
pub struct LwtGuard<'a> {
    locker: &'a LwtLocker,
    lock_id: String,
    wait: Duration,
    requests: u32,
    lost: Arc<AtomicBool>,
    renewal: tokio::task::JoinHandle<()>,
}

impl Drop for LwtGuard<'_> {
    fn drop(&mut self) {
        self.renewal.abort();
    }
}

impl LwtGuard<'_> {
    /// How long [`LwtLocker::lock`] took.
    pub fn wait(&self) -> Duration {
        self.wait
    }

    /// The CQL requests the acquisition made.
    pub fn requests(&self) -> u32 {
        self.requests
    }

    /// Stops the renewal and deletes the row if it still names this owner. Returns the
    /// CQL requests the release made.
    pub async fn release(self) -> Result<u32, LwtError> {
        self.renewal.abort();
        let locker = self.locker;
        let mut requests = 0;
        // Whether an earlier delete of this release may have committed.
        let mut uncertain = false;
        for _ in 0..locker.config.release_attempts.max(1) {
            requests += 1;
            let answer = locker
                .conditional(
                    "release",
                    &locker.statements.release,
                    (self.lock_id.as_str(), locker.owner.as_str()),
                )
                .await?;
            let holder = match answer {
                CasAnswer::Applied => return Ok(requests),
                CasAnswer::Failed => continue,
                CasAnswer::NotApplied { owner } => owner,
                CasAnswer::Unknown => {
                    uncertain = true;
                    requests += 1;
                    match locker.read_back(&self.lock_id).await {
                        Some(holder) => holder,
                        None => continue,
                    }
                }
            };
            match after_release(
                &locker.owner,
                holder.as_deref(),
                uncertain,
                self.lost.load(Ordering::Relaxed),
            ) {
                Release::Retry => {}
                Release::Done => return Ok(requests),
                Release::LeaseLost => {
                    return Err(LwtError::LeaseLost {
                        lock_id: self.lock_id.clone(),
                        found: holder.unwrap_or_else(|| "no owner".to_owned()),
                    });
                }
            }
        }
        Err(LwtError::ReleaseUnconfirmed {
            lock_id: self.lock_id.clone(),
            attempts: locker.config.release_attempts.max(1),
        })
    }
}

impl LwtLocker {
    /// A locker with its own owner id on `session`, drawing its backoff from `seed`.
    pub fn new(
        session: Arc<Session>,
        statements: LwtStatements,
        config: LwtConfig,
        owner: String,
        seed: u64,
        tally: Arc<LwtTally>,
    ) -> Self {
        LwtLocker {
            session,
            statements,
            config,
            owner,
            seed,
            draws: AtomicU64::new(0),
            tally,
        }
    }

    /// This locker's owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    fn random(&self) -> u64 {
        splitmix(self.seed, self.draws.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends one conditional write and reads its answer; a timeout is [`CasAnswer::Unknown`]
    /// and a failure that wrote nothing is [`CasAnswer::Failed`].
    async fn conditional(
        &self,
        operation: &'static str,
        statement: &PreparedStatement,
        values: impl scylla::serialize::row::SerializeRow,
    ) -> Result<CasAnswer, LwtError> {
        self.tally.conditional.fetch_add(1, Ordering::Relaxed);
        match self.session.execute_unpaged(statement, values).await {
            Ok(result) => {
                let answer = cas_answer(operation, result)?;
                if matches!(answer, CasAnswer::NotApplied { .. }) && operation == "take" {
                    self.tally.not_applied.fetch_add(1, Ordering::Relaxed);
                }
                Ok(answer)
            }
            Err(error) => match request_fault(&error) {
                RequestFault::Unknown => {
                    self.tally.unknown.fetch_add(1, Ordering::Relaxed);
                    Ok(CasAnswer::Unknown)
                }
                RequestFault::NotApplied => {
                    self.tally.failed.fetch_add(1, Ordering::Relaxed);
                    Ok(CasAnswer::Failed)
                }
                RequestFault::Refused => Err(LwtError::Refused {
                    operation,
                    error: Box::new(error),
                }),
            },
        }
    }

    /// Reads the lock's owner at SERIAL: `Some(owner)` (`Some(None)` for no row), or
    /// `None` if the read failed.
    async fn read_back(&self, lock_id: &str) -> Option<Option<String>> {
        self.tally.reads.fetch_add(1, Ordering::Relaxed);
        let read = async {
            let result = self
                .session
                .execute_unpaged(&self.statements.read, (lock_id,))
                .await
                .ok()?;
            let rows = result.into_rows_result().ok()?;
            let row: Option<(Option<String>,)> = rows.maybe_first_row().ok()?;
            Some(row.and_then(|(owner,)| owner))
        };
        let holder = read.await;
        if holder.is_none() {
            self.tally.failed.fetch_add(1, Ordering::Relaxed);
        }
        holder
    }

    /// Takes `lock_id`, retrying with backoff while another owner holds it, for at most
    /// the acquire timeout.
    pub async fn lock(&self, lock_id: &str) -> Result<LwtGuard<'_>, LwtError> {
        let started = TokioInstant::now();
        let ttl = i32::try_from(self.config.lease_ttl.as_secs()).unwrap_or(i32::MAX);
        let mut requests = 0_u32;
        let mut attempts = 0_u32;
        let mut backoffs = 0_u32;
        loop {
            attempts += 1;
            requests += 1;
            let answer = self
                .conditional(
                    "take",
                    &self.statements.take,
                    (lock_id, self.owner.as_str(), ttl),
                )
                .await?;
            let mut next = after_insert(&self.owner, &answer);
            if next == Next::ReadBack {
                requests += 1;
                next = match self.read_back(lock_id).await {
                    Some(holder) => after_read_back(&self.owner, holder.as_deref()),
                    None => Next::BackOff,
                };
            }
            match next {
                Next::Hold => {
                    let lost = Arc::new(AtomicBool::new(false));
                    let renewal = tokio::spawn(
                        Renewal {
                            session: self.session.clone(),
                            statement: self.statements.renew.clone(),
                            every: self.config.renew_every,
                            ttl,
                            owner: self.owner.clone(),
                            lock_id: lock_id.to_owned(),
                            lost: lost.clone(),
                            tally: self.tally.clone(),
                        }
                        .run(),
                    );
                    return Ok(LwtGuard {
                        locker: self,
                        lock_id: lock_id.to_owned(),
                        wait: started.elapsed(),
                        requests,
                        lost,
                        renewal,
                    });
                }
                Next::Retry | Next::ReadBack => {}
                Next::BackOff => {
                    let delay = self.config.backoff.delay(backoffs, self.random());
                    backoffs = backoffs.saturating_add(1);
                    tokio::time::sleep(delay).await;
                }
            }
            if started.elapsed() >= self.config.acquire_timeout {
                return Err(LwtError::GaveUp {
                    lock_id: lock_id.to_owned(),
                    waited: started.elapsed(),
                    attempts,
                });
            }
        }
    }
}

/// The task that renews a held lock's row.
struct Renewal {
    session: Arc<Session>,
    statement: PreparedStatement,
    every: Duration,
    ttl: i32,
    owner: String,
    lock_id: String,
    lost: Arc<AtomicBool>,
    tally: Arc<LwtTally>,
}

impl Renewal {
    /// Renews the row's TTL every `every` while it names `owner`; marks `lost` and stops
    /// when it names anybody else or nobody.
    async fn run(self) {
        let mut ticks = tokio::time::interval_at(TokioInstant::now() + self.every, self.every);
        loop {
            ticks.tick().await;
            self.tally.conditional.fetch_add(1, Ordering::Relaxed);
            let values = (
                self.ttl,
                self.owner.as_str(),
                self.lock_id.as_str(),
                self.owner.as_str(),
            );
            match self.session.execute_unpaged(&self.statement, values).await {
                Ok(result) => {
                    if matches!(
                        cas_answer("renew", result),
                        Ok(CasAnswer::NotApplied { .. })
                    ) {
                        self.lost.store(true, Ordering::Relaxed);
                        return;
                    }
                }
                // The next tick renews again: a lease of 10 s renewed every 3 s outlasts
                // two failed rounds.
                Err(_) => {
                    self.tally.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

/// The README's example, compiled with this crate's doctests so that it cannot drift.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Draw `draw` of the seeded sequence that times the backoff: SplitMix64's output
/// function over `seed` and the draw's index, so that a run with the same seed waits the same.
fn splitmix(seed: u64, draw: u64) -> u64 {
    let mut bits = seed.wrapping_add(draw.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    bits = (bits ^ (bits >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    bits = (bits ^ (bits >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    bits ^ (bits >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap_with_full_jitter() {
        let backoff = Backoff {
            base: Duration::from_millis(2),
            cap: Duration::from_millis(250),
        };
        let ceilings: Vec<u128> = (0..9)
            .map(|attempt| backoff.ceiling(attempt).as_millis())
            .collect();
        assert_eq!(ceilings, [2, 4, 8, 16, 32, 64, 128, 250, 250]);
        assert_eq!(backoff.ceiling(u32::MAX), Duration::from_millis(250));
        assert_eq!(backoff.delay(3, 0), Duration::ZERO);
        assert_eq!(backoff.delay(3, 1 << 63), Duration::from_millis(8));
        assert!(backoff.delay(3, u64::MAX) < Duration::from_millis(16));
        assert!(backoff.delay(3, u64::MAX) > Duration::from_micros(15_999));
        assert!(backoff.delay(40, u64::MAX) <= Duration::from_millis(250));
    }

    #[test]
    fn an_unknown_outcome_is_resolved_by_what_the_row_says() {
        let me = "me";
        assert_eq!(after_insert(me, &CasAnswer::Applied), Next::Hold);
        assert_eq!(after_insert(me, &CasAnswer::Unknown), Next::ReadBack);
        assert_eq!(after_insert(me, &CasAnswer::Failed), Next::BackOff);
        let held_by = |owner: Option<&str>| CasAnswer::NotApplied {
            owner: owner.map(str::to_owned),
        };
        // An earlier take that timed out did commit: the row names us.
        assert_eq!(after_insert(me, &held_by(Some("me"))), Next::Hold);
        assert_eq!(after_insert(me, &held_by(Some("other"))), Next::BackOff);
        assert_eq!(after_insert(me, &held_by(None)), Next::Retry);
        assert_eq!(after_read_back(me, Some("me")), Next::Hold);
        assert_eq!(after_read_back(me, Some("other")), Next::BackOff);
        assert_eq!(after_read_back(me, None), Next::Retry);
    }

    #[test]
    fn a_release_after_a_timed_out_delete_accepts_any_other_holder() {
        let me = "me";
        assert_eq!(after_release(me, Some("me"), false, false), Release::Retry);
        assert_eq!(after_release(me, Some("me"), true, false), Release::Retry);
        // Our delete timed out, then committed; the row is empty or already another's.
        assert_eq!(after_release(me, None, true, false), Release::Done);
        assert_eq!(after_release(me, Some("other"), true, false), Release::Done);
        // No delete of ours ran, yet the row is not ours: the lease had expired.
        assert_eq!(after_release(me, None, false, false), Release::LeaseLost);
        assert_eq!(
            after_release(me, Some("other"), false, false),
            Release::LeaseLost
        );
        assert_eq!(after_release(me, None, true, true), Release::LeaseLost);
    }
}
