//! `harrier runs`: the stored runs as a table, from the local database or a server.

use std::process::ExitCode;

use anyhow::Context;

use super::import::server_base;
use super::serve::database_hint;
use crate::config::TargetArgs;
use crate::store::Store;

pub async fn list_runs(args: TargetArgs) -> anyhow::Result<ExitCode> {
    let runs: Vec<serde_json::Value> = match &args.server {
        Some(server) => {
            let url = format!("{}/api/v1/runs", server_base(server));
            let json: serde_json::Value = crate::cli::http()
                .get(&url)
                .send()
                .await
                .with_context(|| format!("cannot reach {url}"))?
                .json()
                .await?;
            json["runs"].as_array().cloned().unwrap_or_default()
        }
        None => {
            let db = args.database()?;
            let store = Store::connect_existing(&db)
                .await
                .with_context(|| database_hint(&db))?;
            crate::views::runs::list_runs(&store)
                .await?
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .collect()
        }
    };
    if runs.is_empty() {
        outln!("no runs yet — import one with: harrier import results.jtl");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:>5}  {:<32} {:<8} {:>10} {:>8} {:>10} {:>14}",
        "ID",
        "NAME",
        "TOOL",
        "REQUESTS",
        "ERROR %",
        "P95",
        "THROUGHPUT"
    );
    use crate::domain::format;
    for r in runs {
        outln!(
            "{:>5}  {:<32} {:<8} {:>10} {:>8} {:>10} {:>14}",
            r["id"].as_i64().unwrap_or_default(),
            // Control characters (escape sequences, line breaks) would act on the
            // terminal: shown as U+FFFD.
            r["name"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .map(|c| if c.is_control() { '\u{fffd}' } else { c })
                .take(32)
                .collect::<String>(),
            r["tool"].as_str().unwrap_or_default(),
            format::count(r["count"].as_i64().unwrap_or_default()),
            format::pct(r["error_pct"].as_f64()),
            format::ms(r["p95_ms"].as_f64()),
            format::rps(r["throughput_rps"].as_f64()),
        );
    }
    Ok(ExitCode::SUCCESS)
}
