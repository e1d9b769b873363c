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
        eprintln!("SKIPPED on PostgreSQL (SQLite-specific): {why}");
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
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("harrier.db");
    let mut config = Config {
        db,
        ..Config::default()
    };
    let mut pg = None;
    if on_postgres() {
        let server = pg_server_url()
            .expect("HARRIER_TEST_BACKEND=postgres needs HARRIER_TEST_DATABASE_URL (scripts/test.sh sets both)");
        let database = PgDatabase::create(&server).await;
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
