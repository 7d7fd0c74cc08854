//! Simulator throughput in real time: one client doing QUORUM write + read pairs against a
//! zero-latency cluster (the default one), as fast as it can on a current-thread runtime;
//! then uncontended acquire + release cycles through lock-core's locker, with and without
//! fencing tokens: on a fresh lock id each (the simulator's and the driver's own cost: no
//! dead cells in reach), on 1000 lock ids taken in turn, and back to back on one lock id.
//! Each cycle leaves a tombstone, and a queue read walks those of the last
//! `2 × max_clock_skew + request_timeout`, as it would in Cassandra: taken in turn, a lock
//! is back within that margin after ~1000 cycles, so the dead cells per read grow with the
//! rate and the length of the run.
//!
//! ```text
//! cargo run --release -p lock-storage-memory --example throughput [pairs]
//! ```

use std::error::Error;
use std::time::Instant;

use lock_core::storage::{CellDelete, CellWrite, RowKey, RowKind, RowRead};
use lock_core::{ColumnName, LockConfig, LockId, LockStorage, RemoteLocker, Timestamp};
use lock_storage_memory::MemoryCluster;

fn main() -> Result<(), Box<dyn Error>> {
    let pairs: u64 = match std::env::args().nth(1) {
        Some(argument) => argument.parse()?,
        None => 1_000_000,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    runtime.block_on(async {
        let cluster = MemoryCluster::default();
        let storage = cluster.client();
        let row = RowKey::new(RowKind::Main, LockId::new("benchmark")?);
        let column = ColumnName::new("owner-0000000000000001");
        let value = column.as_str().as_bytes().to_vec();

        let started = Instant::now();
        for round in 1..=pairs {
            storage
                .write_cell(CellWrite {
                    row: row.clone(),
                    column: column.clone(),
                    value: value.clone(),
                    timestamp: Timestamp::from_micros(round),
                    ttl: None,
                })
                .await?;
            let cells = storage.read_row(RowRead::first(row.clone(), 2)).await?;
            if cells.len() != 1 {
                return Err(format!("round {round}: expected one cell, read {cells:?}").into());
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        report("QUORUM write + read pairs", pairs, 2, elapsed);

        let started = Instant::now();
        for round in 1..=pairs {
            let timestamp = Timestamp::from_micros(2 * (pairs + round));
            storage
                .write_cell(CellWrite {
                    row: row.clone(),
                    column: column.clone(),
                    value: value.clone(),
                    timestamp,
                    ttl: lock_core::storage::Ttl::from_secs(30).ok(),
                })
                .await?;
            storage.read_row(RowRead::first(row.clone(), 2)).await?;
            storage
                .delete_cell(CellDelete {
                    row: row.clone(),
                    column: column.clone(),
                    timestamp: timestamp.next(),
                })
                .await?;
        }
        let elapsed = started.elapsed().as_secs_f64();
        report("TTL write + read + delete triples", pairs, 3, elapsed);

        let cycles = pairs / 10;
        let fresh_ids = (0..cycles)
            .map(|index| LockId::new(format!("fresh-{index}")))
            .collect::<Result<Vec<_>, _>>()?;
        for fencing in [false, true] {
            let config = LockConfig {
                fencing,
                ..LockConfig::default()
            };
            let in_turn = (0..1000)
                .map(|index| LockId::new(format!("lock-{fencing}-{index}")))
                .collect::<Result<Vec<_>, _>>()?;
            let locker = RemoteLocker::new(cluster.client(), config.clone())?;
            let label = format!("acquire + release cycles, 1000 lock ids in turn (fencing {fencing})");
            run_cycles(&cluster, &locker, in_turn.iter().cycle().take(cycles as usize), &label).await?;
            // A fresh locker: it has no queue floor for these ids, and reads from `cold_lookback`.
            let locker = RemoteLocker::new(cluster.client(), config)?;
            let label = format!("acquire + release cycles, a fresh lock id each (fencing {fencing})");
            let ids = fresh_ids.iter().map(|id| LockId::new(format!("{id}-{fencing}")));
            let ids = ids.collect::<Result<Vec<_>, _>>()?;
            run_cycles(&cluster, &locker, ids.iter(), &label).await?;
        }

        let locker = RemoteLocker::new(cluster.client(), LockConfig::default())?;
        let cycles = (pairs / 100).max(1);
        let dead_before = cluster.counters().dead_cells_scanned;
        let started = Instant::now();
        for _ in 0..cycles {
            locker.lock("one-lock").await?.release().await?;
        }
        let elapsed = started.elapsed().as_secs_f64();
        report(
            "acquire + release cycles on one lock id",
            cycles,
            8,
            elapsed,
        );
        println!(
            "  dead cells scanned per cycle: {} (the tombstones of the cycles within the read margin)",
            (cluster.counters().dead_cells_scanned - dead_before) / cycles
        );

        let counters = cluster.counters();
        println!(
            "requests served: {} (succeeded {}, dead cells scanned {})",
            counters.requests.total(),
            counters.succeeded,
            counters.dead_cells_scanned
        );
        Ok::<(), Box<dyn Error>>(())
    })
}

/// Takes and releases each lock id in turn, and reports the rate, the requests and the dead
/// cells scanned per cycle.
async fn run_cycles<'a>(
    cluster: &MemoryCluster,
    locker: &RemoteLocker<lock_storage_memory::MemoryClient>,
    lock_ids: impl Iterator<Item = &'a LockId>,
    label: &str,
) -> Result<(), Box<dyn Error>> {
    let before = cluster.counters();
    let started = Instant::now();
    let mut cycles = 0_u64;
    for lock_id in lock_ids {
        locker.lock(lock_id).await?.release().await?;
        cycles += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = cluster.counters();
    let requests = after.requests.total() - before.requests.total();
    report(label, cycles, requests / cycles.max(1), elapsed);
    println!(
        "  dead cells scanned per cycle: {}",
        (after.dead_cells_scanned - before.dead_cells_scanned) / cycles.max(1)
    );
    Ok(())
}

fn report(what: &str, rounds: u64, requests_per_round: u64, seconds: f64) {
    let rounds_per_second = rounds as f64 / seconds;
    println!(
        "{what}: {rounds} in {seconds:.3} s = {rounds_per_second:.0}/s, {:.0} requests/s",
        rounds_per_second * requests_per_round as f64
    );
}
