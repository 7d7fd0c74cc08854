//! What the clients of every model share: the owner id of each acquisition, and the pump
//! that sends a machine's requests into the store.

use lock_core::OwnerId;
use lock_core::machine::Machine;

use crate::store::{ClientIndex, QuorumStore};

/// The owner id of client `index`'s acquisition number `round`: `c0`, `c0.1`, `c0.2`, ...
/// Like the driver, which draws a fresh random owner id for every acquisition, each
/// acquisition has its own id; their byte order is client first, then round.
pub fn owner_id(index: ClientIndex, round: u8) -> OwnerId {
    let name = if round == 0 {
        format!("c{index}")
    } else {
        format!("c{index}.{round}")
    };
    OwnerId::new(name).expect("a valid owner id")
}

/// Sends a machine's requests into the store and returns its outcome, if it has one.
pub(crate) fn drain<M: Machine>(
    machine: &mut M,
    store: &mut QuorumStore,
    client: ClientIndex,
    micros: u64,
) -> Option<M::Outcome> {
    while let Some(outgoing) = machine.poll_request() {
        store.submit(client, outgoing, micros);
    }
    machine.poll_outcome()
}
