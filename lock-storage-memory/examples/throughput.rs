//! Simulator throughput in real time: one client doing QUORUM write + read pairs against a
//! zero-latency cluster (the default one), as fast as it can on a current-thread runtime;
//! then uncontended acquire + release cycles through lock-core's locker, with fencing tokens
//! (the default) and without, each measurement on a new cluster: on a fresh lock id each
//! (the simulator's and the driver's own cost: no dead cells in reach), on 1000 lock ids
//! taken in turn, and back to back on one lock id. Each cycle leaves a tombstone, and a
//! queue read walks those of the last `2 × max_clock_skew + request_timeout`, as it would in
//! Cassandra: taken in turn, a lock is back within that margin after ~1000 cycles, so the
//! dead cells per read grow with the rate and the length of the run.
//!
//! ```text
//! cargo run --release -p lock-storage-memory --example throughput [pairs]
//! ```

use std::error::Error;
use std::time::Instant;

use fair_lock::Locker;
use lock_core::storage::{CellDelete, CellWrite, RowKey, RowKind, RowRead};
use lock_core::{ColumnName, LockConfig, LockId, LockStorage, Timestamp};
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

        let counters = cluster.counters();
        println!(
            "requests served by that cluster: {} (succeeded {}, dead cells scanned {})",
            counters.requests.total(),
            counters.succeeded,
            counters.dead_cells_scanned
        );

        let cycles = pairs / 10;
        for fencing in [true, false] {
            let config = LockConfig {
                fencing,
                ..LockConfig::default()
            };
            let fresh_ids = (0..cycles).map(|index| LockId::new(format!("fresh-{index}")));
            let label =
                format!("acquire + release cycles, a fresh lock id each (fencing {fencing})");
            run_cycles(&config, fresh_ids.collect::<Result<Vec<_>, _>>()?, &label).await?;
            let in_turn = (0..1000).map(|index| LockId::new(format!("lock-{index}")));
            let in_turn = in_turn.collect::<Result<Vec<_>, _>>()?;
            let label =
                format!("acquire + release cycles, 1000 lock ids in turn (fencing {fencing})");
            let lock_ids = in_turn
                .iter()
                .cycle()
                .take(cycles as usize)
                .cloned()
                .collect();
            run_cycles(&config, lock_ids, &label).await?;
        }
        let one_lock = vec![LockId::new("one-lock")?; (pairs / 100).max(1) as usize];
        let label = "acquire + release cycles on one lock id (fencing true)";
        run_cycles(&LockConfig::default(), one_lock, label).await?;

        Ok::<(), Box<dyn Error>>(())
    })
}

/// Takes and releases each lock id in turn, through one locker on a new default cluster
/// (so that no measurement pays for the rows an earlier one left), and reports the rate, the
/// requests and the dead cells scanned per cycle.
async fn run_cycles(
    config: &LockConfig,
    lock_ids: Vec<LockId>,
    label: &str,
) -> Result<(), Box<dyn Error>> {
    let cluster = MemoryCluster::default();
    let locker = Locker::new(cluster.client(), config.clone())?;
    let started = Instant::now();
    for lock_id in &lock_ids {
        locker.lock(lock_id).await?.release().await?;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cycles = lock_ids.len().max(1) as u64;
    let counters = cluster.counters();
    report(label, cycles, counters.requests.total() / cycles, elapsed);
    println!(
        "  dead cells scanned per cycle: {}",
        counters.dead_cells_scanned / cycles
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
