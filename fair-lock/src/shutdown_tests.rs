//! `Locker::shutdown`, on the single-node test store and Tokio's paused clock.

use std::time::Duration;

use crate::driver_tests::{locker_with, store};
use crate::test_client::Link;
use lock_core::config::LockConfig;
use lock_core::error::Error;
use lock_core::id::LockId;
use lock_core::machine::LeaseStatus;
use lock_core::storage::{RowKey, RowKind};

fn lingering() -> LockConfig {
    LockConfig {
        linger: Duration::from_millis(50),
        ..LockConfig::default()
    }
}

fn row(kind: RowKind, lock: &str) -> RowKey {
    RowKey::new(kind, LockId::new(lock).unwrap())
}

/// A guard with a renewal task, a guard whose lease waits in the keeper, a lingering lock
/// and a waiting acquisition: the shutdown releases the three locks, gives the acquisition
/// up, ends every task, and the locker sends nothing more; its guards say the lock is gone.
#[test]
fn shutdown_releases_every_lock_and_ends_every_task() {
    crate::watchdog::in_virtual_time("shutdown_releases_every_lock_and_ends_every_task", async {
        let (store, clock) = store();
        let client = store.client();
        let a = locker_with(client.clone(), &clock, 1, lingering());
        let b = locker_with(store.client(), &clock, 2, lingering());
        let renewed = a.lock("renewed").await.unwrap();
        tokio::time::sleep(Duration::from_secs(12)).await;
        let parked = a.lock("parked").await.unwrap();
        a.lock("lingering").await.unwrap().release().await.unwrap();
        assert!(
            !store
                .live_columns(&row(RowKind::Main, "lingering"))
                .is_empty()
        );
        let busy = b.lock("busy").await.unwrap();
        let waiting = tokio::spawn({
            let a = a.clone();
            async move { a.lock("busy").await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(a.shared.tasks.running_count() > 0);

        a.clone().shutdown().await.unwrap();

        assert_eq!(waiting.await.unwrap(), Err(Error::ShutDown));
        assert_eq!(
            a.shared.tasks.running_count(),
            0,
            "a task outlived the shutdown"
        );
        for lock in ["renewed", "parked", "lingering"] {
            for kind in [RowKind::Main, RowKind::Queue] {
                let left = store.live_columns(&row(kind, lock));
                assert!(left.is_empty(), "{lock}: {left:?} left");
            }
        }
        for guard in [&renewed, &parked] {
            assert_eq!(guard.status(), LeaseStatus::Lost);
            assert!(futures::poll!(Box::pin(guard.lost())).is_ready());
            assert!(futures::poll!(Box::pin(guard.in_doubt())).is_ready());
        }
        for guard in [renewed, parked] {
            let released = guard.release().await;
            assert!(
                matches!(released, Err(Error::LockLost { .. })),
                "{released:?}"
            );
        }
        assert!(matches!(a.lock("other").await, Err(Error::ShutDown)));
        assert!(matches!(a.try_lock("other").await, Err(Error::ShutDown)));
        let sent = client.sent().len();
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(client.sent().len(), sent, "a request after the shutdown");
        busy.release().await.unwrap();
        for lock in ["busy", "renewed", "parked", "lingering"] {
            let taken = b.try_lock(lock).await.unwrap();
            assert!(taken.is_some(), "{lock} not free after the shutdown");
        }
    });
}

/// Releases that fail come back from the shutdown, one error each.
#[test]
fn shutdown_returns_the_errors_of_the_releases() {
    crate::watchdog::in_virtual_time("shutdown_returns_the_errors_of_the_releases", async {
        let (store, clock) = store();
        let client = store.client();
        let a = locker_with(client.clone(), &clock, 1, LockConfig::default());
        let _renewed = a.lock("renewed").await.unwrap();
        tokio::time::sleep(Duration::from_secs(12)).await;
        let _parked = a.lock("parked").await.unwrap();
        client.set_link(Link::Refused);
        let errors = a.shutdown().await.unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(errors.iter().all(Error::is_storage), "{errors:?}");
        assert_eq!(a.shared.tasks.running_count(), 0);
    });
}
