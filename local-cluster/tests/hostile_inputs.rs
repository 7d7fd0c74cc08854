//! Hostile values for the local cluster's configuration: every one is refused by
//! `LocalClusterConfig::validate` with a typed error naming its field, never a panic, and
//! `LocalCluster::start` refuses it before it fetches a jar or starts a JVM.

use std::path::PathBuf;
use std::time::Duration;

use lock_local_cluster::{
    CassandraVersion, ClientEncryption, ClusterError, LocalCluster, LocalClusterConfig,
    MAX_HEAP_MIB, MAX_STARTUP_TIMEOUT, PaxosVariant, ReleaseLine,
};

const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";
const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// Client encryption with `key`, `chain` and `client_ca`.
fn encryption(key: &str, chain: &str, client_ca: Option<&str>) -> Option<ClientEncryption> {
    Some(ClientEncryption {
        private_key_pem: key.to_owned(),
        certificate_chain_pem: chain.to_owned(),
        client_ca_pem: client_ca.map(str::to_owned),
    })
}

fn hostile() -> Vec<(LocalClusterConfig, &'static str, &'static str)> {
    let base = LocalClusterConfig::new(3);
    let with = |change: &dyn Fn(&mut LocalClusterConfig)| {
        let mut config = base.clone();
        change(&mut config);
        config
    };
    vec![
        (with(&|c| c.nodes = 0), "nodes", "1 or 3"),
        (with(&|c| c.nodes = 2), "nodes", "1 or 3"),
        (with(&|c| c.nodes = 4), "nodes", "1 or 3"),
        (with(&|c| c.nodes = usize::MAX), "nodes", "1 or 3"),
        (with(&|c| c.data_centers = 0), "data_centers", "1 or 2"),
        (with(&|c| c.data_centers = 3), "data_centers", "1 or 2"),
        (
            with(&|c| c.data_centers = usize::MAX),
            "data_centers",
            "1 or 2",
        ),
        (
            with(&|c| {
                c.nodes = 1;
                c.data_centers = 2;
            }),
            "data_centers",
            "need 3 nodes",
        ),
        (with(&|c| c.heap_mib = 0), "heap_mib", "256"),
        (with(&|c| c.heap_mib = 255), "heap_mib", "256"),
        (with(&|c| c.heap_mib = MAX_HEAP_MIB + 1), "heap_mib", "MiB"),
        (with(&|c| c.heap_mib = u32::MAX), "heap_mib", "MiB"),
        (
            with(&|c| c.startup_timeout = Duration::ZERO),
            "startup_timeout",
            "zero",
        ),
        (
            with(&|c| c.startup_timeout = MAX_STARTUP_TIMEOUT + Duration::from_nanos(1)),
            "startup_timeout",
            "at most",
        ),
        (
            with(&|c| c.startup_timeout = Duration::MAX),
            "startup_timeout",
            "at most",
        ),
        (
            with(&|c| c.cache_dir = PathBuf::new()),
            "cache_dir",
            "empty",
        ),
        (
            with(&|c| c.cache_dir = PathBuf::from("jars\0here")),
            "cache_dir",
            "NUL",
        ),
        (
            with(&|c| c.client_encryption = encryption("", CERTIFICATE, None)),
            "client_encryption.private_key_pem",
            "PRIVATE KEY",
        ),
        (
            with(&|c| {
                c.client_encryption = encryption(
                    "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n",
                    CERTIFICATE,
                    None,
                )
            }),
            "client_encryption.private_key_pem",
            "encrypted",
        ),
        (
            with(&|c| c.client_encryption = encryption(KEY, KEY, None)),
            "client_encryption.certificate_chain_pem",
            "CERTIFICATE",
        ),
        (
            with(&|c| c.client_encryption = encryption(KEY, CERTIFICATE, Some(""))),
            "client_encryption.client_ca_pem",
            "certificate",
        ),
        (
            with(&|c| {
                c.version = Some(ReleaseLine::V4_0.tested_release());
                c.paxos_variant = PaxosVariant::V2;
            }),
            "paxos_variant",
            "4.1",
        ),
        (
            with(&|c| {
                c.version = Some(ReleaseLine::V4_0.tested_release());
                c.client_encryption = encryption(KEY, CERTIFICATE, None);
            }),
            "client_encryption",
            "PEM",
        ),
    ]
}

/// What 4.0 lacks is refused only there: Paxos v2 and PEM keys are fine on 4.1 and 5.0.
#[test]
fn paxos_v2_and_pem_keys_are_refused_on_4_0_only() {
    for line in [ReleaseLine::V4_1, ReleaseLine::V5_0] {
        let config = LocalClusterConfig {
            version: Some(line.tested_release()),
            paxos_variant: PaxosVariant::V2,
            client_encryption: encryption(KEY, CERTIFICATE, None),
            ..LocalClusterConfig::new(1)
        };
        assert!(config.validate().is_ok(), "{line}: {:?}", config.validate());
    }
}

/// A release outside the supported lines is its own typed error, naming the text.
#[test]
fn unsupported_versions_are_refused_with_what_was_given() {
    for text in ["3.11.17", "4.2", "5.1.0", "latest"] {
        match text.parse::<CassandraVersion>() {
            Err(error @ ClusterError::UnsupportedVersion { .. }) => {
                let message = error.to_string();
                assert!(
                    message.contains(&format!("{text:?}")) && message.contains("4.1.x"),
                    "{message}"
                );
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

#[test]
fn hostile_local_cluster_configurations_are_refused_by_name() {
    for (config, field, says) in hostile() {
        match config.validate() {
            Err(ClusterError::InvalidConfig {
                field: named,
                reason,
            }) => {
                assert_eq!(named, field, "{config:?}: {reason}");
                assert!(
                    reason.contains(says),
                    "{config:?}: {reason} should say {says:?}"
                );
            }
            other => panic!("{config:?} must be refused for {field}, got {other:?}"),
        }
    }
}

#[test]
fn start_refuses_a_hostile_configuration_before_starting_anything() {
    for (config, field, _) in hostile() {
        match LocalCluster::start(config.clone()) {
            Err(ClusterError::InvalidConfig { field: named, .. }) => {
                assert_eq!(named, field, "{config:?}")
            }
            Err(other) => panic!("{config:?}: expected {field} refused, got {other}"),
            Ok(_) => panic!("{config:?} started a cluster"),
        }
    }
    assert!(matches!(
        lock_local_cluster::shared("hostile", 4),
        Err(ClusterError::InvalidConfig { field: "nodes", .. })
    ));
}

#[test]
fn the_extremes_that_are_accepted_validate() {
    for nodes in [1, 3] {
        for heap_mib in [256, 512, MAX_HEAP_MIB] {
            for startup_timeout in [Duration::from_nanos(1), MAX_STARTUP_TIMEOUT] {
                let config = LocalClusterConfig {
                    heap_mib,
                    startup_timeout,
                    cache_dir: PathBuf::from("relative/jars"),
                    ..LocalClusterConfig::new(nodes)
                };
                assert!(config.validate().is_ok(), "{config:?}");
            }
        }
    }
    let two_data_centres = LocalClusterConfig {
        data_centers: 2,
        ..LocalClusterConfig::new(3)
    };
    assert!(two_data_centres.validate().is_ok(), "{two_data_centres:?}");
    for client_ca in [None, Some(CERTIFICATE)] {
        let encrypted = LocalClusterConfig {
            client_encryption: encryption(KEY, CERTIFICATE, client_ca),
            ..LocalClusterConfig::new(1)
        };
        assert!(encrypted.validate().is_ok(), "{encrypted:?}");
    }
}
