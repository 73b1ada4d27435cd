//! The prompts the orchestrator submits into worker conversations. They carry
//! only the worker's opaque attach identity and short instructions: no
//! executor token, no assignment body (the worker fetches that over MCP), so a
//! leaked transcript leaks nothing but one worker's attach identity. Prompts
//! are rendered at dispatch from a [`protocol::PromptRef`], never stored.

/// Version of the bootstrap text; bump when the wording changes meaning
/// (2: the completion contract of Execution Continuity, seed §8.4; 3: every
/// report names the work it answers, `followup 0` for the assignment).
pub const BOOTSTRAP_VERSION: u32 = 3;

/// The bootstrap prompt for the worker whose attach identity is `attach`.
pub fn bootstrap_prompt(attach: &str) -> String {
    format!(
        "[orchestrator bootstrap v{BOOTSTRAP_VERSION}] You are an orchestrated worker. \
         Call the ChatGPT Orchestrator tool worker_attach with attach_identity \"{attach}\" \
         to receive your capability and your assignment, then carry the assignment out to completion. \
         Communicate only through orchestrator tools: worker_progress for progress, message_send to /root \
         for questions, events_wait for replies; pass followup 0 to worker_progress, worker_complete and worker_fail \
         (the number of a follow-up instead, once you carry one out). Before ending a turn: worker_complete if \
         finished, worker_fail if irrecoverably failed, worker_await_human if a person must act, worker_await_dependency if another worker or \
         system must change first; otherwise stay active: your conversation may be resumed."
    )
}

/// Version of the managed root's bootstrap text.
pub const ROOT_BOOTSTRAP_VERSION: u32 = 1;

/// The bootstrap prompt for a root the daemon launched into a conversation
/// of its own (seed §13.4): it coordinates the run, and like a worker it
/// may be resumed when its turn ends while the run is active.
pub fn root_bootstrap_prompt(attach: &str) -> String {
    format!(
        "[orchestrator root bootstrap v{ROOT_BOOTSTRAP_VERSION}] You are the root of an orchestrated run. \
         Call the ChatGPT Orchestrator tool worker_attach with attach_identity \"{attach}\" \
         to receive root's capability and the run's objective. Decompose the objective into workers (worker_spawn), \
         coordinate them with events_wait and message_send, and integrate their results. Before ending a turn: \
         worker_complete once the objective is met, worker_fail if it cannot be, worker_await_human if a person must \
         act; otherwise stay active: your conversation may be resumed to go on coordinating."
    )
}

/// Version of the wake prompt wording (2: the report names its follow-up).
pub const WAKE_VERSION: u32 = 2;

/// The wake prompt telling the worker with attach identity `attach` that
/// follow-up number `seq` is waiting for it.
pub fn followup_prompt(attach: &str, seq: u32) -> String {
    format!(
        "[orchestrator wake v{WAKE_VERSION}] Root gave you follow-up #{seq}. Call worker_attach with attach_identity \"{attach}\" \
         to read your assignment and follow-ups, carry follow-up #{seq} out, and finish with worker_complete or worker_fail \
         passing followup {seq} (a report on older work is refused)."
    )
}

/// Version of the resume and checkpoint wording (Execution Continuity; 2:
/// reports name the follow-up they answer).
pub const CONTINUE_VERSION: u32 = 2;

/// The resume prompt (seed §11): the worker's turn ended while it is
/// unfinished. Durable state is authoritative; no assignment body.
pub fn resume_prompt(attach: &str, attempt: u32) -> String {
    format!(
        "[orchestrator resume v{CONTINUE_VERSION} attempt {attempt}] Continue your orchestrated assignment. \
         Call worker_attach with attach_identity \"{attach}\" to recover your assignment, follow-ups and progress \
         before acting; do not redo completed work. Continue until the acceptance criteria are met. Pass each report \
         the followup number of the work it answers (the newest follow-up attach lists, or 0 for the assignment). \
         Before ending your turn: call worker_complete if finished, worker_fail if irrecoverably failed, worker_await_human only if a \
         person must act, worker_await_dependency only if another worker or system must change first; otherwise \
         leave the worker active and it will be resumed."
    )
}

/// The checkpoint prompt (seed §10.3): the active keepalive fell due.
pub fn checkpoint_prompt(attach: &str, attempt: u32) -> String {
    format!(
        "[orchestrator checkpoint v{CONTINUE_VERSION} attempt {attempt}] Send root a durable update now \
         (worker_progress with the followup number of the work you are on, and message_send to /root): the checkpoint commits if any, what you completed since your \
         last report, what you are doing now, what remains, and any blockers or contract changes. Then continue the \
         same assignment to completion; do not stop because you reported. If you lost your capability, call \
         worker_attach with attach_identity \"{attach}\". If finished, call worker_complete; if genuinely blocked, \
         use worker_await_human or worker_await_dependency."
    )
}

/// Version of the rollover wording.
pub const ROLLOVER_VERSION: u32 = 1;

/// The bootstrap of a worker's (or a managed root's) fresh conversation at
/// continuation `epoch`: it attaches with the new epoch's identity and
/// reads its capsule. The old conversation is not mentioned by content.
pub fn rollover_bootstrap_prompt(attach: &str, epoch: u32, root: bool) -> String {
    let role = if root { "the root of an orchestrated run" } else { "an orchestrated worker" };
    format!(
        "[orchestrator rollover bootstrap v{ROLLOVER_VERSION} epoch {epoch}] You continue the work of {role} \
         whose earlier conversation was retired. Call the ChatGPT Orchestrator tool worker_attach with \
         attach_identity \"{attach}\" to receive your capability, your assignment and follow-ups, and your \
         continuation capsule (what is done, what is open, your last checkpoint). Do not redo completed work; \
         go on from the capsule. Pass each report the followup number of the work it answers. Before ending a \
         turn: worker_complete if finished, worker_fail if irrecoverably failed, worker_await_human if a person \
         must act; otherwise stay active: your conversation may be resumed."
    )
}

/// The rollover prompt: the worker's conversation is about to be
/// replaced; it writes what is done and what is next first.
pub fn rollover_prompt(attach: &str) -> String {
    format!(
        "[orchestrator rollover v{ROLLOVER_VERSION}] This conversation is about to be replaced by a fresh one. \
         Call worker_checkpoint now with a short note (at most 8 KB): what is done, what you are doing, what \
         is next, and anything your successor must know. Then end your turn; the work goes on in the fresh \
         conversation. If you lost your capability, call worker_attach with attach_identity \"{attach}\" first."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_only_the_attach_identity() {
        let text = bootstrap_prompt("att_0123_abcd");
        assert!(text.contains("\"att_0123_abcd\""));
        assert!(text.starts_with("[orchestrator bootstrap v3]"));
        assert!(text.contains("followup 0"), "{text}");
        assert!(text.contains("worker_await_dependency") && text.contains("stay active"));
        assert!(!text.contains("cap_"));
    }

    #[test]
    fn the_root_prompt_names_only_the_attach_identity_and_the_coordinator_role() {
        let text = root_bootstrap_prompt("att_0123_abcd");
        assert!(text.starts_with("[orchestrator root bootstrap v1]"));
        assert!(text.contains("\"att_0123_abcd\"") && text.contains("worker_spawn") && text.contains("events_wait"));
        assert!(!text.contains("cap_"));
    }

    #[test]
    fn rollover_prompts_name_only_the_new_attach_identity() {
        let text = rollover_bootstrap_prompt("att_1-2_ab", 2, false);
        assert!(text.starts_with("[orchestrator rollover bootstrap v1 epoch 2]"), "{text}");
        assert!(text.contains("\"att_1-2_ab\"") && text.contains("capsule") && text.contains("worker"), "{text}");
        assert!(rollover_bootstrap_prompt("att_1-2_ab", 2, true).contains("root of an orchestrated run"));
        let ask = rollover_prompt("att_1-2_ab");
        assert!(ask.contains("worker_checkpoint") && !ask.contains("cap_") && ask.len() < 1_000, "{ask}");
    }

    #[test]
    fn resume_and_checkpoint_name_the_attempt_and_the_explicit_outcomes_only() {
        for text in [resume_prompt("att_1", 3), checkpoint_prompt("att_1", 3)] {
            assert!(text.contains("attempt 3") && text.contains("\"att_1\""), "{text}");
            assert!(text.contains("worker_complete") && text.contains("worker_await_human"), "{text}");
            assert!(!text.contains("cap_") && text.len() < 1_000, "{text}");
        }
    }
}
