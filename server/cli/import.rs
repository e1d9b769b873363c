//! `harrier import FILE…`: into the local database, or into a running server (`--server`).

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use super::serve::database_hint;
use crate::config::{Config, ImportArgs};
use crate::services::import::{self, ImportRequest, Progress};
use crate::sources::ingest::Format;
use crate::store::Store;

/// A `--server` value as a base URL: `127.0.0.1:7070` gets `http://`, a trailing `/` goes.
pub fn server_base(server: &str) -> String {
    let base = server.trim_end_matches('/');
    if base.contains("://") {
        base.to_string()
    } else {
        format!("http://{base}")
    }
}

fn source_name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "stdin".to_string()
    } else {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    }
}

pub async fn import_files(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let format = Format::from_name(&args.format).context("unknown format")?;
    let mut failed = 0;
    let store = match &args.target.server {
        Some(_) => None,
        None => {
            let db = args.target.database()?;
            Some(
                Store::connect(&db)
                    .await
                    .with_context(|| database_hint(&db))?,
            )
        }
    };
    let results: Vec<(String, anyhow::Result<Vec<import::ImportedRun>>)> = match &store {
        Some(store) => import_local(store, &args, format).await?,
        None => {
            let server = args
                .target
                .server
                .as_deref()
                .expect("either a store or a server");
            // The files of one Locust --csv run given together make one run.
            let names: Vec<String> = args.files.iter().map(|p| source_name(p)).collect();
            let (sets, rest) = import::locust_sets(&names, format);
            let mut jobs: Vec<(usize, String, Vec<&Path>)> = sets
                .iter()
                .map(|(prefix, idx)| {
                    (
                        idx[0],
                        format!("{prefix}_*.csv"),
                        idx.iter().map(|&i| args.files[i].as_path()).collect(),
                    )
                })
                .collect();
            jobs.extend(
                rest.iter()
                    .map(|&i| (i, names[i].clone(), vec![args.files[i].as_path()])),
            );
            jobs.sort_by_key(|j| j.0);
            let mut results = Vec::new();
            for (_, source, paths) in jobs {
                let result = match paths.as_slice() {
                    [path] => import_remote(server, &args, path, &source).await,
                    paths => import_remote_set(server, &args, paths).await,
                };
                results.push((source, result));
            }
            results
        }
    };
    for (source, result) in results {
        match result {
            Ok(runs) => {
                for run in runs {
                    let rejected = if run.rejected_rows > 0 {
                        format!(", {} rejected rows (see the run page)", run.rejected_rows)
                    } else {
                        String::new()
                    };
                    let kind = if run.summary_only {
                        " (summary reported by the tool)"
                    } else {
                        ""
                    };
                    outln!(
                        "{source}: run {} \"{}\" — {} samples{kind}{rejected}  {}",
                        run.id,
                        run.name,
                        run.samples,
                        run.url
                    );
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("harrier: {e:#}");
            }
        }
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Imports the files into the local database, one plan for all
/// ([`import::import_files`]): each file's result (or its Locust set's), in order.
async fn import_local(
    store: &Store,
    args: &ImportArgs,
    format: Format,
) -> anyhow::Result<Vec<(String, anyhow::Result<Vec<import::ImportedRun>>)>> {
    let limits = Config::client()?.run_limits;
    let request = |source: &str| {
        Ok(ImportRequest {
            limits,
            format,
            name: args.name.clone(),
            scenario: args.scenario.clone(),
            tags: args.tags.clone(),
            source: source.to_string(),
            max_bytes: u64::MAX,
            replace: args.replace,
        })
    };
    let show = std::io::stderr().is_terminal();
    let progress = |source: &str| Progress {
        hub: None,
        callback: show.then(|| {
            let source = source.to_string();
            std::sync::Arc::new(move |read: u64, total: Option<u64>| {
                let mb = read as f64 / 1e6;
                match total {
                    Some(t) if t > 0 => eprint!(
                        "\r{source}: {mb:.0} / {:.0} MB ({:.0} %)   ",
                        t as f64 / 1e6,
                        read as f64 * 100.0 / t as f64
                    ),
                    _ => eprint!("\r{source}: {mb:.0} MB read   "),
                }
            }) as import::ProgressFn
        }),
    };
    let files = args
        .files
        .iter()
        .map(|p| import::InputFile::path(source_name(p), p.clone()))
        .collect();
    let results = import::import_files(store, &progress, files, format, &request, true).await;
    if show {
        eprint!("\r\x1b[K");
    }
    Ok(results
        .into_iter()
        .map(|(source, r)| (source, r.map_err(anyhow::Error::from)))
        .collect())
}

/// The named files, read whole (a Locust `--csv` set: small CSV files).
fn read_all(paths: &[&Path], max_bytes: u64) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut total = 0u64;
    for p in paths {
        total += std::fs::metadata(p)
            .with_context(|| format!("cannot open {}", p.display()))?
            .len();
    }
    if total > max_bytes {
        anyhow::bail!(
            "the files of a Locust --csv run are read whole, together at most {max_bytes} bytes (limits.max_document_bytes in harrier.toml); they hold {total}"
        );
    }
    paths
        .iter()
        .map(|p| {
            let bytes = std::fs::read(p).with_context(|| format!("cannot open {}", p.display()))?;
            Ok((source_name(p), bytes))
        })
        .collect()
}

/// One run from the files of one Locust `--csv` run, sent to a server as one multipart
/// upload (several `file` fields).
async fn import_remote_set(
    server: &str,
    args: &ImportArgs,
    paths: &[&Path],
) -> anyhow::Result<Vec<import::ImportedRun>> {
    // The server holds them whole too; its own limit may differ, it says so if lower.
    let files = read_all(paths, Config::client()?.run_limits.max_document_bytes)?;
    let boundary = format!("harrier-{:x}", crate::now_ms());
    let mut body: Vec<u8> = Vec::new();
    for (name, bytes) in &files {
        let safe: String = name
            .chars()
            .filter(|c| *c != '"' && *c != '\r' && *c != '\n')
            .collect();
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{safe}\"\r\nContent-Type: text/csv\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let request = crate::cli::http()
        .post(format!("{}/api/v1/runs", server_base(server)))
        .header(
            reqwest::header::CONTENT_TYPE,
            format!("multipart/form-data; boundary={boundary}"),
        )
        .body(body);
    send_import(server, args, request).await
}

async fn import_remote(
    server: &str,
    args: &ImportArgs,
    path: &Path,
    source: &str,
) -> anyhow::Result<Vec<import::ImportedRun>> {
    let mut query: Vec<(&str, String)> = vec![
        ("format", args.format.clone()),
        ("filename", source.to_string()),
    ];
    if let Some(id) = args.replace {
        query.push(("replace", id.to_string()));
    }
    let body = if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf)?;
        reqwest::Body::from(buf)
    } else {
        let file = tokio::fs::File::open(path)
            .await
            .with_context(|| format!("cannot open {}", path.display()))?;
        reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(file, 1 << 20))
    };
    let url = format!("{}/api/v1/runs", server_base(server));
    let response = crate::cli::http().post(&url).query(&query).body(body);
    send_import(server, args, response).await
}

/// Sends an import request (query options added here) and reads the runs it made.
async fn send_import(
    server: &str,
    args: &ImportArgs,
    request: reqwest::RequestBuilder,
) -> anyhow::Result<Vec<import::ImportedRun>> {
    let url = format!("{}/api/v1/runs", server_base(server));
    let mut query: Vec<(&str, String)> = Vec::new();
    if let Some(n) = &args.name {
        query.push(("name", n.clone()));
    }
    if let Some(s) = &args.scenario {
        query.push(("scenario", s.clone()));
    }
    for (k, v) in &args.tags {
        query.push(("tag", format!("{k}={v}")));
    }
    let response = match request.query(&query).send().await {
        Ok(r) => r,
        Err(e) => {
            return Err(crate::cli::explain_send_error(
                &server_base(server),
                format!("cannot reach {url} (is `harrier serve` running there?)"),
                e,
            )
            .await);
        }
    };
    let status = response.status();
    let json: serde_json::Value = response
        .json()
        .await
        .with_context(|| format!("{url} answered {status} without JSON"))?;
    if !status.is_success() {
        anyhow::bail!("{}", json["error"].as_str().unwrap_or("import failed"));
    }
    let mut runs: Vec<import::ImportedRun> = Vec::new();
    for r in json["runs"].as_array().into_iter().flatten() {
        runs.push(import::ImportedRun {
            id: r["id"].as_i64().unwrap_or_default(),
            name: r["name"].as_str().unwrap_or_default().to_string(),
            tool: r["tool"].as_str().unwrap_or_default().to_string(),
            url: format!(
                "{}{}",
                server_base(server),
                r["url"].as_str().unwrap_or_default()
            ),
            samples: r["samples"].as_u64().unwrap_or_default(),
            rejected_rows: r["rejected_rows"].as_u64().unwrap_or_default(),
            summary_only: r["summary_only"].as_bool().unwrap_or_default(),
        });
    }
    Ok(runs)
}
