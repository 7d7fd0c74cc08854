//! The backend's configuration and its validation.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use lock_core::LockConfig;

use crate::error::CassandraError;
use crate::tls::TlsConfig;

/// The longest keyspace or table name Cassandra accepts.
pub const MAX_IDENTIFIER_LEN: usize = 48;

/// The default table name.
pub const DEFAULT_TABLE: &str = "lock_cells";

/// The default `gc_grace_seconds`: one minute, the least accepted. It covers leases up to
/// `60 s - 2 × max_clock_skew - 1 s` (57 s with the default skew); longer leases need a
/// longer one, which [`CassandraConfig::check_lock_config`] asks for. See the crate docs
/// (the section on tombstones) for why, and for what it bounds.
pub const DEFAULT_GC_GRACE_SECONDS: u32 = 60;

/// The lock table's `memtable_flush_period_in_ms`: a minute. Each node then writes the
/// table's memtable to an SSTable at least once a minute while locks are taken, so that
/// compaction can purge tombstones past gc_grace instead of a memtable keeping them.
pub const MEMTABLE_FLUSH_PERIOD_MS: u32 = 60_000;

/// Keywords that CQL reserves: an unquoted identifier may not be one of them.
const RESERVED_KEYWORDS: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "between",
    "by",
    "columnfamily",
    "create",
    "delete",
    "desc",
    "describe",
    "drop",
    "entries",
    "execute",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "mbean",
    "mbeans",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "unset",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// The consistency levels the backend reads and writes with.
///
/// The lock's proofs rest on Lemma 1 of the specification: a write acknowledged by a set
/// of replicas and a later read answered by a set of replicas must have a replica in
/// common. Every mode below except [`LockConsistency::One`] guarantees that.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LockConsistency {
    /// `QUORUM` reads and writes: a majority of all replicas, across every data centre.
    /// The safe default; with several data centres every request pays a cross-DC round trip.
    #[default]
    Quorum,
    /// `LOCAL_QUORUM` reads and writes: a majority of the replicas in
    /// [`CassandraConfig::local_dc`]. Requests never fail over to another data centre.
    ///
    /// Safe only when **every client of a lock uses the same `local_dc`**: two clients in
    /// different data centres would each see only their own quorum and could both take the
    /// lock. Use [`LockConsistency::EachQuorum`] when clients live in several data centres.
    LocalQuorum,
    /// `EACH_QUORUM` writes (a majority in every data centre) and `LOCAL_QUORUM` reads (a
    /// majority in the coordinator's data centre). Every read quorum meets every write
    /// quorum, wherever the clients are, so clients may live in any data centre; writes
    /// fail while any data centre has lost its majority. Requires
    /// [`CassandraConfig::local_dc`].
    EachQuorum,
    /// `ALL` reads and writes: safe, but one replica down stops the lock.
    All,
    /// `ONE` reads and writes.
    ///
    /// **Warning: this breaks mutual exclusion.** A write acknowledged by one replica and a
    /// read answered by another need not meet, so two clients can both see themselves alone
    /// in the main row and both hold the lock (Lemma 1 of the specification fails). It is
    /// accepted only when [`CassandraConfig::allow_unsafe_consistency_one`] is set, for
    /// single-node test clusters where ONE and QUORUM coincide.
    One,
}

impl LockConsistency {
    /// The driver's consistency level for writes and deletes.
    pub fn write_level(self) -> scylla::statement::Consistency {
        use scylla::statement::Consistency;
        match self {
            LockConsistency::Quorum => Consistency::Quorum,
            LockConsistency::LocalQuorum => Consistency::LocalQuorum,
            LockConsistency::EachQuorum => Consistency::EachQuorum,
            LockConsistency::All => Consistency::All,
            LockConsistency::One => Consistency::One,
        }
    }

    /// The driver's consistency level for reads.
    pub fn read_level(self) -> scylla::statement::Consistency {
        match self {
            LockConsistency::EachQuorum => scylla::statement::Consistency::LocalQuorum,
            other => other.write_level(),
        }
    }

    /// True for the modes whose requests must stay in [`CassandraConfig::local_dc`].
    fn pins_local_dc(self) -> bool {
        matches!(self, LockConsistency::LocalQuorum)
    }

    /// True for the modes that need [`CassandraConfig::local_dc`].
    fn needs_local_dc(self) -> bool {
        matches!(
            self,
            LockConsistency::LocalQuorum | LockConsistency::EachQuorum
        )
    }
}

/// A user name and password for Cassandra's `PasswordAuthenticator`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password (never printed by `Debug`).
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How the keyspace replicates, when the backend creates it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Replication {
    /// `SimpleStrategy` with one replication factor: single data centre clusters.
    Simple {
        /// Copies of every row; 3 is usual, 1 only for tests.
        replication_factor: u32,
    },
    /// `NetworkTopologyStrategy`: a replication factor per data centre.
    NetworkTopology {
        /// Data centre name to its replication factor.
        data_centers: BTreeMap<String, u32>,
    },
}

/// Whether and how [`crate::CassandraStorage::connect`] creates the keyspace and table.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaConfig {
    /// The keyspace's replication, used only if the keyspace does not exist yet.
    pub replication: Replication,
    /// The table's `gc_grace_seconds`: how long tombstones are kept. It must be at least the
    /// lock's `lease_ttl + 2 * max_clock_skew + 1 s` (see
    /// [`CassandraConfig::check_lock_config`] and the crate docs).
    pub gc_grace_seconds: u32,
    /// How long each schema statement may take, schema agreement included.
    pub timeout: Duration,
}

impl SchemaConfig {
    /// A schema with `replication` and the default table options.
    pub fn new(replication: Replication) -> Self {
        SchemaConfig {
            replication,
            gc_grace_seconds: DEFAULT_GC_GRACE_SECONDS,
            timeout: Duration::from_secs(60),
        }
    }
}

/// Whether, and when, a request with no answer yet is also sent to another node (the
/// driver's speculative execution), the first answer winning: one node that stops
/// answering (cut off, frozen, restarting) then costs a caller about that delay instead of
/// a request timeout. Every statement of the lock is idempotent (each write carries its
/// own timestamp), so running one twice is running it once. At most two more requests go
/// out, the delay apart: with three replicas, one to each of the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Speculation {
    /// After a quarter of [`CassandraConfig::request_timeout`] (500 ms with the default
    /// 2 s): rare enough on a healthy cluster, well inside the timeout.
    #[default]
    QuarterOfTimeout,
    /// After this delay: above zero and below [`CassandraConfig::request_timeout`].
    After(Duration),
    /// Never: each request goes to one coordinator, and a node that stops answering costs
    /// the requests it coordinates a timeout each, until its connections are closed.
    Off,
}

impl Speculation {
    /// The delay before another node is asked, for requests limited to `request_timeout`;
    /// `None` when [`Speculation::Off`].
    pub fn delay(self, request_timeout: Duration) -> Option<Duration> {
        match self {
            Speculation::QuarterOfTimeout => Some(request_timeout / 4),
            Speculation::After(delay) => Some(delay),
            Speculation::Off => None,
        }
    }
}

/// Everything [`crate::CassandraStorage::connect`] needs. Build it with
/// [`CassandraConfig::new`] and change fields; [`CassandraConfig::validate`] (called by
/// `connect`) rejects unsafe or malformed values before anything touches the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CassandraConfig {
    /// Nodes to contact first, as `host` (port 9042), `host:port` or `[ipv6]:port`; the
    /// driver discovers the rest of the cluster from them.
    pub contact_points: Vec<String>,
    /// The keyspace holding the table: a lowercase CQL identifier.
    pub keyspace: String,
    /// The table holding every lock's cells: a lowercase CQL identifier.
    pub table: String,
    /// The consistency of reads and writes.
    pub consistency: LockConsistency,
    /// Accept [`LockConsistency::One`], which breaks mutual exclusion on any cluster with
    /// more than one replica. Leave it `false` outside single-node tests.
    pub allow_unsafe_consistency_one: bool,
    /// The data centre requests are sent to first; required by
    /// [`LockConsistency::LocalQuorum`] and [`LockConsistency::EachQuorum`].
    pub local_dc: Option<String>,
    /// The client-side limit on one request. A request that exceeds it reports
    /// [`lock_core::Error::StorageOutcomeUnknown`]. Keep it at or below the lock's
    /// `LockConfig::request_timeout`.
    pub request_timeout: Duration,
    /// When a request with no answer yet is sent again to another node; see
    /// [`Speculation`]. Default [`Speculation::QuarterOfTimeout`].
    pub speculation: Speculation,
    /// The limit on opening one connection.
    pub connection_timeout: Duration,
    /// Credentials, if the cluster requires authentication.
    pub credentials: Option<Credentials>,
    /// `Some` to create the keyspace and table if they do not exist; `None` to expect them.
    pub schema: Option<SchemaConfig>,
    /// `Some` to encrypt every connection with TLS (client-to-node encryption), trusting
    /// the given CA and, for mutual TLS, presenting a client certificate; `None` (the
    /// default) for plaintext. See [`TlsConfig`].
    pub tls: Option<TlsConfig>,
}

impl CassandraConfig {
    /// A configuration for `keyspace` on the cluster behind `contact_points`, with
    /// `QUORUM` consistency, the table [`DEFAULT_TABLE`], a 2 s request timeout and no
    /// schema creation.
    pub fn new(
        contact_points: impl IntoIterator<Item = impl Into<String>>,
        keyspace: impl Into<String>,
    ) -> Self {
        CassandraConfig {
            contact_points: contact_points.into_iter().map(Into::into).collect(),
            keyspace: keyspace.into(),
            table: DEFAULT_TABLE.to_owned(),
            consistency: LockConsistency::Quorum,
            allow_unsafe_consistency_one: false,
            local_dc: None,
            request_timeout: Duration::from_secs(2),
            speculation: Speculation::QuarterOfTimeout,
            connection_timeout: Duration::from_secs(5),
            credentials: None,
            schema: None,
            tls: None,
        }
    }

    /// Whether requests must stay in the local data centre (no failover to others).
    pub(crate) fn pins_local_dc(&self) -> bool {
        self.consistency.pins_local_dc()
    }

    /// Checks every field; see the field docs for what is accepted. With [`CassandraConfig::tls`]
    /// set it also reads and parses the certificate and key files (without any network).
    pub fn validate(&self) -> Result<(), CassandraError> {
        if self.contact_points.is_empty() {
            return Err(invalid(
                "contact_points",
                "is empty; give at least one node as \"host\" or \"host:port\"",
            ));
        }
        for point in &self.contact_points {
            validate_contact_point(point)?;
        }
        validate_identifier("keyspace", &self.keyspace)?;
        if self.keyspace.starts_with("system") {
            return Err(invalid(
                "keyspace",
                format!(
                    "{:?} looks like one of Cassandra's own keyspaces; choose a name not starting with \"system\"",
                    self.keyspace
                ),
            ));
        }
        validate_identifier("table", &self.table)?;
        if self.consistency == LockConsistency::One && !self.allow_unsafe_consistency_one {
            return Err(invalid(
                "consistency",
                "ONE breaks mutual exclusion (a write and a later read need not meet on any \
                 replica); use Quorum, LocalQuorum, EachQuorum or All, or set \
                 allow_unsafe_consistency_one for a single-node test cluster",
            ));
        }
        if let Some(dc) = &self.local_dc {
            validate_dc_name("local_dc", dc)?;
        } else if self.consistency.needs_local_dc() {
            return Err(invalid(
                "local_dc",
                format!(
                    "is required with {:?} consistency; name the data centre this client's requests go to",
                    self.consistency
                ),
            ));
        }
        within("request_timeout", self.request_timeout, ONE_HOUR)?;
        if let Speculation::After(delay) = self.speculation
            && (delay.is_zero() || delay >= self.request_timeout)
        {
            return Err(invalid(
                "speculation",
                format!(
                    "waits {delay:?}, which must be above zero and below request_timeout ({:?}); \
                     Speculation::Off turns speculative requests off",
                    self.request_timeout
                ),
            ));
        }
        within("connection_timeout", self.connection_timeout, ONE_HOUR)?;
        if let Some(credentials) = &self.credentials
            && credentials.username.is_empty()
        {
            return Err(invalid(
                "credentials.username",
                "is empty; give the user name or leave credentials as None",
            ));
        }
        if let Some(schema) = &self.schema {
            self.validate_schema(schema)?;
        }
        if let Some(tls) = &self.tls {
            tls.validate()?;
        }
        Ok(())
    }

    fn validate_schema(&self, schema: &SchemaConfig) -> Result<(), CassandraError> {
        match &schema.replication {
            Replication::Simple { replication_factor } => {
                validate_replication_factor("schema.replication", *replication_factor)?;
                if self.consistency.needs_local_dc() {
                    return Err(invalid(
                        "schema.replication",
                        format!(
                            "SimpleStrategy does not know data centres, so {:?} consistency \
                             cannot be honoured; use Replication::NetworkTopology",
                            self.consistency
                        ),
                    ));
                }
            }
            Replication::NetworkTopology { data_centers } => {
                if data_centers.is_empty() {
                    return Err(invalid(
                        "schema.replication",
                        "names no data centre; give each data centre's replication factor",
                    ));
                }
                for (dc, factor) in data_centers {
                    validate_dc_name("schema.replication", dc)?;
                    validate_replication_factor("schema.replication", *factor)?;
                }
                if let Some(local) = &self.local_dc
                    && !data_centers.contains_key(local)
                {
                    return Err(invalid(
                        "schema.replication",
                        format!(
                            "does not replicate to local_dc {local:?}; add it or change local_dc"
                        ),
                    ));
                }
            }
        }
        if !(MIN_GC_GRACE_SECONDS..=MAX_GC_GRACE_SECONDS).contains(&schema.gc_grace_seconds) {
            return Err(invalid(
                "schema.gc_grace_seconds",
                format!(
                    "must be {MIN_GC_GRACE_SECONDS} to {MAX_GC_GRACE_SECONDS}, got {}",
                    schema.gc_grace_seconds
                ),
            ));
        }
        within("schema.timeout", schema.timeout, ONE_HOUR)
    }

    /// Checks that this backend suits a lock configured with `lock`: the request timeout
    /// must not exceed the lock's (or the lock would give up on a request the driver still
    /// waits for), and tombstones must outlive every cell they can shadow
    /// (`gc_grace_seconds >= lease_ttl + 2 * max_clock_skew + 1 s`, rounded up to whole
    /// seconds; see the crate docs). Checks the schema only if this configuration creates
    /// it.
    pub fn check_lock_config(&self, lock: &LockConfig) -> Result<(), CassandraError> {
        if self.request_timeout > lock.request_timeout {
            return Err(invalid(
                "request_timeout",
                format!(
                    "({:?}) exceeds the lock's request_timeout ({:?}); lower it to at most the lock's",
                    self.request_timeout, lock.request_timeout
                ),
            ));
        }
        if let Some(schema) = &self.schema {
            check_gc_grace("schema.gc_grace_seconds", schema.gc_grace_seconds, lock)?;
        }
        Ok(())
    }
}

/// The least `gc_grace_seconds` that lets no tombstone of a lock configured as `lock` be
/// purged while the cell it deletes may still be alive on a replica:
/// `lease_ttl + 2 * max_clock_skew + 1 s`, rounded up to whole seconds.
pub fn least_gc_grace_seconds(lock: &LockConfig) -> u64 {
    let needed = lock
        .lease_ttl
        .saturating_add(lock.max_clock_skew.saturating_mul(2))
        .saturating_add(Duration::from_secs(1));
    needed
        .as_secs()
        .saturating_add(u64::from(needed.subsec_nanos() > 0))
}

/// Refuses a `gc_grace_seconds` (named `field` in the error) below
/// [`least_gc_grace_seconds`] of `lock`.
pub(crate) fn check_gc_grace(
    field: &'static str,
    gc_grace_seconds: u32,
    lock: &LockConfig,
) -> Result<(), CassandraError> {
    let needed_secs = least_gc_grace_seconds(lock);
    if u64::from(gc_grace_seconds) < needed_secs {
        return Err(invalid(
            field,
            format!(
                "({gc_grace_seconds}) is shorter than the lock's lease_ttl + 2 max_clock_skew + 1 s \
                 ({needed_secs} s): a tombstone could be purged while the cell it deletes is \
                 still alive on a replica that missed the delete; raise gc_grace_seconds to at \
                 least {needed_secs}"
            ),
        ));
    }
    Ok(())
}

const ONE_HOUR: Duration = Duration::from_secs(3600);
const MIN_GC_GRACE_SECONDS: u32 = 60;
const MAX_GC_GRACE_SECONDS: u32 = 864_000;
const MAX_REPLICATION_FACTOR: u32 = 100;
const MAX_NAME_LEN: usize = 255;

fn invalid(field: &'static str, reason: impl Into<String>) -> CassandraError {
    CassandraError::InvalidConfig {
        field,
        reason: reason.into(),
    }
}

fn within(field: &'static str, value: Duration, max: Duration) -> Result<(), CassandraError> {
    if value.is_zero() || value > max {
        return Err(invalid(
            field,
            format!("must be above zero and at most {max:?}, got {value:?}"),
        ));
    }
    Ok(())
}

fn validate_replication_factor(field: &'static str, factor: u32) -> Result<(), CassandraError> {
    if !(1..=MAX_REPLICATION_FACTOR).contains(&factor) {
        return Err(invalid(
            field,
            format!(
                "replication factor must be 1 to {MAX_REPLICATION_FACTOR}, got {factor} (3 is usual)"
            ),
        ));
    }
    Ok(())
}

/// A keyspace or table name must be an unquoted CQL identifier that reads the same in
/// every tool: lowercase ASCII letters, digits and `_`, starting with a letter, at most
/// [`MAX_IDENTIFIER_LEN`] characters, and not a reserved keyword. Nothing else is ever
/// written into a CQL statement, so no quoting or escaping is needed.
pub(crate) fn validate_identifier(field: &'static str, name: &str) -> Result<(), CassandraError> {
    let shown = excerpt(name);
    let mut bytes = name.bytes();
    let starts_with_letter = bytes.next().is_some_and(|byte| byte.is_ascii_lowercase());
    if !starts_with_letter
        || !bytes.all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_')
    {
        return Err(invalid(
            field,
            format!(
                "{shown:?} is not a plain CQL identifier; use a lowercase ASCII letter followed by \
                 lowercase letters, digits or underscores"
            ),
        ));
    }
    if name.len() > MAX_IDENTIFIER_LEN {
        return Err(invalid(
            field,
            format!("{shown:?} is longer than Cassandra's {MAX_IDENTIFIER_LEN} characters"),
        ));
    }
    if RESERVED_KEYWORDS.contains(&name) {
        return Err(invalid(
            field,
            format!("{shown:?} is a reserved CQL keyword; choose another name"),
        ));
    }
    Ok(())
}

/// Data centre names end up inside CQL string literals, so only a safe set is accepted.
fn validate_dc_name(field: &'static str, dc: &str) -> Result<(), CassandraError> {
    let allowed = |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.');
    if dc.is_empty() || dc.len() > MAX_NAME_LEN || !dc.bytes().all(allowed) {
        return Err(invalid(
            field,
            format!(
                "data centre name {:?} must be 1 to {MAX_NAME_LEN} characters from [A-Za-z0-9_.-]",
                excerpt(dc)
            ),
        ));
    }
    Ok(())
}

fn validate_contact_point(point: &str) -> Result<(), CassandraError> {
    let reject = |what: &str| {
        invalid(
            "contact_points",
            format!(
                "{:?} {what}; write \"host\", \"host:port\" or \"[ipv6]:port\"",
                excerpt(point)
            ),
        )
    };
    if point.is_empty() || point.len() > MAX_NAME_LEN {
        return Err(reject("must be 1 to 255 characters"));
    }
    if point
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == ',')
    {
        return Err(reject(
            "contains whitespace, a control character or a comma",
        ));
    }
    let port = if let Some(rest) = point.strip_prefix('[') {
        let Some((_, after)) = rest.split_once(']') else {
            return Err(reject("opens an IPv6 bracket it does not close"));
        };
        Some(
            after
                .strip_prefix(':')
                .ok_or_else(|| reject("needs \":port\" right after the IPv6 bracket"))?,
        )
    } else {
        match point.matches(':').count() {
            0 => None,
            1 => point.split_once(':').map(|(_, port)| port),
            _ => return Err(reject("looks like an IPv6 address without brackets")),
        }
    };
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(port) if port > 0 => {}
            _ => return Err(reject("has a port that is not 1 to 65535")),
        }
    }
    Ok(())
}

fn excerpt(value: &str) -> String {
    const SHOWN: usize = 64;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => format!("{}…", &value[..cut]),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> CassandraConfig {
        CassandraConfig::new(["127.0.0.1:9042"], "locks")
    }

    fn rejected_field(config: &CassandraConfig) -> &'static str {
        match config.validate() {
            Err(CassandraError::InvalidConfig { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    fn network(dcs: &[(&str, u32)]) -> SchemaConfig {
        SchemaConfig::new(Replication::NetworkTopology {
            data_centers: dcs.iter().map(|(dc, rf)| ((*dc).to_owned(), *rf)).collect(),
        })
    }

    #[test]
    fn the_defaults_are_valid_and_safe() {
        let config = base();
        config.validate().unwrap();
        assert_eq!(config.consistency, LockConsistency::Quorum);
        assert_eq!(config.table, "lock_cells");
        assert_eq!(config.schema, None);
        let with_schema = CassandraConfig {
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 3,
            })),
            ..base()
        };
        with_schema.validate().unwrap();
        with_schema
            .check_lock_config(&LockConfig::default())
            .unwrap();
    }

    #[test]
    fn identifiers_must_be_plain_lowercase_cql_names() {
        for good in ["locks", "a", "lock_cells_2", &"k".repeat(48)] {
            validate_identifier("keyspace", good).unwrap();
        }
        for bad in [
            "",
            "Locks",
            "2locks",
            "_locks",
            "lo-cks",
            "lo cks",
            "locks;DROP",
            "\"locks\"",
            "lócks",
            &"k".repeat(49),
            "select",
            "table",
            "keyspace",
        ] {
            assert!(
                validate_identifier("keyspace", bad).is_err(),
                "{bad:?} was accepted"
            );
        }
    }

    #[test]
    fn bad_names_are_rejected_in_the_right_field() {
        let keyspace = CassandraConfig {
            keyspace: "ks'; DROP KEYSPACE x".into(),
            ..base()
        };
        assert_eq!(rejected_field(&keyspace), "keyspace");
        let system = CassandraConfig {
            keyspace: "system_auth".into(),
            ..base()
        };
        assert_eq!(rejected_field(&system), "keyspace");
        let table = CassandraConfig {
            table: "Cells".into(),
            ..base()
        };
        assert_eq!(rejected_field(&table), "table");
    }

    #[test]
    fn contact_points_are_checked() {
        for good in [
            "localhost",
            "10.0.0.1:9042",
            "db-1.example.org:19042",
            "[::1]:9042",
        ] {
            validate_contact_point(good).unwrap_or_else(|err| panic!("{good:?}: {err}"));
        }
        for bad in [
            "",
            "a b",
            "a,b",
            "host:0",
            "host:99999",
            "host:port",
            "::1",
            "[::1",
            "[::1]",
            "[::1]9042",
        ] {
            assert!(validate_contact_point(bad).is_err(), "{bad:?} was accepted");
        }
        let none = CassandraConfig {
            contact_points: Vec::new(),
            ..base()
        };
        assert_eq!(rejected_field(&none), "contact_points");
    }

    #[test]
    fn consistency_one_needs_an_explicit_opt_in() {
        let one = CassandraConfig {
            consistency: LockConsistency::One,
            ..base()
        };
        assert_eq!(rejected_field(&one), "consistency");
        let message = one.validate().unwrap_err().to_string();
        assert!(message.contains("breaks mutual exclusion"), "{message}");
        CassandraConfig {
            allow_unsafe_consistency_one: true,
            ..one
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn datacenter_local_modes_need_a_local_dc() {
        for consistency in [LockConsistency::LocalQuorum, LockConsistency::EachQuorum] {
            let missing = CassandraConfig {
                consistency,
                ..base()
            };
            assert_eq!(rejected_field(&missing), "local_dc");
            CassandraConfig {
                local_dc: Some("dc1".into()),
                ..missing
            }
            .validate()
            .unwrap();
        }
        let quoted = CassandraConfig {
            local_dc: Some("dc1'}".into()),
            ..base()
        };
        assert_eq!(rejected_field(&quoted), "local_dc");
    }

    #[test]
    fn levels_match_the_modes() {
        use scylla::statement::Consistency;
        let each = LockConsistency::EachQuorum;
        assert_eq!(each.write_level(), Consistency::EachQuorum);
        assert_eq!(each.read_level(), Consistency::LocalQuorum);
        for (mode, level) in [
            (LockConsistency::Quorum, Consistency::Quorum),
            (LockConsistency::LocalQuorum, Consistency::LocalQuorum),
            (LockConsistency::All, Consistency::All),
            (LockConsistency::One, Consistency::One),
        ] {
            assert_eq!(mode.write_level(), level);
            assert_eq!(mode.read_level(), level);
        }
        assert!(LockConsistency::LocalQuorum.pins_local_dc());
        assert!(!LockConsistency::EachQuorum.pins_local_dc());
    }

    #[test]
    fn schema_replication_is_checked() {
        let zero = CassandraConfig {
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 0,
            })),
            ..base()
        };
        assert_eq!(rejected_field(&zero), "schema.replication");
        let simple_local = CassandraConfig {
            consistency: LockConsistency::LocalQuorum,
            local_dc: Some("dc1".into()),
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 3,
            })),
            ..base()
        };
        assert_eq!(rejected_field(&simple_local), "schema.replication");
        let elsewhere = CassandraConfig {
            schema: Some(network(&[("dc2", 3)])),
            ..simple_local.clone()
        };
        assert_eq!(rejected_field(&elsewhere), "schema.replication");
        let empty = CassandraConfig {
            schema: Some(network(&[])),
            ..base()
        };
        assert_eq!(rejected_field(&empty), "schema.replication");
        let bad_dc = CassandraConfig {
            schema: Some(network(&[("dc 1", 3)])),
            ..base()
        };
        assert_eq!(rejected_field(&bad_dc), "schema.replication");
        CassandraConfig {
            schema: Some(network(&[("dc1", 3), ("dc2", 3)])),
            ..simple_local
        }
        .validate()
        .unwrap();
    }

    #[test]
    fn durations_and_grace_are_bounded() {
        let timeout = CassandraConfig {
            request_timeout: Duration::ZERO,
            ..base()
        };
        assert_eq!(rejected_field(&timeout), "request_timeout");
        let connect = CassandraConfig {
            connection_timeout: Duration::from_secs(7200),
            ..base()
        };
        assert_eq!(rejected_field(&connect), "connection_timeout");
        let grace = CassandraConfig {
            schema: Some(SchemaConfig {
                gc_grace_seconds: 10,
                ..SchemaConfig::new(Replication::Simple {
                    replication_factor: 1,
                })
            }),
            ..base()
        };
        assert_eq!(rejected_field(&grace), "schema.gc_grace_seconds");
        let user = CassandraConfig {
            credentials: Some(Credentials {
                username: String::new(),
                password: "x".into(),
            }),
            ..base()
        };
        assert_eq!(rejected_field(&user), "credentials.username");
    }

    /// A speculative request must go out before the request times out, and after some
    /// wait; the default follows the request timeout, whatever it is set to.
    #[test]
    fn the_speculative_delay_is_below_the_request_timeout() {
        let refused = [
            Duration::ZERO,
            Duration::from_secs(2),
            Duration::from_secs(3),
        ];
        for delay in refused {
            let config = CassandraConfig {
                speculation: Speculation::After(delay),
                ..base()
            };
            assert_eq!(rejected_field(&config), "speculation", "{delay:?}");
        }
        let accepted = [
            Speculation::After(Duration::from_millis(1)),
            Speculation::After(Duration::from_millis(1999)),
            Speculation::Off,
        ];
        for speculation in accepted {
            let config = CassandraConfig {
                speculation,
                ..base()
            };
            config.validate().unwrap();
        }
        let short = CassandraConfig {
            request_timeout: Duration::from_millis(400),
            ..base()
        };
        short.validate().unwrap();
        assert_eq!(
            short.speculation.delay(short.request_timeout),
            Some(Duration::from_millis(100))
        );
    }

    #[test]
    fn the_lock_config_must_fit_the_backend() {
        let lock = LockConfig::default();
        let slow = CassandraConfig {
            request_timeout: lock.request_timeout + Duration::from_millis(1),
            ..base()
        };
        assert!(matches!(
            slow.check_lock_config(&lock),
            Err(CassandraError::InvalidConfig {
                field: "request_timeout",
                ..
            })
        ));
        let schema = SchemaConfig {
            gc_grace_seconds: 60,
            ..SchemaConfig::new(Replication::Simple {
                replication_factor: 1,
            })
        };
        let backend = CassandraConfig {
            schema: Some(schema),
            ..base()
        };
        let long_lease = LockConfig {
            lease_ttl: Duration::from_secs(59),
            max_clock_skew: Duration::from_millis(1500),
            ..LockConfig::default()
        };
        let message = backend
            .check_lock_config(&long_lease)
            .unwrap_err()
            .to_string();
        assert!(message.contains("at least 63"), "{message}");
        let fitting = LockConfig {
            lease_ttl: Duration::from_secs(57),
            max_clock_skew: Duration::from_secs(1),
            ..LockConfig::default()
        };
        backend.check_lock_config(&fitting).unwrap();
    }

    #[test]
    fn passwords_are_not_printed() {
        let credentials = Credentials {
            username: "app".into(),
            password: "hunter2".into(),
        };
        let shown = format!("{credentials:?}");
        assert!(
            shown.contains("app") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
