//! Every public constructor and builder of lock-core, fed hostile values: each answers with
//! a typed error (or a documented success), never a panic.
#![allow(
    clippy::disallowed_methods,
    reason = "a test of the driver measures time on Tokio's clock"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use fair_lock::{Locker, TimeServiceConfig, VirtualClock};
use lock_core::storage::{Cell, CellDelete, CellWrite, RowKey, RowRead, Ttl};
use lock_core::{
    Algorithm, BaselineConfig, ColumnName, Error, Fraction, LockConfig, LockId, LockStorage,
    MainCellValue, OwnerId, PollConfig, QueueColumn, Timestamp,
};

/// The smallest storage that keeps cells: last write wins by timestamp, TTLs ignored (the
/// tests here never wait for one).
#[derive(Clone, Default)]
struct Store(Arc<Mutex<Cells>>);

/// Each cell's last write timestamp and value (`None`: a tombstone).
type Cells = BTreeMap<(RowKey, ColumnName), (Timestamp, Option<Vec<u8>>)>;

impl Store {
    fn put(&self, row: RowKey, column: ColumnName, timestamp: Timestamp, value: Option<Vec<u8>>) {
        let mut cells = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = cells
            .entry((row, column))
            .or_insert((Timestamp::ZERO, None));
        if timestamp >= entry.0 {
            *entry = (timestamp, value);
        }
    }
}

#[async_trait]
impl LockStorage for Store {
    async fn write_cell(&self, write: CellWrite) -> Result<(), Error> {
        self.put(write.row, write.column, write.timestamp, Some(write.value));
        Ok(())
    }

    async fn delete_cell(&self, delete: CellDelete) -> Result<(), Error> {
        self.put(delete.row, delete.column, delete.timestamp, None);
        Ok(())
    }

    async fn read_row(&self, read: RowRead) -> Result<Vec<Cell>, Error> {
        let cells = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(cells
            .iter()
            .filter(|((row, column), _)| {
                *row == read.row && read.start.as_ref().is_none_or(|start| column >= start)
            })
            .filter_map(|((_, column), (timestamp, value))| {
                Some(Cell {
                    column: column.clone(),
                    value: value.clone()?,
                    write_timestamp: *timestamp,
                })
            })
            .take(read.limit.get() as usize)
            .collect())
    }
}

const EPOCH: Timestamp = Timestamp::from_micros(1_700_000_000_000_000);

fn locker(store: &Store, config: LockConfig) -> Result<Locker<Store>, Error> {
    locker_seeded(store, config, u64::MAX)
}

/// Lockers sharing a storage need distinct seeds (documented on `LockerBuilder::seed`).
fn locker_seeded(store: &Store, config: LockConfig, seed: u64) -> Result<Locker<Store>, Error> {
    Locker::builder(store.clone())
        .config(config)
        .clock(Arc::new(VirtualClock::starting_at(EPOCH)))
        .replay_owner_ids_unsafe(seed)
        .build()
}

fn is_config_error(result: Result<impl std::fmt::Debug, Error>) -> bool {
    matches!(result, Err(Error::InvalidConfig { .. }))
}

#[test]
fn lock_ids() {
    let hostile = [
        String::new(),
        "a".repeat(LockId::MAX_LEN + 1),
        "é".repeat(LockId::MAX_LEN),
        "x".repeat(1 << 20),
        "\0".into(),
        "a\nb".into(),
        "\u{7f}".into(),
        "\u{202E}gnp.exe".into(),
        "\u{200B}".into(),
        "\u{FEFF}account".into(),
        "\u{2066}a\u{2069}".into(),
        "\u{E0001}".into(),
    ];
    for value in hostile {
        match LockId::new(&value) {
            Err(error @ Error::InvalidLockId { .. }) => {
                let message = error.to_string();
                assert!(message.len() < 1000, "the message stays short: {message}");
                assert!(message.contains("use 1 to 256 bytes"), "{message}");
            }
            other => panic!("{value:?}: {other:?}"),
        }
        assert!(value.parse::<LockId>().is_err());
        assert!(LockId::try_from(value.as_str()).is_err());
    }
    // Documented successes: any other Unicode, up to 256 bytes.
    for value in [
        "a".repeat(LockId::MAX_LEN),
        "日本".into(),
        "🔒".into(),
        " ".into(),
    ] {
        assert!(LockId::new(&value).is_ok(), "{value:?}");
    }
}

#[test]
fn owner_ids() {
    let hostile = [
        String::new(),
        "a".repeat(OwnerId::MAX_LEN + 1),
        "with space".into(),
        "ü".into(),
        "\0".into(),
        "a/b".into(),
        "\u{202E}".into(),
    ];
    for value in &hostile {
        assert!(
            matches!(OwnerId::new(value), Err(Error::InvalidOwnerId { .. })),
            "{value:?}"
        );
        assert!(
            OwnerId::from_random_bytes(Some(value), [0; 16]).is_err() || value.is_empty(),
            "prefix {value:?}"
        );
    }
    assert!(OwnerId::from_random_bytes(Some(&"a".repeat(1000)), [0xff; 16]).is_err());
    assert!(OwnerId::from_random_bytes(None, [0xff; 16]).is_ok());
    assert!(OwnerId::new("a".repeat(OwnerId::MAX_LEN)).is_ok());
}

#[test]
fn queue_columns_and_ttls() {
    for garbage in [
        "",
        "x",
        "00000000000000000000",
        "99999999999999999999owner",
        "-1a",
    ] {
        assert!(QueueColumn::decode(garbage).is_err(), "{garbage:?}");
        assert!(QueueColumn::decode_timestamp(garbage).is_err() || garbage.len() >= 20);
    }
    assert!(Ttl::from_secs(0).is_err());
    assert!(Ttl::from_secs(u32::MAX).is_err());
    assert!(Ttl::from_duration(Duration::MAX).is_err());
    assert!(Ttl::from_duration(Duration::ZERO).is_err());
    assert!(Ttl::from_duration(Duration::from_nanos(1)).is_err());
}

#[test]
fn main_cell_values() {
    for garbage in [
        &b""[..],
        b"^",
        b"^^00000000000000000042a",
        b"^owner",
        b"^00000000000000000042",
        b"\xff\xfe",
        b"with space",
        b"^99999999999999999999a",
    ] {
        assert!(
            matches!(
                MainCellValue::decode(garbage),
                Err(Error::MalformedColumn { .. })
            ),
            "{garbage:?}"
        );
    }
    let head = MainCellValue::decode(b"^00000000000000000042a").unwrap();
    assert_eq!(
        head.head().map(|column| column.timestamp.as_micros()),
        Some(42)
    );
    assert!(
        MainCellValue::decode(b"00000000000000000042a")
            .unwrap()
            .head()
            .is_none()
    );
    assert!(MainCellValue::decode(b"owner-1").unwrap().head().is_none());
}

#[test]
fn every_config_field_at_its_extremes_is_refused_or_accepted_without_panicking() {
    let extremes = [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::MAX,
        Duration::new(u64::MAX, 0),
    ];
    let base = LockConfig::default();
    let mut variants: Vec<LockConfig> = Vec::new();
    for value in extremes {
        variants.extend([
            LockConfig {
                lease_ttl: value,
                ..base.clone()
            },
            LockConfig {
                max_clock_skew: value,
                ..base.clone()
            },
            LockConfig {
                request_timeout: value,
                ..base.clone()
            },
            LockConfig {
                retry_backoff: value,
                ..base.clone()
            },
            LockConfig {
                poll: PollConfig {
                    min_interval: value,
                    ..PollConfig::default()
                },
                ..base.clone()
            },
            LockConfig {
                poll: PollConfig {
                    max_interval: value,
                    ..PollConfig::default()
                },
                ..base.clone()
            },
            LockConfig {
                poll: PollConfig {
                    cold_lookback: value,
                    ..PollConfig::default()
                },
                ..base.clone()
            },
            LockConfig {
                baseline: BaselineConfig {
                    owner_backoff_max: value,
                    ..BaselineConfig::default()
                },
                ..base.clone()
            },
            LockConfig {
                baseline: BaselineConfig {
                    concurrent_backoff_step: value,
                    ..BaselineConfig::default()
                },
                ..base.clone()
            },
        ]);
    }
    for (numerator, denominator) in [(0, 0), (1, 0), (0, 1), (u32::MAX, u32::MAX), (1, u32::MAX)] {
        variants.push(LockConfig {
            renew_fraction: Fraction::new(numerator, denominator),
            ..base.clone()
        });
    }
    for count in [0, u32::MAX] {
        variants.extend([
            LockConfig {
                storage_retries: count,
                ..base.clone()
            },
            LockConfig {
                soft_attempts: count,
                ..base.clone()
            },
            LockConfig {
                poll: PollConfig {
                    queue_read_limit: count,
                    ..PollConfig::default()
                },
                ..base.clone()
            },
            LockConfig {
                poll: PollConfig {
                    jitter_percent: count,
                    ..PollConfig::default()
                },
                ..base.clone()
            },
        ]);
    }
    for prefix in ["", "with space", "\u{202E}", &"a".repeat(51), "\0"] {
        variants.push(LockConfig {
            owner_prefix: Some(prefix.to_owned()),
            ..base.clone()
        });
    }
    let mut refused = 0;
    for config in variants {
        match config.clone().validate() {
            Ok(valid) => {
                // Documented successes (zero retries, zero jitter, a huge cold lookback
                // within its day, ...) still derive sane timings.
                assert!(valid.renew_every() < valid.effective_lease(), "{config:?}");
            }
            Err(Error::InvalidConfig { field, reason }) => {
                refused += 1;
                assert!(!field.is_empty() && !reason.is_empty());
            }
            Err(other) => panic!("{config:?}: {other:?}"),
        }
    }
    assert!(refused > 40, "only {refused} refused");
}

#[test]
fn the_builder_refuses_an_invalid_configuration() {
    let store = Store::default();
    assert!(is_config_error(locker(
        &store,
        LockConfig {
            max_clock_skew: Duration::MAX,
            ..LockConfig::default()
        }
    )));
    assert!(is_config_error(Locker::new(
        store.clone(),
        LockConfig {
            renew_fraction: Fraction::new(1, u32::MAX),
            ..LockConfig::default()
        }
    )));
    assert!(
        locker(
            &store,
            LockConfig {
                algorithm: Algorithm::Combined,
                ..LockConfig::default()
            }
        )
        .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn locker_methods_with_hostile_arguments() {
    let store = Store::default();
    let a = locker(&store, LockConfig::default()).unwrap();
    let b = locker_seeded(&store, LockConfig::default(), 0).unwrap();
    // Bad ids: typed errors from every entry point, before any request.
    assert!(matches!(a.lock("").await, Err(Error::InvalidLockId { .. })));
    assert!(matches!(
        a.try_lock("\u{202E}").await,
        Err(Error::InvalidLockId { .. })
    ));
    assert!(matches!(
        a.lock_timeout("\0", Duration::MAX).await,
        Err(Error::InvalidLockId { .. })
    ));
    assert!(matches!(
        a.inspect("x".repeat(300), 0).await,
        Err(Error::InvalidLockId { .. })
    ));
    let nobody = OwnerId::new("nobody").unwrap();
    assert!(matches!(
        a.force_release("", &nobody).await,
        Err(Error::InvalidLockId { .. })
    ));
    // lock_timeout: Duration::MAX on a free lock takes it (documented: waits as long as
    // needed); Duration::ZERO on a held lock gives up at once with None.
    let held = a
        .lock_timeout("account:42", Duration::MAX)
        .await
        .unwrap()
        .expect("a free lock is taken");
    let started = tokio::time::Instant::now();
    assert!(
        b.lock_timeout("account:42", Duration::ZERO)
            .await
            .unwrap()
            .is_none()
    );
    assert!(started.elapsed() < Duration::from_secs(1));
    // inspect: a limit of 0 reads at least the minimum slice; u32::MAX reads what is there.
    for limit in [0, 1, u32::MAX] {
        let report = a.inspect("account:42", limit).await.unwrap();
        let text = format!("{report:?}");
        assert!(
            text.contains(held.owner_id().as_str()),
            "limit {limit}: {text}"
        );
    }
    // force_release of an owner with no cell: documented Ok(false).
    assert!(!a.force_release("account:42", &nobody).await.unwrap());
    held.release().await.unwrap();
    assert!(b.try_lock("account:42").await.unwrap().is_some());
}

#[tokio::test(start_paused = true)]
async fn clocks_at_the_ends_of_time() {
    // A clock far ahead or far behind: acquisitions still end in a lock or a typed error.
    for (offset, drift) in [(i64::MAX, 0), (i64::MIN, 0), (0, i64::MAX), (0, i64::MIN)] {
        let store = Store::default();
        let locker = Locker::builder(store)
            .clock(Arc::new(
                VirtualClock::starting_at(EPOCH).skewed(offset, drift),
            ))
            .replay_owner_ids_unsafe(0)
            .build()
            .unwrap();
        tokio::time::advance(Duration::from_millis(1)).await;
        if let Ok(Some(guard)) = locker.try_lock("account:42").await {
            let _ = guard.release().await;
        }
    }
}

#[tokio::test(start_paused = true)]
async fn time_service_configs() {
    let domain = LockId::new("time").unwrap();
    for (update, refresh, timeout) in [
        (
            Duration::ZERO,
            Duration::from_millis(100),
            Duration::from_secs(1),
        ),
        (
            Duration::from_nanos(1),
            Duration::from_millis(100),
            Duration::from_secs(1),
        ),
        (
            Duration::MAX,
            Duration::from_millis(100),
            Duration::from_secs(1),
        ),
        (
            Duration::from_millis(500),
            Duration::ZERO,
            Duration::from_secs(1),
        ),
        (
            Duration::from_millis(500),
            Duration::MAX,
            Duration::from_secs(1),
        ),
        (
            Duration::from_millis(500),
            Duration::from_millis(100),
            Duration::ZERO,
        ),
        (
            Duration::from_millis(500),
            Duration::from_millis(100),
            Duration::MAX,
        ),
    ] {
        let config = TimeServiceConfig {
            update_every: update,
            refresh_every: refresh,
            request_timeout: timeout,
            ..TimeServiceConfig::new(domain.clone())
        };
        assert!(is_config_error(config.validate()), "{config:?}");
        let started = fair_lock::TimeService::start(
            Arc::new(Store::default()),
            VirtualClock::starting_at(EPOCH),
            config,
        )
        .await;
        assert!(is_config_error(started.map(drop)));
    }
}

/// The baseline takes no fencing tokens: asking for them is refused, not silently ignored.
#[test]
fn the_baseline_with_fencing_is_refused() {
    let refused = LockConfig {
        algorithm: Algorithm::Baseline,
        fencing: true,
        ..LockConfig::default()
    }
    .validate();
    match refused {
        Err(Error::InvalidConfig { field, .. }) => assert_eq!(field, "fencing"),
        other => panic!("expected InvalidConfig for fencing, got {other:?}"),
    }
    let accepted = LockConfig {
        algorithm: Algorithm::Baseline,
        fencing: false,
        ..LockConfig::default()
    }
    .validate();
    assert!(accepted.is_ok(), "{accepted:?}");
}
