//! Live updates across replicas: what one `harrier serve` publishes on its hub reaches the
//! websocket clients of every other `serve` on the same PostgreSQL database.
//!
//! PostgreSQL `LISTEN`/`NOTIFY` (channel [`CHANNEL`]) is a wake-up only; the database stays
//! the source of truth. A wake-up names what changed ([`Wake`]): a run by id, which the
//! receiving replica reads from the database before telling its clients, so a client on
//! any replica sees the same row `GET /api/v1/runs` gives. Only small events whose data is
//! not stored (an import's progress, an alert firing or resolved) travel whole, capped at
//! [`INLINE_MAX`] bytes; a bigger one becomes a resync.
//!
//! Nothing is silently missed: when the listening connection is lost (the database
//! restarted, the backend was terminated) it is made again and this replica's clients get
//! a `resync` (they refetch what they show); when the queue of wake-ups to send is full or
//! sending fails, the next wake-up tells the other replicas to resync theirs.
//!
//! Scrapes too: each target is scraped by one replica ([`crate::services::scrape::Shards`]),
//! whose `target_status` and `routes_updated` become wake-ups naming the target; the others
//! read its status and its route rows (the last minute's figures) from the database.
//!
//! On SQLite there is one process per database file: nothing runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::services::live::{Event, Hub, Relay};
use crate::store::Store;

/// The PostgreSQL notification channel of live updates.
pub const CHANNEL: &str = "harrier_live";

/// Largest event carried whole, bytes of JSON (PostgreSQL refuses payloads from 8,000).
pub const INLINE_MAX: usize = 4_000;

/// Wake-ups waiting to be sent; beyond this they are dropped and the others resync.
const QUEUE: usize = 4_096;

/// What a wake-up says changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum Wake {
    /// A run was stored: read it and announce `run_imported`.
    RunImported {
        id: i64,
    },
    /// A run changed (name, tags, a live run's figures, failed by a rule): read it and
    /// announce `run_updated`.
    RunUpdated {
        id: i64,
    },
    RunDeleted {
        id: i64,
    },
    /// A target was scraped: read its status and announce `target_status`.
    Target {
        id: i64,
    },
    /// A target's routes changed: read its route rows and announce `routes_updated`.
    Routes {
        target_id: i64,
    },
    TargetRemoved {
        id: i64,
    },
    /// A small event whose data is not stored, whole: its JSON.
    Event {
        e: String,
    },
    /// Updates were lost: clients should refetch.
    Resync,
}

impl Wake {
    /// The wake-up announcing `event` (whose JSON is `json`) to other replicas; `None` for
    /// events that concern one connection.
    pub fn of(event: &Event, json: &str) -> Option<Wake> {
        match event {
            Event::RunImported { run } => Some(Wake::RunImported { id: run.id }),
            Event::RunUpdated { run } => Some(Wake::RunUpdated { id: run.id }),
            Event::RunDeleted { id } => Some(Wake::RunDeleted { id: *id }),
            Event::ImportProgress { .. }
            | Event::ImportDone { .. }
            | Event::ImportFailed { .. }
            | Event::AlertFiring { .. }
            | Event::AlertResolved { .. } => Some(if json.len() <= INLINE_MAX {
                Wake::Event {
                    e: json.to_string(),
                }
            } else {
                Wake::Resync
            }),
            Event::TargetStatus { target } => Some(Wake::Target { id: target.id }),
            Event::RoutesUpdated { target_id, .. } => Some(Wake::Routes {
                target_id: *target_id,
            }),
            Event::TargetRemoved { id } => Some(Wake::TargetRemoved { id: *id }),
            Event::Hello { .. } | Event::Resync { .. } => None,
        }
    }
}

/// A wake-up as sent: `o` names the replica that sent it (it ignores its own).
#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    o: String,
    #[serde(flatten)]
    w: Wake,
}

/// Carries the hub's events to and from the other replicas until `shutdown`; returns at
/// once on SQLite, and (logged) when the database refuses to listen.
pub async fn run(store: Store, hub: Hub, shutdown: CancellationToken) {
    let mut listener = match store.listen(CHANNEL).await {
        Ok(Some(l)) => l,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(error = %e, "listening for other replicas' live updates failed: this replica's clients see only what it does itself");
            return;
        }
    };
    // Recognises this replica's own wake-ups: 64 random bits.
    let origin = crate::services::auth::random_secret()[..16].to_string();
    let (tx, rx) = mpsc::channel(QUEUE);
    let lost = Arc::new(AtomicBool::new(false));
    let full = lost.clone();
    let relay: Relay = Box::new(move |event, json| {
        if let Some(wake) = Wake::of(event, json)
            && tx.try_send(wake).is_err()
        {
            full.store(true, Ordering::Relaxed);
        }
    });
    hub.set_relay(relay);
    let sender = tokio::spawn(announce(
        store.clone(),
        origin.clone(),
        rx,
        lost,
        shutdown.clone(),
    ));
    let mut down = false;
    // Target statuses come with every scrape of every target: gathered, and read in one
    // query every [`TARGETS_EVERY`].
    let mut targets: std::collections::BTreeSet<i64> = Default::default();
    let mut flush = tokio::time::interval(TARGETS_EVERY);
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = flush.tick(), if !targets.is_empty() => {
                announce_targets(&store, &hub, std::mem::take(&mut targets)).await;
                continue;
            }
            next = listener.next() => next,
        };
        match next {
            Ok(Some(payload)) => {
                down = false;
                receive(&store, &hub, &origin, &payload, &mut targets).await;
            }
            Ok(None) => {
                down = false;
                tracing::warn!(
                    "the connection listening for other replicas was lost and made again: clients resync"
                );
                resync(&hub, "the connection to the database was lost: refetch");
            }
            Err(e) => {
                if !down {
                    tracing::warn!(error = %e, "listening for other replicas failed; retrying every second");
                    resync(&hub, "the database cannot be reached: refetch");
                }
                down = true;
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
    let _ = sender.await;
}

fn resync(hub: &Hub, reason: &str) {
    metrics::counter!("harrier_replica_wakes_total", "direction" => "lost").increment(1);
    hub.publish_local(&Event::Resync {
        reason: reason.into(),
    });
}

/// Sends the queued wake-ups, one `NOTIFY` each, until `shutdown`.
async fn announce(
    store: Store,
    origin: String,
    mut rx: mpsc::Receiver<Wake>,
    lost: Arc<AtomicBool>,
    shutdown: CancellationToken,
) {
    let mut failing = false;
    loop {
        let wake = tokio::select! {
            _ = shutdown.cancelled() => return,
            wake = rx.recv() => match wake { Some(w) => w, None => return },
        };
        let mut wakes = Vec::with_capacity(2);
        if lost.swap(false, Ordering::Relaxed) {
            wakes.push(Wake::Resync);
        }
        wakes.push(wake);
        for w in wakes {
            let mut payload = envelope(&origin, w);
            if payload.len() >= 7_900 {
                payload = envelope(&origin, Wake::Resync);
            }
            match store.notify(CHANNEL, &payload).await {
                Ok(()) => {
                    failing = false;
                    metrics::counter!("harrier_replica_wakes_total", "direction" => "sent")
                        .increment(1);
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "announcing a live update to other replicas failed; they will be told to resync");
                    }
                    failing = true;
                    lost.store(true, Ordering::Relaxed);
                }
            }
        }
    }
}

fn envelope(origin: &str, w: Wake) -> String {
    serde_json::to_string(&Envelope {
        o: origin.to_string(),
        w,
    })
    .unwrap_or_default()
}

/// How often the statuses of targets other replicas scraped are read and announced.
const TARGETS_EVERY: Duration = Duration::from_millis(250);

/// Announces the status of `ids` (one read of the targets).
async fn announce_targets(store: &Store, hub: &Hub, ids: std::collections::BTreeSet<i64>) {
    match store.list_targets().await {
        Ok(all) => {
            for target in all.into_iter().filter(|t| ids.contains(&t.id)) {
                hub.publish_local(&Event::TargetStatus { target });
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "reading the targets other replicas scraped failed");
            resync(hub, "reading an update failed: refetch");
        }
    }
}

/// Tells this replica's clients what another replica announced, read from the database
/// (target statuses are gathered into `targets`, announced by the caller).
async fn receive(
    store: &Store,
    hub: &Hub,
    origin: &str,
    payload: &str,
    targets: &mut std::collections::BTreeSet<i64>,
) {
    let Ok(Envelope { o, w }) = serde_json::from_str::<Envelope>(payload) else {
        tracing::debug!(payload, "an unknown live wake-up was ignored");
        return;
    };
    if o == origin {
        return;
    }
    metrics::counter!("harrier_replica_wakes_total", "direction" => "received").increment(1);
    match w {
        Wake::RunImported { id } | Wake::RunUpdated { id } => {
            match crate::views::runs::run_list_item(store, id).await {
                Ok(Some(run)) => hub.publish_local(&if matches!(w, Wake::RunImported { .. }) {
                    Event::RunImported { run }
                } else {
                    Event::RunUpdated { run }
                }),
                Ok(None) => {} // deleted since: its run_deleted follows
                Err(e) => {
                    tracing::warn!(error = %e, run = id, "reading a run another replica announced failed");
                    resync(hub, "reading an update failed: refetch");
                }
            }
        }
        Wake::RunDeleted { id } => hub.publish_local(&Event::RunDeleted { id }),
        Wake::Target { id } => {
            targets.insert(id);
        }
        // Read only for this replica's clients, if it has any.
        Wake::Routes { .. } if !hub.has_clients() => {}
        Wake::Routes { target_id } => {
            match crate::views::routes::route_rows(
                store,
                Some(target_id),
                crate::services::scrape::LIVE_WINDOW_MS,
                crate::now_ms(),
            )
            .await
            {
                Ok(routes) => hub.publish_local(&Event::RoutesUpdated { target_id, routes }),
                Err(e) => {
                    tracing::warn!(error = %e, target = target_id, "reading the routes of a target another replica scraped failed");
                    resync(hub, "reading an update failed: refetch");
                }
            }
        }
        Wake::TargetRemoved { id } => hub.publish_local(&Event::TargetRemoved { id }),
        Wake::Event { e } => hub.publish_json(e.into()),
        Wake::Resync => resync(hub, "another replica's updates were lost: refetch"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_name_runs_and_carry_small_events_whole() {
        let deleted = Event::RunDeleted { id: 7 };
        let json = serde_json::to_string(&deleted).unwrap();
        assert_eq!(Wake::of(&deleted, &json), Some(Wake::RunDeleted { id: 7 }));
        let failed = Event::ImportFailed {
            import_id: "i1".into(),
            source: "a.jtl".into(),
            error: "line 3: expected a number".into(),
        };
        let json = serde_json::to_string(&failed).unwrap();
        assert_eq!(
            Wake::of(&failed, &json),
            Some(Wake::Event { e: json.clone() })
        );
        let big = Event::ImportFailed {
            import_id: "i1".into(),
            source: "a.jtl".into(),
            error: "x".repeat(INLINE_MAX),
        };
        let json = serde_json::to_string(&big).unwrap();
        assert_eq!(Wake::of(&big, &json), Some(Wake::Resync));
        let removed = Event::TargetRemoved { id: 1 };
        assert_eq!(
            Wake::of(&removed, "{}"),
            Some(Wake::TargetRemoved { id: 1 })
        );
        let hello = Event::Hello { server_time_ms: 1 };
        assert_eq!(Wake::of(&hello, "{}"), None);
    }

    #[test]
    fn an_envelope_round_trips_and_stays_small() {
        let payload = envelope("abc", Wake::RunUpdated { id: 42 });
        assert_eq!(payload, r#"{"o":"abc","t":"run_updated","id":42}"#);
        let back: Envelope = serde_json::from_str(&payload).unwrap();
        assert_eq!(back.o, "abc");
        assert_eq!(back.w, Wake::RunUpdated { id: 42 });
        let e = envelope(
            "abc",
            Wake::Event {
                e: "{\"type\":\"x\"}".into(),
            },
        );
        let back: Envelope = serde_json::from_str(&e).unwrap();
        assert_eq!(
            back.w,
            Wake::Event {
                e: "{\"type\":\"x\"}".into()
            }
        );
    }
}
