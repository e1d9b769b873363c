//! The `harrier` command: parses the command line and hands over to the library.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use harrier::app::{self, AppState};
use harrier::config::{Cli, Command, Config, ImportArgs, RulesCommand, ServeArgs, TargetArgs};
use harrier::services::import::{self, ImportRequest, Progress};
use harrier::sources::ingest::Format;
use harrier::store::Store;
use tracing_subscriber::EnvFilter;

use harrier::cli::compare as cli_compare;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("HARRIER_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn,tower_http=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("harrier: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        match cli.command.unwrap_or(Command::Serve(ServeArgs::default())) {
            Command::Serve(args) => serve(args).await,
            Command::Import(args) => import_files(args).await,
            Command::Runs(args) => list_runs(args).await,
            Command::Check(args) => Ok(cli_compare::check(args).await),
            Command::Compare(args) => cli_compare::compare(args)
                .await
                .or_else(|e| cli_error("compare", e)),
            Command::Baseline(args) => cli_compare::baseline(args)
                .await
                .or_else(|e| cli_error("baseline", e)),
            Command::Seed(args) => cli_compare::seed(args)
                .await
                .or_else(|e| cli_error("seed", e)),
            Command::Rules(RulesCommand::Test { files }) => Ok(test_rules(&files)),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harrier: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Reports a failed client command; its exit code tells an input error (2) from others.
fn cli_error(command: &str, e: anyhow::Error) -> anyhow::Result<ExitCode> {
    eprintln!("harrier {command}: {e:#}");
    Ok(cli_compare::error_code(&e))
}

async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = Config::resolve(&args)?;
    let store = Store::open(&config.db)
        .await
        .with_context(|| open_hint(&config.db))?;
    let stale = store.close_stale_live_runs().await?;
    if stale > 0 {
        tracing::warn!(
            runs = stale,
            "live runs left open by a previous process marked complete"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "listening on {} (is another harrier running? pass --listen)",
                config.listen
            )
        })?;
    let addr = listener.local_addr()?;
    let db = std::fs::canonicalize(&config.db).unwrap_or(config.db.clone());
    tracing::info!(listen = %addr, db = %db.display(), "harrier serving");
    println!(
        "harrier console: http://{addr}/console  (database {})",
        db.display()
    );
    let state = AppState::new(store, config);
    app::serve(listener, state, shutdown_signal()).await?;
    tracing::info!("harrier stopped");
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}

/// The context of a database that fails to open: which file, and what usually helps.
fn open_hint(db: &Path) -> String {
    format!(
        "cannot open the database {} (check that its folder exists and that you may write there)",
        db.display()
    )
}

/// A `--server` value as a base URL: `127.0.0.1:7070` gets `http://`, a trailing `/` goes.
fn server_base(server: &str) -> String {
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

async fn import_files(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let format = Format::from_name(&args.format).context("unknown format")?;
    let mut failed = 0;
    let store = match &args.target.server {
        Some(_) => None,
        None => {
            let db = Config::client_db(args.target.db.clone())?;
            Some(Store::open(&db).await.with_context(|| open_hint(&db))?)
        }
    };
    for path in &args.files {
        let source = source_name(path);
        let result = match (&store, &args.target.server) {
            (Some(store), _) => import_local(store, &args, format, path, &source).await,
            (None, Some(server)) => import_remote(server, &args, path, &source).await,
            (None, None) => unreachable!("either a store or a server"),
        };
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
                    println!(
                        "{source}: run {} \"{}\" — {} samples{kind}{rejected}  {}",
                        run.id, run.name, run.samples, run.url
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

async fn import_local(
    store: &Store,
    args: &ImportArgs,
    format: Format,
    path: &Path,
    source: &str,
) -> anyhow::Result<Vec<import::ImportedRun>> {
    let req = ImportRequest {
        format,
        name: args.name.clone(),
        scenario: args.scenario.clone(),
        tags: args.tags.clone(),
        source: source.to_string(),
        max_bytes: u64::MAX,
        replace: args.replace,
    };
    let show = std::io::stderr().is_terminal();
    let progress = Progress {
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
    let result = if path.as_os_str() == "-" {
        import::import_reader(store, &progress, req, std::io::stdin(), None).await
    } else {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        let total = file.metadata().ok().map(|m| m.len());
        import::import_reader(store, &progress, req, file, total).await
    };
    if show {
        eprint!("\r\x1b[K");
    }
    Ok(result?)
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
    if let Some(n) = &args.name {
        query.push(("name", n.clone()));
    }
    if let Some(s) = &args.scenario {
        query.push(("scenario", s.clone()));
    }
    for (k, v) in &args.tags {
        query.push(("tag", format!("{k}={v}")));
    }
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
    let response = reqwest::Client::new()
        .post(&url)
        .query(&query)
        .body(body)
        .send()
        .await
        .with_context(|| format!("cannot reach {url} (is `harrier serve` running there?)"))?;
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

async fn list_runs(args: TargetArgs) -> anyhow::Result<ExitCode> {
    let runs: Vec<serde_json::Value> = match &args.server {
        Some(server) => {
            let url = format!("{}/api/v1/runs", server_base(server));
            let json: serde_json::Value = reqwest::get(&url)
                .await
                .with_context(|| format!("cannot reach {url}"))?
                .json()
                .await?;
            json["runs"].as_array().cloned().unwrap_or_default()
        }
        None => {
            let db = Config::client_db(args.db.clone())?;
            let store = Store::open_existing(&db)
                .await
                .with_context(|| open_hint(&db))?;
            store
                .list_runs()
                .await?
                .into_iter()
                .map(|r| serde_json::to_value(r).unwrap_or_default())
                .collect()
        }
    };
    if runs.is_empty() {
        println!("no runs yet — import one with: harrier import results.jtl");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:>5}  {:<32} {:<8} {:>10} {:>8} {:>10} {:>14}",
        "ID", "NAME", "TOOL", "REQUESTS", "ERROR %", "P95", "THROUGHPUT"
    );
    use harrier::domain::format;
    for r in runs {
        println!(
            "{:>5}  {:<32} {:<8} {:>10} {:>8} {:>10} {:>14}",
            r["id"].as_i64().unwrap_or_default(),
            r["name"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(32)
                .collect::<String>(),
            r["tool"].as_str().unwrap_or_default(),
            format::int(r["count"].as_i64().unwrap_or_default()),
            format::pct(r["error_pct"].as_f64()),
            format::ms(r["p95_ms"].as_f64()),
            format::rps(r["throughput_rps"].as_f64()),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `harrier rules test FILE…`: 0 all passed, 1 a test failed, 2 a file cannot be run.
fn test_rules(files: &[std::path::PathBuf]) -> ExitCode {
    let mut code = ExitCode::SUCCESS;
    for path in files {
        let result = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| harrier::domain::alerts::ruletest::run(&text));
        match result {
            Ok(failures) if failures.is_empty() => println!("{}: SUCCESS", path.display()),
            Ok(failures) => {
                println!("{}: FAILED", path.display());
                for f in failures {
                    println!("  {f}");
                }
                if code != ExitCode::from(2) {
                    code = ExitCode::from(1);
                }
            }
            Err(e) => {
                eprintln!("harrier: {}: {e}", path.display());
                code = ExitCode::from(2);
            }
        }
    }
    code
}
