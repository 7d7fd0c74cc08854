//! Microbenchmarks of lock-core's sans-IO steps, driven directly with canned responses (no
//! storage, no runtime): what one state-machine step costs on the CPU.
//!
//! ```text
//! cargo bench -p lock-bench --bench machines
//! ```
//!
//! Each benchmark counts the steps it drives (responses and timeouts handed to a machine)
//! as items, so divan prints the time per step beside the time per operation.
#![allow(clippy::unwrap_used)]

use divan::Bencher;
use divan::counter::ItemsCount;
use lock_core::machine::{
    Acquire, AcquireOutcome, BaselineAcquire, Holding, Lease, LeaseStatus, Machine, Mode, Release,
};
use lock_core::storage::{Cell, RowKind, StorageRequest, StorageResponse};
use lock_core::{
    ColumnName, LockConfig, LockId, MonotonicTime, Now, OwnerId, QueueColumn, Timestamp,
    ValidConfig,
};

fn main() {
    divan::main();
}

fn config(fencing: bool) -> ValidConfig {
    LockConfig {
        fencing,
        ..LockConfig::default()
    }
    .validate()
    .unwrap()
}

fn now() -> Now {
    Now::new(
        MonotonicTime::from_micros(1_000),
        Timestamp::from_micros(1_735_689_600_000_000),
    )
}

fn owner() -> OwnerId {
    OwnerId::new("bench-host:0123456789abcdef0123456789abcdef").unwrap()
}

/// Answers every request of an uncontended acquisition: writes and deletes succeed; a
/// queue read finds `queue` first; a main or shadow read finds `main` (or nothing); the
/// fence is empty. Returns how many responses it handed over.
fn drive<M: Machine<Outcome = AcquireOutcome>>(
    machine: &mut M,
    queue: &ColumnName,
    main: Option<&ColumnName>,
    shadow: &ColumnName,
) -> (AcquireOutcome, u32) {
    let now = now();
    let cell = |column: &ColumnName| Cell {
        column: column.clone(),
        value: Vec::new(),
        write_timestamp: now.timestamp,
    };
    let mut steps = 0;
    loop {
        while let Some(outgoing) = machine.poll_request() {
            let response = match &outgoing.request {
                StorageRequest::Write(_) | StorageRequest::Delete(_) => StorageResponse::Done,
                StorageRequest::Read(read) => StorageResponse::Cells(match read.row.kind {
                    RowKind::Queue => vec![cell(queue)],
                    RowKind::Main => main.map(cell).into_iter().collect(),
                    RowKind::Shadow => vec![cell(shadow)],
                    RowKind::Fence
                    | RowKind::GlobalTime
                    | RowKind::WorkItems
                    | RowKind::WorkDone
                    | RowKind::WorkFloor => Vec::new(),
                }),
            };
            steps += 1;
            machine.handle_response(now, outgoing.id, Ok(response));
        }
        if let Some(outcome) = machine.poll_outcome() {
            return (outcome, steps);
        }
        machine.handle_timeout(now);
    }
}

fn holding(config: &ValidConfig) -> Holding {
    let lock_id = LockId::new("bench").unwrap();
    let mut acquire = Acquire::new(
        now(),
        config.clone(),
        Mode::Mandatory,
        lock_id,
        owner(),
        7,
        None,
    );
    let queue = acquire.queue_column().encode();
    let main = ColumnName::from(&owner());
    match drive(&mut acquire, &queue, Some(&main), &main).0 {
        AcquireOutcome::Acquired(holding) => *holding,
        other => panic!("not acquired: {other:?}"),
    }
}

/// The queue algorithm, uncontended, from `new` to `Acquired`: write the queue cell, read
/// the queue, write the main cell, read the main row (and, with fencing, read the fence and
/// write the token).
#[divan::bench(args = [false, true])]
fn acquire_queue_uncontended(bencher: Bencher, fencing: bool) {
    let config = config(fencing);
    let lock_id = LockId::new("bench").unwrap();
    let main = ColumnName::from(&owner());
    let steps = if fencing { 6u32 } else { 4 };
    bencher.counter(ItemsCount::new(steps)).bench(|| {
        let mut acquire = Acquire::new(
            now(),
            config.clone(),
            Mode::Mandatory,
            lock_id.clone(),
            owner(),
            7,
            None,
        );
        let queue = acquire.queue_column().encode();
        let (outcome, driven) = drive(&mut acquire, &queue, Some(&main), &main);
        debug_assert_eq!(driven, steps);
        outcome
    });
}

/// The baseline algorithm, uncontended: read main, write shadow, read shadow, re-read main,
/// write main, delete shadow.
#[divan::bench]
fn acquire_baseline_uncontended(bencher: Bencher) {
    let config = config(false);
    let lock_id = LockId::new("bench").unwrap();
    let shadow = ColumnName::from(&owner());
    let queue = ColumnName::new("unused");
    bencher.counter(ItemsCount::new(6u32)).bench(|| {
        let mut acquire = BaselineAcquire::new(
            now(),
            config.clone(),
            Mode::Mandatory,
            lock_id.clone(),
            owner(),
            7,
            None,
        );
        drive(&mut acquire, &queue, None, &shadow)
    });
}

/// One lease renewal round: the timeout that starts it, the acknowledgements of the main
/// and queue rewrites, and the read-back of the main cell.
#[divan::bench]
fn lease_renewal_round(bencher: Bencher) {
    let config = config(false);
    let holding = holding(&config);
    let main = holding.main.column.clone();
    let renew_at = holding.main.written_at + config.renew_every();
    let due = Now::new(renew_at, now().timestamp + config.renew_every());
    bencher
        .counter(ItemsCount::new(4u32))
        .with_inputs(|| Lease::new(now(), config.clone(), holding.clone()))
        .bench_local_values(|mut lease| {
            lease.handle_timeout(due);
            let mut pending: Vec<_> = std::iter::from_fn(|| lease.poll_request()).collect();
            while let Some(outgoing) = pending.pop() {
                let response = match outgoing.request {
                    StorageRequest::Read(_) => StorageResponse::Cells(vec![Cell {
                        column: main.clone(),
                        value: Vec::new(),
                        write_timestamp: due.timestamp,
                    }]),
                    _ => StorageResponse::Done,
                };
                lease.handle_response(due, outgoing.id, Ok(response));
                pending.extend(std::iter::from_fn(|| lease.poll_request()));
            }
            debug_assert_eq!(lease.status(), LeaseStatus::Held);
            lease
        });
}

/// A release of the main and queue cells: two deletes and their acknowledgements.
#[divan::bench]
fn release_two_cells(bencher: Bencher) {
    let config = config(false);
    let holding = holding(&config);
    bencher.counter(ItemsCount::new(2u32)).bench(|| {
        let mut release = Release::new(
            now(),
            config.clone(),
            holding.cells(),
            holding.last_timestamp,
        );
        let requests: Vec<_> = std::iter::from_fn(|| release.poll_request()).collect();
        for outgoing in requests {
            release.handle_response(now(), outgoing.id, Ok(StorageResponse::Done));
        }
        release.poll_outcome()
    });
}

/// Encoding a queue column name (docs/algorithm.md, section "Queue column names").
#[divan::bench]
fn queue_column_encode(bencher: Bencher) {
    let column = QueueColumn::new(now().timestamp, owner());
    bencher.bench(|| divan::black_box(&column).encode());
}

/// Decoding a queue column name read from storage.
#[divan::bench]
fn queue_column_decode(bencher: Bencher) {
    let encoded = QueueColumn::new(now().timestamp, owner()).encode();
    bencher.bench(|| QueueColumn::decode(divan::black_box(encoded.as_str())));
}
