//! Scraped route metrics: the exposition parser ([`exposition`]), the presets that turn
//! metric families into route observations ([`presets`]), process metrics ([`process`])
//! and Jolokia's Camel MBean JSON ([`jolokia`]).
//!
//! Parsers only: fetching on a schedule, storing and publishing are
//! [`crate::services::scrape`]'s.

pub mod exposition;
pub mod jolokia;
pub mod presets;
pub mod process;
