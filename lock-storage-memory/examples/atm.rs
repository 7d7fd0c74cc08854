//! The thesis's motivating example: two ATMs withdraw 150 each from an account holding 200,
//! at the same moment. Each ATM reads the balance, checks it, and writes the new balance a
//! little later (its round trip to the bank). Without a lock both see 200 and both pay out;
//! with the fair lock on the account, the second ATM sees 50 and refuses.
//!
//! The ATMs are two separate lockers, each with its own client of a simulated 3-replica
//! quorum cluster with a LAN-like latency, as two machines sharing one Cassandra cluster.
//!
//! ```text
//! cargo run -p lock-storage-memory --example atm
//! ```

use std::error::Error;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fair_lock::Locker;
use lock_core::LockConfig;
use lock_storage_memory::{ClusterConfig, Latency, MemoryClient, MemoryCluster};

const OPENING_BALANCE: i64 = 200;
const WITHDRAWAL: i64 = 150;
/// Between reading the balance and writing the new one.
const BANK_ROUND_TRIP: Duration = Duration::from_millis(20);

/// The account, as the bank's ledger sees it.
#[derive(Debug)]
struct Account {
    balance: Mutex<i64>,
}

impl Account {
    fn balance(&self) -> i64 {
        *self.balance.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_balance(&self, balance: i64) {
        *self.balance.lock().unwrap_or_else(PoisonError::into_inner) = balance;
    }
}

/// One withdrawal: read, check, pay out, write back. Returns the cash paid out.
async fn withdraw(account: &Account, amount: i64) -> i64 {
    let balance = account.balance();
    if balance < amount {
        return 0;
    }
    tokio::time::sleep(BANK_ROUND_TRIP).await;
    account.set_balance(balance - amount);
    amount
}

/// One ATM: a machine with its own storage client and locker.
async fn atm(
    storage: MemoryClient,
    account: Arc<Account>,
    with_lock: bool,
) -> Result<i64, lock_core::Error> {
    if !with_lock {
        return Ok(withdraw(&account, WITHDRAWAL).await);
    }
    let locker = Locker::new(storage, LockConfig::default())?;
    let guard = locker.lock("account:42").await?;
    let paid = withdraw(&account, WITHDRAWAL).await;
    guard.release().await?;
    Ok(paid)
}

async fn day_at_the_bank(with_lock: bool) -> Result<(), Box<dyn Error>> {
    let cluster = MemoryCluster::new(ClusterConfig {
        latency: Latency::Uniform {
            min: Duration::from_micros(300),
            max: Duration::from_micros(700),
        },
        ..ClusterConfig::default()
    })?;
    let account = Arc::new(Account {
        balance: Mutex::new(OPENING_BALANCE),
    });
    let first = tokio::spawn(atm(cluster.client(), account.clone(), with_lock));
    let second = tokio::spawn(atm(cluster.client(), account.clone(), with_lock));
    let paid = [first.await??, second.await??];
    let balance = account.balance();
    let lost = paid.iter().sum::<i64>() + balance - OPENING_BALANCE;
    let title = if with_lock {
        "with the lock"
    } else {
        "without a lock"
    };
    println!(
        "{title:>15}: ATMs paid {} and {}, balance now {balance}, bank lost {lost}",
        paid[0], paid[1]
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    println!("two ATMs withdraw {WITHDRAWAL} at once from a balance of {OPENING_BALANCE}");
    runtime.block_on(day_at_the_bank(false))?;
    runtime.block_on(day_at_the_bank(true))?;
    Ok(())
}
