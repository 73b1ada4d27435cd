//! The runtime pool: provisioning slots, admitting their peers, recovering
//! lost tabs, retiring slots.

use super::*;

/// The runtime commands (routed here by [`super::decide`]).
pub(super) fn decide(state: &State, command: &Request) -> Result<Vec<EventBody>, Refusal> {
    match command {
        Request::RuntimeProvision { actor, operation_id, slots, expires_at_ms } => {
            let (run, root) = root_actor(state, actor)?;
            require_active(run)?;
            if run.workers.len() + slots.len() > WORKERS_PER_RUN_MAX {
                return Err(Refusal::RunFull(WORKERS_PER_RUN_MAX));
            }
            let mut paths = run.paths.clone();
            let mut events = Vec::new();
            for s in slots {
                if state.runtime.slot(&run.id, s.slot).is_some_and(|r| r.health != SlotHealth::Retired) {
                    return Err(Refusal::SlotHeld(s.slot));
                }
                check_assignment(&s.assignment)?;
                if s.model.as_deref().is_some_and(|m| !protocol::limits::valid_model_label(m)) {
                    return Err(Refusal::BadModel);
                }
                let base = format!("{}/pool-{}", root.path, s.slot);
                let path = (0..)
                    .map(|n| if n == 0 { base.clone() } else { format!("{base}-{n}") })
                    .find(|p| !paths.contains(p))
                    .expect("a free path");
                paths.insert(path.clone());
                events.extend([EventBody::WorkerCreated {
                    worker_id: s.worker_id.clone(),
                    path,
                    parent_id: Some(actor.clone()),
                    assignment: Some(s.assignment.clone()),
                }]);
                events.extend(s.model.iter().map(|model| EventBody::WorkerModelPinned {
                    effort: None,
                    worker_id: s.worker_id.clone(),
                    model: model.clone(),
                }));
                events.extend([
                    state_change(
                        &s.worker_id,
                        WorkerState::Created,
                        WorkerState::LaunchRequested,
                        Some("pool provisioning"),
                    ),
                    EventBody::RuntimeSlotProvisioning {
                        operation_id: operation_id.clone(),
                        slot: s.slot,
                        worker_id: s.worker_id.clone(),
                        expires_at_ms: *expires_at_ms,
                    },
                    EventBody::CommandQueued {
                        command_id: s.command_id.clone(),
                        worker_id: s.worker_id.clone(),
                        intent: CommandIntent::Create,
                        idempotency_key: format!("create:{}", s.worker_id),
                        not_before_ms: Some(s.not_before_ms),
                    },
                ]);
            }
            Ok(events)
        }
        Request::RuntimeAdmit { worker_id, peer_fingerprint, now_ms } => {
            let (run, worker) = acting(state, worker_id)?;
            require_open(run)?;
            let record = state.runtime.by_worker(worker_id).ok_or(Refusal::Admission(admission::Refusal::NotPooled))?;
            let claim = admission::Claim { worker: worker_id, peer_fingerprint, now_ms: *now_ms };
            let decided = admission::admit(record, &claim).map_err(Refusal::Admission)?;
            let mut events = Vec::new();
            if decided == admission::Admission::Admit {
                events.push(EventBody::RuntimeSlotAdmitted {
                    slot: record.slot,
                    worker_id: worker_id.clone(),
                    peer_fingerprint: peer_fingerprint.clone(),
                });
            }
            events.push(EventBody::WorkerAttached {
                worker_id: worker_id.clone(),
                attach_count: worker.attach_count + 1,
            });
            if matches!(worker.state, WorkerState::Created | WorkerState::LaunchRequested | WorkerState::Launching) {
                events.push(state_change(worker_id, worker.state, WorkerState::Running, Some("admitted")));
            }
            Ok(events)
        }
        Request::RuntimeRecover { actor, slot, command_id } => {
            let (run, _) = root_actor(state, actor)?;
            require_open(run)?;
            let record = state.runtime.slot(&run.id, *slot).ok_or(Refusal::NoSlot(*slot))?;
            if let Some(attempts) = setup_refused(state, record) {
                // Nothing was submitted before: create afresh under a new key
                // (the executor's journal answers the old key with its refusal).
                let worker = record.reserved_worker.clone();
                return Ok(vec![EventBody::CommandQueued {
                    command_id: command_id.clone(),
                    idempotency_key: format!("create:{worker}:retry-{attempts}"),
                    worker_id: worker,
                    intent: CommandIntent::Create,
                    not_before_ms: None,
                }]);
            }
            if record.health != SlotHealth::Lost || record.conversation.is_none() {
                return Err(Refusal::SlotNotLost { slot: *slot, health: record.health });
            }
            let worker = record.reserved_worker.clone();
            Ok(vec![
                EventBody::RuntimeSlotHealth {
                    slot: *slot,
                    worker_id: worker.clone(),
                    health: SlotHealth::Recovering,
                    reason: "reopening the exact conversation".into(),
                },
                EventBody::CommandQueued {
                    command_id: command_id.clone(),
                    worker_id: worker.clone(),
                    intent: CommandIntent::Open,
                    idempotency_key: format!("open:{worker}:{}", record.continuation_epoch + 1),
                    not_before_ms: None,
                },
            ])
        }
        Request::RuntimeRetire { actor, slot, command_id } => {
            let (run, _) = root_actor(state, actor)?;
            let record = state.runtime.slot(&run.id, *slot).ok_or(Refusal::NoSlot(*slot))?;
            let worker = state.worker(&record.reserved_worker).expect("pool workers exist");
            if let Some(why) = retire_protection(state, record, worker) {
                return Err(Refusal::SlotProtected { slot: *slot, why: why.to_string() });
            }
            let mut events = vec![EventBody::RuntimeSlotHealth {
                slot: *slot,
                worker_id: worker.id.clone(),
                health: SlotHealth::Retiring,
                reason: "scale-down".into(),
            }];
            if !worker.state.is_terminal() {
                events.push(state_change(&worker.id, worker.state, WorkerState::Cancelled, Some("retired")));
            }
            events.push(EventBody::CommandQueued {
                command_id: command_id.clone(),
                worker_id: worker.id.clone(),
                intent: CommandIntent::Close,
                idempotency_key: format!("close:{}", worker.id),
                not_before_ms: None,
            });
            Ok(events)
        }
        _ => unreachable!("decide routes only this family's commands here"),
    }
}

/// The number of conversation creates a provisioning slot's worker has had,
/// when the last was refused for a host or setup state (nothing was
/// submitted; see `CarrierRecord::awaiting_setup`) and none is queued since:
/// the slot waits for `runtime_recover` to try again once the setup is fixed.
pub fn setup_refused(state: &State, record: &registry::CarrierRecord) -> Option<usize> {
    if record.awaiting_setup.is_none() || record.health != SlotHealth::Provisioning || record.conversation.is_some() {
        return None;
    }
    let worker = &record.reserved_worker;
    Some(state.commands.values().filter(|c| &c.worker_id == worker && c.intent == CommandIntent::Create).count())
}

/// Why a pool slot may not be retired now, if it may not: only a parked,
/// idle slot with nothing queued or in flight is safe.
pub fn retire_protection(state: &State, record: &registry::CarrierRecord, worker: &Worker) -> Option<&'static str> {
    if record.health != SlotHealth::Parked {
        return Some(match record.health {
            SlotHealth::ReconcileRequired => "reconcile required",
            SlotHealth::Provisioning => "still provisioning",
            SlotHealth::Lost | SlotHealth::Recovering => "being recovered",
            SlotHealth::Retiring | SlotHealth::Retired => "already retiring",
            SlotHealth::Parked => unreachable!(),
        });
    }
    let open = state.open_commands.iter().filter_map(|id| state.commands.get(id)).any(|c| c.worker_id == worker.id);
    if open {
        return Some("a command is queued or in flight (targeted or continuation pending)");
    }
    let idle =
        worker.state == WorkerState::Completed || (worker.state == WorkerState::Running && worker.followups.is_empty());
    (!idle).then_some("busy with a task")
}

#[cfg(test)]
mod tests {
    use super::super::table::{Given, check};
    use super::*;

    fn provision(g: &mut Given, slot: u32) -> Request {
        let (worker_id, command_id) = (WorkerId::from_uuid_bytes(g.id()), CommandId::from_uuid_bytes(g.id()));
        let assignment = Assignment::from_objective(format!("parked for slot {slot}"));
        Request::RuntimeProvision {
            actor: g.root.clone(),
            operation_id: format!("ensure-{slot}"),
            slots: vec![ProvisionSlot { slot, worker_id, assignment, command_id, not_before_ms: 0, model: None }],
            expires_at_ms: 60_000,
        }
    }

    #[test]
    fn runtime_commands_by_state() {
        let mut rows = Vec::new();

        let mut g = Given::run();
        let c = provision(&mut g, 0);
        rows.push((
            "a slot is provisioned before any effect",
            g,
            c,
            Ok(&["worker.created", "worker.state_changed", "runtime.slot_provisioning", "executor.command_queued"][..]),
        ));

        let mut g = Given::run();
        let mut c = provision(&mut g, 0);
        if let Request::RuntimeProvision { slots, .. } = &mut c {
            slots[0].model = Some("o3".into());
        }
        rows.push((
            "a pinned slot's worker is pinned before its create",
            g,
            c,
            Ok(&[
                "worker.created",
                "worker.model_pinned",
                "worker.state_changed",
                "runtime.slot_provisioning",
                "executor.command_queued",
            ][..]),
        ));

        let mut g = Given::run();
        let mut c = provision(&mut g, 0);
        if let Request::RuntimeProvision { slots, .. } = &mut c {
            slots[0].model = Some(" o3".into());
        }
        rows.push(("a model label outside its form", g, c, Err(ErrorCode::InvalidArgument)));

        let mut g = Given::run();
        let c = provision(&mut g, 0);
        g.apply(c);
        let c = provision(&mut g, 0);
        rows.push(("a held slot is not provisioned twice", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let c = provision(&mut g, 0);
        g.apply(c);
        let worker = g.state.runtime.slot(&g.run, 0).unwrap().reserved_worker.clone();
        let c = Request::RuntimeAdmit { worker_id: worker, peer_fingerprint: "p1".into(), now_ms: 1 };
        rows.push(("no admission before the conversation is bound", g, c, Err(ErrorCode::PeerIdentityUnresolved)));

        let mut g = Given::run();
        let c = provision(&mut g, 0);
        g.apply(c);
        let c =
            Request::RuntimeRetire { actor: g.root.clone(), slot: 0, command_id: CommandId::from_uuid_bytes(g.id()) };
        rows.push(("a provisioning slot is not retired", g, c, Err(ErrorCode::InvalidTransition)));

        let mut g = Given::run();
        let a = g.attached("a");
        let c = provision(&mut g, 0);
        let Request::RuntimeProvision { slots, expires_at_ms, operation_id, .. } = c else { unreachable!() };
        let c = Request::RuntimeProvision { actor: a, operation_id, slots, expires_at_ms };
        rows.push(("only root provisions", g, c, Err(ErrorCode::Forbidden)));

        check(rows);
    }
}
