//! `harrier user …` and `harrier token …`: local users and machine tokens, written to the
//! database directly (they work while `harrier serve` runs on it; a running server turns
//! sign-in on within two seconds of the first user). And `harrier migrate`: a SQLite
//! database copied into PostgreSQL.

use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;

use anyhow::Context;

use super::serve::database_hint;
use crate::config::{DbArgs, MigrateArgs, TokenCommand, UserCommand};
use crate::domain::auth::{self, Role, Scope, TOKEN_PREFIX};
use crate::domain::format;
use crate::store::DatabaseUrl;
use crate::store::Store;

async fn open(db: &DbArgs) -> anyhow::Result<Store> {
    let database = db.database()?;
    Store::connect(&database)
        .await
        .with_context(|| database_hint(&database))
}

/// Writes a change made by this command to the audit log (who `cli`, method `CLI`).
async fn audit(store: &Store, what: String) {
    let user = std::env::var("USER").unwrap_or_default();
    let who = if user.is_empty() {
        "cli".to_string()
    } else {
        format!("cli:{user}")
    };
    if let Err(e) = store
        .insert_audit(crate::now_ms(), &who, "CLI", &what, 200, None)
        .await
    {
        eprintln!("harrier: writing the audit log failed: {e}");
    }
}

/// A password: asked twice without echo on a terminal, else the first line of stdin.
fn read_password(name: &str) -> anyhow::Result<String> {
    let password = if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(format!("Password for {name}: "))?;
        let again = rpassword::prompt_password("Again: ")?;
        if first != again {
            anyhow::bail!("the two passwords differ; nothing changed");
        }
        first
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_string()
    };
    auth::check_password(&password).map_err(|e| anyhow::anyhow!(e))?;
    Ok(password)
}

/// Runs a `harrier user` command: 0 done, 2 bad input, 1 otherwise.
pub async fn user(command: UserCommand) -> anyhow::Result<ExitCode> {
    let now = crate::now_ms();
    match command {
        UserCommand::Add { name, role, db } => {
            if let Err(e) = auth::check_user_name(name.trim()) {
                eprintln!("harrier user add: {e}");
                return Ok(ExitCode::from(2));
            }
            let name = auth::normalize_user_name(&name);
            let role = Role::parse(&role).context("role")?;
            let store = open(&db).await?;
            if store.user_by_name(&name).await?.is_some() {
                eprintln!(
                    "harrier user add: a user named {name:?} exists (change it with `harrier user passwd` or `harrier user role`)"
                );
                return Ok(ExitCode::from(2));
            }
            let password = match read_password(&name) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("harrier user add: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let hash = crate::services::auth::hash_password(&password)?;
            let first = store.count_users().await? == 0;
            match store.insert_user(&name, role.as_str(), &hash, now).await? {
                Some(id) => {
                    audit(&store, format!("user add {name} --role {role}")).await;
                    outln!("user {name} added ({role}, id {id})");
                    if first {
                        outln!(
                            "sign-in is now on: the console asks for a user name and password, \
                             and tools need a token (harrier token create NAME --scope ingest)"
                        );
                    }
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    eprintln!("harrier user add: a user named {name:?} exists");
                    Ok(ExitCode::from(2))
                }
            }
        }
        UserCommand::List { db } => {
            let store = open(&db).await?;
            let users = store.list_users().await?;
            if users.is_empty() {
                outln!(
                    "no users: sign-in is off (add one with harrier user add NAME --role admin)"
                );
                return Ok(ExitCode::SUCCESS);
            }
            let w = users
                .iter()
                .map(|u| u.name.chars().count())
                .max()
                .unwrap_or(4)
                .max(4);
            outln!("{:<w$}  {:<8}  {:<14}  created", "name", "role", "sign-in");
            for u in users {
                let by = if u.oidc_subject.is_some() {
                    "single sign-on"
                } else {
                    "password"
                };
                outln!(
                    "{:<w$}  {:<8}  {by:<14}  {}",
                    u.name,
                    u.role,
                    format::time(Some(u.created_at_ms))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        UserCommand::Remove { name, db } => {
            let name = auth::normalize_user_name(&name);
            let store = open(&db).await?;
            if let Some(why) = crate::services::auth::last_admin(&store, &name).await? {
                eprintln!("harrier user remove: {why}");
                return Ok(ExitCode::from(2));
            }
            if store.delete_user(&name, now).await? {
                audit(&store, format!("user remove {name}")).await;
                outln!(
                    "user {name} removed (their sessions ended, tokens and share links they made revoked)"
                );
                if store.count_users().await? == 0 {
                    outln!(
                        "no users are left: sign-in is off for a server on loopback; a server on \
                         another address keeps refusing everyone until a user is added"
                    );
                }
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("harrier user remove: no user named {name:?}");
                Ok(ExitCode::from(2))
            }
        }
        UserCommand::Passwd { name, db } => {
            let name = auth::normalize_user_name(&name);
            let store = open(&db).await?;
            if store.user_by_name(&name).await?.is_none() {
                eprintln!("harrier user passwd: no user named {name:?}");
                return Ok(ExitCode::from(2));
            }
            let password = match read_password(&name) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("harrier user passwd: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let hash = crate::services::auth::hash_password(&password)?;
            store.update_user(&name, None, Some(&hash)).await?;
            audit(&store, format!("user passwd {name}")).await;
            outln!("password of {name} changed; their sessions are ended");
            Ok(ExitCode::SUCCESS)
        }
        UserCommand::Role { name, role, db } => {
            let name = auth::normalize_user_name(&name);
            let role = Role::parse(&role).context("role")?;
            let store = open(&db).await?;
            if role != Role::Admin
                && let Some(why) = crate::services::auth::last_admin(&store, &name).await?
            {
                eprintln!("harrier user role: {why}");
                return Ok(ExitCode::from(2));
            }
            if store.update_user(&name, Some(role.as_str()), None).await? {
                audit(&store, format!("user role {name} {role}")).await;
                outln!("{name} is now {role}");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("harrier user role: no user named {name:?}");
                Ok(ExitCode::from(2))
            }
        }
    }
}

/// Runs a `harrier token` command: 0 done, 2 bad input, 1 otherwise.
pub async fn token(command: TokenCommand) -> anyhow::Result<ExitCode> {
    let now = crate::now_ms();
    match command {
        TokenCommand::Create {
            name,
            scope,
            expires,
            db,
        } => {
            let scope = Scope::parse(&scope).context("scope")?;
            if let Err(e) = auth::check_token_name(&name) {
                eprintln!("harrier token create: {e}");
                return Ok(ExitCode::from(2));
            }
            let name = name.trim().to_string();
            let expires_at = if expires.trim().eq_ignore_ascii_case("never") {
                None
            } else {
                match format::parse_duration_ms(&expires) {
                    Some(ms) if ms > 0 => Some(now + ms),
                    _ => {
                        eprintln!(
                            "harrier token create: --expires {expires:?}: expected a duration such as 90d, 12h, 30m, or never"
                        );
                        return Ok(ExitCode::from(2));
                    }
                }
            };
            let store = open(&db).await?;
            let secret = crate::services::auth::random_secret();
            let id = store
                .insert_token(
                    &name,
                    scope.as_str(),
                    &auth::secret_hash(&secret),
                    "cli",
                    now,
                    expires_at,
                )
                .await?;
            audit(
                &store,
                format!("token create {name} --scope {scope} (id {id})"),
            )
            .await;
            // The token alone on stdout (for `$(harrier token create …)`), the rest on stderr.
            outln!("{}", auth::format_credential(TOKEN_PREFIX, id, &secret));
            eprintln!(
                "token {id} ({name}, scope {scope}, expires {}): shown this once, harrier keeps only its hash",
                expires_at.map_or("never".to_string(), |t| format::time(Some(t)))
            );
            if store.count_users().await? == 0 {
                eprintln!(
                    "note: sign-in is off (no users), so the server does not ask for tokens yet; add a user with harrier user add"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::List { db } => {
            let store = open(&db).await?;
            let tokens = store.list_tokens().await?;
            if tokens.is_empty() {
                outln!("no tokens (create one with harrier token create NAME --scope ingest)");
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{:>4}  {:<20}  {:<7}  {:<23}  {:<23}  {:<23}  state",
                "id",
                "name",
                "scope",
                "created",
                "expires",
                "last used"
            );
            for t in tokens {
                let state = if t.revoked_at_ms.is_some() {
                    "revoked"
                } else if t.expires_at_ms.is_some_and(|e| e <= now) {
                    "expired"
                } else {
                    "live"
                };
                outln!(
                    "{:>4}  {:<20}  {:<7}  {:<23}  {:<23}  {:<23}  {state}",
                    t.id,
                    t.name
                        .chars()
                        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
                        .take(20)
                        .collect::<String>(),
                    t.scope,
                    format::time(Some(t.created_at_ms)),
                    t.expires_at_ms
                        .map_or("never".into(), |e| format::time(Some(e))),
                    format::time(t.last_used_ms),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        TokenCommand::Revoke { id, db } => {
            let store = open(&db).await?;
            if store.revoke_token(id, now).await? {
                audit(&store, format!("token revoke {id}")).await;
                outln!("token {id} revoked");
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("harrier token revoke: no live token {id}");
                Ok(ExitCode::from(2))
            }
        }
    }
}

/// Runs `harrier migrate`: 0 copied, 2 unsupported direction or a target holding data, 1
/// otherwise.
pub async fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let (DatabaseUrl::Sqlite(path), DatabaseUrl::Postgres(_)) = (&args.from, &args.to) else {
        eprintln!(
            "harrier migrate: copies sqlite:PATH into postgres://…; got --from {} --to {}",
            args.from.shown(),
            args.to.shown()
        );
        return Ok(ExitCode::from(2));
    };
    // Nobody may write the file meanwhile: a serve on it holds this lock.
    let _lock = crate::store::lock_for_serving(path)?;
    let from = Store::connect_existing(&args.from)
        .await
        .with_context(|| database_hint(&args.from))?;
    let to = Store::connect(&args.to)
        .await
        .with_context(|| database_hint(&args.to))?;
    let (Some(src), Some(dst)) = (from.sqlite_pool(), to.postgres_pool()) else {
        unreachable!("checked above");
    };
    let started = std::time::Instant::now();
    let copied = crate::store::migrate::sqlite_to_postgres(src, dst, |c| {
        eprintln!("  {:<28} {:>10} rows", c.table, c.rows);
    })
    .await;
    match copied {
        Ok(tables) => {
            let rows: u64 = tables.iter().map(|t| t.rows).sum();
            outln!(
                "copied {rows} rows of {} tables from {} to {} in {:.1} s",
                tables.len(),
                args.from.shown(),
                args.to.shown(),
                started.elapsed().as_secs_f64()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(crate::store::StoreError::Invalid(message)) => {
            eprintln!("harrier {message}; nothing was copied");
            Ok(ExitCode::from(2))
        }
        Err(e) => Err(anyhow::Error::new(e).context("migrate: nothing was copied")),
    }
}
