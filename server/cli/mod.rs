//! Client commands: `import`, `runs`, `compare`, `check`, `baseline`, `seed`, `rules test`.

pub mod compare;
