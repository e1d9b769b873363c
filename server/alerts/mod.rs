//! Threshold alerts: rules over subject sets ([`rule`]), their pure evaluation
//! ([`eval`]: inactive → pending → firing → resolved, after Prometheus'
//! `rules/alerting.go`).
//!
//! Owns the rule model and the state machine; SQL lives in `store`, HTTP in `api_alerts`.

pub mod eval;
pub mod rule;
