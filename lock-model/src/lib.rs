//! Stateright models that check the thesis's Theorems 1–5, and the fencing tokens, on
//! lock-core's own state machines.
//!
//! The models do not restate the algorithm. Every client is one of lock-core's sans-IO
//! machines — [`Acquire`] (the queue algorithm, mandatory or soft), [`BaselineAcquire`] (the
//! old shadow-row algorithm), [`Release`], [`Lease`] and [`UpdateGlobalTime`] — driven
//! through the loop contract of [`lock_core::machine`]: after every event the model drains
//! [`Machine::poll_request`] into the network, reads [`Machine::poll_outcome`], and offers
//! [`Machine::handle_timeout`] once [`Machine::poll_timeout`] is due. The models own only the
//! world around the machines: replicas, network, time and the ghost variables the
//! properties read. A change to lock-core's machines changes what is checked, and the pinned
//! state counts in `tests/theorems.rs` say so. Two of lock-core's rules are plain values
//! rather than machines, and the models embed them too: each lock client keeps a
//! [`SeatBook`] (its main-row seats and queue floors) and, with the time service, a
//! [`GlobalTimeFollower`] (its clock), and uses them exactly as the driver does.
//!
//! # What is modelled, and how
//!
//! * **Storage** ([`store`]): `RF` replicas, each a map of last-write-wins cells merged by
//!   lock-core's merge rule ([`lock_core::storage::merge`]: the higher timestamp; on a tie
//!   a tombstone, then a cell with a TTL, then the later expiry, then the greater value). A
//!   per-client coordinator turns each machine request into one message per replica and
//!   answers the machine after `QUORUM` replies, merging reads cell by cell. Cells carry TTLs that each replica judges on its own (possibly skewed) clock;
//!   an expired cell reads as a tombstone. Optional: blocking read repair; write copies
//!   outside the quorum that stay in flight and land late; and, as deliberately broken
//!   stores, reads of chosen rows answered by one replica, or deletes of chosen rows
//!   acknowledged and never applied.
//! * **Network**: messages sit in a set and are delivered one at a time in any order, so
//!   every reordering is explored; none is duplicated. A reply travels with its request's
//!   delivery (see [`store::Message`] for why that loses nothing).
//! * **Crashes**: up to `crashes` replicas stop at any moment; their messages are lost and
//!   they never answer again. Clients do not crash in the lock models (that is the lease
//!   model's business); in the lease model a holder may *pause* for good, and in its
//!   dead-waiter mode a waiter may *die*, leaving its queue cell to its TTL.
//! * **Time** ([`clock`]): a small tick counter shared by everyone, bounded by `max_tick`.
//!   Both the monotonic instant and the wall-clock timestamp a machine sees are
//!   `tick × 1 ms` (`× 1 s` in the lease model), so every poll pause is one tick. A queue
//!   timestamp is the reading at which the client *started*; its queue write is delivered
//!   whenever the network chooses, so a client may enqueue with an older timestamp than
//!   clients already in the queue — the thesis's delay between taking the time and
//!   writing. With `strict_timestamps` every reading is distinct; without, clients that
//!   start in the same tick share a timestamp and the queue orders them by owner id.
//!   [`clock::TimeRule::Free`] lets time pass at any moment (safety);
//!   [`clock::TimeRule::Urgent`] only when nothing else is pending (liveness, below).
//! * **Seats and queue floors** (docs/algorithm.md, sections "Seats" and "Queue floors and tombstones"): each lock
//!   client is a locker with its own [`SeatBook`], seat prefix `c<i>`. A queue acquisition
//!   takes its seat and queue floor from the book ([`SeatBook::start`], the call the
//!   driver's locker makes); through the [`SeatUse`] it returns, it gives the seat back when
//!   it ends without the lock, and a holder when its release has ended, successfully or not
//!   ([`SeatUse::acquisition_ended`], [`SeatUse::release_ended`], the calls of
//!   `driver/locker.rs` and `driver/guard.rs`). So seat reuse across rounds, the seat's timestamp floor and where queue
//!   reads start are the book's; a client's first mandatory acquisition, for which the book
//!   has no queue floor yet, also reads the main row with its first queue write and may
//!   start at a later queue head another owner's main cell names
//!   ([`AcquireOptions::floor_from_main`]). Rounds of one client are sequential, as the
//!   driver's local line makes a locker's acquisitions of one lock; no lease is lost within
//!   the lock models' horizon, so no seat is retired. With the default `request_timeout` and
//!   `max_clock_skew` the floor's margin (`2 × max_clock_skew + request_timeout`, 4 s) is
//!   beyond every horizon; the floor test shrinks it to one tick. Optional, to show the
//!   properties can fail: [`lock::SeatFault`] breaks one rule, and
//!   [`lock::LockModel::release_timeouts`] lets requests of a release time out (assumption
//!   A6: the machine hears *outcome unknown*, the message stays in flight and may land
//!   after the seat was given back).
//! * **The time service** (section "The time service"): [`global_time`] runs lock-core's
//!   [`UpdateGlobalTime`] on time-service replicas with skewed clocks, readers, and lock
//!   clients that follow `GlobalTime` through [`GlobalTimeFollower`] (refresh: read and
//!   [`observe`](lock_core::machine::GlobalTimeFollower::observe) as of the read's completion; take a
//!   timestamp: [`now`](lock_core::machine::GlobalTimeFollower::now)). In the lock model,
//!   [`lock::LockModel::time_service`] adds a time-service replica ahead of true time that
//!   updates `GlobalTime` once in the same store, lets each client refresh at any moment,
//!   and gives every machine of a client its followed clock; timeouts and deadlines stay on
//!   the monotonic instant, as in the driver.
//! * **Leases** are out of the lock models' time (TTL 10 s, far beyond a horizon of a few
//!   milliseconds), as the thesis assumes holders keep their cells; [`lease`] models them
//!   with lock-core's [`Lease`] on a one-second tick. Both models release as the driver
//!   does: a holder holds the [`Lease`] built from its acquisition's `Holding` and releases
//!   through [`Lease::release`], so a release that forgets a cell is the release checked.
//!
//! # Properties
//!
//! | Theorem | Property (stateright name) | Kind | Model |
//! |---|---|---|---|
//! | 1 (mandatory), 3 (soft) | `mutual exclusion` | always | [`lock`] |
//! | 2 | `every client acquires every round` | eventually | [`lock`], mandatory, urgent time |
//! | 4 | `some soft client acquires` | eventually | [`lock`], soft, urgent time |
//! | bounded bypass | `bypass bounded` (≤ K), `bypass bound reached` (= K) | always, sometimes | [`lock`], queue |
//! | baseline starvation | `starvation: bypassed beyond the bound` | sometimes | [`lock`], baseline |
//! | no spurious failure | `no acquisition fails` | always | [`lock`], mandatory |
//! | fencing | `fencing tokens increase from holder to holder` | always | [`lock`] |
//! | clean release | `no lock cell is left on a quorum once every client is done` | always | [`lock`] (vacuous when holders keep the lock) |
//! | fencing | `fencing tokens grow with acquisition order`, `the resource takes no write from a holder after its successor's`, `the resource refuses a superseded holder's write` | always, always, sometimes | [`lease`] |
//! | leases | `mutual exclusion of holders whose lease has time left`, `mutual exclusion of holders that believe they hold` | always | [`lease`] |
//! | dead waiters | `the owner behind a dead waiter holds within the waiter TTL` (bounded progress, checked in every state where time could pass), `the owner behind a dead waiter holds` | always, sometimes | [`lease`], dead-waiter mode |
//! | 5 | `every stored GlobalTime equals its write timestamp`, `a read returns at least every update acknowledged before it`, `a read returns at least every read finished before it`, `a read sees an update` | always ×3, sometimes | [`global_time`] |
//! | seats (section "Seats") | `every holder's main cell reads as its own on every quorum` | always | [`lock`] |
//! | queue floors (section "Queue floors and tombstones") | `no queue read starts past an enqueued waiter's cell` | always | [`lock`], queue, urgent time |
//! | time service (section "The time service") | `a timestamp is at least every GlobalTime update acknowledged before its client's last refresh`, `a follower's timestamps never decrease`, `a timestamp is at least every GlobalTime its client has read`, `a followed timestamp runs ahead of the local clock`, `a client takes a timestamp below one another client took earlier (not guaranteed)` | always ×3, sometimes ×2 | [`global_time`], with followers |
//! | time service (section "The time service") | `a queue timestamp is at least every GlobalTime update acknowledged before its client's last refresh` | always | [`lock`], with a time service |
//! | lingering (section "Lingering after a release") | `a retake passes no waiter enqueued before its reads were sent`, and every property above with a retake counted as an acquisition | always | [`lock`], queue, with `LockConfig::linger` ([`lock::MODEL_LINGER`]) |
//!
//! `bypassed` counts the acquisitions by other clients that complete while a client waits:
//! for the queue algorithm from the acknowledgement of its queue write, for the baseline from
//! its start.
//!
//! **Lingering** ([`lock::MODEL_LINGER`], `--linger`): a holder's release asks lock-core's
//! `Retake::lingers` whether to keep its cells, with the counters of the acquisition or
//! retake that took the lock, as the driver's guard does; if so the client lingers
//! ([`lock::Phase::Lingering`]), and the linger may end at any moment (its release then
//! starts as usual). A lingering client with a round left may instead retake
//! ([`lock::LockAction::Retake`]): lock-core's `Retake` runs through the store like any
//! machine, and the retake *is* that round's acquisition, started at the retake. Held, the
//! client holds the lease again with its old fencing token, which must still be the highest
//! any holder was given (nobody held since), and every waiter enqueued then counts it as
//! one more pass, as it would a fresh acquisition's; given back, the lease is released and
//! the same round is acquired afresh, counted once. So bypass needs no new definition: a
//! retake that started before a waiter enqueued is one of the acquisitions already under
//! way that K = N − 1 allows for, and [`lock::RETAKE_PASSES_NO_WAITER`] checks the rule's own
//! claim, that a retake passes nobody enqueued before its reads were sent. Under the urgent
//! time rule a client with a round left retakes or ends its linger before time passes, and
//! one without lingers at most `linger` (one tick). A fencing token is "increasing" if it is above the highest token any earlier
//! holder was given (and present whenever the configuration takes tokens).
//!
//! "Clean release" ([`lock::CLEAN_AFTER_RELEASE`]) is checked in every state in which every
//! client is done (all its rounds finished, its last release or clean-up acknowledged) and
//! no message is in flight: then no quorum of live replicas may return a live cell of the
//! main, queue or shadow row. A quorum, because the copies of a delete outside the quorum
//! that acknowledged it are lost (unless `late_writes`, and then they are delivered before
//! the network is quiet), so a live copy may stay on one replica and a quorum read must
//! still not see it; live replicas, because a crashed replica never answers again. The fence
//! row is not a lock cell: its token must outlive every holder. Late writes cannot revive a
//! cell, since every delete carries a timestamp above every write of its cell.
//!
//! **Seats** ([`lock::HOLDERS_CELLS_STAY`]): while a client holds the lock, every quorum of
//! live replicas must return its main cell, in its seat, with the value it wrote (its queue
//! column, which ends with its owner id, marked `^` unless the fast path's first write left
//! it: docs/algorithm.md, section "Who holds the lock").
//! Theorem 1 rests on exactly that ("a holder's main cell stays live until its deadline",
//! section "Theorem 1: mutual exclusion of the mandatory lock"), and seats are the one thing that could break it within the lock models'
//! horizon, in three ways, one rule of section "Seats" each: another locker writing the same
//! seat (prefixes unique, assumption A7), a late delete by the seat's previous user (the
//! timestamp floor: the next user stamps above every timestamp its predecessors used), and
//! two running acquisitions of one locker in one seat (the lowest seat no running
//! acquisition or held lock uses; the driver's local line keeps a locker's acquisitions of
//! one lock sequential, so in the model this rule always gives seat 0 and is not where a
//! failure can show).
//!
//! **Queue floors** ([`lock::FLOORS_HIDE_NO_WAITER`]): no queue read may start (at the floor
//! less its margin, or at the reader's own cell if that is earlier) past the cell of a
//! waiter whose queue write was acknowledged before the read was sent and which is still
//! acquiring. Section "Queue floors and tombstones": a live cell sorts before a head already seen by at most the skew
//! between two clocks plus the time its write took to become visible, and the margin covers
//! both. That argument needs requests bounded by `request_timeout` (A6), which the model
//! gives only under the urgent time rule (every message is delivered within the tick it was
//! sent in), so the property is checked there. The doc's "a hidden cell costs fairness, not
//! safety" is visible too: mutual exclusion holds in the broken variant that hides one.
//!
//! **The time service** (section "The time service") guarantees, for clients that follow `GlobalTime`:
//! reading 2 of Theorem 5 (a read returns at least every update acknowledged before it
//! started) carried through the follower, which never hands out less than it observed. So
//! every timestamp a client takes is at least every update acknowledged before its latest
//! completed refresh started, which orders queue timestamps across clients by acknowledged
//! updates; and one client's timestamps never decrease nor fall behind a `GlobalTime` it
//! read (section "The clock that follows `GlobalTime`"). That is what is checked, and no more: a client that has not
//! refreshed since an update can still take a timestamp below one another client took
//! earlier, and the checker shows it (a "sometimes" property, reachable).
//!
//! # Liveness with `eventually`, and why it is sound here
//!
//! stateright 0.31's `eventually` is unsound in general: it misses runs that end in a cycle,
//! and paths that join a state first reached by a path on which the property had held. The
//! liveness models avoid both, and [`liveness::verify`] checks that they do on the exact
//! configuration of every liveness test:
//!
//! * **Acyclic.** Every step raises a rank ([`liveness::Ranked`] for [`lock::LockModel`]):
//!   the tick, then acquisitions started, replicas crashed and storage operations started,
//!   then fewer messages in flight. A due timeout always makes its machine send (poll
//!   pauses are at least one tick, so a machine never polls twice in a tick without a
//!   reason), so there are no no-op steps, and with a bounded tick every run is finite and
//!   ends in a terminal state.
//! * **Stable.** Both `eventually` properties read ghost counters that only grow
//!   ("every client has `rounds` acquisitions", "some client has one"), so once true they
//!   stay true, and whether a path has seen the property is a function of its last state.
//!
//! Then stateright reports `eventually P` exactly when a terminal state violates `P`, that
//! is, exactly when some complete run never reaches `P`. Because the horizon is part of the
//! model, the property proved is *bounded* liveness: every client holds the lock within
//! `max_tick` ticks, on every schedule allowed by the urgent time rule — message delays,
//! think times and critical sections shorter than one tick, timeouts firing only on a quiet
//! network ([`clock::TimeoutRule::QuietNetwork`]). A horizon that is too short makes the
//! check fail (a test shows it), so a passing check is not vacuous.
//!
//! # Symmetry, and checking at scale
//!
//! Breadth-first search keeps every state of its frontier in memory, whole: three
//! acquisition machines of some thirty fields each, every replica's cells and every message
//! in flight, each with its row key, column name and value. That is what made `check 3 3`
//! run out of memory (about 7 KB a state). Two things change that, and neither changes
//! what is checked:
//!
//! * **Copy on write.** The machines a client runs ([`lock::Phase`]) and the replicas
//!   ([`store::QuorumStore::replicas`]) sit behind reference-counted pointers; a step copies
//!   only the machine and the replica it changes, so the states of a frontier share the rest
//!   with each other. The state, its equality and its hash are the same (every pinned count
//!   is unchanged). Most of the memory that remains is the messages in flight and the
//!   coordinators' operations, which nearly every step changes, and stateright's own table
//!   of fingerprints and parents.
//! * **Depth-first search** (`check-dfs`) keeps a 64-bit fingerprint per state seen, and
//!   whole states only along the current path (with their unexplored siblings), so memory
//!   stops being the limit and the number of states, that is time, becomes it.
//!
//! Two reductions then cut the number of states; both are opt-in and both keep the models
//! driving lock-core's own machines unchanged.
//!
//! * **Replica symmetry** (`--symmetry`, [`store::QuorumStore::with_canonical_replicas`],
//!   used through stateright's [`Representative`](stateright::Representative) in
//!   `check-dfs`; stateright 0.31's breadth-first checker has no symmetry reduction).
//!   Replicas are interchangeable: no lock-core machine ever sees a replica index, the
//!   coordinator only counts and merges replies, every replica runs on true time in the lock
//!   models, and no property names a replica. So renumbering replicas (in the replica list,
//!   in every message and in every coordinator's replies) maps runs to runs and keeps every
//!   property's value, and the checker may count a state once per orbit. The representative
//!   sorts replicas by everything the state says about each one, and two replicas with the
//!   same sort key are interchangeable in that very state, so the representative is
//!   canonical: the reduction is exact, up to RF! (6 at RF 3: Theorem 1 with a crash goes
//!   from 282,996 to 47,794 states). The path the checker follows is the real one (stateright
//!   only looks the representative up), so traces are real runs. The liveness argument is
//!   unaffected: the rank and the `eventually` properties are the same on every state of an
//!   orbit.
//! * **Client symmetry** (`--client-symmetry`, [`lock::LockModel::client_symmetry`]): owner
//!   ids go to clients in the order they first start, realised by letting only the
//!   lowest-numbered client that has not started yet start. Renaming clients is a symmetry
//!   only where the order of owner ids cannot matter, and owner ids are ordered in four
//!   places: (1) queue cells with equal timestamps are queued by owner id; (2) a main-row
//!   read of two cells returns seat columns in name order, but the acquisition only asks
//!   whether the cells it got are all its own, whose answer is the same for any two of the
//!   live cells; (3) merge ties between live cells compare values, but a main cell's value
//!   holds its owner id (it is the owner's queue column) and the cell is written only by
//!   that owner, with increasing timestamps, so such ties never happen; (4) each machine's random generator is seeded from its client number,
//!   but it only jitters poll pauses, and jitter is off in the lock models. **With
//!   `strict_timestamps`** no two queue cells share a timestamp, (1) never decides
//!   anything, and every permutation of clients is an automorphism (up to the generator
//!   states, which nothing observes): renaming every client of a run of the full model by
//!   the order of first starts gives a run of the reduced model with the same property
//!   values, and a state of the reduced model has a successor whenever the full model's
//!   has. With strict timestamps the start order is also written in the queue timestamps,
//!   so the reduced model holds one state per orbit of started clients: up to N! fewer
//!   states. **Without strict timestamps**, two clients that start in one tick share a
//!   timestamp and are queued by id; renaming them in start order would only explore
//!   "the earlier starter wins the tie" and miss the runs in which the later one does. The
//!   permutations that keep every tie-break are those that keep the id order of every pair
//!   that can still tie, and since any two clients that have not started (or, with several
//!   rounds, any two clients) may still start in one tick, that is only the identity. So
//!   the model refuses client symmetry without strict timestamps, and runs with equal
//!   timestamps use replica symmetry only.
//!
//! Pruning ghost state would not help the lock models: every ghost variable is read by a
//! property (`bypassed` and `enqueued` by the bypass properties, the token fields by the
//! fencing property, the counters by the progress properties) and most change only when a
//! machine's own state changes anyway. In-flight messages are already a set, so the order
//! in which they were sent is not part of the state.
//!
//! # Results
//!
//! The configurations `cargo test -p lock-model` checks, with the state counts it pins
//! (how long each takes is in
//! `docs/measurements/2026-11-24-model-checking-runs.md`). All
//! lock models run with fencing on, as lock-core ships; "urgent" is the liveness time
//! rule; RF is the replication factor.
//!
//! | Theorem / property | Test | Configuration | Unique states |
//! |---|---|---|---|
//! |  1, fencing | `theorem_1_mutual_exclusion_of_the_mandatory_lock_rf3` | 2 mandatory clients, RF 3, tick 0, holders keep the lock | 70,749 |
//! |  1, fencing off | `theorem_1_holds_without_fencing_rf3` | the same with `fencing: false` | 31,545 |
//! |  1 | `theorem_1_survives_one_replica_crash_rf3` | the same, one replica may crash | 282,996 |
//! |  1, re-enqueueing | `theorem_1_holds_when_late_queue_cells_are_enqueued_again` | 2 mandatory clients, RF 1, 2 ticks, holders keep the lock, `request_timeout` 1 tick (queue writes held over two ticks are re-enqueued); against the same with the default `request_timeout` (never re-enqueues) | 17,320 against 15,192 |
//! |  fencing | `fencing_tokens_increase_from_holder_to_holder_rf3` | 1 client, 2 acquisitions, RF 3, tick 0 | 38,046 |
//! |  fencing, broken store | `fencing_tokens_repeat_when_the_fence_is_read_from_one_replica_rf3` | the same, fence read at `ONE`; stops at the counterexample | — |
//! |  2 | `theorem_2_every_client_acquires_given_enough_ticks` | 2 mandatory clients, RF 1, urgent, 2 ticks | 511 |
//! |  2, horizon too short | `theorem_2_check_fails_when_the_horizon_is_too_short` | the same, 1 tick | — |
//! |  2, crash | `theorem_2_a_lone_client_acquires_despite_one_replica_crash_rf3` | 1 client, RF 3, urgent, tick 0, one crash | 4,656 |
//! |  3, 4 | `theorems_3_and_4_soft_lock_rf3` | 2 soft clients keeping the lock, RF 3, urgent, 2 ticks | 179,190 |
//! |  3, 4, crash | `theorems_3_and_4_survive_one_replica_crash_rf3` | 2 soft clients, RF 3, urgent, 1 tick, one crash | 507,240 |
//! |  bypass K = 1 | `bypass_is_bounded_by_one_for_two_clients_with_strict_timestamps` | 2 clients × 2 rounds, RF 1, urgent, 3 ticks, distinct timestamps | 22,945 |
//! |  bypass K = 2 | `bypass_is_bounded_by_two_for_three_clients_with_strict_timestamps` | 3 clients, RF 1, urgent, 3 ticks, distinct timestamps (checked with K = 1, which fails, and K = 2) | 166,966 |
//! |  bypass, equal timestamps | `equal_timestamps_let_a_smaller_owner_id_bypass_again` | 2 clients × 2 rounds, RF 1, urgent, 3 ticks | 4,808 |
//! |  baseline starvation | `the_baseline_starves_a_waiter` | 2 baseline clients × 3 rounds, RF 1, urgent, 3 ticks | 36,905 |
//! |  1, 2 above the queue read limit | `theorems_1_and_2_hold_with_more_clients_than_the_queue_read_limit` | 3 mandatory clients, RF 1, urgent, 3 ticks, `queue_read_limit` 2 (the smallest lock-core accepts), K = 2 | 15,579 |
//! |  clean release, broken store | `a_store_that_loses_main_row_deletes_leaves_the_main_cell_behind_rf3` | 1 client, RF 3, tick 0, main-row deletes lost; stops at the counterexample | — |
//! |  1 with a crash, replica symmetry | `replica_symmetry_keeps_the_verdicts_rf3` | as `theorem_1_survives_one_replica_crash_rf3`, depth-first with replica symmetry; and the broken fence read, still caught | 47,794 (against 282,996) |
//! |  bypass K = 2, client symmetry | `client_symmetry_keeps_the_bypass_verdicts` | as the K = 2 test, owner ids in start order: K = 1 still fails, K = 2 holds | 27,835 (against 166,966) |
//! |  client symmetry refused | `client_symmetry_is_refused_without_strict_timestamps` | 2 clients with equal timestamps: the model panics rather than check unsoundly | — |
//! |  lease, fencing | `a_paused_holder_and_a_new_holder_hold_at_once_but_fencing_refuses_the_paused_one` | 2 clients, RF 1, 4 s, holders may pause | 895 |
//! |  fencing, broken resource | `a_resource_that_ignores_tokens_takes_the_paused_holders_write_last` | the same, the resource ignores tokens | — |
//! |  lease | `renewal_keeps_the_lock_exclusive` | 2 clients, RF 1, 4 s, no pauses | 207 |
//! |  lease, skew | `a_replica_clock_beyond_the_skew_bound_breaks_the_lease_but_not_fencing` | the same, the replica's clock 2 s ahead | 3,351 |
//! |  dead waiters | `a_dead_waiter_delays_the_next_owner_only_for_its_waiter_ttl` | 3 clients, RF 1, 5 s, lease TTL 6 s, waiter TTL 2 s: c0 holds and may release at any tick, c1 queues behind it and may die at any tick, c2 queues behind c1; c2 must hold by 2 ticks after the death (and a tick after the release) | 39,885 |
//! |  dead waiters, control | `a_dead_waiter_with_a_lease_long_queue_cell_delays_the_next_owner_past_the_bound` | the same with the waiter TTL at the lease TTL, as before waiter TTLs: the checker finds c2 still waiting | — |
//! |  5 | `theorem_5_holds_for_acknowledged_updates_but_reads_can_go_back_rf3` | 2 time-service replicas (clocks 0 and 1 tick ahead), 1 reader × 2 reads, RF 3, 2 ticks | 42,517 |
//! |  5, read repair | `theorem_5_with_blocking_read_repair_rf3` | the same with blocking read repair | 82,727 |
//! |  seats: timestamp floor | `a_late_delete_by_a_seats_previous_user_never_removes_the_holders_cell` | 1 client × 2 rounds, RF 1, tick 0, `storage_retries` 0, one request of a release may time out (its delete stays in flight); and the same with `SeatFault::NoTimestampFloor`, which the checker catches | 64 |
//! |  seats: unique prefixes (A7) | `seats_shared_between_lockers_let_two_owners_hold` | 2 mandatory clients, RF 1, tick 0, holders keep the lock; and the same with `SeatFault::SharedPrefix`: the holders' cell and mutual exclusion fail | 150 |
//! |  queue floors | `queue_floors_hide_no_enqueued_waiter` | as the bypass K = 1 test with `max_clock_skew` 0 and `request_timeout` one tick (a one-tick margin); and the same with `SeatFault::FloorWithoutMargin`, which the checker catches | 22,945 |
//! |  a short queue margin | `a_waiter_hidden_by_a_short_margin_joins_again_and_exclusion_holds` | the floor test's configuration with `PollConfig::queue_margin` zero: floors hide waiters, hidden waiters rejoin (`a hidden waiter joins the queue again`), exclusion and the holders' cells hold, bypass K = 1 does not (the rejoin's write can land after the next owner's read) | 46,149 |
//! |  a short queue margin, waiting in the main row | `a_waiter_hidden_by_a_short_margin_joins_again_waiting_in_the_main_row` | the same with `wait_in_main_row` on: floors hide waiters, hidden waiters rejoin, exclusion and the holders' cells hold | 44,270 |
//! |  an adaptive queue margin | `an_adaptive_margin_shortens_reads_and_keeps_exclusion` | the floor test's configuration with `request_timeout` three ticks and `PollConfig::margin_acquisitions` 1, `least_queue_margin` 1 µs: reads take margins from a microsecond to the safe one (`an acquisition's reads take a margin shorter than the safe one`), exclusion and the holders' cells hold, and with two clients no read is hidden | 26,583 |
//! |  queue floors from the main row | `floors_from_the_main_row_hide_no_enqueued_waiter` | three mandatory clients × one round (every acquisition a locker's first, so every one reads the main row for a head to start from), RF 1, urgent time, two ticks, distinct timestamps, a one-tick margin | 165,310 |
//! |  time service | `followed_timestamps_follow_acknowledged_updates_rf3` | 1 time-service replica a tick ahead, 2 followers × (1 refresh, 2 timestamps), RF 3, 1 tick; and the same with `FollowRule::LocalClock`, caught | 74,445 |
//! |  time service, the thesis's rule | `timestamps_from_the_latest_read_go_back_rf3` | 1 time-service replica a tick ahead, 1 follower × (2 refreshes, 2 timestamps), RF 3, tick 0: `FollowRule::LatestRead` goes back, the follower does not | 912 |
//! |  1, fencing, seats, time service | `theorem_1_holds_with_clocks_that_follow_global_time` | 2 mandatory clients, RF 1, tick 0, releasing, clocks following `GlobalTime` (replica 2 ticks ahead, 1 refresh each); and the same on local clocks, caught | 64,885 |
//! |  2, time service | `theorem_2_holds_with_clocks_that_follow_global_time` | 2 mandatory clients, RF 1, urgent, 2 ticks, followed clocks as above | 108,731 |
//!
//! The models run with lock-core's two-round-trip fast path off (it is on in lock-core's
//! default configuration), so that each check above sees the path it names.
//! `tests/fast_path.rs` checks the theorems again with it on: on every mandatory
//! acquisition ([`lock::LockModel::fast_path_always`]; `--fast-path-always` on the command
//! line) and as lock-core's locker uses it (`--fast-path`). Its configurations and counts
//! are in docs/algorithm.md, section "The two-round-trip fast path": Theorem 1 at RF 1, 2 and 3, Theorem 2 with two
//! and three clients, bypass bounded with two and three, and the fencing, release, seat
//! and floor properties over two rounds; every property holds. Two hand mutants of
//! lock-core's fast path are caught: holding without the queue-first test breaks `bypass
//! bounded`, and holding without the main-row test breaks Theorem 1.
//!
//! `tests/linger.rs` checks them again with lingering after a release on (lock-core's
//! `linger`, one tick: [`lock::MODEL_LINGER`]), with fencing on and waiting in the main row
//! off and on (the two numbers of each count, in that order): Theorem 1 with releasing
//! holders over two rounds (so that the second round can retake) at RF 1 (6,163 and
//! 6,004 states) and RF 2 (91,441 and 70,557), tick 0; Theorem 2 with two clients over two
//! rounds (13,907 and 12,600, 4 ticks, the horizon that suffices without lingering);
//! bounded bypass K = 1 for two clients over two rounds (61,137 and 57,743) and
//! K = 2 for three clients of one round (229,519 and 255,275), urgent, 3 ticks, distinct
//! timestamps. Every property holds, [`lock::RETAKE_PASSES_NO_WAITER`] included, with the
//! bounds K as without lingering. The control, [`lock::RetakeFault::IgnoreQueue`], is caught
//! (see the mutant table below). With wake-up hints on as well, waiting in the main row, a
//! holder that found the lock idle stays queued so that the owner behind can ask it not to
//! linger (docs/algorithm.md, section "Lingering after a release"; the asking hints are
//! lost in the model, where a linger may end at any moment anyway): Theorem 1 at RF 1
//! (21,339 states), bounded bypass K = 1 (568,083) and Theorem 2 within 4 ticks (81,165).
//!
//! `tests/wake_hints.rs` checks them again with wake-up hints on ([`lock::LockModel::wake_hints`]):
//! every acquisition names a listener in its queue cell, a holder's release reads the queue
//! for whom to hint, and a hint may reach an acquiring client at any moment, any number of
//! times ([`lock::LockAction::WakeHint`]), so forged, early, late and repeated hints are all
//! among the runs; [`lock::HINTED_READ_SENT`] must be reached. Theorem 1 (RF 1, and RF 2
//! with `--ignored`), Theorem 2 not waiting in the main row, and bounded bypass K = 1 (and
//! K = 2 with `--ignored`) hold. Theorem 2 waiting in the main row does not: a hint cuts
//! lock-core's conflict pause short, and two owners can keep each other from the lock. The
//! control, [`lock::HintFault::Trusted`] (a hinted acquisition trusts the hint as a grant),
//! breaks mutual exclusion.
//!
//! `tests/wait_in_main.rs` checks them again with lock-core's `wait_in_main_row` on
//! (docs/algorithm.md, section "Waiting in the main row", with the configurations and counts): Theorems 1 to 4,
//! bounded bypass, and the fencing, release and floor properties; every property holds.
//! Two hand mutants of the option are caught: waiting for any
//! main cell with a queue column, not only an earlier one, breaks Theorem 2 (two owners
//! wait for each other), and holding beside cells of earlier columns instead of waiting
//! breaks Theorem 1.
//!
//! The bakery baseline (docs/algorithm.md, section "The bakery baseline") is checked in `tests/bakery.rs`,
//! whose module docs give each configuration: exclusion at QUORUM, RF 3, without the lease
//! (97,114 states) and with it at RF 1 (35,245); progress without crashes (344 and 347);
//! the wiki's warning, a crashed client blocking the other for good (1,144), and the lease
//! turning that into a delay (1,022); the lease through expiry at RF 3 (226,566 states,
//! about 5 s); and the wiki's comparison without a tie-break, whose two holders the checker
//! finds with and without the lease.
//!
//! The liveness tests (Theorems 2 and 4) also run [`liveness::verify`] on their
//! configuration, which explores the same states again. Larger configurations, run once
//! with the command-line checker (`check` breadth-first, `check-dfs` depth-first with the
//! reductions above), among them Theorem 1 for three clients on three replicas with a
//! crash and Theorem 2 at RF 3 with a crash for two, exhaustively, are listed with their
//! commands, state counts, times and memory in
//! `docs/measurements/2026-11-24-model-checking-runs.md`.
//!
//! ## Why the counts changed
//!
//! **Waiting main cells with the waiter TTL.** With `wait_in_main_row`, an owner that
//! decides to wait in the main row now rewrites its main cell with the waiter TTL at once,
//! and renews it with `lease_ttl` before it holds (with the fence read, or alone without
//! fencing). The models' time stays below every TTL, so this shows only as those writes,
//! and every count of `tests/wait_in_main.rs` with an owner that waits grew: Theorem 1 at
//! RF 1 and 2 from 213, 3,302, 144 and 1,679 to 225, 3,447, 151 and 1,755, at RF 3 from
//! 228,699 and 68,238 to 271,467 and 82,656; Theorem 2 from 463 and 1,079 to 501 and 1,120,
//! with three clients from 51,258 to 55,282; bypass K = 1 over two rounds (and the floor
//! test) from 20,723 to 23,605, K = 2 from 149,366 to 173,368. The one-client fencing test
//! and the soft clients never wait, and did not move. Every property holds as before.
//! Then an owner that renews a short cell with its fence read kept its queue cell until
//! the fence write (a renewal acknowledged too late had cost it its place in the queue):
//! Theorem 2 with fencing went from 501 to 491, bypass K = 1 (and the floor test) from
//! 23,605 to 22,901, K = 2 from 173,368 to 169,408, and the lease model's dead head waiter
//! in the main row from 50,275 to 47,707; the other counts did not move.
//!
//! **Releasing through the lease.** Holders used to keep the acquisition's `Holding` and
//! release with a `Release` built from its cells; they now keep the [`Lease`] the driver
//! builds from it and release through [`Lease::release`]. The lease keeps only what renewal
//! and release need, not the acquisition's statistics and start and acquisition instants,
//! so holders whose acquisitions went differently but left the same cells now coincide.
//! One-round counts are unchanged; runs with several rounds lost a few states (bypass
//! K = 1 over two rounds 15,695 → 15,683, equal timestamps 3,274 → 3,273, baseline
//! starvation 36,967 → 36,905). The cells deleted, their order and their timestamps are
//! the same, which the unchanged one-round counts confirm.
//!
//! **Fencing tokens.**
//!
//! The models were first pinned against a lock-core without fencing. Since then
//! `LockConfig::fencing` (default `true`) makes every queue acquisition read the fence row
//! and write the next token before it holds: two more quorum operations per acquisition, and
//! a fence cell whose copies differ between replicas. With `fencing: false` every count is
//! exactly what it was (20,740 for Theorem 1), which is how the change was attributed; the
//! models check what ships, so fencing is on, and one Theorem 1 test keeps the fencing-off
//! path checked. (The other lock-core changes since — the combined migration mode, the
//! capped poll pause of the owner next in line, the order of deleted cells — change no
//! count here: the combined mode is not modelled, every poll interval is one tick, and the
//! deletes are sent together.) Seats then changed the two-round counts only: with a seat a
//! client writes its main cell in the same column every round, so states that differed only
//! in the previous round's column name now coincide (fencing over two acquisitions went
//! from 87,752 to 38,018 states, bypass K = 1 over two rounds from 15,925 to 15,695).
//! Re-enqueueing a queue cell acknowledged later than `request_timeout` after the time in
//! its name changes no pinned count either: `request_timeout` (2 s) is far past every
//! model's horizon, so only the test that shortens it to one tick reaches it.
//!
//! **Seat books.** Clients now take their seats and queue floors from lock-core's
//! `SeatBook` instead of a hand-made `seat-<i>` column whose floor the model tracked
//! itself. No pinned count changed: the book gives each round seat 0 with the same
//! timestamp floor the model used, and the queue floor it adds (where the next round's
//! reads start) lies a 4 s margin before the head last seen, beyond every horizon, so it
//! changes no read. Only the seat's name changed in the traces (`main/c0.0` for
//! `main/seat-0`).
//!
//! **Counting who waits behind the owner first in line.** An acquisition's read that finds
//! its owner first now counts the cells queued behind it, and whether one of them was
//! enqueued since the previous holder's release (`AcquireStats::behind_at_turn` and
//! `ahead_at_return`): the locker passes the count to its next acquisition to time its
//! first read, and an owner that had anyone behind no longer counts as having found the
//! lock idle, so its locker's next acquisition takes no fast path. The machine keeps both
//! numbers from that read to the end of the acquisition, so states that differed only in
//! how many owners had queued behind the head, or when, no longer coincide, and every
//! count in which a client finds itself first with another one queued grew: Theorem 1 at
//! RF 3 from 45,292 to 48,343 states, bypass K = 1 over two rounds from 15,683 to 22,353,
//! Theorem 2 with three clients waiting in the main row from 20,860 to 40,010 (the
//! one-client fencing counts did not move, the dead-waiter check's barely did). Every
//! property holds as before. The times in the table above were measured with the earlier
//! counts. The models pass no poll hints (they time nothing), so the skipped read itself
//! is not in their state; it changes when a read is sent, never what a read decides.
//!
//! **Main cells that name the queue head, and cold floors from the main row.** A main
//! cell's value is now lock-core's `MainCellValue`: the owner's queue column, marked `^`
//! when written after a queue read showed the owner first (every main write but the fast
//! path's first), where it was the bare owner id (or, with `wait_in_main_row`, the unmarked
//! column). That alone moves no count, since a client writes one such value per round
//! where it wrote another before (with the fast path on every acquisition, whose first
//! queue write goes out with a main write and no main read, every count is as it was).
//! What moves them is the read that came with it:
//! an acquisition whose `SeatBook` has no queue floor for the lock yet
//! ([`AcquireOptions::floor_from_main`], set by [`TakenSeat::options`]), in the models every
//! mandatory client's first round, now sends a read of the main row together with its
//! first queue write, and raises its queue floor to the margin before the latest `^` head
//! another owner's cell there names, if that is later than the floor it has. That read can land before or after the queue write
//! and any other client's step, so every count with a mandatory queue client that is not
//! on the fast path from its first round grew: Theorem 1 at RF 3 from 48,343 to 70,749
//! states (21,901 to 31,545 without fencing, 193,372 to 282,996 with a crash), Theorem 2
//! from 423 to 511, bypass K = 1 over two rounds from 22,353 to 22,945 and K = 2 for three
//! clients from 116,104 to 166,966, the seat tests from 62 to 64 and from 98 to 150, the
//! one-client fencing test from 38,018 to 38,046; with `wait_in_main_row`, Theorem 1 at
//! RF 3 from 168,286 to 228,699 and Theorem 2 with three clients from 40,010 to 51,258;
//! with the fast path as the locker uses it (not on a first round), fencing over two
//! rounds from 48,170 to 48,198. Soft clients send no such read, and their counts did not
//! move. (Later a locker took the fast path on its first round of a lock too, and the two
//! counts of the fast path as the locker uses it went from 48,198 to 48,362 and from
//! 45,971 to 70,403.) With the default margin (4 s), both the floor a head gives and `cold_lookback`
//! before now are the epoch within the models' few milliseconds, so no floor is raised;
//! only the floor tests' one-tick margin lets a head in the main row move one, and there
//! too no queue read starts past an enqueued waiter. Every property holds as before; the
//! counterexamples gained the first round's main read, and their later operations are
//! numbered one higher. The times in the table above, the larger configurations and the
//! three-client runs were measured before this change and not run again, and the mutant
//! table's counts are those of its own time.
//!
//! # What each check is known to catch
//!
//! A check that cannot fail proves nothing, so every property here has been seen to fail.
//! Deliberately broken variants that live in this crate are tests (see the table above);
//! mutations of lock-core were made by hand in a copy of the workspace, checked with the
//! release build of this crate's command line, and thrown away. Each row says which checks
//! reported the mutant; rows can be added as more mutants are run.
//!
//! | Mutant or broken variant | Where | Configuration (command) | Caught by |
//! |---|---|---|---|
//! | `Lease::release` forgets the main cell (deletes only the side cells) | lock-core, `machine/lease.rs`, by hand | `check 1 3 --ticks 0 --rounds 2` | `no lock cell is left on a quorum once every client is done` only (the next round's seat write covers the forgotten cell, so no other property sees it) |
//! | the same | by hand | `check 2 1 --liveness --ticks 2` | `every client acquires every round` (the second client finds the first one's main cell and never holds) |
//! | the same | by hand | `check 2 3 --ticks 0 --no-release` | nothing: no holder releases there, which is why the clean-release property needs releasing configurations |
//! | deciding whether a queue slice was full with `>` instead of `>=` (`cells.len() > queue_read_limit`) | lock-core, `machine/acquire/`, by hand | `check 3 1 --liveness --ticks 3 --bypass-bound 2 --queue-read-limit 2` (the configuration of `theorems_1_and_2_hold_with_more_clients_than_the_queue_read_limit`) | `no acquisition fails` and `every client acquires every round`: the third waiter, behind a full slice of two, takes its cell for missing, writes it again and again and gives up |
//! | main-row deletes acknowledged and never applied | `StoreConfig::lost_deletes`, test | `a_store_that_loses_main_row_deletes_leaves_the_main_cell_behind_rf3` | `no lock cell is left on a quorum once every client is done` |
//! | fence reads answered by one replica | `StoreConfig::one_replica_reads`, test | `fencing_tokens_repeat_when_the_fence_is_read_from_one_replica_rf3`, and with replica symmetry in `replica_symmetry_keeps_the_verdicts_rf3` | `fencing tokens increase from holder to holder` |
//! | a horizon one tick too short | test | `theorem_2_check_fails_when_the_horizon_is_too_short` | `every client acquires every round` |
//! | bypass bound K = 1 for three clients | test | `bypass_is_bounded_by_two_for_three_clients_with_strict_timestamps`, `client_symmetry_keeps_the_bypass_verdicts` | `bypass bounded` |
//! | a resource that ignores fencing tokens | test | `a_resource_that_ignores_tokens_takes_the_paused_holders_write_last` | `the resource takes no write from a holder after its successor's` |
//! | a replica clock beyond the skew bound | test | `a_replica_clock_beyond_the_skew_bound_breaks_the_lease_but_not_fencing` | `mutual exclusion of holders whose lease has time left` |
//! | a waiter TTL as long as the lease | test | `a_dead_waiter_with_a_lease_long_queue_cell_delays_the_next_owner_past_the_bound` | `the owner behind a dead waiter holds within the waiter TTL` |
//! | a seat's timestamp floor dropped (`Seat::after` zero), with a release's delete timed out and landing late | `SeatFault::NoTimestampFloor`, test | `a_late_delete_by_a_seats_previous_user_never_removes_the_holders_cell` (`check 1 1 --ticks 0 --rounds 2 --release-timeouts 1 --storage-retries 0 --seat-fault no-timestamp-floor`) | `every holder's main cell reads as its own on every quorum` (without a timed-out release the floor is never needed within the horizon: every earlier delete was acknowledged before the seat was given back) |
//! | two lockers with one seat prefix (A7 broken) | `SeatFault::SharedPrefix`, test | `seats_shared_between_lockers_let_two_owners_hold` | `every holder's main cell reads as its own on every quorum` and `mutual exclusion` |
//! | queue floors without their margin | `SeatFault::FloorWithoutMargin`, test | `queue_floors_hide_no_enqueued_waiter` | `no queue read starts past an enqueued waiter's cell` (mutual exclusion still holds: a hidden cell costs fairness, not safety) |
//! | clients on their local clocks instead of following `GlobalTime` | `FollowRule::LocalClock`, tests | `followed_timestamps_follow_acknowledged_updates_rf3`, `theorem_1_holds_with_clocks_that_follow_global_time` | `a timestamp is at least every GlobalTime update acknowledged before its client's last refresh`, and in the lock model its queue-timestamp form |
//! | timestamps from the latest read of `GlobalTime` (the thesis's rule), no read repair | `FollowRule::LatestRead`, test | `timestamps_from_the_latest_read_go_back_rf3` | `a follower's timestamps never decrease` |
//! | `SeatBook::give_back` no longer raises the book's timestamp high-water mark (so `Seat::after` stays zero) | lock-core, `machine/seats.rs`, by hand | `check 1 1 --ticks 0 --rounds 2 --release-timeouts 1 --storage-retries 0` (53 states against 62 unmutated) | `every holder's main cell reads as its own on every quorum` |
//! | `Acquire::floor_margin` returns zero | lock-core, `machine/acquire/`, by hand | `check 2 1 --liveness --ticks 3 --rounds 2 --strict-timestamps --request-timeout-ticks 1 --max-clock-skew-ticks 0` (17,387 states against 15,683) | `no queue read starts past an enqueued waiter's cell` and `bypass bounded` (K = 1: the hidden waiter is passed a second time); the horizon's `every client acquires every round` counterexample is there unmutated too |
//! | a floor from a head named in the main row taken without the margin | lock-core, `machine/acquire/` (`floor_from_main_row` sets the floor at the head itself), by hand | `floors_from_the_main_row_hide_no_enqueued_waiter` | `no queue read starts past an enqueued waiter's cell`: a third client's cell, visible only after the head's owner read the queue, sorts before the head (with two clients the head is the only other cell, and `queue_floors_hide_no_enqueued_waiter` passes this mutant) |
//! | a retake's queue read answered with nothing (the retake holds without checking the queue) | [`lock::RetakeFault::IgnoreQueue`], test | `a_retake_that_ignores_the_queue_passes_a_waiter` (`check 2 1 --liveness --ticks 3 --rounds 2 --strict-timestamps --linger --retake-ignores-queue`) | `a retake passes no waiter enqueued before its reads were sent` and `bypass bounded` (K = 1: the waiter passed by the other client's acquisition is passed again by its retake); mutual exclusion still holds |
//! | `GlobalTimeFollower::observe` with its test inverted (anchors only a value *not* ahead of where it would be) | lock-core, `machine/global_time.rs`, by hand | `check 2 3 --model time --followers 2 --ticks 1` (1,919,000 states against 1,726,386); `check 2 1 --ticks 0 --time-service-ahead 2` | `a timestamp is at least every GlobalTime update acknowledged before its client's last refresh`, `a timestamp is at least every GlobalTime its client has read`; in the lock model its queue-timestamp form |
//!
//! # The bypass bound K
//!
//! With distinct timestamps, **K = N − 1** for N clients, found by the checker (K = 1 fails
//! for three clients, K = 2 holds; K = 1 holds for two clients over two and three rounds)
//! and explained as follows. Once a client is enqueued, any acquisition that *starts* later
//! takes a later timestamp and queues behind it. So only acquisitions already started when it
//! enqueued can precede it — those ahead in the queue and those that took their time earlier
//! but whose queue write lands later — and each other client has at most one of those. The
//! bound does not grow with rounds. With equal timestamps the queue falls back to owner-id
//! order and a client with a smaller id can pass the same waiter again within one clock
//! reading; the baseline algorithm has no bound at all: the checker finds a waiter passed
//! over by every acquisition of the other client. See [`counterexamples`].
//!
//! # Fencing tokens
//!
//! The lock model keeps the highest token any holder was given and flags a holder whose
//! token is not above it. At RF 3 the first holder's fence write reaches only a quorum, so
//! the property depends on the next holder's fence read meeting it (the argument in
//! [`FencingToken`]'s documentation). The property can fail: over a store that answers fence
//! reads from one replica the checker finds a second holder with the same token. In the
//! lease model, a resource that refuses tokens below the highest it accepted never takes a
//! paused holder's write after its successor's, even when a replica clock beyond the skew
//! bound gives two holders with time left on their leases; a resource that ignores tokens
//! does.
//!
//! # Command line
//!
//! The `lock-model` binary offers stateright's usual subcommands (see `--help`):
//!
//! ```text
//! lock-model check [CLIENTS] [REPLICAS] [OPTIONS]             breadth-first, every state
//! lock-model check-dfs [CLIENTS] [REPLICAS] [OPTIONS]         depth-first, every state
//! lock-model check-simulation [CLIENTS] [REPLICAS] [OPTIONS]  random walks
//! lock-model explore [CLIENTS] [REPLICAS] [OPTIONS]           Explorer web UI on localhost:3000
//! ```
//!
//! `--model queue|soft|baseline|lease|time` picks the model; `--liveness` the urgent time
//! rule; `--ticks`, `--rounds`, `--crashes`, `--strict-timestamps`, `--bypass-bound`,
//! `--no-release`, `--no-fencing`, `--fence-read-one`, `--no-pause`,
//! `--resource-ignores-tokens`, `--replica-skew`, `--read-repair`, `--late-writes`,
//! `--queue-read-limit`, `--request-timeout-ticks`, `--max-clock-skew-ticks`,
//! `--storage-retries`, `--release-timeouts`, `--seat-fault`, `--linger` and
//! `--retake-ignores-queue` set the rest; with
//! `--model time`, `--followers`, `--refreshes`, `--stamps` and `--follow-rule` add lock
//! clients that follow `GlobalTime`, and with the queue and soft models
//! `--time-service-ahead` (with `--refreshes` and `--follow-rule`) makes their clocks
//! follow it; `--symmetry` (depth-first and simulation only) and
//! `--client-symmetry` (with `--strict-timestamps`) turn on the reductions above, and
//! `--timeout-secs` stops a long run and reports how far it got. Every discovery is printed
//! as a trace like those in [`counterexamples`], and every run ends with the process's peak
//! resident memory.
//!
//! [`Acquire`]: lock_core::machine::Acquire
//! [`BaselineAcquire`]: lock_core::machine::BaselineAcquire
//! [`Release`]: lock_core::machine::Release
//! [`Lease`]: lock_core::machine::Lease
//! [`Lease::release`]: lock_core::machine::Lease::release
//! [`UpdateGlobalTime`]: lock_core::machine::UpdateGlobalTime
//! [`SeatBook`]: lock_core::machine::SeatBook
//! [`SeatBook::start`]: lock_core::machine::SeatBook::start
//! [`SeatUse`]: lock_core::machine::SeatUse
//! [`SeatUse::acquisition_ended`]: lock_core::machine::SeatUse::acquisition_ended
//! [`SeatUse::release_ended`]: lock_core::machine::SeatUse::release_ended
//! [`TakenSeat::options`]: lock_core::machine::TakenSeat::options
//! [`AcquireOptions::floor_from_main`]: lock_core::machine::AcquireOptions::floor_from_main
//! [`GlobalTimeFollower`]: lock_core::machine::GlobalTimeFollower
//! [`FencingToken`]: lock_core::machine::FencingToken
//! [`Machine::poll_request`]: lock_core::machine::Machine::poll_request
//! [`Machine::poll_outcome`]: lock_core::machine::Machine::poll_outcome
//! [`Machine::handle_timeout`]: lock_core::machine::Machine::handle_timeout
//! [`Machine::poll_timeout`]: lock_core::machine::Machine::poll_timeout

pub mod client;
pub mod clock;
#[doc = include_str!("counterexamples.md")]
pub mod counterexamples {}
pub mod global_time;
pub mod lease;
pub mod liveness;
pub mod lock;
pub mod store;
pub mod trace;
