//! One node's JVM and its watchdog, and signals to processes by pid.

use std::fs;
use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::version::{CassandraVersion, JavaRuntime, ReleaseLine};
use super::{JitCompilers, LocalClusterConfig};

/// The JVM options of every node, on Java 11 and 17: those of Cassandra's
/// `jvm-server.options`, `jvm11-server.options`, `jvm17-server.options` and
/// `cassandra.in.sh` that a test node needs (the module opens and exports Cassandra relies
/// on), with a serial collector, which suits small heaps on two cores better than G1.
const JVM_OPTIONS: &[&str] = &[
    "-Xss256k",
    "-XX:+UseSerialGC",
    "-XX:+PerfDisableSharedMem",
    "-XX:+ExitOnOutOfMemoryError",
    "-ea",
    "-da:net.openhft...",
    "-Djava.net.preferIPv4Stack=true",
    "-Dchronicle.analytics.disable=true",
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports=java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports=java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports=java.management/com.sun.jmx.remote.security=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports=java.sql/java.sql=ALL-UNNAMED",
    "--add-exports=java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports=jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports=jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens=java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens=jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
    // Keep the console open (it goes to stdout.log) and skip the waits meant for large
    // clusters. Not `cassandra.unsafesystem`: it keeps schema changes out of the commit
    // log, so a node killed soon after a `CREATE KEYSPACE` restarts without the keyspace.
    "-Dcassandra-foreground=yes",
    "-Dcassandra.skip_wait_for_gossip_to_settle=0",
    "-Dcassandra.ring_delay_ms=5000",
    "-Dcassandra.superuser_setup_delay_ms=0",
    "-Dcassandra.available_processors=2",
];

/// The options only Java 17 (and so Cassandra 5.0) gets: the `jdk.compiler` module, which
/// the runtime of Java 11 ([`JavaRuntime::Bundled11`]) lacks.
const JAVA17_OPTIONS: &[&str] = &[
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-opens=jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
];

/// The option that spares a node the row overhead it otherwise estimates at every start by
/// building 100,000 rows (seconds of CPU per node). 5.0 takes the value itself: the one that
/// estimate gives under JDK 17. 4.x only takes the estimate's step: 100 rows, as
/// Cassandra's own test runs use.
fn row_overhead_option(version: CassandraVersion) -> &'static str {
    match version.line() {
        ReleaseLine::V5_0 => "-Dcassandra.memtable.row_overhead_size=181",
        ReleaseLine::V4_0 | ReleaseLine::V4_1 => {
            "-Dcassandra.memtable_row_overhead_computation_step=100"
        }
    }
}

const MAIN_CLASS: &str = "org.apache.cassandra.service.CassandraDaemon";

/// What every node of a cluster runs: a Cassandra release, its jars and its `java`.
#[derive(Debug)]
pub(super) struct NodeRuntime {
    /// The release.
    pub(super) version: CassandraVersion,
    /// The directory of its jars.
    pub(super) lib_dir: std::path::PathBuf,
    /// The `java` binary: `java` (found on the `PATH`) or the path of Java 11's.
    pub(super) java: std::path::PathBuf,
}

/// A node's JVM and the watchdog that kills it when this process ends.
#[derive(Debug)]
pub(super) struct NodeProcess {
    jvm: Child,
    /// `sh` blocked reading a pipe whose write end only this process holds (in
    /// `watchdog.stdin`); when this process ends the pipe closes and `sh` kills the JVM.
    watchdog: Child,
}

impl NodeProcess {
    /// Starts the JVM of the node whose files are in `dir`, running the release, jars and
    /// `java` of `runtime` with `environment` added to its environment, with its console
    /// in `dir/stdout.log`, and its watchdog.
    pub(super) fn spawn(
        dir: &Path,
        runtime: &NodeRuntime,
        config: &LocalClusterConfig,
        environment: &[(String, String)],
    ) -> io::Result<NodeProcess> {
        // The JVM runs in its node's directory, not in this process's working directory,
        // which may be gone by the time a node is restarted (a JVM without one does not
        // start); a relative cache directory is resolved first.
        let dir = std::path::absolute(dir)?;
        let dir = dir.as_path();
        let lib_dir = std::path::absolute(&runtime.lib_dir)?;
        let lib_dir = lib_dir.as_path();
        let java_binary = if runtime.java.components().count() > 1 {
            std::path::absolute(&runtime.java)?
        } else {
            runtime.java.clone()
        };
        let heap_mib = config.heap_mib;
        let console = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("stdout.log"))?;
        let conf = dir.join("conf");
        let jamm = fs::read_dir(lib_dir)?
            .flatten()
            .map(|entry| entry.path())
            .find(|path| {
                path.file_name()
                    .and_then(|name| name.to_str())
                    .is_some_and(|name| name.starts_with("jamm-") && name.ends_with(".jar"))
            });
        let mut java = Command::new(&java_binary);
        java.current_dir(dir)
            .envs(environment.iter().map(|(name, value)| (name, value)))
            .arg(format!("-Xms{heap_mib}m"))
            .arg(format!("-Xmx{heap_mib}m"))
            .args(JVM_OPTIONS)
            .arg(row_overhead_option(runtime.version));
        if runtime.version.java() == JavaRuntime::System17 {
            java.args(JAVA17_OPTIONS);
        }
        if config.jit == JitCompilers::QuickStart {
            java.arg("-XX:TieredStopAtLevel=1");
        }
        if let Some(jamm) = jamm {
            java.arg(format!("-javaagent:{}", jamm.display()));
        }
        java.arg(format!(
            "-Dcassandra.config=file://{}",
            conf.join("cassandra.yaml").display()
        ))
        .arg(format!("-Dcassandra.storagedir={}", dir.display()))
        .arg(format!("-Dcassandra.logdir={}", dir.join("logs").display()))
        .arg(format!(
            "-Dlogback.configurationFile={}",
            conf.join("logback.xml").display()
        ))
        .arg("-cp")
        .arg(format!("{}:{}/*", conf.display(), lib_dir.display()))
        .arg(MAIN_CLASS)
        .stdin(Stdio::null())
        .stdout(console.try_clone()?)
        .stderr(console);
        let mut jvm = java.spawn()?;
        let watchdog = Command::new("sh")
            .args(["-c", "read -r _ignored; kill -9 \"$0\" 2>/dev/null"])
            .arg(jvm.id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        match watchdog {
            Ok(watchdog) => Ok(NodeProcess { jvm, watchdog }),
            Err(error) => {
                let _ = jvm.kill();
                let _ = jvm.wait();
                Err(error)
            }
        }
    }

    /// Writes the JVM's pid to `dir/jvm.pid`, for [`kill_recorded_nodes`].
    pub(super) fn record_pid(&self, dir: &Path) -> io::Result<()> {
        fs::write(dir.join("jvm.pid"), self.jvm.id().to_string())
    }

    /// The JVM's process id.
    pub(super) fn pid(&self) -> u32 {
        self.jvm.id()
    }

    /// Whether the JVM has not exited (it may be frozen).
    pub(super) fn is_alive(&mut self) -> bool {
        matches!(self.jvm.try_wait(), Ok(None))
    }

    /// Sends `signal` (a name such as `STOP`) to the JVM.
    pub(super) fn signal(&self, signal: &str) -> io::Result<()> {
        send_signal(self.jvm.id(), signal)
    }

    /// `SIGKILL`, and waits for the JVM to be gone.
    pub(super) fn kill(mut self) {
        let _ = self.jvm.kill();
        let _ = self.jvm.wait();
        self.end_watchdog();
    }

    /// `SIGTERM` (after `SIGCONT`, in case the node is frozen), then `SIGKILL` if the JVM
    /// has not exited within `grace`.
    pub(super) fn terminate(mut self, grace: Duration) {
        let _ = self.signal("CONT");
        let _ = self.signal("TERM");
        let deadline = Instant::now() + grace;
        while self.is_alive() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
        }
        self.kill();
    }

    fn end_watchdog(&mut self) {
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

fn send_signal(pid: u32, signal: &str) -> io::Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "`kill -{signal} {pid}` exited with {status}"
        )))
    }
}

/// Whether a process with this pid exists.
pub(super) fn is_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Asks process `pid` to end (`SIGTERM`).
pub(super) fn terminate_pid(pid: u32) {
    let _ = send_signal(pid, "TERM");
}

/// Kills (`SIGKILL`) every JVM recorded in a `node*/jvm.pid` under `slot_dir` whose command
/// line is still a Cassandra node of that directory (a pid may have been reused since).
pub(super) fn kill_recorded_nodes(slot_dir: &Path) {
    let Ok(entries) = fs::read_dir(slot_dir) else {
        return;
    };
    let marker = slot_dir.display().to_string();
    for entry in entries.flatten() {
        let Some(pid) = fs::read_to_string(entry.path().join("jvm.pid"))
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok())
        else {
            continue;
        };
        let command_line = fs::read(Path::new("/proc").join(pid.to_string()).join("cmdline"))
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
            .unwrap_or_default();
        if command_line.contains(MAIN_CLASS) && command_line.contains(&marker) {
            let _ = send_signal(pid, "KILL");
        }
    }
}
