//! Shared test helpers: an app over a temporary SQLite file, request shortcuts, fixtures.

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use harrier::app::{AppState, router};
use harrier::config::Config;
use harrier::store::Store;
use http_body_util::BodyExt;
use tower::ServiceExt;

/// An app over a fresh SQLite file in a temporary directory (kept alive by the struct).
pub struct TestApp {
    pub state: AppState,
    pub _dir: tempfile::TempDir,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// [`spawn_app`] with a changed configuration.
pub async fn spawn_app_with(change: impl FnOnce(&mut Config)) -> TestApp {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("harrier.db");
    let store = Store::open(&db).await.expect("open store");
    let mut config = Config {
        db,
        ..Config::default()
    };
    change(&mut config);
    TestApp {
        state: AppState::new(store, config),
        _dir: dir,
    }
}

/// A response read whole.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: String,
    /// The `Location` header, when there is one.
    pub location: Option<String>,
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
