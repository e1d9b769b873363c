//! One alert evaluator and notifier at a time, however many `harrier serve` replicas share
//! the database: a lease row (`leases`, name `alerts`) with a holder and a term number.
//!
//! Each evaluation round first takes or renews the lease for [`Leader::ttl_ms`] (three
//! rounds); a replica that cannot (another holds a lease that has not run out) skips the
//! round. The term grows at every change of holder, and the notifier checks right before
//! each dispatch that this replica still holds the lease *in the term it took* — so a
//! replica that was paused, partitioned or lost its connection past its lease sends
//! nothing once it resumes, even if it believes it still leads. Another replica takes
//! over at most `ttl_ms` plus one round after the leader stops renewing. A notification
//! is sent twice only if a leader dies between sending it and marking it sent (the
//! outbox's at-least-once window; docs/alerts.md, docs/postgres.md).
//!
//! With SQLite (one serving process per file) the lease is always this process's.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::store::{LeaseTerm, Store};

/// The lease's name in the `leases` table.
pub const ALERTS_LEASE: &str = "alerts";

/// This process's side of the alerts lease.
#[derive(Debug)]
pub struct Leader {
    store: Store,
    /// Who this process is: host name, process id and a random part.
    pub holder: String,
    /// How long a taken or renewed lease lasts, ms.
    pub ttl_ms: i64,
    /// The term held, 0 when not the leader.
    term: AtomicI64,
}

impl Leader {
    /// A leader candidate whose lease lasts three evaluation rounds (at least 3 s).
    pub fn new(store: Store, evaluation_interval_ms: i64) -> Leader {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "host".into());
        let random = &crate::services::auth::random_secret()[..8];
        Leader {
            store,
            holder: format!("{host}:{}:{random}", std::process::id()),
            ttl_ms: (evaluation_interval_ms * 3).max(3_000),
            term: AtomicI64::new(0),
        }
    }

    /// Takes or renews the lease at `now_ms`; `true` when this process leads this round.
    pub async fn round(&self, now_ms: i64) -> bool {
        let before = self.term.load(Ordering::Relaxed);
        let term = match self
            .store
            .acquire_lease(ALERTS_LEASE, &self.holder, now_ms, self.ttl_ms)
            .await
        {
            Ok(t) => t.unwrap_or(0),
            Err(e) => {
                tracing::error!(error = %e, "renewing the alerts lease failed; not evaluating");
                0
            }
        };
        self.term.store(term, Ordering::Relaxed);
        metrics::gauge!("harrier_alert_leader").set(if term > 0 { 1.0 } else { 0.0 });
        if term != before {
            if term > 0 {
                tracing::info!(holder = %self.holder, term, "this replica evaluates the alert rules now");
            } else {
                tracing::info!(holder = %self.holder, "another replica evaluates the alert rules");
            }
        }
        term > 0
    }

    /// Whether this process still holds the lease in the term it took, at `now_ms`
    /// (checked in the database, not from memory).
    pub async fn still_held(&self, now_ms: i64) -> bool {
        let term = self.term.load(Ordering::Relaxed);
        if term == 0 {
            return false;
        }
        match self
            .store
            .lease_held(ALERTS_LEASE, &self.holder, term, now_ms)
            .await
        {
            Ok(held) => {
                if !held {
                    self.term.store(0, Ordering::Relaxed);
                    metrics::gauge!("harrier_alert_leader").set(0.0);
                }
                held
            }
            Err(e) => {
                tracing::error!(error = %e, "checking the alerts lease failed; sending nothing");
                false
            }
        }
    }

    /// The term held now (0: not the leader).
    pub fn term(&self) -> i64 {
        self.term.load(Ordering::Relaxed)
    }

    /// The lease in the term held now, for a write that must happen only under it
    /// ([`Store::save_evaluation_fenced`]).
    pub fn fence(&self) -> LeaseTerm<'_> {
        LeaseTerm {
            name: ALERTS_LEASE,
            holder: &self.holder,
            term: self.term(),
        }
    }

    /// Gives the lease up (at shutdown): another replica takes it at its next round.
    pub async fn release(&self) {
        self.term.store(0, Ordering::Relaxed);
        if let Err(e) = self.store.release_lease(ALERTS_LEASE, &self.holder).await {
            tracing::warn!(error = %e, "releasing the alerts lease failed; it runs out by itself");
        }
    }
}
