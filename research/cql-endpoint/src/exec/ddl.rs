//! The schema statements: CREATE and DROP of the one keyspace and the one table served
//! (checked against the simulated cluster's replication and the lock table's shape), USE,
//! and the schema change events they send to the connections registered for them.

use std::collections::BTreeMap;
use std::time::Duration;

use cassandra_protocol::frame::events::{
    SchemaChange, SchemaChangeOptions, SchemaChangeTarget, SchemaChangeType,
};
use lock_core::storage::Ttl;
use lock_storage_memory::ReplicaId;

use super::{Answer, Engine, Outcome, Session, lock};
use crate::error::CqlError;
use crate::parse::{Constant, CreateKeyspace, CreateTable, Order, Property};
use crate::schema::{self, DATA_CENTER, Keyspace, LOCK_COLUMNS, Table, name_uuid, parse_uuid};

impl Engine {
    /// CREATE KEYSPACE.
    pub(super) fn create_keyspace(&self, create: &CreateKeyspace) -> Result<Answer, CqlError> {
        let mut schema = lock(&self.schema);
        match &schema.keyspace {
            Some(served) if served.name == create.name => {
                return if create.if_not_exists {
                    Ok(Outcome::Void.into())
                } else {
                    Err(CqlError::AlreadyExists {
                        message: format!("Keyspace {} already exists", create.name),
                        keyspace: create.name.clone(),
                        table: String::new(),
                    })
                };
            }
            Some(served) => {
                return Err(CqlError::Invalid(format!(
                    "this endpoint serves one keyspace at a time and {} exists; DROP KEYSPACE \
                     {} first",
                    served.name, served.name
                )));
            }
            None => {}
        }
        let rf = self.cluster.config().replication_factor;
        let mut replication = None;
        let mut durable_writes = true;
        for (name, property) in &create.properties {
            match (name.as_str(), property) {
                ("replication", Property::Map(entries)) => {
                    replication = Some(replication_map(entries, rf)?);
                }
                ("durable_writes", Property::Constant(Constant::Boolean(value))) => {
                    durable_writes = *value;
                }
                (other, _) => {
                    return Err(CqlError::Invalid(format!(
                        "Unknown or malformed keyspace property '{other}' (this endpoint takes \
                         replication = {{...}} and durable_writes = true|false)"
                    )));
                }
            }
        }
        let replication = replication
            .ok_or_else(|| CqlError::Invalid("Missing mandatory option 'replication'".into()))?;
        schema.keyspace = Some(Keyspace {
            name: create.name.clone(),
            replication,
            durable_writes,
        });
        schema.changes += 1;
        drop(schema);
        Ok(self.changed(
            SchemaChangeType::Created,
            SchemaChangeTarget::Keyspace,
            SchemaChangeOptions::Keyspace(create.name.clone()),
        ))
    }

    /// CREATE TABLE of the lock table.
    pub(super) fn create_table(
        &self,
        keyspace: &str,
        create: &CreateTable,
    ) -> Result<Answer, CqlError> {
        let name = &create.table.name;
        check_lock_table_shape(create)?;
        let mut gc_grace_seconds = None;
        let mut compaction = BTreeMap::new();
        let mut comment = String::new();
        let mut id = name_uuid(&format!("table {keyspace}.{name}"));
        let mut warnings = Vec::new();
        for (property, value) in &create.properties {
            match (property.as_str(), value) {
                ("gc_grace_seconds", Property::Constant(Constant::Number(number))) => {
                    let seconds: u32 = number
                        .parse()
                        .ok()
                        .filter(|seconds| *seconds <= Ttl::MAX_SECONDS)
                        .ok_or_else(|| {
                            CqlError::Invalid(format!(
                                "gc_grace_seconds must be 0 to {}, got {number}",
                                Ttl::MAX_SECONDS
                            ))
                        })?;
                    gc_grace_seconds = Some(seconds);
                }
                ("compaction", Property::Map(entries)) => {
                    compaction = entries
                        .iter()
                        .map(|(key, value)| (key.as_text(), value.as_text()))
                        .collect();
                    warnings.push(
                        "compaction options are recorded in system_schema.tables but change \
                         nothing: the simulated cluster has no SSTables and purges tombstones \
                         whenever a replica touches a row"
                            .to_owned(),
                    );
                }
                ("comment", Property::Constant(Constant::Text(text))) => comment = text.clone(),
                ("id", Property::Constant(Constant::Text(text))) => {
                    id = parse_uuid(text).ok_or_else(|| {
                        CqlError::Invalid(format!(
                            "table id must be a UUID such as \
                             '5a1c395e-b41f-11e5-9f22-ba0be0483c18', got '{text}'"
                        ))
                    })?;
                }
                ("default_time_to_live", Property::Constant(Constant::Number(number)))
                    if number == "0" => {}
                ("memtable_flush_period_in_ms", Property::Constant(Constant::Number(number)))
                    if number
                        .parse::<u32>()
                        .is_ok_and(|period| period <= i32::MAX as u32) =>
                {
                    warnings.push(
                        "memtable_flush_period_in_ms changes nothing: the simulated cluster has \
                         no memtables to flush"
                            .to_owned(),
                    );
                }
                (other, _) => {
                    return Err(CqlError::Invalid(format!(
                        "table property '{other}' (or its value) is not supported by this \
                         endpoint; it takes gc_grace_seconds, compaction, comment, id \
                         (quoted), memtable_flush_period_in_ms and default_time_to_live = 0"
                    )));
                }
            }
        }
        let mut schema = lock(&self.schema);
        if schema
            .keyspace
            .as_ref()
            .is_none_or(|served| served.name != keyspace)
        {
            return Err(CqlError::Invalid(format!(
                "Keyspace '{keyspace}' does not exist"
            )));
        }
        match &schema.table {
            Some(table) if table.name == *name => {
                return if create.if_not_exists {
                    Ok(Outcome::Void.into())
                } else {
                    Err(CqlError::AlreadyExists {
                        message: format!("Table {keyspace}.{name} already exists"),
                        keyspace: keyspace.to_owned(),
                        table: name.clone(),
                    })
                };
            }
            Some(table) => {
                return Err(CqlError::Invalid(format!(
                    "this endpoint serves one table at a time and {}.{} exists; DROP TABLE it \
                     first",
                    table.keyspace, table.name
                )));
            }
            None => {}
        }
        let gc_grace_seconds = match gc_grace_seconds {
            Some(seconds) => {
                self.cluster
                    .faults()
                    .set_gc_grace(Duration::from_secs(u64::from(seconds)))
                    .map_err(|error| CqlError::Invalid(error.to_string()))?;
                seconds
            }
            None => u32::try_from(self.cluster.config().gc_grace.as_secs()).unwrap_or(u32::MAX),
        };
        schema.table = Some(Table {
            keyspace: keyspace.to_owned(),
            name: name.clone(),
            gc_grace_seconds,
            compaction,
            comment,
            id,
        });
        schema.changes += 1;
        drop(schema);
        let mut answer = self.changed(
            SchemaChangeType::Created,
            SchemaChangeTarget::Table,
            SchemaChangeOptions::TableType(keyspace.to_owned(), name.clone()),
        );
        answer.warnings = warnings;
        Ok(answer)
    }

    /// DROP KEYSPACE (`table` is `None`) or DROP TABLE: forgets the schema and wipes every
    /// replica, so that a new table starts empty.
    pub(super) fn drop(
        &self,
        keyspace: &str,
        table: Option<&str>,
        if_exists: bool,
    ) -> Result<Answer, CqlError> {
        let mut schema = lock(&self.schema);
        let exists = match table {
            None => schema
                .keyspace
                .as_ref()
                .is_some_and(|served| served.name == keyspace),
            Some(name) => schema.table(keyspace, name).is_some(),
        };
        if !exists {
            return if if_exists {
                Ok(Outcome::Void.into())
            } else {
                Err(CqlError::Invalid(match table {
                    None => format!("Cannot drop non existing keyspace '{keyspace}'."),
                    Some(name) => format!("Table '{keyspace}.{name}' doesn't exist"),
                }))
            };
        }
        schema.table = None;
        if table.is_none() {
            schema.keyspace = None;
        }
        schema.changes += 1;
        drop(schema);
        let faults = self.cluster.faults();
        for replica in 0..self.cluster.config().replicas {
            faults
                .wipe_replica(ReplicaId(replica))
                .map_err(|error| CqlError::Server(error.to_string()))?;
        }
        Ok(match table {
            None => self.changed(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Keyspace,
                SchemaChangeOptions::Keyspace(keyspace.to_owned()),
            ),
            Some(name) => self.changed(
                SchemaChangeType::Dropped,
                SchemaChangeTarget::Table,
                SchemaChangeOptions::TableType(keyspace.to_owned(), name.to_owned()),
            ),
        })
    }

    /// Sends a schema change to the registered connections, and answers with it.
    fn changed(
        &self,
        change_type: SchemaChangeType,
        target: SchemaChangeTarget,
        options: SchemaChangeOptions,
    ) -> Answer {
        let change = SchemaChange {
            change_type,
            target,
            options,
        };
        // Nobody listening is fine.
        let _ = self.events.send(change.clone());
        Outcome::SchemaChange(change).into()
    }

    /// USE: the keyspace of the connection's later statements.
    pub(super) fn use_keyspace(
        &self,
        session: &mut Session,
        keyspace: &str,
    ) -> Result<Answer, CqlError> {
        let exists = schema::is_system_keyspace(keyspace)
            || lock(&self.schema)
                .keyspace
                .as_ref()
                .is_some_and(|served| served.name == keyspace);
        if !exists {
            return Err(CqlError::Invalid(format!(
                "Keyspace '{keyspace}' does not exist"
            )));
        }
        session.keyspace = Some(keyspace.to_owned());
        Ok(Outcome::SetKeyspace(keyspace.to_owned()).into())
    }
}

/// Checks a keyspace's replication map against the simulated cluster and returns it as
/// `system_schema.keyspaces` shows it.
fn replication_map(
    entries: &[(Constant, Constant)],
    rf: usize,
) -> Result<BTreeMap<String, String>, CqlError> {
    let mut map: BTreeMap<String, String> = entries
        .iter()
        .map(|(key, value)| (key.as_text(), value.as_text()))
        .collect();
    let class = map
        .remove("class")
        .ok_or_else(|| CqlError::Invalid("Missing replication strategy class".into()))?;
    let short = class
        .strip_prefix("org.apache.cassandra.locator.")
        .unwrap_or(&class)
        .to_owned();
    let factors: Vec<(String, String)> = map.into_iter().collect();
    let matches = |factor: &str| factor.parse::<usize>().ok() == Some(rf);
    let ok = match short.as_str() {
        "SimpleStrategy" => {
            matches!(factors.as_slice(), [(key, factor)] if key == "replication_factor" && matches(factor))
        }
        "NetworkTopologyStrategy" => {
            matches!(factors.as_slice(), [(dc, factor)] if dc == DATA_CENTER && matches(factor))
        }
        _ => false,
    };
    if !ok {
        return Err(CqlError::Invalid(format!(
            "this endpoint's simulated cluster has one data centre '{DATA_CENTER}' and \
             replication factor {rf} (set by the server's ClusterConfig); the keyspace must ask \
             for exactly that, with SimpleStrategy (replication_factor: {rf}) or \
             NetworkTopologyStrategy ('{DATA_CENTER}': {rf}), got class {class} with {factors:?}"
        )));
    }
    let mut replication: BTreeMap<String, String> = factors.into_iter().collect();
    replication.insert(
        "class".into(),
        format!("org.apache.cassandra.locator.{short}"),
    );
    Ok(replication)
}

/// Checks that a CREATE TABLE describes the lock table, the only shape the simulated
/// cluster can store.
fn check_lock_table_shape(create: &CreateTable) -> Result<(), CqlError> {
    let wanted = "(lock_id text, row_kind text, column_name text, value blob, PRIMARY KEY \
                  ((lock_id, row_kind), column_name)) WITH CLUSTERING ORDER BY (column_name ASC)";
    let mut columns: Vec<(String, String)> = create
        .columns
        .iter()
        .map(|(name, ty)| {
            let ty = if ty == "varchar" { "text" } else { ty.as_str() };
            (name.clone(), ty.to_owned())
        })
        .collect();
    columns.sort();
    let mut expected: Vec<(String, String)> = LOCK_COLUMNS
        .iter()
        .map(|(name, ty, _, _)| ((*name).to_owned(), ty.cql_name().to_owned()))
        .collect();
    expected.sort();
    let ordered = create.clustering_order.is_empty()
        || create.clustering_order == [("column_name".to_owned(), Order::Asc)];
    if columns != expected
        || create.partition_key != ["lock_id", "row_kind"]
        || create.clustering != ["column_name"]
        || !ordered
    {
        return Err(CqlError::Invalid(format!(
            "this endpoint stores only the lock table's shape {wanted}; {} differs",
            create.table
        )));
    }
    Ok(())
}
