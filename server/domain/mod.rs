//! The domain: what harrier's figures mean, with no I/O.
//!
//! Types and statistics of runs ([`runs`]), route metrics arithmetic ([`routes`]), run
//! comparison ([`compare`]), the alert rule model and state machine ([`alerts`]), and the
//! number and unit formatting shared by the console, the CLI and exports ([`format`]), the
//! load generator's schedules and figures ([`load`]), and how URLs holding credentials are
//! shown ([`secrets`]), and which hosts and origins the server
//! answers to ([`access`]), where it may send
//! requests ([`egress`]), who may do what ([`auth`]), single sign-on's settings ([`oidc`]), and the pools a service exposes and when one is full ([`pools`]).
//!
//! Must not import axum, sqlx, reqwest or anything of the layers above (sources, store,
//! services, views, http); must not read the clock, files or the network.

pub mod access;
pub mod alerts;
pub mod auth;
pub mod compare;
pub mod egress;
pub mod format;
pub mod load;
pub mod oidc;
pub mod pools;
pub mod routes;
pub mod runs;
pub mod secrets;
