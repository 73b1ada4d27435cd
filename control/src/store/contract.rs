//! The contract every [`Store`] must keep, as a suite of checks that any
//! implementation's tests call with a factory for fresh, empty stores.

use std::collections::HashSet;

use protocol::{Event, EventBody, MessageId, MessageKind, RunId, WorkerId};

use super::{Batch, IdempotencyRecord, Pruned, Store, StoreError};

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
    replay_keeps_commit_order(&make());
    a_snapshot_holds_what_was_committed_before_it(&make());
    messages_are_found_by_id(&make());
    a_prune_removes_runs_whole(&make());
    a_snapshot_and_its_tail_fold_to_the_whole_log(make());
}

fn tail<S: Store>(store: &S, position: u64) -> Vec<(RunId, u64)> {
    let mut out = Vec::new();
    store
        .replay_after(position, &mut |e| {
            out.push((e.run_id, e.cursor));
            Ok(())
        })
        .unwrap();
    out
}

fn message(run_id: &RunId, cursor: u64, id: u8, to: u8) -> Event {
    let body = EventBody::WorkerMessage {
        message_id: MessageId::from_uuid_bytes([id; 16]),
        from: WorkerId::from_uuid_bytes([0xee; 16]),
        to: WorkerId::from_uuid_bytes([to; 16]),
        kind: MessageKind::Information,
        body: "hello".into(),
        in_reply_to: None,
    };
    Event { cursor, run_id: run_id.clone(), at_ms: 1_000 + cursor, body }
}

/// A snapshot stands after every event committed before it: the events
/// after it replay on their own, in commit order; a later snapshot
/// replaces it.
pub fn a_snapshot_holds_what_was_committed_before_it<S: Store>(store: &S) {
    assert_eq!(store.snapshot().unwrap(), None);
    let (a, b) = (run(1), run(2));
    store.append(&batch(vec![event(&a, 1), event(&b, 1)])).unwrap();
    store.save_snapshot(b"first").unwrap();
    let first = store.snapshot().unwrap().unwrap();
    assert_eq!(first.state, b"first");
    assert_eq!(tail(store, first.position), vec![]);
    store.append(&batch(vec![event(&b, 2), event(&a, 2)])).unwrap();
    store.append(&batch(vec![event(&b, 3)])).unwrap();
    assert_eq!(tail(store, first.position), vec![(b.clone(), 2), (a.clone(), 2), (b.clone(), 3)]);
    assert_eq!(tail(store, 0).len(), 5, "position 0 is the whole log");
    store.save_snapshot(b"second").unwrap();
    let second = store.snapshot().unwrap().unwrap();
    assert!(second.position > first.position);
    assert_eq!(second.state, b"second");
    assert_eq!(tail(store, second.position), vec![]);
}

/// A message is found by its id: its run and recipient.
pub fn messages_are_found_by_id<S: Store>(store: &S) {
    let r = run(1);
    store.append(&batch(vec![event(&r, 1), message(&r, 2, 5, 6)])).unwrap();
    let found = store.message(&MessageId::from_uuid_bytes([5; 16])).unwrap();
    assert_eq!(found, Some((r, WorkerId::from_uuid_bytes([6; 16]))));
    assert_eq!(store.message(&MessageId::from_uuid_bytes([7; 16])).unwrap(), None);
}

/// A prune removes the runs named, whole: events, messages, the records
/// their ids own, every snapshot; a dry one only counts. Other runs keep
/// everything, and a pruned run's id may start a log again.
pub fn a_prune_removes_runs_whole<S: Store>(store: &S) {
    let (gone, kept) = (run(1), run(2));
    let owned = |scope: &str, key: &str| IdempotencyRecord {
        scope: scope.into(),
        key: key.into(),
        request_hash: "h".into(),
        response: "{}".into(),
    };
    let created = IdempotencyRecord { response: format!("{{\"run_id\":\"{gone}\"}}"), ..owned("run_create", "c") };
    store
        .append(&Batch {
            events: vec![event(&gone, 1), message(&gone, 2, 5, 6)],
            idempotency: Some(owned(&format!("message_send:{}", WorkerId::from_uuid_bytes([0xee; 16])), "m")),
        })
        .unwrap();
    store.append(&Batch { events: vec![], idempotency: Some(created) }).unwrap();
    store
        .append(&Batch { events: vec![event(&kept, 1)], idempotency: Some(owned(&format!("x:{kept}"), "k")) })
        .unwrap();
    store.save_snapshot(b"state").unwrap();
    let owners: HashSet<String> = [gone.to_string(), WorkerId::from_uuid_bytes([0xee; 16]).to_string()].into();
    let expected = Pruned { runs: 1, events: 2, idempotency_records: 2 };
    assert_eq!(store.prune(std::slice::from_ref(&gone), &owners, true).unwrap(), expected);
    assert_eq!(tail(store, 0).len(), 3, "a dry prune removes nothing");
    assert!(store.snapshot().unwrap().is_some());
    assert_eq!(store.prune(std::slice::from_ref(&gone), &owners, false).unwrap(), expected);
    assert_eq!(tail(store, 0), vec![(kept.clone(), 1)]);
    assert_eq!(store.snapshot().unwrap(), None, "the snapshot held the pruned run");
    assert_eq!(store.message(&MessageId::from_uuid_bytes([5; 16])).unwrap(), None);
    assert_eq!(store.idempotency("run_create", "c").unwrap(), None);
    assert!(store.idempotency(&format!("x:{kept}"), "k").unwrap().is_some());
    store.append(&batch(vec![event(&gone, 1)])).unwrap();
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

/// Replay yields the events in commit order, runs interleaved as their
/// appends were (the order the live state folded them in).
pub fn replay_keeps_commit_order<S: Store>(store: &S) {
    let (a, b) = (run(7), run(3));
    store.append(&batch(vec![event(&a, 1)])).unwrap();
    store.append(&batch(vec![event(&b, 1)])).unwrap();
    store.append(&batch(vec![event(&a, 2)])).unwrap();
    store.append(&batch(vec![event(&b, 2), event(&a, 3)])).unwrap();
    let order: Vec<(RunId, u64)> = all(store).into_iter().map(|e| (e.run_id, e.cursor)).collect();
    assert_eq!(order, vec![(a.clone(), 1), (b.clone(), 1), (a.clone(), 2), (b, 2), (a, 3)]);
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

/// Through the control plane, saving a snapshot every few events: the
/// state folded from the latest snapshot and the events after it is the
/// state the whole log folds to, and the live plane's.
pub fn a_snapshot_and_its_tail_fold_to_the_whole_log<S: Store>(store: S) {
    use crate::decide::Request;
    let store: std::sync::Arc<dyn Store> = std::sync::Arc::new(store);
    let clock = std::sync::Arc::new(crate::ManualClock::at(1_000));
    let plane = crate::ControlPlane::open(store.clone(), clock, crate::Keyring::new([9; 32])).unwrap();
    let plane = plane.with_snapshot_every(4);
    let (_, root_id) = plane.create_run("snapshots", None).unwrap();
    let root = plane.worker(&root_id).unwrap();
    let objective = protocol::Assignment::from_objective("fold");
    let workers: Vec<WorkerId> =
        (0..2).map(|i| plane.spawn(&root, &format!("w{i}"), &objective, None).unwrap()).collect();
    for w in &workers {
        plane.execute(Request::Attach { worker_id: w.clone() }).unwrap();
        let me = plane.worker(w).unwrap();
        let q = plane.send(&me, &root_id, MessageKind::Question, "which?", None, None).unwrap();
        plane.send(&plane.worker(&root_id).unwrap(), w, MessageKind::Answer, "this", Some(&q), None).unwrap();
    }
    plane.execute(Request::Complete { actor: workers[0].clone(), summary: "done".into(), artifacts: vec![] }).unwrap();
    let snapshot = store.snapshot().unwrap().expect("snapshots were saved");
    assert!(snapshot.position > 0);
    let mut whole = crate::model::State::default();
    store
        .replay(&mut |e| {
            whole.apply(&e).unwrap();
            Ok(())
        })
        .unwrap();
    assert_eq!(crate::plane::fold_store(store.as_ref()).unwrap(), whole);
    assert_eq!(plane.with_state(Clone::clone), whole);
}
