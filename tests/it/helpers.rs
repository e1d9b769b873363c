//! Shared test helpers: an app over a fresh database (SQLite, or PostgreSQL with
//! `HARRIER_TEST_BACKEND=postgres`), request shortcuts, fixtures.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use harrier::app::{AppState, router};
use harrier::config::Config;
use harrier::store::{DatabaseUrl, Store};
use http_body_util::BodyExt;
use tower::ServiceExt;

use crate::skip::{Kind, skip};

/// An app over a fresh database (kept alive by the struct): a SQLite file in a temporary
/// directory, or a new PostgreSQL database when `HARRIER_TEST_BACKEND=postgres` (see
/// [`fresh_store`]).
pub struct TestApp {
    pub state: AppState,
    pub _dir: TestDir,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// [`spawn_app`] with a changed configuration.
pub async fn spawn_app_with(change: impl FnOnce(&mut Config)) -> TestApp {
    let (store, mut config, dir) = fresh_store().await;
    change(&mut config);
    TestApp {
        state: AppState::new(store, config),
        _dir: dir,
    }
}

/// The backend the tests run on: `HARRIER_TEST_BACKEND=postgres` selects PostgreSQL (on
/// the server `HARRIER_TEST_DATABASE_URL` names), anything else SQLite.
pub fn on_postgres() -> bool {
    std::env::var("HARRIER_TEST_BACKEND").is_ok_and(|b| b.eq_ignore_ascii_case("postgres"))
}

/// Runs `sql` (no parameters) on the store's own database, whichever backend; for tests
/// that must reach under the operations. Returns the rows affected.
pub async fn exec_raw(store: &Store, sql: &str) -> u64 {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(p), _) => sqlx::query(sql).execute(p).await.unwrap().rows_affected(),
        (_, Some(p)) => sqlx::query(sql).execute(p).await.unwrap().rows_affected(),
        _ => unreachable!("one backend or the other"),
    }
}

/// The first column of the first row of `sql` as an integer, whichever backend.
pub async fn scalar_raw(store: &Store, sql: &str) -> i64 {
    let sql = sqlx::AssertSqlSafe(sql.to_string());
    match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(p), _) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
        (_, Some(p)) => sqlx::query_scalar(sql).fetch_one(p).await.unwrap(),
        _ => unreachable!("one backend or the other"),
    }
}

/// Prints why a test that reaches under the store with SQLite-only SQL (or tests SQLite's
/// file lock or WAL) does not run on PostgreSQL; `true` when it should return.
pub fn sqlite_only(why: &str) -> bool {
    if on_postgres() {
        skip(
            Kind::Backend,
            &format!("SQLite-specific, not run on PostgreSQL: {why}"),
        );
        return true;
    }
    false
}

/// A test's temporary directory and, on PostgreSQL, its database (dropped with it).
pub struct TestDir {
    _dir: tempfile::TempDir,
    _pg: Option<PgDatabase>,
}

/// A database created for one test on the server of `HARRIER_TEST_DATABASE_URL`, dropped
/// (with any connection still open to it) when this is dropped.
pub struct PgDatabase {
    admin: String,
    pub name: String,
    pub url: String,
}

/// Taken by the tests that start several `harrier serve` replicas and time what they do
/// (`replicas`, `chaos`), so they run one after the other: on a small machine two of them
/// at once slow each other past their time limits.
pub static REPLICA_TESTS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The server the PostgreSQL tests use, `HARRIER_TEST_DATABASE_URL`.
pub fn pg_server_url() -> Option<String> {
    std::env::var("HARRIER_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let mut u = url::Url::parse(url).expect("HARRIER_TEST_DATABASE_URL is a URL");
    u.set_path(&format!("/{name}"));
    u.to_string()
}

impl PgDatabase {
    /// Creates a database with a random name on the server at `server` (a URL whose
    /// database the test user may connect to and create databases from).
    pub async fn create(server: &str) -> PgDatabase {
        use sqlx::Connection;
        let name = format!(
            "harrier_test_{}_{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
                ^ (NEXT_DB.fetch_add(1, std::sync::atomic::Ordering::Relaxed) as u128) << 64
        );
        let mut admin = sqlx::PgConnection::connect(server)
            .await
            .unwrap_or_else(|e| panic!("HARRIER_TEST_DATABASE_URL does not answer: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .expect("create the test database");
        let _ = admin.close().await;
        PgDatabase {
            admin: server.to_string(),
            url: with_database(server, &name),
            name,
        }
    }
}

static NEXT_DB: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl Drop for PgDatabase {
    fn drop(&mut self) {
        // On a thread of its own: a test's runtime may be gone or busy by now.
        let admin = self.admin.clone();
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                use sqlx::Connection;
                if let Ok(mut c) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                    )))
                    .execute(&mut c)
                    .await;
                    let _ = c.close().await;
                }
            });
        })
        .join();
    }
}

/// A fresh store for one test, its configuration pointing at it, and what keeps it alive:
/// SQLite `harrier.db` in a new temporary directory, or (`HARRIER_TEST_BACKEND=postgres`)
/// a new database on `HARRIER_TEST_DATABASE_URL`, dropped with the [`TestDir`].
pub async fn fresh_store() -> (Store, Config, TestDir) {
    let server = on_postgres().then(|| {
        pg_server_url().expect(
            "HARRIER_TEST_BACKEND=postgres needs HARRIER_TEST_DATABASE_URL (scripts/test.sh sets both)",
        )
    });
    fresh_store_on(server.as_deref()).await
}

/// [`fresh_store`] on SQLite (`None`) or on a new database of the PostgreSQL server at
/// `postgres`, whatever `HARRIER_TEST_BACKEND` says.
pub async fn fresh_store_on(postgres: Option<&str>) -> (Store, Config, TestDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("harrier.db");
    let mut config = Config {
        db,
        ..Config::default()
    };
    let mut pg = None;
    if let Some(server) = postgres {
        let database = PgDatabase::create(server).await;
        config.database_url = Some(DatabaseUrl::Postgres(database.url.clone()));
        pg = Some(database);
    }
    let store = Store::connect(&config.database())
        .await
        .expect("open store");
    (store, config, TestDir { _dir: dir, _pg: pg })
}

/// A response read whole.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    /// The `Location` header, when there is one.
    pub location: Option<String>,
    pub headers: axum::http::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn html(&self) -> scraper::Html {
        scraper::Html::parse_document(&self.text())
    }
}

impl TestApp {
    pub async fn send(&self, req: Request<Body>) -> Reply {
        let res = router(self.state.clone())
            .oneshot(req)
            .await
            .expect("infallible");
        let status = res.status();
        let content_type = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let location = res
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let headers = res.headers().clone();
        let body = res
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec();
        Reply {
            status,
            content_type,
            location,
            headers,
            body,
        }
    }

    pub async fn get(&self, uri: &str) -> Reply {
        self.send(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    pub async fn delete(&self, uri: &str) -> Reply {
        self.send(Request::delete(uri).body(Body::empty()).unwrap())
            .await
    }

    /// `POST /api/v1/runs?{query}` with `body` as the raw request body.
    pub async fn import(&self, query: &str, body: Vec<u8>) -> Reply {
        let uri = format!("/api/v1/runs?{query}");
        self.send(Request::post(uri).body(Body::from(body)).unwrap())
            .await
    }
}

/// The project's own fixture file `tests/fixtures/{rel}`.
pub fn fixture(rel: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Asserts `a` equals `b` within 1e-6 relative (the edge-case files' rounding).
pub fn assert_close(a: f64, b: f64, what: &str) {
    let tol = 1e-6 * b.abs().max(1.0);
    assert!((a - b).abs() <= tol, "{what}: got {a}, expected {b}");
}

/// Texts of every element matching `selector`.
pub fn select_texts(html: &scraper::Html, selector: &str) -> Vec<String> {
    let sel = scraper::Selector::parse(selector).expect("valid selector");
    html.select(&sel)
        .map(|e| e.text().collect::<String>().trim().to_string())
        .collect()
}

/// A PostgreSQL server started for the tests in a temporary directory (Debian's
/// `postgresql` package: `initdb`, `pg_ctl`), trust authentication on 127.0.0.1 and a free
/// port; stopped and removed on drop. As root it runs as the `postgres` user (`initdb`
/// refuses root).
pub struct ThrowawayPostgres {
    pub url: String,
    bin: std::path::PathBuf,
    data: std::path::PathBuf,
    dir: std::path::PathBuf,
    as_root: bool,
}

impl ThrowawayPostgres {
    /// The newest `/usr/lib/postgresql/*/bin` holding `initdb` and `pg_ctl`.
    pub fn binaries() -> Option<std::path::PathBuf> {
        let mut bins: Vec<std::path::PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists() && b.join("pg_ctl").exists())
            .collect();
        bins.sort_by_key(|b| {
            b.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        });
        bins.pop()
    }

    fn command(&self, program: &str) -> std::process::Command {
        let program = self.bin.join(program);
        if self.as_root {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            std::process::Command::new(program)
        }
    }

    /// Starts one; `None` when the binaries are missing.
    pub fn start() -> Option<ThrowawayPostgres> {
        let bin = ThrowawayPostgres::binaries()?;
        let dir = tempfile::Builder::new()
            .prefix("harrier-pg-")
            .tempdir()
            .expect("temp dir")
            .keep();
        let as_root = std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if as_root {
            let ok = std::process::Command::new("chown")
                .arg("postgres")
                .arg(&dir)
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown postgres {}", dir.display());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let pg = ThrowawayPostgres {
            url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
            bin,
            data: dir.join("data"),
            dir,
            as_root,
        };
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(&pg.data)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let options = format!(
            "-h 127.0.0.1 -p {port} -k {} -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            pg.dir.display()
        );
        let out = pg
            .command("pg_ctl")
            .arg("-D")
            .arg(&pg.data)
            .arg("-l")
            .arg(pg.dir.join("log"))
            .args(["-o", &options, "-w", "-t", "30", "start"])
            .output()
            .expect("run pg_ctl");
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(pg)
    }
}

impl Drop for ThrowawayPostgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The PostgreSQL server for a test: `HARRIER_TEST_DATABASE_URL`, else one started for it
/// (kept alive by the second value); `None`, with a notice, when there is neither.
pub fn postgres_server(test: &str) -> Option<(String, Option<ThrowawayPostgres>)> {
    if let Some(url) = pg_server_url() {
        return Some((url, None));
    }
    match ThrowawayPostgres::start() {
        Some(pg) => Some((pg.url.clone(), Some(pg))),
        None => {
            skip(
                Kind::Tool,
                &format!(
                    "{test}: no PostgreSQL (set HARRIER_TEST_DATABASE_URL, or install Debian's postgresql; scripts/test.sh does both)"
                ),
            );
            None
        }
    }
}

/// Runs stored as an import stores them (bootstrap draws computed first, by the service).
pub trait InsertRuns {
    /// One run; its id.
    async fn insert_run(
        &self,
        run: &harrier::store::NewRun,
        data: &harrier::domain::runs::RunData,
    ) -> harrier::store::Result<i64>;
    /// Runs in one transaction; their ids.
    async fn import_runs(
        &self,
        runs: &[(harrier::store::NewRun, &harrier::domain::runs::RunData)],
    ) -> harrier::store::Result<Vec<i64>>;
}

impl InsertRuns for harrier::store::Store {
    async fn insert_run(
        &self,
        run: &harrier::store::NewRun,
        data: &harrier::domain::runs::RunData,
    ) -> harrier::store::Result<i64> {
        harrier::services::import::insert_run(self, run, data).await
    }
    async fn import_runs(
        &self,
        runs: &[(harrier::store::NewRun, &harrier::domain::runs::RunData)],
    ) -> harrier::store::Result<Vec<i64>> {
        harrier::services::import::insert_runs(self, runs).await
    }
}
