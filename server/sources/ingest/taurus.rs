//! Taurus (bzt) `kpi.jtl` → samples.
//!
//! Format (docs/formats.md#taurus; writers in Blazemeter/taurus: `bzt/modules/jmeter.py` and the
//! Locust wrapper `bzt/resources/locustio-taurus-wrapper.py`): a JTL-like CSV whose
//! columns depend on the executor. The JMeter executor writes JMeter's own CSV JTL (and is
//! sniffed as `jmeter-csv`); the Locust executor writes
//! `allThreads,timeStamp,label,method,elapsed,bytes,responseCode,responseMessage,success,Latency`.
//! Columns are always mapped by header name, so the JMeter CSV reader does the work
//! ([`super::jmeter_csv`], same definitions: `timeStamp` epoch ms start, `elapsed` ms,
//! `success` the error flag, `allThreads` active users); this module only recognises the
//! file and names the tool. `Latency` (always 0 from the Locust executor) is not read.

use std::io::BufRead;

use serde_json::json;

use super::summary::invalid;
use super::{IngestError, ParsedRun, jmeter_csv};
use crate::domain::runs::RunLimits;

const LOCUST_HEADER: &[u8] = b"allThreads,timeStamp,label,method,";

/// True when `prefix` starts with the Locust executor's `kpi.jtl` header.
pub fn looks_like(prefix: &[u8]) -> bool {
    prefix.trim_ascii_start().starts_with(LOCUST_HEADER)
}

/// Reads a Taurus `kpi.jtl` (any executor).
pub fn parse<R: BufRead>(
    mut input: R,
    source_name: &str,
    limits: &RunLimits,
) -> Result<Vec<ParsedRun>, IngestError> {
    let head = input
        .fill_buf()
        .map_err(|source| IngestError::Io {
            source_name: source_name.to_owned(),
            source,
        })?
        .to_vec();
    let Some(layout) = jmeter_csv::detect(&head) else {
        return Err(invalid(
            source_name,
            1,
            "not a Taurus kpi.jtl: expected a header naming timeStamp, elapsed, label and success",
        ));
    };
    let executor = if looks_like(&head) {
        "locust"
    } else {
        "jmeter"
    };
    let mut data = jmeter_csv::parse(input, &layout, limits).map_err(|source| IngestError::Io {
        source_name: source_name.to_owned(),
        source,
    })?;
    if data.labels.is_empty() {
        let (line, why) = data.rejected.first().map_or_else(
            || (1, "no rows after the header".to_owned()),
            |r| {
                (
                    r.line,
                    format!("nothing readable: the first problem: {}", r.reason),
                )
            },
        );
        return Err(invalid(source_name, line, why));
    }
    data.reported = json!({
        "tool": "taurus",
        "file": "kpi.jtl",
        "executor": executor,
    });
    Ok(vec![ParsedRun {
        tool: "taurus".to_owned(),
        name_hint: None,
        data,
    }])
}
