//! `lock-jepsen worker`: one client process of a run. In a loop until the
//! stop file appears: take the lock, read both registers, write each plus one, read the
//! fenced one back, release; every step is a line of its JSON log, timed on the machine's
//! monotonic clock.

use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fair_lock::{LockGuard, Locker};
use lock_core::{Error, LockConfig};
use lock_storage_cassandra::scylla::client::session::Session;
use lock_storage_cassandra::scylla::statement::Consistency;
use lock_storage_cassandra::scylla::statement::prepared::PreparedStatement;
use lock_storage_cassandra::{CassandraConfig, CassandraStorage};

use crate::check::{Event, Register};
use crate::{BoxError, REGISTER_TABLE, monotonic_us};

/// The hidden subcommand of a worker process: the run spawns its own binary with it.
pub const COMMAND: &str = "worker";

/// The options of the hidden `worker` subcommand, which the run gives each worker it spawns.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The worker's number.
    #[arg(long)]
    pub worker: usize,
    /// Contact points.
    #[arg(long, value_delimiter = ',', required = true)]
    pub contact_points: Vec<String>,
    /// The keyspace.
    #[arg(long)]
    pub keyspace: String,
    /// The lock id.
    #[arg(long)]
    pub lock_id: String,
    /// The log to append to.
    #[arg(long)]
    pub log: PathBuf,
    /// The file whose appearance ends the loop.
    #[arg(long)]
    pub stop: PathBuf,
    /// The seed of the locker.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The loopback address every connection of this worker goes out from, so that the
    /// nemesis can cut this worker's links and no other's.
    #[arg(long)]
    pub local_address: Option<IpAddr>,
}

/// SplitMix64's finaliser of `seed` and `salt`: each worker's locker gets its own seed
/// from the run's (the same function as lock-bench's experiment uses for its processes).
fn mix(seed: u64, salt: u64) -> u64 {
    let mut z = seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The time between reading the registers and writing them: the window in which the
/// nemesis's pause lands.
const THINK: Duration = Duration::from_millis(20);
/// How long `lock()` may wait before the worker logs an error and asks again.
const LOCK_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a holder whose lease is gone keeps retrying its reads and its fenced write
/// (a process that does not check its lease would keep trying): longer than the nemesis
/// cuts a holder off, so that its late fenced write reaches the register after the heal.
const LATE_PERSISTENCE: Duration = Duration::from_secs(30);

/// Appends events to the worker's log, one flushed line each.
struct Log {
    file: std::fs::File,
}

impl Log {
    fn open(path: &Path) -> Result<Self, BoxError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|error| format!("cannot open {}: {error}", path.display()))?;
        Ok(Log { file })
    }

    fn write(&mut self, event: &Event) -> Result<(), BoxError> {
        let mut line = serde_json::to_string(event)?;
        line.push('\n');
        self.file.write_all(line.as_bytes())?;
        Ok(())
    }
}

/// The register statements.
struct Registers {
    session: Arc<Session>,
    read: PreparedStatement,
    write_plain: PreparedStatement,
    write_fenced: PreparedStatement,
}

impl Registers {
    async fn prepare(session: Arc<Session>, keyspace: &str) -> Result<Self, BoxError> {
        let table = format!("{keyspace}.{REGISTER_TABLE}");
        let prepare = async |text: String| -> Result<PreparedStatement, BoxError> {
            let mut prepared = session.prepare(text).await?;
            prepared.set_consistency(Consistency::Quorum);
            prepared.set_request_timeout(Some(Duration::from_secs(2)));
            Ok(prepared)
        };
        Ok(Registers {
            read: prepare(format!(
                "SELECT value, WRITETIME(value) FROM {table} WHERE name = ?"
            ))
            .await?,
            write_plain: prepare(format!("UPDATE {table} SET value = ? WHERE name = ?")).await?,
            write_fenced: prepare(format!(
                "UPDATE {table} USING TIMESTAMP ? SET value = ? WHERE name = ?"
            ))
            .await?,
            session,
        })
    }

    /// A register's value and write timestamp (0 and 0 if never written).
    async fn read(&self, name: &str) -> Result<(i64, i64), BoxError> {
        let rows = self
            .session
            .execute_unpaged(&self.read, (name,))
            .await?
            .into_rows_result()?;
        Ok(rows
            .maybe_first_row::<(Option<i64>, Option<i64>)>()?
            .map_or((0, 0), |(value, writetime)| {
                (value.unwrap_or(0), writetime.unwrap_or(0))
            }))
    }

    async fn write(&self, register: Register, value: i64, token: i64) -> Result<(), BoxError> {
        match register {
            Register::Plain => {
                self.session
                    .execute_unpaged(&self.write_plain, (value, "plain"))
                    .await?;
            }
            Register::Fenced => {
                self.session
                    .execute_unpaged(&self.write_fenced, (token, value, "fenced"))
                    .await?;
            }
        }
        Ok(())
    }
}

/// Runs the worker until the stop file appears (or the parent closes its standard input).
pub fn run(args: &WorkerArgs) -> Result<(), BoxError> {
    // The parent holds our standard input; when it ends, however it ends, we end too.
    std::thread::spawn(|| {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        std::process::exit(3);
    });
    let mut log = Log::open(&args.log)?;
    log.write(&Event::Start {
        at: monotonic_us(),
        pid: std::process::id(),
    })?;
    let runtime = crate::runtime()?;
    runtime.block_on(work(args, &mut log))
}

async fn work(args: &WorkerArgs, log: &mut Log) -> Result<(), BoxError> {
    let config = CassandraConfig {
        local_address: args.local_address,
        ..CassandraConfig::new(
            args.contact_points.iter().map(String::as_str),
            &args.keyspace,
        )
    };
    let storage = CassandraStorage::connect(config).await?;
    let registers = Registers::prepare(storage.session().clone(), &args.keyspace).await?;
    let lock = LockConfig::default();
    let request_timeout = lock.request_timeout;
    let locker = Locker::builder(storage)
        .config(lock)
        .seed(mix(args.seed, args.worker as u64 + 1))
        .build()?;
    let stop: PathBuf = args.stop.clone();
    while !stop.exists() {
        log.write(&Event::Asked { at: monotonic_us() })?;
        match locker
            .lock_timeout(args.lock_id.as_str(), LOCK_TIMEOUT)
            .await
        {
            Ok(Some(guard)) => hold(guard, &registers, request_timeout, log).await?,
            Ok(None) => log.write(&Event::Error {
                at: monotonic_us(),
                what: format!("lock: not acquired within {LOCK_TIMEOUT:?}"),
            })?,
            Err(error) => {
                log.write(&Event::Error {
                    at: monotonic_us(),
                    what: format!("lock: {error}"),
                })?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    log.write(&Event::Stop { at: monotonic_us() })?;
    Ok(())
}

/// The deadline of `guard`'s lease on the monotonic time line, unless it is lost already
/// (then `time_left` is zero and says nothing of when it was lost).
fn deadline(guard: &LockGuard) -> Option<u64> {
    let left = guard.time_left();
    (!left.is_zero()).then(|| monotonic_us() + u64::try_from(left.as_micros()).unwrap_or(u64::MAX))
}

/// One critical section.
async fn hold(
    guard: LockGuard,
    registers: &Registers,
    request_timeout: Duration,
    log: &mut Log,
) -> Result<(), BoxError> {
    let token = guard
        .fencing_token()
        .map_or(0, lock_core::FencingToken::get);
    let at = monotonic_us();
    log.write(&Event::Acquired {
        at,
        token,
        // lock-core grants the lock only with `request_timeout` of the lease left.
        deadline: deadline(&guard).unwrap_or(at),
    })?;
    let token = i64::try_from(token).map_err(|_| "the fencing token exceeds a CQL bigint")?;
    // When `lost()` fires, on the monotonic time line (0 until it does).
    let lost_at = Arc::new(AtomicU64::new(0));
    let watcher = tokio::spawn({
        let lost = guard.lost();
        let lost_at = Arc::clone(&lost_at);
        async move {
            lost.await;
            lost_at.store(monotonic_us(), Ordering::SeqCst);
        }
    });
    let started = std::time::Instant::now();
    // Read both registers, retrying while the lease lasts; a holder that finds its lease
    // gone (it was paused) still tries a few times, as a process that does not check its
    // lease would, so that its late fenced write shows what the register does with it.
    let mut read = None;
    let mut attempts = 0;
    while read.is_none()
        && (guard.time_left() > request_timeout
            || attempts < 3
            || started.elapsed() < LATE_PERSISTENCE)
    {
        attempts += 1;
        let outcome = async {
            let (plain, _) = registers.read("plain").await?;
            let (fenced, fenced_writetime) = registers.read("fenced").await?;
            Ok::<_, BoxError>((plain, fenced, fenced_writetime))
        }
        .await;
        match outcome {
            Ok(values) => read = Some(values),
            Err(error) => {
                log.write(&Event::Error {
                    at: monotonic_us(),
                    what: format!("read: {error}"),
                })?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    if let Some((plain, fenced, fenced_writetime)) = read {
        log.write(&Event::Read {
            at: monotonic_us(),
            plain,
            fenced,
            fenced_writetime,
            deadline: deadline(&guard),
        })?;
        tokio::time::sleep(THINK).await;
        // The plain register has no defence of its own: write only with the lease
        // certainly ours until the write has landed.
        if guard.time_left() > request_timeout {
            write(
                registers,
                Register::Plain,
                plain + 1,
                token,
                &guard,
                request_timeout,
                log,
            )
            .await?;
        } else {
            log.write(&Event::Skipped { at: monotonic_us() })?;
        }
        // The fenced register needs no such check: a write stamped with an old token
        // cannot overwrite a later holder's.
        write(
            registers,
            Register::Fenced,
            fenced + 1,
            token,
            &guard,
            request_timeout,
            log,
        )
        .await?;
        match registers.read("fenced").await {
            Ok((value, writetime)) => log.write(&Event::ReadBack {
                at: monotonic_us(),
                value,
                writetime,
            })?,
            Err(error) => log.write(&Event::Error {
                at: monotonic_us(),
                what: format!("read back: {error}"),
            })?,
        }
    }
    let end = monotonic_us();
    let lost = match guard.release().await {
        Ok(()) => false,
        Err(Error::LockLost { .. }) => true,
        Err(error) => {
            log.write(&Event::Error {
                at: monotonic_us(),
                what: format!("release: {error}"),
            })?;
            false
        }
    };
    watcher.abort();
    let told = lost_at.load(Ordering::SeqCst);
    if told != 0 {
        log.write(&Event::Lost { at: told })?;
    }
    log.write(&Event::Released { at: end, lost })?;
    Ok(())
}

/// Writes `value` to `register`, retrying a failed attempt (the same value, so a repeat is
/// harmless) while the lease has `request_timeout` left, or, for a fenced write, at least
/// five times and until [`LATE_PERSISTENCE`] has passed since it was first sent.
async fn write(
    registers: &Registers,
    register: Register,
    value: i64,
    token: i64,
    guard: &LockGuard,
    request_timeout: Duration,
    log: &mut Log,
) -> Result<(), BoxError> {
    let sent = monotonic_us();
    let first = std::time::Instant::now();
    let mut acked = None;
    let mut acked_attempt_sent = None;
    let mut failed_attempts = 0;
    for attempt in 0.. {
        let give_up = match register {
            Register::Plain => attempt >= 5 || guard.time_left() <= request_timeout,
            Register::Fenced => attempt >= 5 && first.elapsed() >= LATE_PERSISTENCE,
        };
        if attempt > 0 && give_up {
            break;
        }
        let attempt_sent = monotonic_us();
        match registers.write(register, value, token).await {
            Ok(()) => {
                acked = Some(monotonic_us());
                acked_attempt_sent = Some(attempt_sent);
                break;
            }
            Err(error) => {
                failed_attempts += 1;
                log.write(&Event::Error {
                    at: monotonic_us(),
                    what: format!("write {register:?}: {error}"),
                })?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    log.write(&Event::Wrote {
        register,
        value,
        sent,
        acked,
        failed_attempts,
        acked_attempt_sent,
    })
}
