//! The JSON API under `/api/v1`, one file per resource, and the line-protocol writes
//! (`/write`, `/api/v2/write`) and OTLP metrics (`/v1/metrics`).

pub mod access;
pub mod alerts;
pub mod compare;
pub mod load;
pub mod otlp;
pub mod routes;
pub mod runs;
pub mod services;
pub mod write;
