//! Network partitions between loopback addresses, with `iptables` (Linux, root only).
//!
//! A [`Partitions`] owns one `iptables` chain of its own, `LOCKNET-<pid>-<n>`, jumped to
//! from the top of `INPUT`: on loopback every packet, whichever address it is for, passes
//! `INPUT` once, so one rule there cuts one direction of a link. [`Partitions::isolate`]
//! drops everything from and to one address (a node cut off from its peers and clients),
//! [`Partitions::cut`] one direction between two addresses, and [`Partitions::heal`]
//! removes every rule of the chain. Dropping the [`Partitions`] heals, unhooks and deletes
//! the chain; a process that died without that leaves a chain that the next
//! [`Partitions::new`] of any process finds by its dead owner's pid and removes.
//!
//! `iptables` comes from Debian's package of that name: when the program is missing and
//! this process runs as root, [`Partitions::new`] installs it with `apt-get`. Without root
//! it returns [`ClusterError::ToolMissing`], which tests report as a skip (and
//! treat as a failure under `CI=true`).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::ClusterError;

use super::process::is_alive;

/// The prefix of every chain this module creates.
const CHAIN_PREFIX: &str = "LOCKNET-";

/// Chains created by this process so far, for unique names.
static CHAINS: AtomicU32 = AtomicU32::new(0);

/// The rules of one partition scenario, in an `iptables` chain of its own (jumped to from
/// the top of `INPUT`), removed when it is dropped; see [`Partitions::new`].
#[derive(Debug)]
pub struct Partitions {
    iptables: PathBuf,
    chain: String,
}

impl Partitions {
    /// Creates this scenario's chain, with no rule yet, after removing the chains of
    /// processes that died without removing theirs. Installs `iptables` if it is missing
    /// and this process runs as root.
    pub fn new() -> Result<Self, ClusterError> {
        let iptables = iptables()?;
        remove_stale_chains(&iptables)?;
        let chain = format!(
            "{CHAIN_PREFIX}{}-{}",
            std::process::id(),
            CHAINS.fetch_add(1, Ordering::SeqCst)
        );
        run(&iptables, &["-N", &chain])?;
        let partitions = Partitions { iptables, chain };
        partitions.iptables(&["-I", "INPUT", "1", "-j", &partitions.chain])?;
        Ok(partitions)
    }

    /// Drops every packet from and to `address`: a node on it can reach nobody and
    /// nobody can reach it, though its process runs on.
    pub fn isolate(&self, address: Ipv4Addr) -> Result<(), ClusterError> {
        let address = address.to_string();
        self.iptables(&["-A", &self.chain, "-s", &address, "-j", "DROP"])?;
        self.iptables(&["-A", &self.chain, "-d", &address, "-j", "DROP"])
    }

    /// Drops every packet from `from` to `to` (one direction; cut both for a broken link).
    pub fn cut(&self, from: Ipv4Addr, to: Ipv4Addr) -> Result<(), ClusterError> {
        let (from, to) = (from.to_string(), to.to_string());
        self.iptables(&["-A", &self.chain, "-s", &from, "-d", &to, "-j", "DROP"])
    }

    /// Drops every TCP packet from `from` to `to`, ports included: one direction of one
    /// connection. Cassandra's internode connections leave from the machine's default
    /// source address (127.0.0.1 on loopback), not from the node's listen address, so a
    /// link between two nodes can be told apart from the others only by its ports.
    pub fn cut_connection(&self, from: SocketAddrV4, to: SocketAddrV4) -> Result<(), ClusterError> {
        let (source, source_port) = (from.ip().to_string(), from.port().to_string());
        let (target, target_port) = (to.ip().to_string(), to.port().to_string());
        self.iptables(&[
            "-A",
            &self.chain,
            "-p",
            "tcp",
            "-s",
            &source,
            "--sport",
            &source_port,
            "-d",
            &target,
            "--dport",
            &target_port,
            "-j",
            "DROP",
        ])
    }

    /// Drops every new TCP connection to `to` (its SYN), leaving established ones alone.
    pub fn refuse_connections(&self, to: SocketAddrV4) -> Result<(), ClusterError> {
        let (target, target_port) = (to.ip().to_string(), to.port().to_string());
        self.iptables(&[
            "-A",
            &self.chain,
            "-p",
            "tcp",
            "--syn",
            "-d",
            &target,
            "--dport",
            &target_port,
            "-j",
            "DROP",
        ])
    }

    /// Removes every rule this scenario added; the chain stays for the next ones.
    pub fn heal(&self) -> Result<(), ClusterError> {
        self.iptables(&["-F", &self.chain])
    }

    /// How many rules are in force.
    pub fn rules(&self) -> Result<usize, ClusterError> {
        let listing = output(&self.iptables, &["-w", "-S", &self.chain])?;
        Ok(listing
            .lines()
            .filter(|line| line.starts_with("-A"))
            .count())
    }

    fn iptables(&self, arguments: &[&str]) -> Result<(), ClusterError> {
        let mut all = vec!["-w"];
        all.extend_from_slice(arguments);
        run(&self.iptables, &all)
    }
}

impl Drop for Partitions {
    fn drop(&mut self) {
        if let Err(error) = remove_chain(&self.iptables, &self.chain) {
            tracing::error!(chain = %self.chain, %error, "could not remove a partition chain");
        }
    }
}

/// The `iptables` program, installed first with `apt-get` if it is missing and this
/// process runs as root.
fn iptables() -> Result<PathBuf, ClusterError> {
    if let Some(found) = find_iptables() {
        return root_or_missing(found);
    }
    root_or_missing(PathBuf::from("iptables"))?;
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q", "--no-install-recommends", "iptables"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    if !install().is_ok_and(|out| out.status.success()) {
        // A fresh machine's package lists may be missing: fetch them once and try again.
        let _ = Command::new("apt-get").args(["update", "-q"]).output();
        let out = install().map_err(|error| missing(format!("apt-get could not run: {error}")))?;
        if !out.status.success() {
            return Err(missing(format!(
                "apt-get install iptables failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    find_iptables().ok_or_else(|| missing("installed, but not found on the PATH".to_owned()))
}

fn find_iptables() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join("iptables"))
        .find(|candidate| candidate.is_file())
}

fn root_or_missing(iptables: PathBuf) -> Result<PathBuf, ClusterError> {
    let uid = Command::new("id")
        .arg("-u")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    match uid {
        Ok(uid) if uid == "0" => Ok(iptables),
        Ok(uid) => Err(missing(format!(
            "this process runs as user {uid}, not root"
        ))),
        Err(error) => Err(missing(format!("`id -u` could not run: {error}"))),
    }
}

fn missing(detail: String) -> ClusterError {
    ClusterError::ToolMissing {
        tool: "iptables",
        detail,
        hint: "partition tests need root and Debian's iptables, which they install themselves \
               as root",
    }
}

/// Removes the chains whose owner process is gone.
fn remove_stale_chains(iptables: &Path) -> Result<(), ClusterError> {
    let listing = output(iptables, &["-w", "-S"])?;
    for line in listing.lines() {
        let Some(chain) = line.strip_prefix("-N ") else {
            continue;
        };
        let owner = chain
            .strip_prefix(CHAIN_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner
            && !is_alive(pid)
        {
            tracing::warn!(chain, pid, "removing a partition chain its dead owner left");
            remove_chain(iptables, chain)?;
        }
    }
    Ok(())
}

/// Flushes `chain`, removes every jump to it from `INPUT` and deletes it.
fn remove_chain(iptables: &Path, chain: &str) -> Result<(), ClusterError> {
    run(iptables, &["-w", "-F", chain])?;
    while run(iptables, &["-w", "-D", "INPUT", "-j", chain]).is_ok() {}
    run(iptables, &["-w", "-X", chain])
}

fn run(iptables: &Path, arguments: &[&str]) -> Result<(), ClusterError> {
    output(iptables, arguments).map(drop)
}

fn output(iptables: &Path, arguments: &[&str]) -> Result<String, ClusterError> {
    let command = || format!("iptables {}", arguments.join(" "));
    let out = Command::new(iptables)
        .args(arguments)
        .output()
        .map_err(|error| ClusterError::Io {
            what: format!("run `{}`", command()),
            error,
        })?;
    if !out.status.success() {
        return Err(ClusterError::Io {
            what: format!("run `{}`", command()),
            error: std::io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
