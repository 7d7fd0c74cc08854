//! `cluster start` and `cluster stop`: a real Apache Cassandra cluster on this machine, from
//! `lock-storage-cassandra`'s harness, for trying the lock by hand.

use std::time::{Duration, Instant};

use lock_local_cluster::{self, DEFAULT_SUPERUSER, LocalCluster, LocalClusterConfig};

use crate::{Error, PASSWORD_VARIABLE};

/// The options a local cluster's configuration takes from the command line, by field.
const OPTIONS: [(&str, &str); 4] = [
    ("nodes", "--nodes"),
    ("data_centers", "--data-centers"),
    ("heap_mib", "--heap-mib"),
    ("paxos_variant", "--paxos-variant"),
];

/// Parses `--nodes`: 1 or 3.
pub fn parse_node_count(text: &str) -> Result<usize, String> {
    match text.trim() {
        "1" => Ok(1),
        "3" => Ok(3),
        _ => Err(format!("a local cluster has 1 or 3 nodes, got {text:?}")),
    }
}

/// `cluster start`: starts a local cluster as `config` says, prints its contact points and
/// the commands to try, and keeps it running until Ctrl-C, `SIGTERM` (which `cluster stop`
/// sends) or `SIGHUP`; then kills its nodes and removes their files. Checks `config` and
/// the tools it needs (`java`, and `mvn` until the jars are cached) before it starts
/// anything.
pub fn start(config: LocalClusterConfig) -> Result<(), Error> {
    config
        .validate()
        .map_err(|error| Error::from_cluster_config(error, &OPTIONS))?;
    lock_local_cluster::check_tools(&config)?;
    let (nodes, heap_mib) = (config.nodes, config.heap_mib);
    let version = config.cassandra_version()?;
    crate::note(&format!(
        "starting a {nodes}-node Apache Cassandra {version} cluster on this machine \
         ({heap_mib} MiB of heap per node, Paxos {}; jars in {})...",
        config.paxos_variant,
        config.cache_dir.display()
    ));
    let password_authentication = config.password_authentication;
    // The signal handlers go in before the cluster starts, so that a Ctrl-C during the
    // start still ends in the cluster's destructor rather than in the default handler.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| Error::Io {
            what: "cannot start the async runtime",
            source,
        })?;
    let mut signals = runtime.block_on(async { Signals::new() })?;
    let begun = Instant::now();
    let cluster = LocalCluster::start(config)?;
    let contact_points = cluster.contact_points().join(",");
    let data_centers = (0..nodes)
        .map(|node| format!("node {} in {}", node + 1, cluster.data_center_of(node)))
        .collect::<Vec<_>>()
        .join(", ");
    let (login, password_note) = if password_authentication {
        let (username, password) = DEFAULT_SUPERUSER;
        (
            format!(" --username {username}"),
            format!(
                "It requires a password: log in as the superuser {username:?}, whose password \
                 is {password:?}, with `export {PASSWORD_VARIABLE}={password}` (lock-bench \
                 reads LOCK_BENCH_CASSANDRA_PASSWORD).\n"
            ),
        )
    } else {
        (String::new(), String::new())
    };
    crate::emit(&format!(
        "Apache Cassandra {version}: {nodes} node(s) up in {:.1} s\n\
         contact points: {contact_points}\n\
         data centres: {data_centers}\n\
         {password_note}\n\
         Try it (in another terminal): take locks with the experiment, from a checkout of \
         the workspace,\n  \
         cargo run --release -p lock-bench -- --cassandra {contact_points}{login} --create-schema --replication-factor {nodes} -n 200\n\
         and watch one while it runs, or inspect it:\n  \
         lockctl watch thesis-experiment-queue-p3 --cassandra {contact_points} --keyspace lock_bench{login}\n  \
         lockctl inspect thesis-experiment-queue-p3 --cassandra {contact_points} --keyspace lock_bench{login}\n\n\
         Running until Ctrl-C here or `lockctl cluster stop` elsewhere.\n",
        begun.elapsed().as_secs_f64()
    ))?;
    let reason = runtime.block_on(async {
        let mut watch = tokio::time::interval(Duration::from_secs(1));
        let mut reported = vec![false; nodes];
        loop {
            tokio::select! {
                reason = signals.next() => return reason,
                _ = watch.tick() => {
                    for (node, reported) in reported.iter_mut().enumerate() {
                        if !*reported && !cluster.is_running(node).unwrap_or(false) {
                            *reported = true;
                            crate::note(&format!(
                                "node {} is no longer running (log: {})",
                                node + 1,
                                cluster
                                    .log_path(node)
                                    .map(|path| path.display().to_string())
                                    .unwrap_or_default()
                            ));
                        }
                    }
                }
            }
        }
    });
    drop(cluster);
    crate::emit(&format!(
        "stopped: {reason}; every node is killed and its files are removed\n"
    ))?;
    Ok(())
}

/// The signals that end `cluster start`.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self, Error> {
        use tokio::signal::unix::{SignalKind, signal};
        let io = |source| Error::Io {
            what: "cannot install the signal handlers",
            source,
        };
        Ok(Signals {
            terminate: signal(SignalKind::terminate()).map_err(io)?,
            hangup: signal(SignalKind::hangup()).map_err(io)?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => "Ctrl-C",
            _ = self.terminate.recv() => "asked to stop (SIGTERM, as `lockctl cluster stop` sends)",
            _ = self.hangup.recv() => "the terminal closed (SIGHUP)",
        }
    }
}

/// `cluster stop`: stops every local cluster on this machine (those of `cluster start`, of
/// lock-bench's `--cassandra local` and of the workspace's tests) and says how many.
pub fn stop() -> Result<(), Error> {
    let text = match lock_local_cluster::stop_all() {
        0 => "no local Cassandra cluster was running\n".to_owned(),
        1 => "stopped 1 local Cassandra cluster\n".to_owned(),
        many => format!("stopped {many} local Cassandra clusters\n"),
    };
    crate::emit(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_cluster_options_are_refused_by_their_option_before_anything_starts() {
        assert_eq!(parse_node_count("1"), Ok(1));
        assert_eq!(parse_node_count(" 3"), Ok(3));
        assert!(parse_node_count("2").unwrap_err().contains("1 or 3"));
        for (config, option) in [
            (
                LocalClusterConfig {
                    data_centers: 2,
                    ..LocalClusterConfig::new(1)
                },
                "--data-centers",
            ),
            (
                LocalClusterConfig {
                    heap_mib: 1,
                    ..LocalClusterConfig::new(3)
                },
                "--heap-mib",
            ),
            (
                LocalClusterConfig {
                    paxos_variant: lock_local_cluster::PaxosVariant::V2,
                    version: Some("4.0".parse().unwrap()),
                    ..LocalClusterConfig::new(1)
                },
                "--paxos-variant",
            ),
        ] {
            let error = start(config).unwrap_err().to_string();
            assert!(error.starts_with(option), "{error}");
        }
    }
}
