//! Read models shared by the JSON API and the console: what a page or a response shows,
//! computed from the store.
//!
//! Must not know axum requests or HTML; must not write.

pub mod alerts;
pub mod routes;
pub mod runs;
pub mod services;
pub mod steps;
