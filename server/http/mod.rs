//! The HTTP surface: thin handlers that parse the request, call views or services, and
//! render JSON ([`api`]) or HTML ([`console`]).
//!
//! The JSON API and the console never import each other; what both show comes from
//! [`crate::views`].

pub mod api;
pub mod assets;
pub mod auth;
pub mod conn;
pub mod console;
pub mod error;
pub mod guard;
pub mod params;
pub mod table;
