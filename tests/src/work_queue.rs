//! Checks the work-queue tests share across backends.

use std::time::Duration;

use lock_core::{FencingToken, LockStorage};
use lock_recipes::{WorkItemId, WorkQueue};
use tokio::time::{Instant, timeout};

/// After a worker died at `died_at` holding the claim on `id` (token `died_token`):
/// `survivor` is given the item again once the lease has run out and not before (between
/// `ttl − 2 s` and `ttl + 3 s` after the death), under a larger token, and completes it;
/// the completion record then names that claim.
pub async fn assert_redelivered_after_the_lease<S: LockStorage>(
    producer: &WorkQueue<S>,
    survivor: &WorkQueue<S>,
    id: &WorkItemId,
    died_token: FencingToken,
    died_at: Instant,
    ttl: Duration,
) {
    let again = timeout(ttl * 4, survivor.claim())
        .await
        .expect("the item was not delivered again within four leases")
        .expect("claim");
    let waited = died_at.elapsed();
    assert_eq!(again.id(), id);
    assert!(
        waited >= ttl - Duration::from_secs(2) && waited <= ttl + Duration::from_secs(3),
        "redelivered {waited:?} after the worker died (lease_ttl {ttl:?})"
    );
    assert!(again.fencing_token() > died_token);
    let token = again.fencing_token();
    again
        .complete()
        .await
        .expect("complete the redelivered item");
    assert_eq!(
        producer.completed_by(id).await.expect("read the record"),
        Some(token)
    );
}
