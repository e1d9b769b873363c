//! The alert engine: the evaluator loop that reads route figures and live runs from the
//! store and records transitions ([`evaluator`]), and the notifier that groups notices
//! and sends them to channels ([`notify`]). The rule model and state machine are the
//! domain's ([`crate::domain::alerts`]). [`lease`] gives both to one replica at a time;
//! [`pause`] is a testing hook that stops the process at named points of the pipeline.

pub mod evaluator;
pub mod lease;
pub mod notify;
pub mod pause;
