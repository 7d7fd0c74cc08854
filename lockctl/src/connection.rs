//! Where the lock lives: a Cassandra (or ScyllaDB) cluster given by its contact points, or,
//! without them, the demonstration's simulated cluster.

use std::path::PathBuf;

use clap::Args;
use clap::builder::RangedU64ValueParser;
use lock_core::LockConfig;
use lock_storage_cassandra::{CassandraConfig, Credentials, PemSource, TlsConfig};

use crate::demo::Demo;
use crate::{Error, PASSWORD_VARIABLE};

/// The most owners the demonstration queues behind its holder.
pub const MAX_WAITERS: u64 = 100;

/// The options of the commands that act on one lock: `inspect`, `force-release`, `watch`.
#[derive(Clone, Debug, Args)]
pub struct Connection {
    /// The Cassandra or ScyllaDB cluster: comma-separated contact points, `host` (port
    /// 9042) or `host:port`; the driver finds the other nodes. Needs --keyspace. Without
    /// it the command runs a demonstration on a simulated cluster inside lockctl, and says
    /// so.
    #[arg(
        long,
        value_name = "HOST[:PORT],...",
        value_delimiter = ',',
        num_args = 1,
        requires = "keyspace"
    )]
    pub cassandra: Option<Vec<String>>,
    /// The keyspace of the lock table (`lock_cells`), as the application's
    /// `CassandraConfig` names it. Required with --cassandra: there is no default, since a
    /// wrong keyspace would show the lock free (a cluster set up by lock-bench uses
    /// `lock_bench`).
    #[arg(long, requires = "cassandra")]
    pub keyspace: Option<String>,
    /// The user to log in as, for a cluster that requires a password
    /// (`PasswordAuthenticator`). The password is read from the environment variable
    /// `LOCKCTL_CASSANDRA_PASSWORD`, never from the command line.
    #[arg(long, requires = "cassandra")]
    pub username: Option<String>,
    /// The data centre to send requests to first (the nearest one); by default the driver
    /// uses every node.
    #[arg(long, value_name = "DC", requires = "cassandra")]
    pub local_dc: Option<String>,
    /// Connect over TLS (client-to-node encryption), trusting the CA certificate(s) in this
    /// PEM file to sign the nodes' certificates. Each node's certificate must name the IP
    /// address lockctl reaches it on, unless --tls-no-hostname-check.
    #[arg(long, value_name = "FILE", requires = "cassandra")]
    pub tls_ca: Option<PathBuf>,
    /// For nodes that require client certificates (mutual TLS): lockctl's certificate
    /// chain, PEM. Needs --tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_key"])]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert: unencrypted PEM (it may be the same file).
    #[arg(long, value_name = "FILE", requires_all = ["tls_ca", "tls_cert"])]
    pub tls_key: Option<PathBuf>,
    /// Accept a node certificate signed by the --tls-ca CA whatever name it was issued
    /// for: for test clusters, or certificates that name the nodes only by DNS name. Any
    /// holder of a certificate from that CA can then pose as a node.
    #[arg(long, requires = "tls_ca")]
    pub tls_no_hostname_check: bool,
    /// Demonstration only: how many owners wait behind the simulated holder (0 to 100).
    #[arg(
        long,
        default_value_t = 3,
        value_parser = RangedU64ValueParser::<usize>::new().range(0..=MAX_WAITERS),
        conflicts_with = "cassandra"
    )]
    pub waiters: usize,
    /// Demonstration only: the simulated holder's client is cut off from every replica
    /// right after it takes the lock, as if it had crashed.
    #[arg(long, conflicts_with = "cassandra")]
    pub crashed: bool,
}

/// Where a command acts, once its options are checked.
#[derive(Clone, Debug)]
pub enum Target {
    /// The demonstration's simulated cluster.
    Simulated(Demo),
    /// A Cassandra cluster; the configuration is valid and suits [`LockConfig::default`].
    Cassandra(Box<CassandraConfig>),
}

impl Target {
    /// A short description, for reports and the audit line of a force release.
    pub fn describe(&self) -> String {
        match self {
            Target::Simulated(_) => "simulated cluster (demonstration)".to_owned(),
            Target::Cassandra(config) => format!(
                "Cassandra at {} (keyspace {}, table {})",
                config.contact_points.join(","),
                config.keyspace,
                config.table
            ),
        }
    }
}

impl Connection {
    /// Checks the options and says where the command acts: without `--cassandra`, the
    /// demonstration; with it, the cluster, its keyspace and login. Connects to nothing.
    pub fn target(&self) -> Result<Target, Error> {
        let Some(contact_points) = &self.cassandra else {
            return Ok(Target::Simulated(Demo {
                waiters: self.waiters,
                crashed: self.crashed,
            }));
        };
        // The command line requires it; a `Connection` built in code may lack it.
        let Some(keyspace) = &self.keyspace else {
            return Err(Error::InvalidOption {
                option: "--keyspace",
                reason: "is required with --cassandra: name the keyspace of the lock table \
                         (lock_cells) as the application's CassandraConfig does; lockctl has \
                         no default, as a wrong keyspace would show the lock free"
                    .to_owned(),
            });
        };
        if let [only] = contact_points.as_slice()
            && only.trim().eq_ignore_ascii_case("local")
        {
            return Err(Error::InvalidOption {
                option: "--cassandra",
                reason: "is \"local\", but lockctl starts no cluster for this command; start \
                         one with `lockctl cluster start` and pass the contact points it prints"
                    .to_owned(),
            });
        }
        let password = std::env::var(PASSWORD_VARIABLE).ok();
        let config = CassandraConfig {
            credentials: credentials(self.username.as_deref(), password)?,
            local_dc: self.local_dc.clone(),
            tls: self.tls(),
            ..CassandraConfig::new(contact_points.iter().map(|point| point.trim()), keyspace)
        };
        let options = [
            ("contact_points", "--cassandra"),
            ("keyspace", "--keyspace"),
            ("local_dc", "--local-dc"),
            ("credentials.username", "--username"),
            ("tls.ca_certificates", "--tls-ca"),
            ("tls.client_certificate", "--tls-cert"),
            ("tls.client_key", "--tls-key"),
        ];
        config
            .validate()
            .map_err(|error| Error::from_config(error, &options))?;
        config.check_lock_config(&LockConfig::default())?;
        Ok(Target::Cassandra(Box::new(config)))
    }
}

impl Connection {
    /// The TLS setting of `--tls-*`; none without `--tls-ca`.
    fn tls(&self) -> Option<TlsConfig> {
        let ca = self.tls_ca.as_deref()?;
        Some(TlsConfig {
            client_certificate: self.tls_cert.clone().map(PemSource::File),
            client_key: self.tls_key.clone().map(PemSource::File),
            verify_hostname: !self.tls_no_hostname_check,
            ..TlsConfig::new(ca)
        })
    }
}

/// The login of `--username`, with `password` from [`PASSWORD_VARIABLE`]; none without
/// `--username`.
fn credentials(
    username: Option<&str>,
    password: Option<String>,
) -> Result<Option<Credentials>, Error> {
    let Some(username) = username else {
        return Ok(None);
    };
    match password {
        Some(password) => Ok(Some(Credentials {
            username: username.to_owned(),
            password,
        })),
        None => Err(Error::MissingPassword {
            username: username.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(cassandra: Option<&[&str]>) -> Connection {
        Connection {
            cassandra: cassandra.map(|points| points.iter().map(|&p| p.to_owned()).collect()),
            keyspace: cassandra.map(|_| "locks".to_owned()),
            username: None,
            local_dc: None,
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
            tls_no_hostname_check: false,
            waiters: 3,
            crashed: false,
        }
    }

    #[test]
    fn without_contact_points_the_command_is_a_demonstration() {
        let target = connection(None).target().unwrap();
        assert!(matches!(
            target,
            Target::Simulated(Demo {
                waiters: 3,
                crashed: false
            })
        ));
        assert!(target.describe().contains("simulated"));
    }

    #[test]
    fn contact_points_name_a_cluster_and_its_keyspace() {
        let mut options = connection(Some(&["10.0.0.1", " 10.0.0.2:9043"]));
        options.local_dc = Some("dc1".to_owned());
        let Target::Cassandra(config) = options.target().unwrap() else {
            panic!("contact points name a cluster");
        };
        assert_eq!(config.contact_points, ["10.0.0.1", "10.0.0.2:9043"]);
        assert_eq!(config.keyspace, "locks");
        assert_eq!(config.local_dc.as_deref(), Some("dc1"));
        assert!(config.credentials.is_none());
    }

    #[test]
    fn contact_points_without_a_keyspace_are_refused_naming_the_option() {
        let mut options = connection(Some(&["10.0.0.1"]));
        options.keyspace = None;
        let error = options.target().unwrap_err().to_string();
        assert!(
            error.starts_with("--keyspace is required with --cassandra"),
            "{error}"
        );
    }

    #[test]
    fn bad_connection_options_name_the_option() {
        for (points, keyspace, option) in [
            (&[""][..], "lock_bench", "--cassandra"),
            (&["local"], "lock_bench", "--cassandra"),
            (&["10.0.0.1"], "Robert'); DROP", "--keyspace"),
            (&["10.0.0.1"], "system_auth", "--keyspace"),
        ] {
            let mut options = connection(Some(points));
            options.keyspace = Some(keyspace.to_owned());
            let error = options.target().unwrap_err().to_string();
            assert!(error.starts_with(option), "{points:?} {keyspace}: {error}");
        }
    }

    #[test]
    fn tls_options_make_the_tls_setting_and_bad_files_name_their_option() {
        let mut options = connection(Some(&["10.0.0.1"]));
        let Target::Cassandra(plain) = options.target().unwrap() else {
            panic!("contact points name a cluster");
        };
        assert!(plain.tls.is_none(), "plaintext without --tls-ca");
        let missing = std::path::Path::new("/nonexistent/lockctl/ca.pem");
        options.tls_ca = Some(missing.to_owned());
        options.tls_no_hostname_check = true;
        assert_eq!(
            options.tls(),
            Some(TlsConfig {
                verify_hostname: false,
                ..TlsConfig::new(missing)
            })
        );
        let error = options.target().unwrap_err().to_string();
        assert!(
            error.starts_with("--tls-ca") && error.contains("/nonexistent/lockctl/ca.pem"),
            "{error}"
        );
        // A file that is not PEM: this crate's manifest.
        let not_pem = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        options.tls_ca = Some(not_pem.clone());
        let error = options.target().unwrap_err().to_string();
        assert!(
            error.starts_with("--tls-ca") && error.contains("certificate"),
            "{error}"
        );
        options.tls_ca = Some(missing.to_owned());
        options.tls_cert = Some(not_pem.clone());
        options.tls_key = Some(not_pem);
        let error = options.target().unwrap_err().to_string();
        assert!(
            error.starts_with("--tls-cert is refused") && error.contains("no certificate"),
            "{error}"
        );
    }

    #[test]
    fn a_login_needs_its_password_from_the_environment() {
        assert!(
            credentials(None, Some("secret".to_owned()))
                .unwrap()
                .is_none()
        );
        let login = credentials(Some("ops"), Some("secret".to_owned()))
            .unwrap()
            .unwrap();
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("ops", "secret")
        );
        let error = credentials(Some("ops"), None).unwrap_err().to_string();
        assert!(
            error.contains(PASSWORD_VARIABLE) && error.contains("never"),
            "{error}"
        );
    }
}
