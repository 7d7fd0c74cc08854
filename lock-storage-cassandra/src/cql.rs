//! The exact CQL text this backend sends.
//!
//! The set is deliberately small (two schema statements, four prepared statements) so that a
//! CQL front end over another store only has to understand these shapes. Identifiers come
//! from a validated [`CassandraConfig`] and are plain lowercase CQL names; nothing else is
//! ever interpolated, and every value on the hot path is a bind marker.

use std::fmt::Write as _;

use md5::{Digest, Md5};

use crate::config::{CassandraConfig, MEMTABLE_FLUSH_PERIOD_MS, Replication, SchemaConfig};
use crate::error::CassandraError;

/// The statements for one keyspace and table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statements {
    /// `CREATE KEYSPACE IF NOT EXISTS ...`, if the configuration creates the schema.
    pub create_keyspace: Option<String>,
    /// `CREATE TABLE IF NOT EXISTS ...`, if the configuration creates the schema.
    pub create_table: Option<String>,
    /// Writes one cell. Binds: `lock_id` (text), `row_kind` (text), `column_name` (text),
    /// `value` (blob), TTL in seconds (int; 0 for no expiry), write timestamp in µs (bigint).
    pub insert: String,
    /// Deletes one cell. Binds: write timestamp in µs (bigint), `lock_id`, `row_kind`,
    /// `column_name`.
    pub delete: String,
    /// Reads the first cells of a row. Binds: `lock_id`, `row_kind`, limit (int).
    pub select_first: String,
    /// Reads the cells of a row from a column on. Binds: `lock_id`, `row_kind`, first
    /// `column_name` (inclusive), limit (int).
    pub select_from: String,
}

impl Statements {
    /// The statements for `config`, which is validated first.
    pub fn new(config: &CassandraConfig) -> Result<Self, CassandraError> {
        config.validate()?;
        let table = format!("{}.{}", config.keyspace, config.table);
        let select = format!("SELECT column_name, value, WRITETIME(value) FROM {table}");
        Ok(Statements {
            create_keyspace: config
                .schema
                .as_ref()
                .map(|schema| create_keyspace(&config.keyspace, &schema.replication)),
            create_table: config
                .schema
                .as_ref()
                .map(|schema| create_table(&table, schema)),
            insert: format!(
                "INSERT INTO {table} (lock_id, row_kind, column_name, value) VALUES (?, ?, ?, ?) \
                 USING TTL ? AND TIMESTAMP ?"
            ),
            delete: format!(
                "DELETE FROM {table} USING TIMESTAMP ? \
                 WHERE lock_id = ? AND row_kind = ? AND column_name = ?"
            ),
            select_first: format!("{select} WHERE lock_id = ? AND row_kind = ? LIMIT ?"),
            select_from: format!(
                "{select} WHERE lock_id = ? AND row_kind = ? AND column_name >= ? LIMIT ?"
            ),
        })
    }
}

fn create_keyspace(keyspace: &str, replication: &Replication) -> String {
    let mut options = String::new();
    match replication {
        Replication::Simple { replication_factor } => {
            options.push_str("'class': 'SimpleStrategy', 'replication_factor': ");
            options.push_str(&replication_factor.to_string());
        }
        Replication::NetworkTopology { data_centers } => {
            options.push_str("'class': 'NetworkTopologyStrategy'");
            for (dc, factor) in data_centers {
                // `write!` into a String cannot fail.
                let _ = write!(options, ", '{dc}': {factor}");
            }
        }
    }
    format!("CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {{{options}}}")
}

fn create_table(table: &str, schema: &SchemaConfig) -> String {
    let grace = schema.gc_grace_seconds;
    let id = table_id(table);
    format!(
        "CREATE TABLE IF NOT EXISTS {table} \
         (lock_id text, row_kind text, column_name text, value blob, \
         PRIMARY KEY ((lock_id, row_kind), column_name)) \
         WITH CLUSTERING ORDER BY (column_name ASC) \
         AND id = '{id}' \
         AND gc_grace_seconds = {grace} \
         AND memtable_flush_period_in_ms = {MEMTABLE_FLUSH_PERIOD_MS} \
         AND compaction = {{'class': 'LeveledCompactionStrategy', \
         'tombstone_compaction_interval': '{grace}', 'unchecked_tombstone_compaction': 'true'}}"
    )
}

/// The id the table is created with: a name-based UUID (version 3 layout) of
/// `keyspace.table`.
///
/// Without it each coordinator that runs `CREATE TABLE IF NOT EXISTS` before another's
/// creation has reached it makes the table under an id of its own. The nodes later keep
/// one of those ids and drop the others' tables, with any cells written to them, and until
/// then a request that meets a node with another id fails with "Unknown CF". Services
/// deployed together that each create the schema on start do exactly that; with one id
/// for one name, their creations are the same table.
fn table_id(qualified_table: &str) -> String {
    let mut bytes: [u8; 16] = Md5::digest(format!("lock table {qualified_table}")).into();
    bytes[6] = (bytes[6] & 0x0f) | 0x30;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let mut id = String::with_capacity(36);
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            id.push('-');
        }
        // `write!` into a String cannot fail.
        let _ = write!(id, "{byte:02x}");
    }
    id
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::config::LockConsistency;

    fn config() -> CassandraConfig {
        CassandraConfig::new(["localhost"], "locks")
    }

    #[test]
    fn hot_path_statements_are_exact() {
        let statements = Statements::new(&config()).unwrap();
        assert_eq!(
            statements.insert,
            "INSERT INTO locks.lock_cells (lock_id, row_kind, column_name, value) \
             VALUES (?, ?, ?, ?) USING TTL ? AND TIMESTAMP ?"
        );
        assert_eq!(
            statements.delete,
            "DELETE FROM locks.lock_cells USING TIMESTAMP ? \
             WHERE lock_id = ? AND row_kind = ? AND column_name = ?"
        );
        assert_eq!(
            statements.select_first,
            "SELECT column_name, value, WRITETIME(value) FROM locks.lock_cells \
             WHERE lock_id = ? AND row_kind = ? LIMIT ?"
        );
        assert_eq!(
            statements.select_from,
            "SELECT column_name, value, WRITETIME(value) FROM locks.lock_cells \
             WHERE lock_id = ? AND row_kind = ? AND column_name >= ? LIMIT ?"
        );
        assert_eq!(statements.create_keyspace, None);
        assert_eq!(statements.create_table, None);
    }

    #[test]
    fn schema_statements_are_exact() {
        let simple = CassandraConfig {
            table: "cells".into(),
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 3,
            })),
            ..config()
        };
        let statements = Statements::new(&simple).unwrap();
        assert_eq!(
            statements.create_keyspace.as_deref(),
            Some(
                "CREATE KEYSPACE IF NOT EXISTS locks WITH replication = \
                 {'class': 'SimpleStrategy', 'replication_factor': 3}"
            )
        );
        assert_eq!(
            statements.create_table.as_deref(),
            Some(
                "CREATE TABLE IF NOT EXISTS locks.cells \
                 (lock_id text, row_kind text, column_name text, value blob, \
                 PRIMARY KEY ((lock_id, row_kind), column_name)) \
                 WITH CLUSTERING ORDER BY (column_name ASC) \
                 AND id = '9576ce1f-571a-3e20-990e-02ff1fb9cd0f' AND gc_grace_seconds = 60 \
                 AND memtable_flush_period_in_ms = 60000 \
                 AND compaction = {'class': 'LeveledCompactionStrategy', \
                 'tombstone_compaction_interval': '60', 'unchecked_tombstone_compaction': 'true'}"
            )
        );
        assert!(statements.insert.contains("INTO locks.cells "));
    }

    #[test]
    fn the_readme_shows_the_schema_statements_connect_runs() {
        let readme = include_str!("../README.md");
        let default = CassandraConfig {
            schema: Some(SchemaConfig::new(Replication::Simple {
                replication_factor: 3,
            })),
            ..config()
        };
        let statements = Statements::new(&default).unwrap();
        for statement in [statements.create_keyspace, statements.create_table] {
            let statement = statement.unwrap_or_default();
            assert!(readme.contains(&statement), "the README lacks {statement}");
        }
    }

    #[test]
    fn the_table_id_is_one_per_name() {
        let id = table_id("locks.cells");
        assert_eq!(id, table_id("locks.cells"));
        assert_ne!(id, table_id("locks.cells2"));
        assert_ne!(id, table_id("other.cells"));
        let digits: Vec<usize> = id.split('-').map(str::len).collect();
        assert_eq!(digits, [8, 4, 4, 4, 12], "{id}");
        assert!(
            id.chars().all(|c| c == '-' || c.is_ascii_hexdigit()),
            "{id}"
        );
        assert_eq!(id.as_bytes()[14], b'3', "version 3: {id}");
    }

    #[test]
    fn network_topology_lists_every_data_centre_in_order() {
        let data_centers = BTreeMap::from([("eu-west".to_owned(), 3), ("dc1".to_owned(), 5)]);
        let multi = CassandraConfig {
            consistency: LockConsistency::EachQuorum,
            local_dc: Some("dc1".into()),
            schema: Some(SchemaConfig {
                gc_grace_seconds: 600,
                ..SchemaConfig::new(Replication::NetworkTopology { data_centers })
            }),
            ..config()
        };
        let statements = Statements::new(&multi).unwrap();
        assert_eq!(
            statements.create_keyspace.as_deref(),
            Some(
                "CREATE KEYSPACE IF NOT EXISTS locks WITH replication = \
                 {'class': 'NetworkTopologyStrategy', 'dc1': 5, 'eu-west': 3}"
            )
        );
        let table = statements.create_table.unwrap_or_default();
        assert!(table.contains("gc_grace_seconds = 600 "), "{table}");
        assert!(
            table.contains("'tombstone_compaction_interval': '600'"),
            "{table}"
        );
    }

    #[test]
    fn invalid_identifiers_never_reach_cql() {
        let injected = CassandraConfig {
            table: "t WHERE 1=1".into(),
            ..config()
        };
        assert!(matches!(
            Statements::new(&injected),
            Err(CassandraError::InvalidConfig { field: "table", .. })
        ));
    }
}
