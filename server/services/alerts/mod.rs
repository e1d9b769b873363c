//! The alert engine: the evaluator loop that reads route figures and live runs from the
//! store and records transitions ([`evaluator`]), and the notifier that groups notices
//! and sends them to channels ([`notify`]). The rule model and state machine are the
//! domain's ([`crate::domain::alerts`]).

pub mod evaluator;
pub mod lease;
pub mod notify;
