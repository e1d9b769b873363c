//! Client commands: `serve`, `import`, `runs`, `compare`, `check`, `baseline`, `seed`,
//! `rules test`, `load run`. Each prints for people and returns the process exit code; `main` only
//! parses the command line and dispatches here.

pub mod compare;
pub mod import;
pub mod load;
pub mod rules;
pub mod runs;
pub mod serve;
