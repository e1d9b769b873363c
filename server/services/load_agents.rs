//! Load agents: `harrier load agent --server URL` processes that wait for work
//! (`POST /api/v1/load-agents/poll`, a long poll) and take part in a console load test
//! whose schedule the server splits among them.
//!
//! Owns the waiting agents and the [`Assignment`] each gets: the test's flags, its share
//! (part `index` of `agents`: every rate divided by `agents`), the run to stream into with
//! its worker numbers (`worker_offset`…), and a common start time so the parts begin
//! together. The run is opened by the server (see `services::load_tests`) for all parts;
//! each agent streams its ticks into it like `--server` does, and the run ends when each
//! agent has ended its part. Agents live in this replica's memory: they poll one replica.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, oneshot};

/// The most one poll waits for work before answering "none" (the agent polls again).
pub const POLL_WAIT: Duration = Duration::from_secs(25);

/// One agent's part of a load test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Assignment {
    /// The run to stream into (`POST /api/v1/load-runs/{run_id}/ticks`, then `…/end`).
    pub run_id: i64,
    /// This agent's part, 0-based, of `agents` equal parts.
    pub index: u32,
    pub agents: u32,
    /// The test's flags (`harrier load run` after the URL…, as [`super::load_tests::NewLoadTest::flags`]).
    pub flags: Vec<String>,
    /// The request body (the same for every request).
    pub body: String,
    /// Worker threads of this agent; its ticks are numbered `worker_offset..worker_offset + threads`.
    pub threads: usize,
    pub worker_offset: usize,
    /// Load targets that are neither loopback nor private (`[load] allow_public_targets`).
    pub allow_public_target: bool,
    /// When every part starts, unix ms (the server's clock).
    pub start_at_ms: i64,
    /// A saturation search: `flags` are `harrier load find`'s, and the server sets the
    /// rate as the search goes (the agent follows `GET /api/v1/load-runs/{run_id}/control`).
    #[serde(default)]
    pub search: bool,
}

struct Waiting {
    name: String,
    since_ms: i64,
    give: oneshot::Sender<Assignment>,
}

/// An agent waiting for work, as `GET /api/v1/load-agents` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct WaitingAgent {
    pub name: String,
    /// Polling since, unix ms.
    pub since_ms: i64,
}

/// The waiting agents; cheap to clone.
#[derive(Clone, Default)]
pub struct LoadAgents {
    waiting: Arc<Mutex<Vec<Waiting>>>,
}

impl LoadAgents {
    pub fn new() -> LoadAgents {
        LoadAgents::default()
    }

    /// Waits (at most `wait`) for an assignment for agent `name`; `None` when there was none.
    pub async fn poll(&self, name: String, wait: Duration) -> Option<Assignment> {
        let (give, take) = oneshot::channel();
        {
            let mut waiting = self.waiting.lock().await;
            waiting.retain(|w| !w.give.is_closed() && w.name != name);
            waiting.push(Waiting {
                name,
                since_ms: crate::now_ms(),
                give,
            });
        }
        tokio::time::timeout(wait, take).await.ok()?.ok()
    }

    /// The agents waiting now (whose poll is still open), oldest first.
    pub async fn list(&self) -> Vec<WaitingAgent> {
        let mut waiting = self.waiting.lock().await;
        waiting.retain(|w| !w.give.is_closed());
        waiting
            .iter()
            .map(|w| WaitingAgent {
                name: w.name.clone(),
                since_ms: w.since_ms,
            })
            .collect()
    }

    /// Takes `n` waiting agents (oldest first) and gives each its assignment, made by
    /// `assign(index)`; returns their names. `Err(waiting)` when fewer than `n` wait
    /// (nothing is given then).
    pub async fn give(
        &self,
        n: usize,
        assign: impl Fn(u32) -> Assignment,
    ) -> Result<Vec<String>, usize> {
        let mut waiting = self.waiting.lock().await;
        waiting.retain(|w| !w.give.is_closed());
        if waiting.len() < n {
            return Err(waiting.len());
        }
        let taken: Vec<Waiting> = waiting.drain(..n).collect();
        drop(waiting);
        let mut names = Vec::with_capacity(n);
        for (i, w) in taken.into_iter().enumerate() {
            names.push(w.name.clone());
            if w.give.send(assign(i as u32)).is_err() {
                tracing::warn!(agent = %w.name, "a load agent left just as it was given its part");
            }
        }
        Ok(names)
    }
}
