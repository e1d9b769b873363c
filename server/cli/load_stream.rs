//! `harrier load … --server URL`: the run streamed into a running harrier while it runs.
//!
//! Owns the client side of `POST /api/v1/load-runs` (see `http::api::load`): the run is
//! opened once the generator knows its protocol, the workers' ticks are sent in order in
//! one batch about every second, and the end carries the run's length, the search's answer
//! and why it stopped early. A batch the server did not take is sent again with the next
//! one; when the server keeps refusing for [`GIVE_UP_AFTER`] (stopped, restarted, the run
//! ended there) the load is stopped — nothing measured is stored twice or silently lost.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::domain::load::Tick;
use crate::services::load::Tap;
use crate::services::load_runs::EndLoadRun;

/// How often ticks are sent.
const SEND_EVERY: Duration = Duration::from_secs(1);
/// How long the server may refuse ticks before the load is stopped.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

/// The run on the server.
#[derive(Debug, Clone)]
pub struct StreamedRun {
    pub id: i64,
    /// The run's page, absolute.
    pub url: String,
}

/// A stream under way: feed [`tap`](Self::tap) to the load, then [`finish`](Self::finish).
pub struct LoadStream {
    base: String,
    task: JoinHandle<anyhow::Result<Option<i64>>>,
}

impl LoadStream {
    /// Starts streaming to `server` (a base URL, e.g. `http://127.0.0.1:7070`); returns the
    /// sender the load taps into. Cancels `cancel` (stopping the load) when the server
    /// cannot open the run or keeps refusing its ticks.
    pub fn start(server: &str, cancel: CancellationToken) -> (mpsc::UnboundedSender<Tap>, Self) {
        let base = crate::cli::import::server_base(server);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(forward(base.clone(), rx, cancel, None));
        (tx, LoadStream { base, task })
    }

    /// Streams one agent's part into run `id`, which the server has opened: its workers'
    /// ticks are numbered from `worker_offset` (the run's workers are all agents' together).
    pub fn join(
        server: &str,
        id: i64,
        worker_offset: usize,
        cancel: CancellationToken,
    ) -> (mpsc::UnboundedSender<Tap>, Self) {
        let base = crate::cli::import::server_base(server);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(forward(base.clone(), rx, cancel, Some((id, worker_offset))));
        (tx, LoadStream { base, task })
    }

    /// Waits until every tick is sent (the load has ended and dropped its sender), then
    /// ends the run on the server. `None` when the run was never opened (no request was
    /// made, e.g. the target could not be resolved).
    pub async fn finish(self, end: EndLoadRun) -> anyhow::Result<Option<StreamedRun>> {
        let id = self
            .task
            .await
            .context("the stream to the server stopped")??;
        let Some(id) = id else { return Ok(None) };
        let url = format!("{}/api/v1/load-runs/{id}/end", self.base);
        let response = crate::cli::http()
            .post(&url)
            .json(&end)
            .send()
            .await
            .with_context(|| format!("cannot reach {url} to end the run"))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or_default();
        if !status.is_success() {
            anyhow::bail!(
                "{url} answered {status}: {}",
                body["error"].as_str().unwrap_or("the run was not ended")
            );
        }
        Ok(Some(StreamedRun {
            id,
            url: format!("{}/console/runs/{id}", self.base),
        }))
    }
}

async fn post(url: &str, body: &Value) -> anyhow::Result<Value> {
    let response = match crate::cli::http().post(url).json(body).send().await {
        Ok(r) => r,
        Err(e) => {
            let base = url.split("/api/").next().unwrap_or(url).to_string();
            return Err(crate::cli::explain_send_error(
                &base,
                format!("cannot reach {url} (is `harrier serve` running there?)"),
                e,
            )
            .await);
        }
    };
    let status = response.status();
    let json: Value = response.json().await.unwrap_or_default();
    if !status.is_success() {
        anyhow::bail!(
            "{url} answered {status}: {}",
            json["error"].as_str().unwrap_or("refused")
        );
    }
    Ok(json)
}

async fn forward(
    base: String,
    mut rx: mpsc::UnboundedReceiver<Tap>,
    cancel: CancellationToken,
    join: Option<(i64, usize)>,
) -> anyhow::Result<Option<i64>> {
    let open = match rx.recv().await {
        Some(Tap::Open(open)) => open,
        Some(Tap::Tick(_)) => anyhow::bail!("the load sent a tick before opening its run"),
        None => return Ok(None),
    };
    let (id, worker_offset) = match join {
        Some(joined) => joined,
        None => {
            let url = format!("{base}/api/v1/load-runs");
            match post(&url, &serde_json::to_value(&open)?).await {
                Ok(v) => (
                    v["id"]
                        .as_i64()
                        .with_context(|| format!("{url} answered without a run id"))?,
                    0,
                ),
                Err(e) => {
                    cancel.cancel();
                    return Err(e.context(
                        "the run could not be opened on the server; the load is stopped",
                    ));
                }
            }
        }
    };
    let ticks_url = format!("{base}/api/v1/load-runs/{id}/ticks");
    let mut pending: Vec<Tick> = Vec::new();
    let mut failing_since: Option<Instant> = None;
    let mut next_send = tokio::time::Instant::now() + SEND_EVERY;
    let mut open_channel = true;
    while open_channel || !pending.is_empty() {
        if open_channel {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Tap::Tick(mut t)) => { t.worker += worker_offset; pending.push(*t); continue; }
                    Some(Tap::Open(_)) => continue,
                    None => open_channel = false,
                },
                _ = tokio::time::sleep_until(next_send) => {}
            }
        }
        next_send = tokio::time::Instant::now() + SEND_EVERY;
        if pending.is_empty() {
            continue;
        }
        match post(&ticks_url, &json!({ "ticks": pending })).await {
            Ok(answer) => {
                pending.clear();
                failing_since = None;
                if answer["stop"] == true && !cancel.is_cancelled() {
                    eprintln!("stopping: the run was stopped on the server");
                    cancel.cancel();
                }
            }
            Err(e) => {
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= GIVE_UP_AFTER {
                    cancel.cancel();
                    return Err(e.context(format!(
                        "the server refused the run's figures for {} s; the load is stopped",
                        GIVE_UP_AFTER.as_secs()
                    )));
                }
                if !open_channel {
                    tokio::time::sleep(SEND_EVERY).await;
                }
            }
        }
    }
    Ok(Some(id))
}
