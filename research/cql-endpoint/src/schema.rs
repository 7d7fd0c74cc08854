//! The one keyspace and table the endpoint serves, and the system tables that describe
//! them and the one-node topology to a driver.

use std::collections::BTreeMap;
use std::net::IpAddr;

use md5::{Digest, Md5};

use crate::value::{CqlType, CqlValue};

/// The data centre of the one node.
pub(crate) const DATA_CENTER: &str = "datacenter1";
/// Its rack.
pub(crate) const RACK: &str = "rack1";
/// The cluster name in `system.local`.
pub(crate) const CLUSTER_NAME: &str = "lock-storage-memory";
/// The Cassandra release the endpoint presents itself as.
pub(crate) const RELEASE_VERSION: &str = "4.1.0";
/// The CQL version in `system.local` and SUPPORTED.
pub(crate) const CQL_VERSION: &str = "3.4.6";
/// The partitioner in `system.local`: the driver computes Murmur3 tokens for routing, and
/// with one node every token routes to it.
const PARTITIONER: &str = "org.apache.cassandra.dht.Murmur3Partitioner";

/// A name-based (version 3) UUID of `name`, as bytes.
pub(crate) fn name_uuid(name: &str) -> [u8; 16] {
    let mut bytes: [u8; 16] = Md5::digest(name.as_bytes()).into();
    bytes[6] = (bytes[6] & 0x0f) | 0x30;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

/// The served keyspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Keyspace {
    pub(crate) name: String,
    /// As `system_schema.keyspaces.replication` shows it.
    pub(crate) replication: BTreeMap<String, String>,
    pub(crate) durable_writes: bool,
}

/// The served table: always the lock table's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Table {
    pub(crate) keyspace: String,
    pub(crate) name: String,
    pub(crate) gc_grace_seconds: u32,
    pub(crate) compaction: BTreeMap<String, String>,
    pub(crate) comment: String,
    /// The id it was created with (`WITH id = '...'`), else one derived from its name.
    pub(crate) id: [u8; 16],
}

/// `text` as a UUID in its canonical form (`8-4-4-4-12` hex digits), if it is one.
pub(crate) fn parse_uuid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = text.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return None;
    }
    let digits: String = groups.concat();
    if !digits.bytes().all(|digit| digit.is_ascii_hexdigit()) {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (index, byte) in bytes.iter_mut().enumerate() {
        let pair = digits.get(2 * index..2 * index + 2)?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(bytes)
}

/// The lock table's columns: name, type, kind and position as `system_schema.columns`
/// has them.
pub(crate) const LOCK_COLUMNS: [(&str, CqlType, &str, i32); 4] = [
    ("lock_id", CqlType::Text, "partition_key", 0),
    ("row_kind", CqlType::Text, "partition_key", 1),
    ("column_name", CqlType::Text, "clustering", 0),
    ("value", CqlType::Blob, "regular", -1),
];

/// What the endpoint serves; changed only by DDL.
#[derive(Clone, Debug, Default)]
pub(crate) struct Schema {
    pub(crate) keyspace: Option<Keyspace>,
    pub(crate) table: Option<Table>,
    /// Bumped by every change, for `schema_version`.
    pub(crate) changes: u64,
}

impl Schema {
    /// The `schema_version` UUID, which changes with every DDL statement.
    pub(crate) fn version(&self) -> [u8; 16] {
        name_uuid(&format!("schema {}", self.changes))
    }

    /// The served table if `keyspace.name` is it.
    pub(crate) fn table(&self, keyspace: &str, name: &str) -> Option<&Table> {
        self.table
            .as_ref()
            .filter(|table| table.keyspace == keyspace && table.name == name)
    }
}

/// What the system tables need to know about the connection asking.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeInfo {
    /// The address the client reached this node at.
    pub(crate) address: IpAddr,
    pub(crate) port: u16,
}

/// A system table: its columns, the columns a WHERE clause may restrict, and its rows.
#[derive(Clone, Debug)]
pub(crate) struct SystemTable {
    pub(crate) keyspace: &'static str,
    pub(crate) name: &'static str,
    pub(crate) columns: Vec<(&'static str, CqlType)>,
    pub(crate) keys: &'static [&'static str],
    pub(crate) rows: Vec<Vec<CqlValue>>,
}

impl SystemTable {
    /// The index and type of `column`.
    pub(crate) fn column(&self, column: &str) -> Option<(usize, CqlType)> {
        self.columns
            .iter()
            .position(|(name, _)| *name == column)
            .map(|index| (index, self.columns[index].1))
    }
}

fn text(value: &str) -> CqlValue {
    CqlValue::Text(value.to_owned())
}

fn int(value: i32) -> CqlValue {
    CqlValue::Int(value)
}

fn port(port: u16) -> CqlValue {
    CqlValue::Int(i32::from(port))
}

fn texts(values: &[&str]) -> Vec<String> {
    values.iter().map(|value| (*value).to_owned()).collect()
}

/// The system table `keyspace.name`, with the rows `schema` and `node` give it, or `None`
/// if the endpoint has no such table.
pub(crate) fn system_table(
    keyspace: &str,
    name: &str,
    schema: &Schema,
    node: NodeInfo,
) -> Option<SystemTable> {
    use CqlType::{Blob, Boolean, Double, Inet, Int, Text, TextList, TextMap, TextSet, Uuid};
    let host_id = CqlValue::Uuid(name_uuid("lock-storage-memory host"));
    let tokens = CqlValue::TextSet(texts(&["0"]));
    let table = match (keyspace, name) {
        ("system", "local") => make(
            "system",
            "local",
            vec![
                ("key", Text),
                ("bootstrapped", Text),
                ("broadcast_address", Inet),
                ("broadcast_port", Int),
                ("cluster_name", Text),
                ("cql_version", Text),
                ("data_center", Text),
                ("host_id", Uuid),
                ("listen_address", Inet),
                ("listen_port", Int),
                ("native_protocol_version", Text),
                ("partitioner", Text),
                ("rack", Text),
                ("release_version", Text),
                ("rpc_address", Inet),
                ("rpc_port", Int),
                ("schema_version", Uuid),
                ("tokens", TextSet),
            ],
            &["key"],
            vec![vec![
                text("local"),
                text("COMPLETED"),
                CqlValue::Inet(node.address),
                port(node.port),
                text(CLUSTER_NAME),
                text(CQL_VERSION),
                text(DATA_CENTER),
                host_id,
                CqlValue::Inet(node.address),
                port(node.port),
                text("4"),
                text(PARTITIONER),
                text(RACK),
                text(RELEASE_VERSION),
                CqlValue::Inet(node.address),
                port(node.port),
                CqlValue::Uuid(schema.version()),
                tokens,
            ]],
        ),
        ("system", "peers") => make(
            "system",
            "peers",
            vec![
                ("peer", Inet),
                ("data_center", Text),
                ("host_id", Uuid),
                ("preferred_ip", Inet),
                ("rack", Text),
                ("release_version", Text),
                ("rpc_address", Inet),
                ("schema_version", Uuid),
                ("tokens", TextSet),
            ],
            &["peer"],
            Vec::new(),
        ),
        ("system", "peers_v2") => make(
            "system",
            "peers_v2",
            vec![
                ("peer", Inet),
                ("peer_port", Int),
                ("data_center", Text),
                ("host_id", Uuid),
                ("native_address", Inet),
                ("native_port", Int),
                ("preferred_ip", Inet),
                ("preferred_port", Int),
                ("rack", Text),
                ("release_version", Text),
                ("schema_version", Uuid),
                ("tokens", TextSet),
            ],
            &["peer", "peer_port"],
            Vec::new(),
        ),
        ("system_schema", "keyspaces") => make(
            "system_schema",
            "keyspaces",
            vec![
                ("keyspace_name", Text),
                ("durable_writes", Boolean),
                ("replication", TextMap),
            ],
            &["keyspace_name"],
            schema
                .keyspace
                .iter()
                .map(|keyspace| {
                    vec![
                        text(&keyspace.name),
                        CqlValue::Boolean(keyspace.durable_writes),
                        CqlValue::TextMap(keyspace.replication.clone()),
                    ]
                })
                .collect(),
        ),
        ("system_schema", "tables") => make(
            "system_schema",
            "tables",
            vec![
                ("keyspace_name", Text),
                ("table_name", Text),
                ("bloom_filter_fp_chance", Double),
                ("comment", Text),
                ("compaction", TextMap),
                ("default_time_to_live", Int),
                ("flags", TextSet),
                ("gc_grace_seconds", Int),
                ("id", Uuid),
            ],
            &["keyspace_name", "table_name"],
            schema
                .table
                .iter()
                .map(|table| {
                    vec![
                        text(&table.keyspace),
                        text(&table.name),
                        CqlValue::Double(0.1),
                        text(&table.comment),
                        CqlValue::TextMap(table.compaction.clone()),
                        int(0),
                        CqlValue::TextSet(texts(&["compound"])),
                        int(i32::try_from(table.gc_grace_seconds).unwrap_or(i32::MAX)),
                        CqlValue::Uuid(table.id),
                    ]
                })
                .collect(),
        ),
        ("system_schema", "columns") => make(
            "system_schema",
            "columns",
            vec![
                ("keyspace_name", Text),
                ("table_name", Text),
                ("column_name", Text),
                ("clustering_order", Text),
                ("column_name_bytes", Blob),
                ("kind", Text),
                ("position", Int),
                ("type", Text),
            ],
            &["keyspace_name", "table_name", "column_name"],
            schema
                .table
                .iter()
                .flat_map(|table| {
                    LOCK_COLUMNS.iter().map(|(column, ty, kind, position)| {
                        let order = if *kind == "clustering" { "asc" } else { "none" };
                        vec![
                            text(&table.keyspace),
                            text(&table.name),
                            text(column),
                            text(order),
                            CqlValue::Blob(column.as_bytes().to_vec()),
                            text(kind),
                            int(*position),
                            text(ty.cql_name()),
                        ]
                    })
                })
                .collect(),
        ),
        ("system_schema", "types") => make(
            "system_schema",
            "types",
            vec![
                ("keyspace_name", Text),
                ("type_name", Text),
                ("field_names", TextList),
                ("field_types", TextList),
            ],
            &["keyspace_name", "type_name"],
            Vec::new(),
        ),
        ("system_schema", "views") => make(
            "system_schema",
            "views",
            vec![
                ("keyspace_name", Text),
                ("view_name", Text),
                ("base_table_id", Uuid),
                ("base_table_name", Text),
                ("include_all_columns", Boolean),
                ("where_clause", Text),
            ],
            &["keyspace_name", "view_name"],
            Vec::new(),
        ),
        ("system_schema", "functions") => make(
            "system_schema",
            "functions",
            vec![
                ("keyspace_name", Text),
                ("function_name", Text),
                ("argument_types", TextList),
                ("argument_names", TextList),
                ("body", Text),
                ("called_on_null_input", Boolean),
                ("language", Text),
                ("return_type", Text),
            ],
            &["keyspace_name", "function_name"],
            Vec::new(),
        ),
        ("system_schema", "aggregates") => make(
            "system_schema",
            "aggregates",
            vec![
                ("keyspace_name", Text),
                ("aggregate_name", Text),
                ("argument_types", TextList),
                ("final_func", Text),
                ("initcond", Text),
                ("return_type", Text),
                ("state_func", Text),
                ("state_type", Text),
            ],
            &["keyspace_name", "aggregate_name"],
            Vec::new(),
        ),
        ("system_schema", "indexes") => make(
            "system_schema",
            "indexes",
            vec![
                ("keyspace_name", Text),
                ("table_name", Text),
                ("index_name", Text),
                ("kind", Text),
                ("options", TextMap),
            ],
            &["keyspace_name", "table_name", "index_name"],
            Vec::new(),
        ),
        ("system_schema", "triggers") => make(
            "system_schema",
            "triggers",
            vec![
                ("keyspace_name", Text),
                ("table_name", Text),
                ("trigger_name", Text),
                ("options", TextMap),
            ],
            &["keyspace_name", "table_name", "trigger_name"],
            Vec::new(),
        ),
        _ => return None,
    };
    Some(table)
}

fn make(
    keyspace: &'static str,
    name: &'static str,
    columns: Vec<(&'static str, CqlType)>,
    keys: &'static [&'static str],
    rows: Vec<Vec<CqlValue>>,
) -> SystemTable {
    SystemTable {
        keyspace,
        name,
        columns,
        keys,
        rows,
    }
}

/// Whether `keyspace` is one of the system keyspaces the endpoint answers for.
pub(crate) fn is_system_keyspace(keyspace: &str) -> bool {
    matches!(keyspace, "system" | "system_schema")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeInfo {
        NodeInfo {
            address: "127.0.0.1".parse().unwrap(),
            port: 9042,
        }
    }

    #[test]
    fn system_local_describes_one_node() {
        let schema = Schema::default();
        let local = system_table("system", "local", &schema, node()).unwrap();
        assert_eq!(local.rows.len(), 1);
        assert_eq!(local.rows[0].len(), local.columns.len());
        let (index, ty) = local.column("rpc_address").unwrap();
        assert_eq!(ty, CqlType::Inet);
        assert_eq!(local.rows[0][index], CqlValue::Inet(node().address));
        let (index, _) = local.column("data_center").unwrap();
        assert_eq!(local.rows[0][index], text(DATA_CENTER));
        assert!(
            system_table("system", "peers", &schema, node())
                .unwrap()
                .rows
                .is_empty()
        );
        assert!(system_table("system_schema", "scylla_tables", &schema, node()).is_none());
        assert!(system_table("system", "clients", &schema, node()).is_none());
    }

    #[test]
    fn uuids_are_parsed_in_their_canonical_form_only() {
        let id = parse_uuid("5a1c395e-b41f-11e5-9f22-ba0be0483c18").unwrap();
        assert_eq!(id[..4], [0x5a, 0x1c, 0x39, 0x5e]);
        assert_eq!(id[15], 0x18);
        assert_eq!(parse_uuid("5A1C395E-B41F-11E5-9F22-BA0BE0483C18"), Some(id));
        for bad in [
            "",
            "5a1c395e-b41f-11e5-9f22",
            "5a1c395eb41f11e59f22ba0be0483c18",
            "5a1c395e-b41f-11e5-9f22-ba0be0483c1g",
            "+a1c395e-b41f-11e5-9f22-ba0be0483c18",
            "5a1c395e-b41f-11e5-9f22-ba0be0483c1é",
            "5a1c395e-b41f-11e5-9f22-ba0be0483c18-",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn schema_tables_describe_the_lock_table() {
        let schema = Schema {
            keyspace: Some(Keyspace {
                name: "locks".into(),
                replication: BTreeMap::new(),
                durable_writes: true,
            }),
            table: Some(Table {
                keyspace: "locks".into(),
                name: "lock_cells".into(),
                gc_grace_seconds: 3600,
                compaction: BTreeMap::new(),
                id: name_uuid("table locks.lock_cells"),
                comment: String::new(),
            }),
            changes: 2,
        };
        let columns = system_table("system_schema", "columns", &schema, node()).unwrap();
        assert_eq!(columns.rows.len(), 4);
        for row in &columns.rows {
            assert_eq!(row.len(), columns.columns.len());
        }
        let tables = system_table("system_schema", "tables", &schema, node()).unwrap();
        assert_eq!(tables.rows[0].len(), tables.columns.len());
        assert_ne!(schema.version(), Schema::default().version());
        let uuid = name_uuid("x");
        assert_eq!(uuid[6] >> 4, 3, "version 3");
        assert_eq!(uuid[8] >> 6, 2, "RFC 4122 variant");
    }
}
