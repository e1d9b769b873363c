//! The route table: every route of the HTTP surface with the permission it requires, and
//! the router built from it.
//!
//! Each resource and page group returns a [`Routes`] (`http::api::runs::routes()`, …);
//! `app::routes()` merges them. A route cannot be added without a
//! [`Permission`]: [`Routes::route`] takes one and puts its check
//! ([`crate::http::auth::authorize`]) in front of the handler, and records
//! `(method, path, permission)` in the table that the permission test walks
//! (`tests/it/permissions.rs`). This is the only file that builds an axum `Router`
//! from handlers.

use axum::Router;
use axum::http::Method;
use axum::middleware;
use axum::routing::MethodRouter;

use crate::domain::auth::Permission;
use crate::state::AppState;

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    pub method: Method,
    /// The route's path as axum matches it (`/api/v1/runs/{id}`).
    pub path: &'static str,
    pub permission: Permission,
}

/// Routes under construction: the router and its table, kept together.
pub struct Routes {
    router: Router<AppState>,
    table: Vec<RouteEntry>,
}

impl Default for Routes {
    fn default() -> Self {
        Routes::new()
    }
}

impl Routes {
    pub fn new() -> Routes {
        Routes {
            router: Router::new(),
            table: Vec::new(),
        }
    }

    /// Adds `handler` (a method router for exactly `method`, e.g. `get(list_runs)`) at
    /// `path`, requiring `permission`.
    pub fn route(
        mut self,
        path: &'static str,
        method: Method,
        permission: Permission,
        handler: MethodRouter<AppState>,
    ) -> Routes {
        let guarded = handler.route_layer(middleware::from_fn_with_state(
            permission,
            crate::http::auth::authorize,
        ));
        self.router = self.router.route(path, guarded);
        self.table.push(RouteEntry {
            method,
            path,
            permission,
        });
        self
    }

    /// Both sets of routes.
    pub fn merge(mut self, other: Routes) -> Routes {
        self.router = self.router.merge(other.router);
        self.table.extend(other.table);
        self
    }

    /// Applies `f` to the router (a layer over every route so far); the table is kept.
    pub fn map_router(mut self, f: impl FnOnce(Router<AppState>) -> Router<AppState>) -> Routes {
        self.router = f(self.router);
        self
    }

    /// The table: one entry per method and path.
    pub fn table(&self) -> &[RouteEntry] {
        &self.table
    }

    /// The router, for `app::router`.
    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}

/// The methods as bare names, for tables that read like one (`.route(path, GET, Read, …)`).
pub mod methods {
    use axum::http::Method;
    pub const GET: Method = Method::GET;
    pub const POST: Method = Method::POST;
    pub const PUT: Method = Method::PUT;
    pub const PATCH: Method = Method::PATCH;
    pub const DELETE: Method = Method::DELETE;
}
