//! The live hub: one broadcast channel that fans events out to every websocket client of
//! `/api/v1/live`.
//!
//! Owns the event shapes ([`Event`]) and the socket loop. Publishing never waits: a slow
//! client falls behind, gets a `resync` message and carries on; ingest is never blocked.

use std::sync::Arc;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::domain::alerts::AlertView;
use crate::domain::routes::RouteRow;
use crate::store::TargetRow;
use crate::views::runs::RunListItem;

/// Events buffered per client before it counts as lagging.
const HUB_CAPACITY: usize = 1024;

/// A message on `/api/v1/live`: JSON with a `type` field.
///
/// - `hello` `{server_time_ms}`: sent once when a client connects;
/// - `run_imported` `{run: RunListItem}`: a run was stored (same shape as `GET /api/v1/runs` items);
/// - `run_updated` `{run: RunListItem}`: name, scenario, tags or notes changed;
/// - `run_deleted` `{id}`;
/// - `import_progress` `{import_id, source, bytes_read, bytes_total|null}`: a long import,
///   about four times a second;
/// - `import_done` `{import_id, source, run_ids}`; `import_failed` `{import_id, source, error}`;
/// - `routes_updated` `{target_id, routes: [RouteRow]}`: after a scrape, the route rows of
///   that target whose figures (1 min window) changed — same shape as `GET /api/v1/routes`;
/// - `target_status` `{target: TargetRow}`: a target was scraped (up, last error, …), same
///   shape as `GET /api/v1/targets` items; `target_removed` `{id}`;
/// - `alert_firing` `{alert: AlertView}`: an alert fired (same shape as `GET /api/v1/alerts`
///   items); `alert_resolved` `{alert: AlertView, resolved_at_ms}`: its episode ended;
/// - `resync` `{reason}`: the client missed events (it was too slow); it should refetch
///   what it shows (`GET /api/v1/runs`).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    Hello {
        server_time_ms: i64,
    },
    RunImported {
        run: RunListItem,
    },
    RunUpdated {
        run: RunListItem,
    },
    RunDeleted {
        id: i64,
    },
    ImportProgress {
        import_id: String,
        source: String,
        bytes_read: u64,
        bytes_total: Option<u64>,
    },
    ImportDone {
        import_id: String,
        source: String,
        run_ids: Vec<i64>,
    },
    ImportFailed {
        import_id: String,
        source: String,
        error: String,
    },
    RoutesUpdated {
        target_id: i64,
        routes: Vec<RouteRow>,
    },
    TargetStatus {
        target: TargetRow,
    },
    TargetRemoved {
        id: i64,
    },
    /// `silenced`: a silence mutes it (no notification is sent).
    AlertFiring {
        alert: AlertView,
        silenced: bool,
    },
    AlertResolved {
        alert: AlertView,
        resolved_at_ms: i64,
        silenced: bool,
    },
    Resync {
        reason: String,
    },
}

/// The broadcast hub; cheap to clone.
///
/// With replicas (PostgreSQL), [`crate::services::fanout`] sets a relay: what is published
/// here is also announced to the other replicas, and what they announce is published here
/// through [`Hub::publish_local`].
#[derive(Clone)]
pub struct Hub {
    tx: broadcast::Sender<Arc<str>>,
    relay: Arc<std::sync::OnceLock<Relay>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("clients", &self.tx.receiver_count())
            .field("relayed", &self.relay.get().is_some())
            .finish()
    }
}

/// What [`Hub::publish`] also calls with each event and its JSON: set by
/// [`crate::services::fanout`] to announce it to the other replicas. Must not wait.
pub type Relay = Box<dyn Fn(&Event, &str) + Send + Sync>;

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::channel(HUB_CAPACITY).0,
            relay: Arc::default(),
        }
    }
}

impl Hub {
    pub fn new() -> Hub {
        Hub::default()
    }

    /// Whether a client of this process listens to the live feed now (a browser's
    /// websocket): what only clients read need not be computed without one.
    pub fn has_clients(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// Hands `event` to the other replicas only (nothing on SQLite, where there are none):
    /// for an event whose data each replica reads for its own clients.
    pub fn relay_only(&self, event: &Event) {
        if let Some(relay) = self.relay.get() {
            relay(event, &serde_json::to_string(event).unwrap_or_default());
        }
    }

    /// Sends an event to every connected client, and to the other replicas' clients when
    /// there are replicas; never blocks, and a hub without clients drops it.
    pub fn publish(&self, event: &Event) {
        let json: Arc<str> = serde_json::to_string(event).unwrap_or_default().into();
        if let Some(relay) = self.relay.get() {
            relay(event, &json);
        }
        let _ = self.tx.send(json);
    }

    /// Sends an event to this process's clients only (one another replica announced).
    pub fn publish_local(&self, event: &Event) {
        self.publish_json(serde_json::to_string(event).unwrap_or_default().into());
    }

    /// Sends an event already in its JSON form to this process's clients only.
    pub fn publish_json(&self, json: Arc<str>) {
        let _ = self.tx.send(json);
    }

    /// Sets where [`Hub::publish`] also hands events (the first call wins).
    pub fn set_relay(&self, relay: Relay) {
        let _ = self.relay.set(relay);
    }

    /// A new receiver of every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.tx.subscribe()
    }

    /// Number of connected clients.
    pub fn clients(&self) -> usize {
        self.tx.receiver_count()
    }
}

fn text(event: &Event) -> Message {
    Message::Text(Utf8Bytes::from(
        serde_json::to_string(event).unwrap_or_default(),
    ))
}

/// Serves one websocket client until it leaves or the server shuts down.
pub async fn client_loop(mut socket: WebSocket, hub: Hub, shutdown: CancellationToken) {
    let mut rx = hub.subscribe();
    metrics::gauge!("harrier_websocket_clients").increment(1.0);
    let hello = Event::Hello {
        server_time_ms: crate::now_ms(),
    };
    if socket.send(text(&hello)).await.is_ok() {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => {
                    // 1012 "service restart": the console reconnects (behind a load
                    // balancer, to another replica) and refetches what it shows.
                    let bye = axum::extract::ws::CloseFrame {
                        code: 1012,
                        reason: Utf8Bytes::from_static("the server is stopping: reconnect"),
                    };
                    let _ = socket.send(Message::Close(Some(bye))).await;
                    break;
                }
                incoming = socket.recv() => match incoming {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => {} // pings are answered by the library; other input is ignored
                },
                event = rx.recv() => match event {
                    Ok(json) => {
                        if socket.send(Message::Text(Utf8Bytes::from(&*json))).await.is_err() {
                            break;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        metrics::counter!("harrier_live_lagged_total").increment(missed);
                        let resync = Event::Resync { reason: format!("missed {missed} events") };
                        if socket.send(text(&resync)).await.is_err() {
                            break;
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
    }
    metrics::gauge!("harrier_websocket_clients").decrement(1.0);
}
