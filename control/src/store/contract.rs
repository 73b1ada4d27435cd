//! The contract every [`Store`] must keep, as a suite of checks that any
//! implementation's tests call with a factory for fresh, empty stores.

use protocol::{Event, EventBody, RunId, WorkerId};

use super::{Batch, IdempotencyRecord, Store, StoreError};

fn run(n: u8) -> RunId {
    RunId::from_uuid_bytes([n; 16])
}

fn event(run_id: &RunId, cursor: u64) -> Event {
    let body = if cursor == 1 {
        EventBody::RunCreated { title: format!("run {run_id}"), root_worker_id: WorkerId::from_uuid_bytes([0xee; 16]) }
    } else {
        EventBody::WorkerProgress {
            worker_id: WorkerId::from_uuid_bytes([0xee; 16]),
            summary: format!("step {cursor}"),
            percent: None,
        }
    };
    Event { cursor, run_id: run_id.clone(), at_ms: 1_000 + cursor, body }
}

fn batch(events: Vec<Event>) -> Batch {
    Batch { events, idempotency: None }
}

fn record(key: &str, hash: &str) -> IdempotencyRecord {
    IdempotencyRecord {
        scope: "test".into(),
        key: key.into(),
        request_hash: hash.into(),
        response: format!("{{\"for\":\"{key}\"}}"),
    }
}

fn all<S: Store>(store: &S) -> Vec<Event> {
    let mut out = Vec::new();
    store
        .replay(&mut |e| {
            out.push(e);
            Ok(())
        })
        .unwrap();
    out
}

/// Runs every check, each on a fresh store from `make`.
pub fn check_all<S: Store>(make: impl Fn() -> S) {
    appended_events_read_back_in_order(&make());
    a_group_commits_every_batch_or_none(&make());
    cursors_must_continue_the_log(&make());
    a_refused_batch_commits_nothing(&make());
    idempotency_keys_are_unique(&make());
    replay_keeps_runs_in_creation_order(&make());
}

/// Events come back exactly as appended, paged by cursor.
pub fn appended_events_read_back_in_order<S: Store>(store: &S) {
    let r = run(1);
    store.append(&batch(vec![event(&r, 1), event(&r, 2)])).unwrap();
    store.append(&batch(vec![event(&r, 3)])).unwrap();
    assert_eq!(store.events_after(&r, 0, 10).unwrap(), vec![event(&r, 1), event(&r, 2), event(&r, 3)]);
    assert_eq!(store.events_after(&r, 1, 1).unwrap(), vec![event(&r, 2)]);
    assert_eq!(store.events_after(&r, 3, 10).unwrap(), vec![]);
    assert_eq!(store.events_after(&run(9), 0, 10).unwrap(), vec![]);
}

/// A gap, a repeat or a restart at 1 is refused; per-run cursors are independent.
pub fn cursors_must_continue_the_log<S: Store>(store: &S) {
    let (a, b) = (run(1), run(2));
    store.append(&batch(vec![event(&a, 1)])).unwrap();
    for bad in [vec![event(&a, 3)], vec![event(&a, 1)], vec![event(&a, 2), event(&a, 2)], vec![event(&b, 2)]] {
        assert!(matches!(store.append(&batch(bad)), Err(StoreError::CursorGap { .. })));
    }
    store.append(&batch(vec![event(&b, 1), event(&a, 2), event(&b, 2)])).unwrap();
    assert_eq!(store.events_after(&a, 0, 10).unwrap().len(), 2);
    assert_eq!(store.events_after(&b, 0, 10).unwrap().len(), 2);
}

/// A batch refused for any reason leaves no event and no key behind.
pub fn a_refused_batch_commits_nothing<S: Store>(store: &S) {
    let r = run(1);
    store.append(&Batch { events: vec![event(&r, 1)], idempotency: Some(record("k", "h")) }).unwrap();
    // Valid events with a duplicate key: nothing is written.
    let dup = Batch { events: vec![event(&r, 2)], idempotency: Some(record("k", "other")) };
    assert_eq!(store.append(&dup), Err(StoreError::DuplicateKey));
    // A fresh key with a gap: the key is not written either.
    let gap = Batch { events: vec![event(&r, 2), event(&r, 4)], idempotency: Some(record("k2", "h")) };
    assert!(matches!(store.append(&gap), Err(StoreError::CursorGap { .. })));
    assert_eq!(store.idempotency("test", "k2").unwrap(), None);
    assert_eq!(store.events_after(&r, 0, 10).unwrap(), vec![event(&r, 1)]);
    assert_eq!(store.idempotency("test", "k").unwrap(), Some(record("k", "h")));
}

/// One record per (scope, key); scopes are independent.
pub fn idempotency_keys_are_unique<S: Store>(store: &S) {
    assert_eq!(store.idempotency("test", "k").unwrap(), None);
    store.append(&Batch { events: vec![], idempotency: Some(record("k", "h1")) }).unwrap();
    assert_eq!(
        store.append(&Batch { events: vec![], idempotency: Some(record("k", "h1")) }),
        Err(StoreError::DuplicateKey)
    );
    let mut other_scope = record("k", "h2");
    other_scope.scope = "elsewhere".into();
    store.append(&Batch { events: vec![], idempotency: Some(other_scope.clone()) }).unwrap();
    assert_eq!(store.idempotency("test", "k").unwrap().unwrap().request_hash, "h1");
    assert_eq!(store.idempotency("elsewhere", "k").unwrap(), Some(other_scope));
}

/// Replay yields each run's events in cursor order, runs in creation order,
/// even when their appends interleave.
pub fn replay_keeps_runs_in_creation_order<S: Store>(store: &S) {
    let (a, b) = (run(7), run(3));
    store.append(&batch(vec![event(&a, 1)])).unwrap();
    store.append(&batch(vec![event(&b, 1)])).unwrap();
    store.append(&batch(vec![event(&a, 2)])).unwrap();
    store.append(&batch(vec![event(&b, 2), event(&a, 3)])).unwrap();
    let order: Vec<(RunId, u64)> = all(store).into_iter().map(|e| (e.run_id, e.cursor)).collect();
    assert_eq!(order, vec![(a.clone(), 1), (a.clone(), 2), (a, 3), (b.clone(), 1), (b, 2)]);
}

/// A group is one transaction: its batches continue each other, and one
/// the store would refuse (a gap, a key used twice) fails all of them.
pub fn a_group_commits_every_batch_or_none<S: Store>(store: &S) {
    let (a, b) = (run(1), run(2));
    let first = Batch { events: vec![event(&a, 1)], idempotency: Some(record("k1", "h")) };
    let second = Batch { events: vec![event(&b, 1), event(&a, 2)], idempotency: Some(record("k2", "h")) };
    store.append_group(&[first, second]).unwrap();
    assert_eq!(all(store).len(), 3);
    let gap = [batch(vec![event(&a, 3)]), batch(vec![event(&a, 5)])];
    assert!(matches!(store.append_group(&gap), Err(StoreError::CursorGap { .. })));
    let twice = [
        Batch { events: vec![event(&a, 3)], idempotency: Some(record("k3", "h")) },
        Batch { events: vec![event(&a, 4)], idempotency: Some(record("k3", "h")) },
    ];
    assert_eq!(store.append_group(&twice), Err(StoreError::DuplicateKey));
    assert_eq!(all(store).len(), 3, "a refused group commits nothing");
    assert!(store.idempotency("test", "k3").unwrap().is_none());
}
