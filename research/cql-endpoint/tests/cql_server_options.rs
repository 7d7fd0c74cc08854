//! `cql-server` fed hostile options: each run must end with exit code 1 or 2 and a message that
//! names the problem, never a panic and never a server that starts.

use std::process::Command;

const HOSTILE: &[(&[&str], &str)] = &[
    (&["--replicas", "0"], "replicas"),
    (&["--replicas", "99999999999999999999"], "replicas"),
    (&["--rf", "9"], "replication_factor"),
    (&["--latency-ms", "5-1"], "latency"),
    (&["--latency-ms", "-"], "latency-ms"),
    (&["--timeout-ms", "0"], "request_timeout"),
    (&["--listen", "nonsense"], "address"),
    (&["--listen", "127.0.0.1:99999"], "address"),
    (&["--seed", "-1"], "seed"),
    (&["--max-buffered-mib", "0"], "max-buffered-mib"),
    (&["--bogus", "1"], "bogus"),
    (&["--replicas"], "replicas"),
];

#[test]
fn hostile_options_give_errors_not_panics() {
    let binary = env!("CARGO_BIN_EXE_cql-server");
    let mut problems = Vec::new();
    for (args, word) in HOSTILE {
        let output = Command::new(binary)
            .args(*args)
            .output()
            .unwrap_or_else(|error| panic!("cannot run cql-server: {error}"));
        let stderr = String::from_utf8_lossy(&output.stderr);
        if stderr.contains("panicked") {
            problems.push(format!("{args:?}: panicked: {stderr}"));
        } else if !matches!(output.status.code(), Some(1 | 2)) {
            problems.push(format!(
                "{args:?}: exit {:?}: {stderr}",
                output.status.code()
            ));
        } else if !stderr.contains(word) {
            problems.push(format!(
                "{args:?}: the message does not mention {word:?}: {stderr}"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
