//! Client-to-node encryption (TLS): [`TlsConfig`], how its PEM material is loaded, and the
//! rustls client configuration handed to the driver.
//!
//! The driver connects to every node by its IP address (the contact points are resolved,
//! the other nodes come from `system.peers`), and checks the node's certificate against
//! that address: with [`TlsConfig::verify_hostname`] on (the default) each node's
//! certificate must list the IP address clients reach it on as a subject alternative name
//! (`IP:10.0.0.5`). Certificates that name the nodes only by DNS name fail that check; set
//! `verify_hostname` to `false` for them, which still requires a certificate chain signed by
//! one of the configured CAs but accepts it for any name.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::error::CassandraError;

/// Where a piece of PEM material comes from: a file, or the PEM text itself.
///
/// Either way it is PEM text (`-----BEGIN CERTIFICATE-----` …), as `openssl` and
/// Cassandra's `PEMBasedSslContextFactory` write it; DER, JKS and PKCS#12 files must be
/// converted first (`openssl x509 -inform der`, `keytool -exportcert -rfc`,
/// `openssl pkcs12 -nodes`). `Debug` never prints the contents (they may be a private key).
#[derive(Clone, PartialEq, Eq)]
pub enum PemSource {
    /// A PEM file, read when the configuration is validated and again at connect.
    File(PathBuf),
    /// PEM text already in memory (from a secret store, say).
    Pem(Vec<u8>),
}

impl PemSource {
    /// A PEM file at `path`.
    pub fn file(path: impl Into<PathBuf>) -> Self {
        PemSource::File(path.into())
    }

    /// PEM text held in memory.
    pub fn pem(text: impl Into<Vec<u8>>) -> Self {
        PemSource::Pem(text.into())
    }

    /// How errors name it: the file's path, or "the PEM given inline".
    fn origin(&self) -> String {
        match self {
            PemSource::File(path) => format!("file {}", path.display()),
            PemSource::Pem(_) => "the PEM text given inline".to_owned(),
        }
    }

    /// Its bytes: the file's contents, or the inline text.
    fn read(&self, field: &'static str) -> Result<std::borrow::Cow<'_, [u8]>, CassandraError> {
        match self {
            PemSource::File(path) => {
                std::fs::read(path)
                    .map(std::borrow::Cow::Owned)
                    .map_err(|error| CassandraError::TlsFileUnreadable {
                        field,
                        path: path.clone(),
                        error,
                    })
            }
            PemSource::Pem(bytes) => Ok(std::borrow::Cow::Borrowed(bytes)),
        }
    }
}

impl fmt::Debug for PemSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PemSource::File(path) => f.debug_tuple("File").field(path).finish(),
            PemSource::Pem(bytes) => write!(f, "Pem(<{} bytes>)", bytes.len()),
        }
    }
}

impl From<PathBuf> for PemSource {
    fn from(path: PathBuf) -> Self {
        PemSource::File(path)
    }
}

impl From<&Path> for PemSource {
    fn from(path: &Path) -> Self {
        PemSource::File(path.to_owned())
    }
}

/// Client-to-node encryption: set [`crate::CassandraConfig::tls`] to connect over TLS to
/// nodes whose `client_encryption_options` are enabled.
///
/// ```
/// use lock_storage_cassandra::{CassandraConfig, PemSource, TlsConfig};
///
/// let mut config = CassandraConfig::new(["10.0.0.5:9042"], "locks");
/// config.tls = Some(TlsConfig {
///     // For mutual TLS (`require_client_auth: true` on the nodes):
///     client_certificate: Some(PemSource::file("/etc/locks/client.pem")),
///     client_key: Some(PemSource::file("/etc/locks/client.key")),
///     ..TlsConfig::new(PemSource::file("/etc/locks/cassandra-ca.pem"))
/// });
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// The certificate authorities that sign the nodes' certificates: one or more PEM
    /// `CERTIFICATE` blocks. Only these are trusted (the system's CAs are not); for
    /// self-signed node certificates, give every node's certificate.
    pub ca_certificates: PemSource,
    /// For mutual TLS (`require_client_auth: true`): this client's certificate chain, PEM,
    /// its own certificate first, then any intermediates. Needs [`TlsConfig::client_key`].
    pub client_certificate: Option<PemSource>,
    /// The private key of [`TlsConfig::client_certificate`]: one unencrypted PEM key
    /// (`PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY`). It may sit in the same file
    /// as the certificate. Needs `client_certificate`.
    pub client_key: Option<PemSource>,
    /// Check that each node's certificate is issued for the address the driver connects
    /// to (its IP address: see the [module docs](crate::tls)). On by default; `false`
    /// still requires a certificate signed by [`TlsConfig::ca_certificates`], but for any
    /// name: any holder of such a certificate can then pose as a node. Turn it off only
    /// for test clusters or certificates without IP addresses.
    pub verify_hostname: bool,
}

impl TlsConfig {
    /// TLS trusting the CA certificates in `ca_certificates`, with hostname verification
    /// and without a client certificate.
    pub fn new(ca_certificates: impl Into<PemSource>) -> Self {
        TlsConfig {
            ca_certificates: ca_certificates.into(),
            client_certificate: None,
            client_key: None,
            verify_hostname: true,
        }
    }

    /// Reads and parses every certificate and key and builds the client configuration,
    /// without touching the network: what [`crate::CassandraConfig::validate`] calls.
    pub fn validate(&self) -> Result<(), CassandraError> {
        self.client_config().map(|_| ())
    }

    /// The rustls client configuration the driver connects with: TLS 1.2 or 1.3 with
    /// aws-lc-rs's safe defaults, trusting [`TlsConfig::ca_certificates`] only.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, CassandraError> {
        let identity = match (&self.client_certificate, &self.client_key) {
            (Some(certificate), Some(key)) => Some((
                load_certificates("tls.client_certificate", certificate)?,
                load_private_key("tls.client_key", key)?,
            )),
            (None, None) => None,
            (None, Some(_)) => {
                return Err(CassandraError::InvalidConfig {
                    field: "tls.client_key",
                    reason: "is set without tls.client_certificate; give the certificate the key \
                             belongs to, or leave both unset when the nodes do not require client \
                             certificates"
                        .into(),
                });
            }
            (Some(_), None) => {
                return Err(CassandraError::InvalidConfig {
                    field: "tls.client_certificate",
                    reason: "is set without tls.client_key; give the certificate's private key \
                             (it may be the same PEM file), or leave both unset"
                        .into(),
                });
            }
        };
        let mut roots = RootCertStore::empty();
        for certificate in load_certificates("tls.ca_certificates", &self.ca_certificates)? {
            roots
                .add(certificate)
                .map_err(|error| CassandraError::TlsSetup {
                    field: "tls.ca_certificates",
                    reason: format!(
                        "{} holds a certificate that cannot be used as a trust anchor",
                        self.ca_certificates.origin()
                    ),
                    error,
                })?;
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|error| CassandraError::TlsSetup {
                field: "tls.ca_certificates",
                reason: "no certificate verifier could be built from it".into(),
                error: rustls::Error::General(error.to_string()),
            })?;
        let verifier: Arc<dyn ServerCertVerifier> = if self.verify_hostname {
            webpki
        } else {
            Arc::new(AnyNameVerifier { inner: webpki })
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| CassandraError::TlsSetup {
                field: "tls",
                reason: "the crypto provider offers no TLS version".into(),
                error,
            })?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match identity {
            Some((chain, key)) => builder.with_client_auth_cert(chain, key).map_err(|error| {
                CassandraError::TlsSetup {
                    field: "tls.client_key",
                    reason: "the client certificate and key cannot be used together (is the key \
                             the certificate's, and of a type TLS supports: RSA, ECDSA P-256/P-384 \
                             or Ed25519?)"
                        .into(),
                    error,
                }
            })?,
            None => builder.with_no_client_auth(),
        };
        Ok(Arc::new(config))
    }
}

/// The PEM sections of one source.
struct Sections {
    /// Every section of a kind this crate knows, in order; sections of other kinds
    /// (encrypted keys, parameters) are skipped.
    known: Vec<(SectionKind, Vec<u8>)>,
    /// Whether it holds an encrypted private key (skipped above).
    encrypted_key: bool,
}

/// The PEM sections of `source`.
fn sections(field: &'static str, source: &PemSource) -> Result<Sections, CassandraError> {
    let bytes = source.read(field)?;
    let known = <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| CassandraError::TlsPemInvalid {
            field,
            origin: source.origin(),
            error,
        })?;
    Ok(Sections {
        known,
        encrypted_key: contains(&bytes, b"-----BEGIN ENCRYPTED PRIVATE KEY-----"),
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The certificates of `source`, in order; at least one.
fn load_certificates(
    field: &'static str,
    source: &PemSource,
) -> Result<Vec<CertificateDer<'static>>, CassandraError> {
    let certificates = sections(field, source)?
        .known
        .into_iter()
        .filter(|(kind, _)| *kind == SectionKind::Certificate)
        .map(|(_, der)| CertificateDer::from(der))
        .collect::<Vec<_>>();
    if certificates.is_empty() {
        return Err(CassandraError::TlsPemMissing {
            field,
            origin: source.origin(),
            expected: "certificate (-----BEGIN CERTIFICATE-----)",
            hint: "give the PEM text of the certificate(s); convert a DER file with `openssl x509 \
                   -inform der -in FILE -out FILE.pem`, a JKS or PKCS#12 store with `keytool \
                   -exportcert -rfc` or `openssl pkcs12 -nokeys`",
        });
    }
    Ok(certificates)
}

/// The one private key of `source`.
fn load_private_key(
    field: &'static str,
    source: &PemSource,
) -> Result<PrivateKeyDer<'static>, CassandraError> {
    let Sections {
        known,
        encrypted_key,
    } = sections(field, source)?;
    let mut keys = known.into_iter().filter_map(|(kind, der)| match kind {
        SectionKind::PrivateKey => Some(PrivateKeyDer::Pkcs8(der.into())),
        SectionKind::RsaPrivateKey => Some(PrivateKeyDer::Pkcs1(der.into())),
        SectionKind::EcPrivateKey => Some(PrivateKeyDer::Sec1(der.into())),
        _ => None,
    });
    let Some(key) = keys.next() else {
        return Err(CassandraError::TlsPemMissing {
            field,
            origin: source.origin(),
            expected: "unencrypted private key (-----BEGIN PRIVATE KEY-----)",
            hint: if encrypted_key {
                "it holds an encrypted key, which this crate cannot decrypt; write it out \
                 unencrypted (`openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pem`) and protect \
                 the file instead"
            } else {
                "give the PEM text of the client certificate's private key"
            },
        });
    };
    if keys.next().is_some() {
        return Err(CassandraError::InvalidConfig {
            field,
            reason: format!(
                "{} holds more than one private key; give only the client certificate's",
                source.origin()
            ),
        });
    }
    Ok(key)
}

/// Checks a node's certificate chain against the configured CAs like rustls's own
/// verifier, but accepts it whatever name it was issued for
/// ([`TlsConfig::verify_hostname`] `false`). Rustls checks the chain (signatures, validity
/// dates, key usage) before the name, so a name error means the chain passed.
#[derive(Debug)]
struct AnyNameVerifier {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    use rustls::{ClientConnection, ServerConfig, ServerConnection};

    use super::*;
    use crate::CassandraConfig;
    use crate::error::{TlsFailure, tls_failure};

    struct Authority {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn authority(name: &str) -> Authority {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Authority {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// (certificate PEM, key PEM) for `names`, signed by `ca`.
    fn leaf(ca: &Authority, names: &[&str], server: bool) -> (String, String) {
        let names = names
            .iter()
            .map(|name| (*name).to_owned())
            .collect::<Vec<_>>();
        let mut params = CertificateParams::new(names).unwrap();
        params.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &ca.issuer).unwrap();
        (certificate.pem(), key.serialize_pem())
    }

    fn tls(ca: &Authority) -> TlsConfig {
        TlsConfig::new(PemSource::pem(ca.pem.as_str()))
    }

    /// The error `tls` is refused with.
    fn refusal(tls: &TlsConfig) -> CassandraError {
        match tls.validate() {
            Err(error) => error,
            Ok(()) => panic!("{tls:?} was accepted"),
        }
    }

    #[test]
    fn a_ca_and_a_client_identity_in_pem_are_accepted_from_files_and_text() {
        let ca = authority("ca");
        let (certificate, key) = leaf(&ca, &["client.invalid"], false);
        tls(&ca).validate().unwrap();
        let dir = std::env::temp_dir().join(format!("lock-tls-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_file = dir.join("ca.pem");
        let identity_file = dir.join("client.pem");
        std::fs::write(&ca_file, &ca.pem).unwrap();
        // The certificate and its key in one file, as many tools write them.
        std::fs::write(&identity_file, format!("{certificate}{key}")).unwrap();
        let from_files = TlsConfig {
            client_certificate: Some(PemSource::file(&identity_file)),
            client_key: Some(PemSource::file(&identity_file)),
            ..TlsConfig::new(ca_file.as_path())
        };
        let validated = from_files.validate();
        std::fs::remove_dir_all(&dir).unwrap();
        validated.unwrap();
        assert!(
            from_files.verify_hostname,
            "hostname verification is on by default"
        );
    }

    #[test]
    fn an_unreadable_file_names_the_setting_and_the_path() {
        let missing = std::path::PathBuf::from("/nonexistent/lock-tls/ca.pem");
        let error = refusal(&TlsConfig::new(missing.as_path()));
        let CassandraError::TlsFileUnreadable { field, path, .. } = &error else {
            panic!("{error:?}");
        };
        assert_eq!((*field, path), ("tls.ca_certificates", &missing));
        assert!(
            std::error::Error::source(&error).is_some(),
            "keeps the I/O error"
        );
        assert!(
            error.to_string().contains("/nonexistent/lock-tls/ca.pem"),
            "{error}"
        );
    }

    #[test]
    fn malformed_pem_is_refused_as_such() {
        for text in [
            "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
            "-----BEGIN CERTIFICATE-----\nMIIB\n",
        ] {
            let error = refusal(&TlsConfig::new(PemSource::pem(text)));
            assert!(
                matches!(
                    error,
                    CassandraError::TlsPemInvalid {
                        field: "tls.ca_certificates",
                        ..
                    }
                ),
                "{text:?}: {error:?}"
            );
            assert!(std::error::Error::source(&error).is_some());
        }
    }

    #[test]
    fn pem_without_the_expected_block_says_what_is_missing() {
        let ca = authority("ca");
        let (certificate, key) = leaf(&ca, &["client.invalid"], false);
        // A DER file, a key where the CA belongs, nothing at all.
        for text in [&b"\x30\x82\x01\x0a"[..], key.as_bytes(), b""] {
            let error = refusal(&TlsConfig::new(PemSource::pem(text)));
            assert!(
                matches!(
                    &error,
                    CassandraError::TlsPemMissing { field: "tls.ca_certificates", expected, .. }
                        if expected.contains("certificate")
                ),
                "{error:?}"
            );
        }
        // A certificate where the key belongs.
        let error = refusal(&TlsConfig {
            client_certificate: Some(PemSource::pem(certificate.as_str())),
            client_key: Some(PemSource::pem(certificate.as_str())),
            ..tls(&ca)
        });
        assert!(
            matches!(
                &error,
                CassandraError::TlsPemMissing {
                    field: "tls.client_key",
                    ..
                }
            ),
            "{error:?}"
        );
        // An encrypted key: the hint says to decrypt it.
        let encrypted =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----\n";
        let error = refusal(&TlsConfig {
            client_certificate: Some(PemSource::pem(certificate.as_str())),
            client_key: Some(PemSource::pem(encrypted)),
            ..tls(&ca)
        });
        assert!(error.to_string().contains("encrypted"), "{error}");
    }

    #[test]
    fn a_key_needs_its_certificate_and_the_other_way_round() {
        let ca = authority("ca");
        let (certificate, key) = leaf(&ca, &["client.invalid"], false);
        let key_only = TlsConfig {
            client_key: Some(PemSource::pem(key.as_str())),
            ..tls(&ca)
        };
        let certificate_only = TlsConfig {
            client_certificate: Some(PemSource::pem(certificate.as_str())),
            ..tls(&ca)
        };
        for (config, expected) in [
            (key_only, "tls.client_key"),
            (certificate_only, "tls.client_certificate"),
        ] {
            match refusal(&config) {
                CassandraError::InvalidConfig { field, .. } => assert_eq!(field, expected),
                other => panic!("{other:?}"),
            }
        }
        // A key that is not the certificate's.
        let (_, other_key) = leaf(&ca, &["other.invalid"], false);
        let mismatched = TlsConfig {
            client_certificate: Some(PemSource::pem(certificate.as_str())),
            client_key: Some(PemSource::pem(other_key.as_str())),
            ..tls(&ca)
        };
        let error = refusal(&mismatched);
        assert!(
            matches!(
                error,
                CassandraError::TlsSetup {
                    field: "tls.client_key",
                    ..
                }
            ),
            "{error:?}"
        );
        // Two keys: which one is meant is not guessed.
        let two_keys = TlsConfig {
            client_certificate: Some(PemSource::pem(certificate.as_str())),
            client_key: Some(PemSource::pem(format!("{key}{other_key}"))),
            ..tls(&ca)
        };
        assert!(matches!(
            refusal(&two_keys),
            CassandraError::InvalidConfig {
                field: "tls.client_key",
                ..
            }
        ));
    }

    #[test]
    fn the_backend_config_validates_its_tls_setting_before_connecting() {
        let config = CassandraConfig {
            tls: Some(TlsConfig::new(PemSource::pem("no PEM here"))),
            ..CassandraConfig::new(["127.0.0.1:9042"], "locks")
        };
        assert!(matches!(
            config.validate(),
            Err(CassandraError::TlsPemMissing { .. })
        ));
    }

    #[test]
    fn debug_never_prints_pem_text() {
        let source = PemSource::pem("-----BEGIN PRIVATE KEY-----\nsecret\n");
        let shown = format!("{source:?}");
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("bytes"), "{shown}");
    }

    /// Runs a TLS handshake in memory between a client with `client` and a server
    /// presenting `certificate` (PEM, with `key`), the client connecting to `address` as
    /// the driver does (by IP address). The client's error, if any.
    fn handshake(
        client: &TlsConfig,
        (certificate, key): &(String, String),
        address: Ipv4Addr,
    ) -> Result<(), rustls::Error> {
        let chain = CertificateDer::pem_slice_iter(certificate.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let server_config = ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
        let name = ServerName::IpAddress(IpAddr::V4(address).into());
        let mut client = ClientConnection::new(client.client_config().unwrap(), name).unwrap();
        let mut server = ServerConnection::new(Arc::new(server_config)).unwrap();
        for _ in 0..16 {
            let mut bytes = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut bytes).unwrap();
            }
            let mut unread = &bytes[..];
            while !unread.is_empty() {
                server.read_tls(&mut unread).unwrap();
            }
            server.process_new_packets().unwrap();
            let mut bytes = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut bytes).unwrap();
            }
            let mut unread = &bytes[..];
            while !unread.is_empty() {
                client.read_tls(&mut unread).unwrap();
            }
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn hostname_verification_checks_the_address_and_can_be_turned_off_but_not_the_ca() {
        let ca = authority("ca");
        let node = Ipv4Addr::new(10, 1, 2, 3);
        let right = leaf(&ca, &["10.1.2.3"], true);
        let elsewhere = leaf(&ca, &["10.9.9.9", "node.invalid"], true);
        handshake(&tls(&ca), &right, node).unwrap();
        let mismatch = handshake(&tls(&ca), &elsewhere, node).unwrap_err();
        assert!(
            matches!(tls_failure(&mismatch), TlsFailure::HostnameMismatch { .. }),
            "{mismatch:?}"
        );
        let any_name = TlsConfig {
            verify_hostname: false,
            ..tls(&ca)
        };
        handshake(&any_name, &elsewhere, node).unwrap();
        // Without hostname verification the chain is still checked.
        let stranger = authority("stranger");
        let untrusted =
            handshake(&any_name, &leaf(&stranger, &["10.1.2.3"], true), node).unwrap_err();
        assert!(
            matches!(
                tls_failure(&untrusted),
                TlsFailure::UntrustedCertificate { .. }
            ),
            "{untrusted:?}"
        );
        let untrusted =
            handshake(&tls(&ca), &leaf(&stranger, &["10.1.2.3"], true), node).unwrap_err();
        assert!(
            matches!(
                tls_failure(&untrusted),
                TlsFailure::UntrustedCertificate { .. }
            ),
            "{untrusted:?}"
        );
    }
}
