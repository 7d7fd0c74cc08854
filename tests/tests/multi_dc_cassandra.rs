//! The lock across two data centres of a real local Apache Cassandra 5.0, started by
//! `lock-storage-cassandra`'s harness for this file alone: nodes 1 and 2 in `dc1`, node 3
//! in `dc2` (`GossipingPropertyFileSnitch`), the keyspace `NetworkTopologyStrategy` with
//! two replicas in `dc1` and one in `dc2`. Without `java` or `mvn` the test says it was
//! skipped; under `CI=true` that is a failure.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use fair_lock::Locker;
use lock_local_cluster::{
    LocalCluster, LocalClusterConfig, TWO_DATA_CENTERS, check_on_own_cluster,
};
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, LockConsistency, Replication, SchemaConfig,
};
use lock_tests::backend::CassandraBackend;
use lock_tests::history::{Recorder, overlaps, untruthful_grants};
use tokio::time::{Instant, sleep};

fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// How many acquisitions each data centre's lockers made, or why the run failed.
type Outcome = Result<BTreeMap<&'static str, usize>, String>;

/// A backend configuration for `keyspace` on `cluster`, its requests sent to `local_dc`.
fn config_in(
    cluster: &LocalCluster,
    keyspace: &str,
    local_dc: &str,
    consistency: LockConsistency,
) -> CassandraConfig {
    let data_centers = TWO_DATA_CENTERS
        .iter()
        .map(|(name, nodes)| ((*name).to_owned(), u32::try_from(*nodes).unwrap_or(1)))
        .collect();
    CassandraConfig {
        consistency,
        local_dc: Some(local_dc.to_owned()),
        request_timeout: CassandraBackend::lock_config().request_timeout,
        schema: Some(SchemaConfig::new(Replication::NetworkTopology {
            data_centers,
        })),
        ..CassandraConfig::new(cluster.contact_points(), keyspace)
    }
}

/// How long one [`contend`] may take. Its lockers make a fixed number of acquisitions, so
/// on a loaded machine it only takes longer (17 acquisitions took 8 s with the load average
/// at 12 on two cores); the bound turns a lock that starves one data centre into a failure
/// that names the counts, instead of a hang.
const CONTEND_LIMIT: Duration = Duration::from_secs(300);

/// Two lockers per data centre in `homes` contend for one lock, `rounds` acquisitions
/// each, each on a session whose requests go to its own data centre, holding 20 ms at a
/// time.
async fn contend(
    cluster: &LocalCluster,
    keyspace: &str,
    consistency: LockConsistency,
    homes: &[&'static str],
    rounds: usize,
) -> Outcome {
    let recorder = Recorder::new();
    let lock_id = format!("two-data-centres-{consistency:?}");
    let mut contenders = Vec::new();
    let homes_of: Vec<&'static str> = homes.iter().flat_map(|home| [*home, *home]).collect();
    for (index, home) in homes_of.iter().copied().enumerate() {
        let config = config_in(cluster, keyspace, home, consistency);
        config
            .check_lock_config(&CassandraBackend::lock_config())
            .map_err(|error| error.to_string())?;
        let storage = CassandraStorage::connect(config)
            .await
            .map_err(|error| format!("connecting in {home}: {error}"))?;
        let locker: Locker<CassandraStorage> = Locker::builder(storage)
            .config(CassandraBackend::lock_config())
            .seed(700 + index as u64)
            .build()
            .map_err(|error| error.to_string())?;
        let recorder = recorder.clone();
        let lock_id = lock_id.clone();
        contenders.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for round in 0..rounds {
                let id = recorder.request(index, round, true);
                recorder.attempt(id);
                let guard = match locker.lock(&lock_id).await {
                    Ok(guard) => Arc::new(guard),
                    Err(error) => {
                        failures.push(error.to_string());
                        continue;
                    }
                };
                recorder.granted(id, &guard);
                tokio::select! {
                    () = guard.lost() => recorder.lost(id),
                    () = sleep(Duration::from_millis(20)) => {}
                }
                recorder.left(id);
                let guard = Arc::try_unwrap(guard).expect("the recorder let the guard go");
                if let Err(error) = guard.release().await {
                    failures.push(format!("release: {error}"));
                }
            }
            failures
        }));
    }
    let per_home = |recorder: &Recorder| {
        let mut per_home = BTreeMap::new();
        for acquisition in recorder
            .acquisitions()
            .iter()
            .filter(|acquisition| acquisition.granted.is_some())
        {
            *per_home.entry(homes_of[acquisition.contender]).or_insert(0) += 1;
        }
        per_home
    };
    let deadline = Instant::now() + CONTEND_LIMIT;
    let mut failures = Vec::new();
    for contender in contenders {
        let abort = contender.abort_handle();
        match tokio::time::timeout_at(deadline, contender).await {
            Ok(joined) => failures.extend(joined.map_err(|error| error.to_string())?),
            Err(_elapsed) => {
                abort.abort();
                return Err(format!(
                    "the lockers did not make {rounds} acquisitions each within \
                     {CONTEND_LIMIT:?}: acquisitions per data centre {:?}",
                    per_home(&recorder)
                ));
            }
        }
    }
    let acquisitions = recorder.acquisitions();
    let overlapping = overlaps(&acquisitions);
    if !overlapping.is_empty() {
        return Err(format!("two holders overlapped: {overlapping:?}"));
    }
    let untruthful = untruthful_grants(&acquisitions);
    if !untruthful.is_empty() {
        return Err(format!("a grant beside a holder that held: {untruthful:?}"));
    }
    if acquisitions
        .iter()
        .any(|acquisition| acquisition.lost_at.is_some())
    {
        return Err("a lease was reported lost with every node up".into());
    }
    if !failures.is_empty() {
        return Err(format!("lock() or release() failed: {failures:?}"));
    }
    Ok(per_home(&recorder))
}

/// With `dc2`'s only node frozen, a locker in `dc1` cannot take the lock: its
/// `EACH_QUORUM` writes need a majority in `dc2` too (with `LOCAL_QUORUM` it would take
/// it, and a locker in `dc2` that read a replica without its cells could too). Thawed,
/// the same locker takes it.
async fn each_quorum_needs_both_data_centres(
    cluster: &LocalCluster,
    keyspace: &str,
) -> Result<(), String> {
    let config = config_in(cluster, keyspace, "dc1", LockConsistency::EachQuorum);
    let storage = CassandraStorage::connect(config)
        .await
        .map_err(|error| format!("connecting in dc1: {error}"))?;
    let locker = Locker::builder(storage)
        .config(CassandraBackend::lock_config())
        .seed(800)
        .build()
        .map_err(|error| error.to_string())?;
    let lock_id = "two-data-centres-cut-off";
    tokio::task::block_in_place(|| cluster.freeze(2)).map_err(|error| error.to_string())?;
    let cut_off = tokio::time::timeout(Duration::from_secs(5), locker.lock(lock_id)).await;
    tokio::task::block_in_place(|| cluster.thaw(2)).map_err(|error| error.to_string())?;
    match cut_off {
        Err(_elapsed) => say("with dc2 frozen, lock() in dc1 was still waiting after 5 s"),
        Ok(Err(error)) => say(&format!("with dc2 frozen, lock() in dc1 failed: {error}")),
        Ok(Ok(guard)) => {
            let _ = guard.release().await;
            return Err("a locker in dc1 took the lock with dc2 frozen".into());
        }
    }
    let started = Instant::now();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), locker.lock(lock_id)).await {
            Ok(Ok(guard)) => {
                say(&format!(
                    "dc2 thawed: lock() in dc1 succeeded {:?} later",
                    started.elapsed()
                ));
                return guard.release().await.map_err(|error| error.to_string());
            }
            _ if started.elapsed() > Duration::from_secs(60) => {
                return Err("lock() in dc1 failed for a minute after dc2 thawed".into());
            }
            _ => sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Creates the keyspace. A node that has seen its peers up may not have their tokens yet.
/// Until it has, it refuses a data centre it has only heard of ("Unrecognized strategy
/// option"), and a driver whose control connection is to that node sees only its own data
/// centre (`UnknownDatacenter` for `dc1`, seen once in CI through node 3). Both are
/// retried, for up to a minute.
async fn create_keyspace(cluster: &LocalCluster, keyspace: &str) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let config = config_in(cluster, keyspace, "dc1", LockConsistency::EachQuorum);
        match CassandraStorage::connect(config).await {
            Ok(_) => return Ok(()),
            Err(error)
                if (matches!(error, CassandraError::UnknownDatacenter { .. })
                    || error.to_string().contains("Unrecognized strategy option"))
                    && started.elapsed() < Duration::from_secs(60) =>
            {
                sleep(Duration::from_millis(500)).await;
            }
            Err(error) => return Err(format!("creating the keyspace: {error}")),
        }
    }
}

/// Everything the test checks on the running cluster; the caller tears it down.
async fn check(cluster: &LocalCluster, keyspace: &str) -> Result<(), String> {
    let names: Vec<&str> = (0..cluster.node_count())
        .map(|node| cluster.data_center_of(node))
        .collect();
    if names != ["dc1", "dc1", "dc2"] {
        return Err(format!("the nodes' data centres are {names:?}"));
    }
    create_keyspace(cluster, keyspace).await?;
    // A data centre the cluster does not have is refused at connect, naming those it has.
    let elsewhere = CassandraConfig {
        schema: None,
        ..config_in(cluster, keyspace, "dc3", LockConsistency::EachQuorum)
    };
    match CassandraStorage::connect(elsewhere).await {
        Err(CassandraError::UnknownDatacenter { known, .. })
            if known.contains("dc1") && known.contains("dc2") => {}
        Err(other) => return Err(format!("local_dc dc3 gave {other}")),
        Ok(_) => return Err("local_dc dc3 was accepted".into()),
    }
    // EACH_QUORUM writes reach a majority in both data centres, so lockers in both meet.
    let rounds = 6;
    let both = contend(
        cluster,
        keyspace,
        LockConsistency::EachQuorum,
        &["dc1", "dc2"],
        rounds,
    )
    .await?;
    say(&format!(
        "two data centres, EACH_QUORUM: acquisitions per data centre {both:?}"
    ));
    // Every locker made every acquisition: neither data centre was starved.
    for home in ["dc1", "dc2"] {
        let made = both.get(home).copied().unwrap_or(0);
        if made != 2 * rounds {
            return Err(format!(
                "{made} acquisitions by the lockers in {home}, not {}",
                2 * rounds
            ));
        }
    }
    each_quorum_needs_both_data_centres(cluster, keyspace).await?;
    // LOCAL_QUORUM is safe when every locker of a lock uses one data centre.
    let one = contend(
        cluster,
        keyspace,
        LockConsistency::LocalQuorum,
        &["dc1"],
        rounds,
    )
    .await?;
    say(&format!(
        "two data centres, LOCAL_QUORUM in dc1 only: acquisitions {one:?}"
    ));
    if one.get("dc1").copied().unwrap_or(0) != 2 * rounds {
        return Err(format!(
            "LOCAL_QUORUM acquisitions {one:?}, not {} in dc1",
            2 * rounds
        ));
    }
    Ok(())
}

/// Lockers in two data centres, with `EACH_QUORUM` writes and `LOCAL_QUORUM` reads, never
/// hold one lock at once and each data centre's lockers get turns; with one data centre
/// cut off, nobody takes the lock; lockers that all use one data centre with
/// `LOCAL_QUORUM` share it safely too; and a `local_dc` the cluster lacks is refused with
/// a typed error naming the data centres it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lockers_in_two_data_centres_never_hold_at_once() {
    let test = "lockers_in_two_data_centres_never_hold_at_once";
    let config = LocalClusterConfig {
        data_centers: 2,
        ..LocalClusterConfig::for_tests(3)
    };
    let keyspace = format!("lock_two_dcs_{}", std::process::id());
    let outcome = check_on_own_cluster(test, config, async |cluster| {
        check(cluster, &keyspace).await
    })
    .await;
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}
