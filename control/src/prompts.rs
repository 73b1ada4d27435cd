//! The prompts the orchestrator submits into worker conversations. They carry
//! only the worker's opaque attach identity and short instructions: no
//! executor token, no assignment body (the worker fetches that over MCP), so a
//! leaked transcript leaks nothing but one worker's attach identity. Prompts
//! are rendered at dispatch from a [`protocol::PromptRef`], never stored.

/// Version of the bootstrap text; bump when the wording changes meaning.
pub const BOOTSTRAP_VERSION: u32 = 1;

/// The bootstrap prompt for the worker whose attach identity is `attach`.
pub fn bootstrap_prompt(attach: &str) -> String {
    format!(
        "[orchestrator bootstrap v{BOOTSTRAP_VERSION}] You are an orchestrated worker. \
         Call the ChatGPT Orchestrator tool worker_attach with attach_identity \"{attach}\" \
         to receive your capability and your assignment, then carry the assignment out to completion. \
         Communicate only through orchestrator tools: worker_progress for progress, message_send to /root \
         for questions, events_wait for replies. Before ending your task call worker_complete or worker_fail."
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_only_the_attach_identity() {
        let text = bootstrap_prompt("att_0123_abcd");
        assert!(text.contains("\"att_0123_abcd\""));
        assert!(text.starts_with("[orchestrator bootstrap v1]"));
        assert!(!text.contains("cap_"));
    }
}
