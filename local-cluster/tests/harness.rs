//! The local-cluster harness itself: no node outlives the process that started it, and
//! the leftovers of a dead owner are cleaned up.

use std::fs;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use lock_local_cluster::{
    LocalCluster, LocalClusterConfig, clean_stale, ran_or_skipped, runtime_dir,
};

/// Set in the child process of [`nodes_die_with_their_owner`].
const CHILD: &str = "LOCK_HARNESS_TEST_CHILD";

fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// A child process starts a one-node cluster, prints the JVM's pid and is then killed
/// with `SIGKILL`, which runs no destructor: the node must die anyway.
#[test]
fn nodes_die_with_their_owner() {
    let test = "nodes_die_with_their_owner";
    if std::env::var_os(CHILD).is_some() {
        let cluster = LocalCluster::start(LocalClusterConfig::for_tests(1))
            .unwrap_or_else(|error| panic!("{error}"));
        let pid_file = cluster
            .log_path(0)
            .ok()
            .and_then(|log| log.parent()?.parent().map(|dir| dir.join("jvm.pid")))
            .expect("node directory");
        let pid = fs::read_to_string(pid_file).expect("jvm.pid");
        println!("jvm {pid}");
        std::io::stdout().flush().expect("stdout");
        thread::sleep(Duration::from_secs(600));
        return;
    }
    match ran_or_skipped(test, 1) {
        Ok(true) => {}
        Ok(false) => return,
        Err(missing) => panic!("{test}: {missing}"),
    }
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let pid = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        // libtest may have printed `test ... ` on the same line before it.
        .find_map(|line| line.rsplit_once("jvm ")?.1.trim().parse::<u32>().ok());
    let Some(pid) = pid else {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{test}: the child did not report a JVM (did the node start?)");
    };
    assert!(alive(pid), "{test}: the JVM {pid} is not running");
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(pid), "{test}: JVM {pid} outlived its owner by 10 s");
}

/// A cluster directory whose owner is gone, with a "node" still running, is found, the
/// node killed and the directory removed.
#[test]
fn clusters_of_dead_owners_are_cleaned_up() {
    let test = "clusters_of_dead_owners_are_cleaned_up";
    let dead_owner = dead_pid();
    // Built aside and moved in whole: a cleaner running in parallel (any start, in this
    // process or another) sees the stale cluster complete or not at all.
    let staging = runtime_dir().with_file_name(format!("stale-staging-{}", std::process::id()));
    let dir = runtime_dir().join(format!("stale-test-{}", std::process::id()));
    let node_dir = staging.join("node1");
    fs::create_dir_all(&node_dir).expect("create a stale cluster directory");
    fs::write(staging.join("owner"), dead_owner.to_string()).expect("owner");
    // Stands in for a node: its command line names the main class and the directory,
    // which is what the cleaner checks before it kills a recorded pid.
    let mut node = Command::new("sh")
        .arg("-c")
        .arg("sleep 120; : \"$0\" \"$1\"")
        .arg("org.apache.cassandra.service.CassandraDaemon")
        .arg(dir.display().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a stand-in node");
    // The parent of a spawn resumes while the child is still inside `execve`, before the
    // kernel has set up its arguments: until then its command line reads empty, and a
    // cleaner rightly takes it for some other process.
    let command_line = Path::new("/proc")
        .join(node.id().to_string())
        .join("cmdline");
    let named = Instant::now() + Duration::from_secs(10);
    while !fs::read_to_string(&command_line).is_ok_and(|text| text.contains("CassandraDaemon"))
        && Instant::now() < named
    {
        thread::sleep(Duration::from_millis(10));
    }
    fs::write(node_dir.join("jvm.pid"), node.id().to_string()).expect("jvm.pid");
    fs::create_dir_all(runtime_dir()).expect("create the runtime directory");
    fs::rename(&staging, &dir).expect("move the stale cluster in");
    // Any start (another test's, in parallel) cleans up too, so only the effect is checked.
    clean_stale();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut killed = false;
    while !killed && Instant::now() < deadline {
        killed = node.try_wait().expect("poll the stand-in").is_some();
        thread::sleep(Duration::from_millis(50));
    }
    let stand_in_command = fs::read(&command_line)
        .map(|bytes| String::from_utf8_lossy(&bytes).replace('\0', " "))
        .unwrap_or_default();
    let _ = node.kill();
    let _ = node.wait();
    assert!(
        killed,
        "{test}: the stale node was not killed in 10 s (owner {dead_owner} alive: {}; {} exists: \
         {}; the stand-in's command line: {stand_in_command:?})",
        alive(dead_owner),
        dir.display(),
        dir.exists(),
    );
    assert!(!dir.exists(), "{test}: {} was not removed", dir.display());
}

/// The pid of a process that has ended and been reaped, and whose pid no live process or
/// thread has taken again (pids are reused, and `/proc` also answers for thread ids).
fn dead_pid() -> u32 {
    for _ in 0..100 {
        let mut finished = Command::new("true").spawn().expect("spawn true");
        let pid = finished.id();
        finished.wait().expect("reap true");
        if !alive(pid) {
            return pid;
        }
    }
    panic!("100 reaped processes in a row had their pid taken again at once");
}

/// A directory that does not name its owner yet is a start in progress (between creating
/// its slot and recording itself), not a leftover: a cleaner must leave it alone.
#[test]
fn a_claim_in_progress_is_left_alone() {
    let dir = runtime_dir().join(format!("claiming-test-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("create a fresh cluster directory");
    clean_stale();
    let survived = dir.exists();
    let _ = fs::remove_dir_all(&dir);
    assert!(survived, "a cleaner removed {} mid-claim", dir.display());
}
