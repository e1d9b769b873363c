//! Path and query values shared by the API and the console.

use crate::error::{Error, Result};

/// Parses a run id from the path.
pub fn run_id(raw: &str) -> Result<i64> {
    raw.parse()
        .map_err(|_| Error::BadRequest(format!("run id must be a number, got {raw:?}")))
}
