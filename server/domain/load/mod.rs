//! The load generator's arithmetic: arrival schedules, what is recorded per request, and
//! the figures of a run (per-second lines, summary, generator-limited verdict).
//!
//! Owns [`schedule`] (when requests are meant to start: constant, ramp, steps, Poisson),
//! [`record`] (the three times of a request and a worker's once-a-second hand-over),
//! [`summary`] (ticks merged into lines, the stored run through the run builder, the
//! summary), [`search`] (the saturation search of `load find`), [`guard`]
//! (`--abort-on`) and [`template`] (feeder rows and the `{{column}}` templates they fill).
//! Must not read the clock, sleep, open sockets or print: the engine in `sources::load`
//! sends the requests, `services::load` stores the run, `cli::load` prints.
//!
//! Definitions (docs/numbers.md, "The load generator"): the open model times each request from
//! its *intended* start (latency, corrected for coordinated omission), and also records
//! service time (actual send → response) and dispatch delay (intended → actual send); a run
//! the generator could not drive is labelled generator-limited, never "the service fell
//! over".

pub mod guard;
pub mod record;
pub mod schedule;
pub mod search;
pub mod summary;
pub mod template;

pub use guard::{AbortRule, AbortWatch};
pub use record::{ErrorCounts, Outcome, Recorder, Tick, Timing};
pub use schedule::{ClosedModel, RateProfile, Schedule, Workload};
pub use search::{Search, SearchOutcome, SearchPlan, Slo, StepPlan, StepResult, Verdict};
pub use summary::{
    DEFAULT_DISPATCH_LIMIT_US, LoadAccumulator, LoadSummary, Percentiles, RunPlan, SecondLine,
};
pub use template::{Feeder, Template, TemplateError};
