//! The backend on a real local Apache Cassandra 5.0 node that requires TLS from clients
//! (`client_encryption_options` with `enabled: true`, `optional: false`), then on one that
//! also requires a client certificate (`require_client_auth: true`), with a CA and
//! certificates this test makes: one node at a time, started by this crate's harness for
//! this file alone. Without `java` or `mvn` the test says it was skipped; under `CI=true`
//! that is a failure.
//!
//! And, without Cassandra, a TLS client of a plaintext CQL server (this workspace's CQL
//! endpoint over the in-memory cluster).

mod checks;

use std::time::Duration;

use checks::lock_and_release;
use cql_endpoint::CqlServer;
use lock_local_cluster::{
    ClientEncryption, LocalCluster, LocalClusterConfig, ReleaseLine, check_on_own_cluster,
    possible_node_addresses,
};
use lock_storage_cassandra::{
    CassandraConfig, CassandraError, CassandraStorage, PemSource, Replication, SchemaConfig,
    TlsConfig, TlsFailure,
};
use lock_storage_memory::{ClusterConfig, MemoryCluster};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

const KEYSPACE: &str = "locks_over_tls";

/// A certificate authority made for this test.
struct Authority {
    certificate_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Result<Self, String> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(text)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().map_err(text)?;
        let certificate = params.self_signed(&key).map_err(text)?;
        Ok(Authority {
            certificate_pem: certificate.pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// A certificate for `names` (IP addresses or DNS names) signed by this authority, for
    /// a server or a client: (certificate PEM, private key PEM).
    fn issue(
        &self,
        common_name: &str,
        names: Vec<String>,
        server: bool,
    ) -> Result<(String, String), String> {
        let mut params = CertificateParams::new(names).map_err(text)?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().map_err(text)?;
        let certificate = params.signed_by(&key, &self.issuer).map_err(text)?;
        Ok((certificate.pem(), key.serialize_pem()))
    }
}

fn text(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// The certificates of one run: the nodes' CA and certificate, a client certificate the
/// nodes trust, and a second CA the nodes know nothing of, with a client certificate of
/// its own.
struct Pki {
    node_ca: Authority,
    node_certificate: (String, String),
    client: (String, String),
    stranger_ca: Authority,
    stranger_client: (String, String),
}

impl Pki {
    fn new() -> Result<Self, String> {
        let node_ca = Authority::new("lock test node CA")?;
        let mut names = possible_node_addresses()
            .into_iter()
            .map(|address| address.to_string())
            .collect::<Vec<_>>();
        names.push("localhost".into());
        let node_certificate = node_ca.issue("lock test node", names, true)?;
        let client = node_ca.issue("locker", vec!["locker.invalid".into()], false)?;
        let stranger_ca = Authority::new("someone else's CA")?;
        let stranger_client =
            stranger_ca.issue("stranger", vec!["stranger.invalid".into()], false)?;
        Ok(Pki {
            node_ca,
            node_certificate,
            client,
            stranger_ca,
            stranger_client,
        })
    }

    fn client_encryption(&self) -> ClientEncryption {
        ClientEncryption {
            private_key_pem: self.node_certificate.1.clone(),
            certificate_chain_pem: self.node_certificate.0.clone(),
            client_ca_pem: Some(self.node_ca.certificate_pem.clone()),
        }
    }
}

/// A TLS setting trusting `ca`, presenting `client` (certificate, key) if given.
fn tls(ca: &Authority, client: Option<&(String, String)>) -> TlsConfig {
    TlsConfig {
        client_certificate: client.map(|(certificate, _)| PemSource::pem(certificate.as_str())),
        client_key: client.map(|(_, key)| PemSource::pem(key.as_str())),
        ..TlsConfig::new(PemSource::pem(ca.certificate_pem.as_str()))
    }
}

fn config(cluster: &LocalCluster, tls: Option<TlsConfig>, create: bool) -> CassandraConfig {
    CassandraConfig {
        tls,
        request_timeout: Duration::from_secs(10),
        connection_timeout: Duration::from_secs(10),
        schema: create.then(|| {
            SchemaConfig::new(Replication::Simple {
                replication_factor: 1,
            })
        }),
        ..CassandraConfig::new(cluster.contact_points(), KEYSPACE)
    }
}

/// Connects, expecting a failure; says which.
async fn refused(config: CassandraConfig) -> Result<CassandraError, String> {
    match CassandraStorage::connect(config).await {
        Ok(_) => Err("connected".into()),
        Err(error) => Ok(error),
    }
}

/// The refusals every node that requires TLS gives: a client trusting another CA refuses
/// the node's certificate; a plaintext client is told that the node wants TLS.
async fn check_refusals(cluster: &LocalCluster, pki: &Pki) -> Result<(), String> {
    let client = Some(&pki.client);
    match refused(config(cluster, Some(tls(&pki.stranger_ca, client)), false)).await? {
        CassandraError::TlsHandshake {
            failure: TlsFailure::UntrustedCertificate { .. },
            ..
        } => {}
        other => return Err(format!("a client trusting another CA gave {other}")),
    }
    match refused(config(cluster, None, false)).await? {
        CassandraError::TlsRequiredByServer { .. } => Ok(()),
        other => Err(format!("a plaintext client gave {other}")),
    }
}

/// On a node that requires TLS but no client certificate.
async fn check_tls(cluster: &LocalCluster, pki: &Pki) -> Result<(), String> {
    lock_and_release(
        config(cluster, Some(tls(&pki.node_ca, None)), true),
        "over-tls",
        "the trusted client",
    )
    .await?;
    check_refusals(cluster, pki).await
}

/// On a node that also requires a client certificate signed by its CA.
async fn check_mutual_tls(cluster: &LocalCluster, pki: &Pki) -> Result<(), String> {
    let trusted = tls(&pki.node_ca, Some(&pki.client));
    lock_and_release(
        config(cluster, Some(trusted), true),
        "over-tls",
        "the trusted client",
    )
    .await?;
    check_refusals(cluster, pki).await?;
    // No client certificate, or one from another CA, is refused.
    for (client, what) in [
        (None, "a client without a certificate"),
        (
            Some(&pki.stranger_client),
            "a client certificate from another CA",
        ),
    ] {
        match refused(config(cluster, Some(tls(&pki.node_ca, client)), false)).await? {
            CassandraError::TlsHandshake {
                failure: TlsFailure::ClientCertificateRefused { .. },
                ..
            } => {}
            other => return Err(format!("{what} gave {other}")),
        }
    }
    Ok(())
}

/// Two nodes, one after the other (each alone, so that two JVMs never compete for the
/// machine). A node that requires TLS: a client with the node's CA creates the schema and
/// takes and releases a lock; a client trusting another CA is refused with
/// `TlsFailure::UntrustedCertificate`, a plaintext client with `TlsRequiredByServer`. A
/// node that also requires client certificates: a client with a certificate signed by its
/// CA takes and releases a lock; the same two refusals; a client without a certificate,
/// or with one from another CA, is refused with `TlsFailure::ClientCertificateRefused`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_that_require_tls() {
    let version = LocalClusterConfig::for_tests(1)
        .cassandra_version()
        .unwrap_or_else(|error| panic!("{error}"));
    if version.line() == ReleaseLine::V4_0 {
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "real-cassandra: skipped nodes_that_require_tls: Cassandra {version} cannot read \
             PEM keys (they came in 4.1)"
        );
        return;
    }
    let pki = match Pki::new() {
        Ok(pki) => pki,
        Err(error) => panic!("making the certificates: {error}"),
    };
    let tls_only = LocalClusterConfig {
        client_encryption: Some(ClientEncryption {
            client_ca_pem: None,
            ..pki.client_encryption()
        }),
        ..LocalClusterConfig::for_tests(1)
    };
    let outcome = check_on_own_cluster("a_node_that_requires_tls", tls_only, async |cluster| {
        check_tls(cluster, &pki).await
    })
    .await;
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    let mutual = LocalClusterConfig {
        client_encryption: Some(pki.client_encryption()),
        ..LocalClusterConfig::for_tests(1)
    };
    let outcome = check_on_own_cluster(
        "a_node_that_requires_tls_and_client_certificates",
        mutual,
        async |cluster| check_mutual_tls(cluster, &pki).await,
    )
    .await;
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// A client configured for TLS that reaches a node speaking plaintext CQL is refused with
/// `TlsFailure::ServerNotTls`, quickly, whichever CA it trusts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_of_a_plaintext_server_is_told_so() {
    let pki = match Pki::new() {
        Ok(pki) => pki,
        Err(error) => panic!("making the certificates: {error}"),
    };
    let cluster = match MemoryCluster::new(ClusterConfig::default()) {
        Ok(cluster) => cluster,
        Err(error) => panic!("the in-memory cluster: {error}"),
    };
    let server = match CqlServer::start(cluster, "127.0.0.1:0").await {
        Ok(server) => server,
        Err(error) => panic!("the CQL endpoint: {error}"),
    };
    let config = CassandraConfig {
        tls: Some(tls(&pki.node_ca, None)),
        ..CassandraConfig::new([server.contact_point()], KEYSPACE)
    };
    let begun = std::time::Instant::now();
    match refused(config).await {
        Ok(CassandraError::TlsHandshake {
            failure: TlsFailure::ServerNotTls { .. },
            ..
        }) => {}
        Ok(other) => panic!("a TLS client of a plaintext server gave {other}"),
        Err(connected) => panic!("a TLS client of a plaintext server {connected}"),
    }
    assert!(
        begun.elapsed() < Duration::from_secs(4),
        "the refusal took {:?}, not the prompt answer of a server that does not speak TLS",
        begun.elapsed()
    );
    server.shutdown().await;
}
