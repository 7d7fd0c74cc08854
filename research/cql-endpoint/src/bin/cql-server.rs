//! Serves a simulated cluster over CQL native protocol v4 until interrupted.
//!
//! ```text
//! cql-server [--listen 127.0.0.1:9042] [--replicas 3] [--rf 3] [--latency-ms MIN[-MAX]]
//!            [--timeout-ms 2000] [--seed 0] [--max-buffered-mib 64]
//! ```

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cql_endpoint::{CqlLimits, CqlServer};
use lock_core::Timestamp;
use lock_storage_memory::{ClusterConfig, Latency, MemoryCluster};

const USAGE: &str = "usage: cql-server [--listen ADDR] [--replicas N] [--rf N] \
[--latency-ms MIN[-MAX]] [--timeout-ms MS] [--seed N] [--max-buffered-mib N]

Serves an in-memory simulated Cassandra cluster over CQL native protocol v4.
  --listen ADDR         address to listen on (default 127.0.0.1:9042)
  --replicas N          simulated replicas (default 3)
  --rf N                replication factor; keyspaces must ask for it (default 3)
  --latency-ms MIN-MAX  uniform message latency in milliseconds (default 0)
  --timeout-ms MS       coordinator timeout (default 2000)
  --seed N              seed of the latency generator (default 0)
  --max-buffered-mib N  request bytes held at once across all connections; frames
                        over it are refused as Overloaded (default 64)";

struct Options {
    listen: String,
    config: ClusterConfig,
    limits: CqlLimits,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        listen: "127.0.0.1:9042".into(),
        config: ClusterConfig {
            epoch: wall_clock(),
            ..ClusterConfig::default()
        },
        limits: CqlLimits::default(),
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            return Err(String::new());
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = |value: &str| {
            value
                .parse::<u64>()
                .map_err(|_| format!("{flag} takes a whole number, got {value:?}"))
        };
        let count = |value: &str| number(value).map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        match flag.as_str() {
            "--listen" => options.listen = value,
            "--replicas" => options.config.replicas = count(&value)?,
            "--rf" => options.config.replication_factor = count(&value)?,
            "--timeout-ms" => {
                options.config.request_timeout = Duration::from_millis(number(&value)?);
            }
            "--seed" => options.config.seed = number(&value)?,
            "--max-buffered-mib" => {
                let mib = count(&value)?;
                if mib == 0 {
                    return Err(
                        "--max-buffered-mib must be at least 1: with 0 every request is refused"
                            .into(),
                    );
                }
                let bytes = mib.saturating_mul(1024 * 1024);
                options.limits = options.limits.with_max_buffered_bytes(bytes);
            }
            "--latency-ms" => {
                let (min, max) = value.split_once('-').unwrap_or((&value, &value));
                let (min, max) = (number(min)?, number(max)?);
                options.config.latency = if max == 0 {
                    Latency::Zero
                } else {
                    Latency::Uniform {
                        min: Duration::from_millis(min),
                        max: Duration::from_millis(max),
                    }
                };
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

/// The real wall clock, so that the simulated clocks (and server-side timestamps) start
/// at the time of day.
fn wall_clock() -> Timestamp {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_micros())
        .unwrap_or_default();
    Timestamp::from_micros(u64::try_from(micros).unwrap_or(u64::MAX))
}

fn main() -> ExitCode {
    let options = match parse(std::env::args().skip(1)) {
        Ok(options) => options,
        Err(message) if message.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("cql-server: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cql-server: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let cluster = match MemoryCluster::new(options.config) {
            Ok(cluster) => cluster,
            Err(error) => {
                eprintln!("cql-server: {error}");
                return ExitCode::from(2);
            }
        };
        let config = cluster.config();
        let server =
            match CqlServer::start_with_limits(cluster, options.listen.as_str(), options.limits)
                .await
            {
                Ok(server) => server,
                Err(error) => {
                    eprintln!("cql-server: {error}");
                    return ExitCode::FAILURE;
                }
            };
        println!(
            "serving {} replicas (replication factor {}, data centre datacenter1) over CQL v4 \
             on {}; Ctrl-C stops",
            config.replicas,
            config.replication_factor,
            server.local_addr()
        );
        if let Err(error) = tokio::signal::ctrl_c().await {
            eprintln!("cql-server: cannot wait for Ctrl-C: {error}");
        }
        server.shutdown().await;
        ExitCode::SUCCESS
    })
}
