//! `harrier serve`: opens the store, binds the listener and serves until Ctrl-C or SIGTERM.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;

use crate::app::{self, AppState};
use crate::config::{Config, ServeArgs};
use crate::store::{DatabaseUrl, Store};

pub async fn serve(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let config = Config::resolve(&args)?;
    let database = config.database();
    // The one start-up gate of a server other machines can reach: sign-in on (a user
    // exists in the database, which is then only read) or --insecure-no-auth.
    let mut protection = config.protection();
    if crate::domain::access::exposure_check(config.listen, protection).is_err() {
        protection.users = match Store::connect_existing(&database).await {
            Ok(store) => store.count_users().await.unwrap_or(0) > 0,
            Err(_) => false,
        };
    }
    if let Err(message) = crate::domain::access::exposure_check(config.listen, protection) {
        eprintln!("harrier serve: {message}");
        return Ok(ExitCode::from(2));
    }
    // Before anything is read or changed: a second serve on this SQLite file stops here.
    // (Several harrier processes may share one PostgreSQL database.)
    let _lock = match &database {
        DatabaseUrl::Sqlite(path) => Some(crate::store::lock_for_serving(path)?),
        DatabaseUrl::Postgres(_) => None,
    };
    let store = Store::connect(&database)
        .await
        .with_context(|| database_hint(&database))?;
    // Alone on a SQLite file, every run still live was left by a previous process; on
    // PostgreSQL other replicas may be streaming theirs: only runs quiet for longer than
    // any replica keeps one open.
    let quiet_since = if store.shared() {
        let idle = std::time::Duration::from_secs(config.live_idle_timeout_s);
        crate::now_ms() - crate::services::live_runs::abandoned_after_ms(idle)
    } else {
        i64::MAX
    };
    let stale = store.close_stale_live_runs(quiet_since).await?;
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
    let shown = database.shown();
    tracing::info!(listen = %addr, db = %shown, "harrier serving");
    // One line: scripts read the URL from it and may close the pipe after.
    let users = store.count_users().await?;
    let plural = if users == 1 { "" } else { "s" };
    let sign_in = match (&config.oidc, users) {
        (Some(o), n) => format!(
            "sign-in on: single sign-on with {}, {n} user{plural}",
            o.name
        ),
        (None, 0) => "sign-in off: no users".to_string(),
        (None, n) => format!("sign-in on: {n} user{plural}"),
    };
    outln!("harrier console: http://{addr}/console  (database {shown}; {sign_in})");
    let state = AppState::new(store, config);
    app::serve(listener, state, shutdown_signal()).await?;
    tracing::info!("harrier stopped");
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
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

/// The context of a database that fails to open: which one, and what usually helps.
pub fn database_hint(database: &DatabaseUrl) -> String {
    match database {
        DatabaseUrl::Sqlite(path) => open_hint(path),
        DatabaseUrl::Postgres(_) => format!(
            "cannot open the database {} (check that the server answers, that the database exists and that the user may create tables in it)",
            database.shown()
        ),
    }
}

/// The context of a database file that fails to open: which file, and what usually helps.
pub fn open_hint(db: &Path) -> String {
    format!(
        "cannot open the database {} (check that its folder exists and that you may write there)",
        db.display()
    )
}
