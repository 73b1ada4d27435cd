//! `orchestrator hosts` (issue 47): the pool by machine. Each host the
//! daemon knows of (a live executor's, or one a worker still lives on),
//! its executors with their room, and the workers whose conversations it
//! holds, from one admin read. A host with workers and no live executor is
//! shown as not connected: its workers wait for it.

use serde::Serialize;

use crate::admin::Status;

/// One machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Host {
    /// Its name, as its executors' `hello` said (`(unnamed: <executor>)`
    /// when one did not: one executor's machine, never merged with another's).
    pub host: String,
    /// Whether any of its executors is connected now.
    pub connected: bool,
    /// Its OS, as an executor said.
    pub os: Option<String>,
    /// Its live executors.
    pub executors: Vec<crate::admin::ExecutorSummary>,
    /// Managed conversations its live executors hold.
    pub load: usize,
    /// The most they take together (none: one declared no bound).
    pub capacity: Option<u32>,
    /// The unfinished workers whose conversations it holds, `run/path (worker id)`.
    pub workers: Vec<HostWorker>,
}

/// A worker on a host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostWorker {
    /// The worker.
    pub worker_id: String,
    /// Its run.
    pub run_id: String,
    /// Its path.
    pub path: String,
    /// Its state.
    pub state: protocol::WorkerState,
    /// The executor holding it.
    pub executor_id: Option<String>,
}

/// The host name of `executor` when its `hello` named none.
fn unnamed(executor: &str) -> String {
    format!("(unnamed: {executor})")
}

/// The hosts in `status`, by name.
pub fn of(status: &Status) -> Vec<Host> {
    let mut hosts: Vec<Host> = Vec::new();
    for executor in &status.executors {
        let name = executor.host.clone().unwrap_or_else(|| unnamed(&executor.executor_id));
        let host = entry(&mut hosts, &name);
        host.connected = true;
        host.os = host.os.take().or_else(|| executor.os.clone());
        host.load += executor.load;
        host.capacity = host.capacity.zip(executor.capacity).map(|(a, b)| a + b);
        host.executors.push(executor.clone());
    }
    for run in &status.runs {
        for worker in run.workers.iter().filter(|w| !w.state.is_terminal() && w.executor_id.is_some()) {
            let name =
                worker.host.clone().unwrap_or_else(|| unnamed(worker.executor_id.as_deref().unwrap_or_default()));
            entry(&mut hosts, &name).workers.push(HostWorker {
                worker_id: worker.worker_id.clone(),
                run_id: run.run_id.clone(),
                path: worker.path.clone(),
                state: worker.state,
                executor_id: worker.executor_id.clone(),
            });
        }
    }
    for host in &mut hosts {
        if !host.connected {
            host.capacity = None;
        }
    }
    hosts.sort_by(|a, b| a.host.cmp(&b.host));
    hosts
}

/// The host named `name` in `hosts`, added (not connected, empty) if absent.
fn entry<'a>(hosts: &'a mut Vec<Host>, name: &str) -> &'a mut Host {
    match hosts.iter().position(|h| h.host == name) {
        Some(i) => &mut hosts[i],
        None => {
            hosts.push(Host {
                host: name.to_owned(),
                connected: false,
                os: None,
                executors: Vec::new(),
                load: 0,
                capacity: Some(0),
                workers: Vec::new(),
            });
            hosts.last_mut().expect("just pushed")
        }
    }
}

/// The hosts as text, one block each.
pub fn render(hosts: &[Host]) -> String {
    if hosts.is_empty() {
        return "no host: no executor is connected and no worker lives on one\n".to_owned();
    }
    let mut out = String::new();
    for host in hosts {
        let room = host.capacity.map_or(String::new(), |c| format!("/{c}"));
        let state = if host.connected {
            format!("connected, {}{room} conversations", host.load)
        } else {
            "NOT CONNECTED: its workers wait for it".to_owned()
        };
        out.push_str(&format!("{} ({}): {state}\n", host.host, host.os.as_deref().unwrap_or("os unsaid")));
        for e in &host.executors {
            let kind = e.kind.map(|k| format!("{k:?}").to_lowercase()).unwrap_or_default();
            out.push_str(&format!("  executor {} {kind} {}\n", e.executor_id, e.release.as_deref().unwrap_or("")));
        }
        for w in &host.workers {
            out.push_str(&format!("  worker {} {} ({:?}, run {})\n", w.path, w.worker_id, w.state, w.run_id));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::{ExecutorSummary, RunSummary, WorkerSummary};

    fn executor(id: &str, host: &str, load: usize, capacity: Option<u32>) -> ExecutorSummary {
        ExecutorSummary {
            executor_id: id.into(),
            host: Some(host.into()),
            browser: None,
            os: Some("linux".into()),
            load,
            capacity,
            kind: None,
            instance: None,
            release: None,
        }
    }

    fn worker(id: &str, host: &str, state: protocol::WorkerState) -> WorkerSummary {
        WorkerSummary {
            worker_id: id.into(),
            path: format!("/root/{id}"),
            state,
            waiting_for: None,
            executor_id: Some(format!("on-{host}")),
            host: Some(host.into()),
        }
    }

    #[test]
    fn hosts_gather_their_executors_and_workers_and_a_lost_one_says_so() {
        use protocol::WorkerState::{Completed, Running};
        let status: Status = serde_json::from_value(serde_json::json!({
            "version": "0.1.0", "catalog_stamp": "", "app_label": null, "worker_project_url": null,
            "exposed_hosts": [], "mcp_secret": false, "executors_paired": 3, "executors_connected": []
        }))
        .unwrap();
        let status = Status {
            executors: vec![executor("a1", "alpha", 1, Some(4)), executor("a2", "alpha", 2, Some(8))],
            runs: vec![RunSummary {
                run_id: "run_1".into(),
                title: "t".into(),
                state: protocol::RunState::Active,
                workers: vec![
                    worker("w1", "alpha", Running),
                    worker("w2", "beta", Running),
                    worker("w3", "beta", Completed),
                ],
            }],
            ..status
        };
        let hosts = of(&status);
        assert_eq!(hosts.iter().map(|h| h.host.as_str()).collect::<Vec<_>>(), ["alpha", "beta"]);
        let (alpha, beta) = (&hosts[0], &hosts[1]);
        assert!(alpha.connected && alpha.load == 3 && alpha.capacity == Some(12), "{alpha:?}");
        assert_eq!(alpha.workers.len(), 1);
        assert!(!beta.connected && beta.capacity.is_none(), "{beta:?}");
        assert_eq!(
            beta.workers.iter().map(|w| w.worker_id.as_str()).collect::<Vec<_>>(),
            ["w2"],
            "finished ones left out"
        );
        assert!(
            render(&hosts).contains("beta (os unsaid): NOT CONNECTED: its workers wait for it"),
            "{}",
            render(&hosts)
        );
    }
}
