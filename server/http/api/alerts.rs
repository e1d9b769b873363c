//! The alerts part of the JSON API.
//!
//! - `GET /api/v1/alerts` → `[AlertView…]`: the active alerts, `{"rule", "labels",
//!   "state": "pending"|"firing", "value", "active_since_ms", "fired_at_ms", "severity",
//!   "summary"}`, firing first;
//! - `GET /api/v1/alerts/history?rule=&limit=&from=&to=&route_id=&run_id=` →
//!   `[HistoryRow…]` newest first (`limit` default 200, at most 5000): `{"id", "rule",
//!   "labels", "change": "pending"|"firing"|"resolved"|"inactive", "value", "at_ms"}`.
//!   `from` / `to` are unix ms; with `from`, alerts pending or firing at `from` also get
//!   their last earlier row. `route_id` keeps the alerts of that route (its `service`,
//!   `instance` and `route` labels; 404 if unknown), `run_id` those of that live run (its
//!   `run` label, from rules that watch a scenario's live runs);
//! - `GET /api/v1/alert-rules` → `[StoredRule…]` (the rule with `origin` and `updated_at_ms`);
//! - `POST /api/v1/alert-rules` with a rule (see [`Rule`]) → 201 `StoredRule`;
//! - `POST /api/v1/alert-rules/validate` with a rule → 200 `{"ok": true, "rule": Rule}` (the
//!   rule as it would be stored, defaults filled in), or the same 400 as a save; nothing is
//!   stored;
//! - `GET|PUT|DELETE /api/v1/alert-rules/{name}` → `StoredRule` | `StoredRule` | 204.
//!   Rules from `harrier.toml` are changed there, not here (400).
//!
//! - `GET /api/v1/silences` → `[Silence…]` newest first: `{"id", "matchers": [{"name",
//!   "value", "op": "="|"!="|"=~"|"!~"}], "starts_at_ms", "ends_at_ms", "comment",
//!   "created_by", "state": "active"|"pending"|"expired"}` (expired ones kept 7 days);
//! - `POST /api/v1/silences` with `{"matchers", "starts_at_ms"?, "ends_at_ms"? |
//!   "duration"?, "comment", "created_by"?}` → 201 `Silence`;
//! - `DELETE /api/v1/silences/{id}` → 204 (expired now); 404 if unknown.
//!
//! - `GET /api/v1/alert-channels` → `[ChannelView…]` by name: `{"channel": ChannelSpec,
//!   "origin": "config"|"api", "updated_at_ms" (null for config), "last_delivery":
//!   {"at_ms", "status", "error", "firing", "resolved"} | null}` (the newest entry of the
//!   delivery log, test sends included). `ChannelSpec` is `[[alerts.channels]]` as JSON:
//!   `{"name", "kind": "webhook"|"slack"|"alertmanager", "url", "timeout_s", "matchers",
//!   "group_by", "group_wait", "group_interval", "repeat_interval", "send_resolved"}`
//!   (durations as `"30s"`, defaults Alertmanager's). A `slack` channel's URL is a secret:
//!   answers show it masked to scheme and host (`https://hooks.slack.com/…`);
//! - `POST /api/v1/alert-channels` with a `ChannelSpec` → 201 `ChannelView`; 409 `{"error",
//!   "field": "name"}` when the name is taken, by a stored channel or one of `harrier.toml`;
//! - `GET|PUT|DELETE /api/v1/alert-channels/{name}` → `ChannelView` | `ChannelView` | 204.
//!   A PUT may rename; without `url` (or with it empty or masked as answered) it keeps the
//!   stored URL. Channels of `harrier.toml` are changed there, not here (409);
//! - `POST /api/v1/alert-channels/{name}/test` → 200 `{"status": HTTP status | null,
//!   "error": text | null}`: one test notification sent now in the channel's format
//!   (see [`notify::send_test`]), logged in the delivery log; 404 if unknown.
//!
//! A channel added, changed or deleted here counts from the dispatcher's next pass (within
//! a second): a new channel gets the alerts that fire from then on (the evaluator's
//! notices are taken once, so alerts already firing are not sent to it);
//! deleting one drops its notification groups.
//!
//! Errors are `{"error": "…"}`; a rule or channel that does not validate is answered
//! `{"error": "…", "field": "threshold"}` (the field as named in the JSON, dotted for
//! nested ones: `subject.route`); a silence that does not validate names the field in the
//! message.

use crate::domain::auth::Permission::*;
use crate::http::table::Routes;
use crate::http::table::methods::*;
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};

use serde::Deserialize;

use crate::domain::alerts::channel::ChannelSpec;
use crate::domain::alerts::rule::Rule;
use crate::domain::alerts::silence::{NewSilence, Silence};
use crate::domain::alerts::{AlertView, ChannelView};
use crate::error::{Error, Result};
use crate::services::alerts::notify;
use crate::state::AppState;
use crate::store::{HistoryFilter, HistoryRow, StoredRule};

/// Routes of the alerts API.
pub fn routes() -> Routes {
    Routes::new()
        .route("/api/v1/alerts", GET, Read, get(list_alerts))
        .route("/api/v1/alerts/history", GET, Read, get(history))
        .route("/api/v1/alert-rules", GET, Read, get(list_rules))
        .route("/api/v1/alert-rules", POST, Write, post(create_rule))
        .route(
            "/api/v1/alert-rules/validate",
            POST,
            Write,
            post(validate_rule),
        )
        .route("/api/v1/alert-rules/{name}", GET, Read, get(get_rule))
        .route("/api/v1/alert-rules/{name}", PUT, Write, put(update_rule))
        .route(
            "/api/v1/alert-rules/{name}",
            DELETE,
            Write,
            delete(delete_rule),
        )
        .route("/api/v1/silences", GET, Read, get(list_silences))
        .route("/api/v1/silences", POST, Write, post(create_silence))
        .route(
            "/api/v1/silences/{id}",
            DELETE,
            Write,
            delete(expire_silence),
        )
        .route("/api/v1/alert-channels", GET, Read, get(list_channels))
        .route("/api/v1/alert-channels", POST, Write, post(create_channel))
        .route("/api/v1/alert-channels/{name}", GET, Read, get(get_channel))
        .route(
            "/api/v1/alert-channels/{name}",
            PUT,
            Write,
            put(update_channel),
        )
        .route(
            "/api/v1/alert-channels/{name}",
            DELETE,
            Write,
            delete(delete_channel),
        )
        .route(
            "/api/v1/alert-channels/{name}/test",
            POST,
            Write,
            post(test_channel),
        )
}

async fn list_alerts(State(state): State<AppState>) -> Result<Json<Vec<AlertView>>> {
    Ok(Json(
        crate::views::alerts::active_alerts(&state.store, crate::now_ms()).await?,
    ))
}

#[derive(Deserialize)]
struct HistoryQuery {
    rule: Option<String>,
    limit: Option<String>,
    from: Option<String>,
    to: Option<String>,
    route_id: Option<String>,
    run_id: Option<String>,
}

/// An optional integer query parameter: absent or empty is `None`.
fn int_param(name: &str, v: Option<&str>) -> Result<Option<i64>> {
    match v.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some(s) => s
            .parse::<i64>()
            .map(Some)
            .map_err(|_| Error::BadRequest(format!("{name} must be an integer, got {s:?}"))),
    }
}

async fn history(
    State(state): State<AppState>,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<Vec<HistoryRow>>> {
    let limit = match q.limit.as_deref().filter(|s| !s.is_empty()) {
        None => 200,
        Some(s) => s
            .parse::<i64>()
            .ok()
            .filter(|n| (1..=5000).contains(n))
            .ok_or_else(|| {
                Error::BadRequest(format!("limit must be a number from 1 to 5000, got {s:?}"))
            })?,
    };
    let mut filter = HistoryFilter {
        rule: q.rule.filter(|s| !s.is_empty()),
        from_ms: int_param("from", q.from.as_deref())?,
        to_ms: int_param("to", q.to.as_deref())?,
        ..HistoryFilter::default()
    };
    if let (Some(f), Some(t)) = (filter.from_ms, filter.to_ms)
        && f > t
    {
        return Err(Error::BadRequest(format!(
            "from ({f}) must not be after to ({t})"
        )));
    }
    if let Some(id) = int_param("route_id", q.route_id.as_deref())? {
        let labels = crate::views::alerts::route_subject(&state.store, id)
            .await?
            .ok_or_else(|| Error::NotFound(format!("route {id}")))?;
        filter.labels.extend(labels);
    }
    if let Some(id) = int_param("run_id", q.run_id.as_deref())? {
        filter.labels.insert("run".to_string(), id.to_string());
    }
    Ok(Json(
        state.store.alert_history_filtered(&filter, limit).await?,
    ))
}

async fn list_rules(State(state): State<AppState>) -> Result<Json<Vec<StoredRule>>> {
    Ok(Json(state.store.list_alert_rules().await?))
}

/// The field a JSON body error is about: serde's path before the first ": " of the
/// message (`for: expected a duration …` → `for`), when there is one.
fn json_error_field(text: &str) -> Option<String> {
    let detail = text.split_once("target type: ").map(|(_, d)| d)?;
    if let Some(rest) = detail.strip_prefix("missing field `") {
        return rest.split_once('`').map(|(f, _)| f.to_string());
    }
    let (path, _) = detail.split_once(": ")?;
    let ok = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.[]".contains(c));
    ok.then(|| path.to_string())
}

/// The rule in a request body, checked; errors name the field (see [`Error::Field`]).
pub fn parse_rule(body: std::result::Result<Json<Rule>, JsonRejection>) -> Result<Rule> {
    let Json(rule) = body.map_err(|e| {
        let text = e.body_text();
        let message = format!("alert rule: {text}");
        match json_error_field(&text) {
            Some(field) => Error::Field { field, message },
            None => Error::BadRequest(message),
        }
    })?;
    rule.validate().map_err(|e| Error::Field {
        field: e.field.to_string(),
        message: e.to_string(),
    })?;
    Ok(rule)
}

async fn validate_rule(
    body: std::result::Result<Json<Rule>, JsonRejection>,
) -> Result<Json<serde_json::Value>> {
    let rule = parse_rule(body)?;
    Ok(Json(serde_json::json!({ "ok": true, "rule": rule })))
}

async fn stored(state: &AppState, name: &str) -> Result<StoredRule> {
    state
        .store
        .get_alert_rule(name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("alert rule {name:?}")))
}

async fn create_rule(
    State(state): State<AppState>,
    body: std::result::Result<Json<Rule>, JsonRejection>,
) -> Result<Response> {
    let rule = parse_rule(body)?;
    if !state
        .store
        .insert_alert_rule(&rule, "api", crate::now_ms())
        .await?
    {
        return Err(Error::Field {
            field: "name".into(),
            message: format!(
                "an alert rule named {:?} exists; change it with PUT or pick another name",
                rule.name
            ),
        });
    }
    Ok((StatusCode::CREATED, Json(stored(&state, &rule.name).await?)).into_response())
}

async fn get_rule(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<StoredRule>> {
    Ok(Json(stored(&state, &name).await?))
}

fn not_from_config(s: &StoredRule) -> Result<()> {
    if s.origin == "config" {
        return Err(Error::BadRequest(format!(
            "alert rule {:?} is defined in harrier.toml; change it there",
            s.rule.name
        )));
    }
    Ok(())
}

async fn update_rule(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: std::result::Result<Json<Rule>, JsonRejection>,
) -> Result<Json<StoredRule>> {
    let rule = parse_rule(body)?;
    not_from_config(&stored(&state, &name).await?)?;
    if rule.name != name && state.store.get_alert_rule(&rule.name).await?.is_some() {
        return Err(Error::Field {
            field: "name".into(),
            message: format!(
                "an alert rule named {:?} exists; pick another name",
                rule.name
            ),
        });
    }
    if !state
        .store
        .update_alert_rule(&name, &rule, crate::now_ms())
        .await?
    {
        return Err(Error::NotFound(format!("alert rule {name:?}")));
    }
    Ok(Json(stored(&state, &rule.name).await?))
}

async fn delete_rule(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    not_from_config(&stored(&state, &name).await?)?;
    if !state
        .store
        .delete_alert_rule(&name, crate::now_ms())
        .await?
    {
        return Err(Error::NotFound(format!("alert rule {name:?}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn list_silences(State(state): State<AppState>) -> Result<Json<Vec<Silence>>> {
    Ok(Json(state.store.list_silences(crate::now_ms()).await?))
}

async fn create_silence(
    State(state): State<AppState>,
    body: std::result::Result<Json<NewSilence>, JsonRejection>,
) -> Result<Response> {
    let Json(new) = body.map_err(|e| Error::BadRequest(format!("silence: {}", e.body_text())))?;
    let now = crate::now_ms();
    let spec = new
        .check(now)
        .map_err(|e| Error::BadRequest(format!("silence: {e}")))?;
    let silence = state.store.insert_silence(&spec, now).await?;
    Ok((StatusCode::CREATED, Json(silence)).into_response())
}

async fn expire_silence(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let id: i64 = id
        .parse()
        .map_err(|_| Error::NotFound(format!("silence {id:?}")))?;
    if !state.store.expire_silence(id, crate::now_ms()).await? {
        return Err(Error::NotFound(format!("silence {id}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn list_channels(State(state): State<AppState>) -> Result<Json<Vec<ChannelView>>> {
    Ok(Json(
        crate::views::alerts::channel_views(&state.store, &state.config.alerts.channels).await?,
    ))
}

/// The channel of `harrier.toml` called `name`, if any.
fn config_channel<'a>(state: &'a AppState, name: &str) -> Option<&'a ChannelSpec> {
    state.config.alerts.channels.iter().find(|c| c.name == name)
}

/// 409 for a channel of `harrier.toml`: it is changed there.
fn not_config_channel(state: &AppState, name: &str) -> Result<()> {
    if config_channel(state, name).is_some() {
        return Err(Error::Conflict {
            field: None,
            message: format!(
                "alert channel {name:?} is defined in harrier.toml ([[alerts.channels]]); \
                 edit it there and restart harrier"
            ),
        });
    }
    Ok(())
}

/// 409 naming the field `name`.
fn name_taken(name: &str, by_config: bool) -> Error {
    Error::Conflict {
        field: Some("name".into()),
        message: if by_config {
            format!("alert channel {name:?} is defined in harrier.toml; pick another name")
        } else {
            format!(
                "an alert channel named {name:?} exists; change it with PUT or pick another name"
            )
        },
    }
}

/// The channel in a request body, checked; errors name the field (see [`Error::Field`]).
/// With `stored` (a PUT), a missing, empty or masked `url` is the stored channel's URL.
fn parse_channel(
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
    stored: Option<&ChannelSpec>,
) -> Result<ChannelSpec> {
    let Json(mut value) =
        body.map_err(|e| Error::BadRequest(format!("alert channel: {}", e.body_text())))?;
    if let (Some(stored), Some(obj)) = (stored, value.as_object_mut()) {
        let keep = match obj.get("url") {
            None | Some(serde_json::Value::Null) => true,
            Some(serde_json::Value::String(u)) => u.is_empty() || *u == stored.masked_url(),
            Some(_) => false,
        };
        if keep {
            obj.insert("url".into(), stored.url.expose().into());
        }
    }
    let bytes = serde_json::to_vec(&value).unwrap_or_default();
    let Json(channel) = Json::<ChannelSpec>::from_bytes(&bytes).map_err(|e| {
        let text = e.body_text();
        let message = format!("alert channel: {text}");
        match json_error_field(&text) {
            Some(field) => Error::Field { field, message },
            None => Error::BadRequest(message),
        }
    })?;
    channel.validate().map_err(|e| Error::Field {
        field: e.field.to_string(),
        message: format!("alert channel {:?}: {e}", channel.name),
    })?;
    Ok(channel)
}

/// A channel whose URL the egress policy refuses outright (an address literal it refuses,
/// a host name `deny` names) is refused when it is saved; names are decided again, on
/// their addresses, at every send.
fn egress_allowed(state: &AppState, channel: &ChannelSpec) -> Result<()> {
    match state.egress.policy().check_url(channel.url.expose()) {
        Ok(_) => Ok(()),
        Err(refusal) => Err(Error::Field {
            field: "url".into(),
            message: format!("alert channel {:?}: {refusal}", channel.name),
        }),
    }
}

async fn channel_view(state: &AppState, name: &str) -> Result<ChannelView> {
    crate::views::alerts::channel_views(&state.store, &state.config.alerts.channels)
        .await?
        .into_iter()
        .find(|v| v.channel.name == name)
        .ok_or_else(|| Error::NotFound(format!("alert channel {name:?}")))
}

async fn create_channel(
    State(state): State<AppState>,
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Response> {
    let channel = parse_channel(body, None)?;
    egress_allowed(&state, &channel)?;
    if config_channel(&state, &channel.name).is_some() {
        return Err(name_taken(&channel.name, true));
    }
    if !state
        .store
        .insert_channel(&channel, crate::now_ms())
        .await?
    {
        return Err(name_taken(&channel.name, false));
    }
    let view = channel_view(&state, &channel.name).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

async fn get_channel(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ChannelView>> {
    Ok(Json(channel_view(&state, &name).await?))
}

async fn update_channel(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: std::result::Result<Json<serde_json::Value>, JsonRejection>,
) -> Result<Json<ChannelView>> {
    not_config_channel(&state, &name)?;
    let stored = state
        .store
        .get_channel(&name)
        .await?
        .ok_or_else(|| Error::NotFound(format!("alert channel {name:?}")))?;
    let channel = parse_channel(body, Some(&stored.channel))?;
    egress_allowed(&state, &channel)?;
    if channel.name != name && config_channel(&state, &channel.name).is_some() {
        return Err(name_taken(&channel.name, true));
    }
    if !state
        .store
        .update_channel(&name, &channel, crate::now_ms())
        .await?
    {
        if state.store.get_channel(&channel.name).await?.is_some() {
            return Err(name_taken(&channel.name, false));
        }
        return Err(Error::NotFound(format!("alert channel {name:?}")));
    }
    Ok(Json(channel_view(&state, &channel.name).await?))
}

async fn delete_channel(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode> {
    not_config_channel(&state, &name)?;
    if !state.store.delete_channel(&name).await? {
        return Err(Error::NotFound(format!("alert channel {name:?}")));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// harrier's address for the links of a test message: `external_url` of `[alerts]` (or
/// `public_url` of `[server]`), else the address the request was sent to.
fn external_url(state: &AppState, headers: &HeaderMap) -> String {
    if let Some(u) = &state.config.alerts.external_url {
        return u.clone();
    }
    match headers.get(header::HOST).and_then(|h| h.to_str().ok()) {
        Some(host) => format!("http://{host}"),
        None => format!("http://{}", state.config.listen),
    }
}

async fn test_channel(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>> {
    let channel = match config_channel(&state, &name) {
        Some(c) => c.clone(),
        None => {
            state
                .store
                .get_channel(&name)
                .await?
                .ok_or_else(|| Error::NotFound(format!("alert channel {name:?}")))?
                .channel
        }
    };
    let delivery = notify::send_test(
        &notify::client(&state.egress),
        &channel,
        &external_url(&state, &headers),
        crate::now_ms(),
    )
    .await;
    state.store.log_delivery(&delivery).await?;
    if let Some(e) = &delivery.error {
        tracing::info!(channel = %name, error = %e, "test notification not delivered");
    }
    Ok(Json(serde_json::json!({
        "status": delivery.status,
        "error": delivery.error,
    })))
}

#[cfg(test)]
mod tests {
    use super::json_error_field;

    #[test]
    fn json_errors_name_their_field() {
        let text = "Failed to deserialize the JSON body into the target type: for: expected a \
                    duration such as 30s, 5m or 1h, got \"2 weeks\" at line 1 column 80";
        assert_eq!(json_error_field(text).as_deref(), Some("for"));
        let nested = "Failed to deserialize the JSON body into the target type: subject.route: \
                      invalid type: integer `3`, expected a string at line 1 column 20";
        assert_eq!(json_error_field(nested).as_deref(), Some("subject.route"));
        let root = "Failed to deserialize the JSON body into the target type: missing field \
                    `measure` at line 1 column 2";
        assert_eq!(json_error_field(root).as_deref(), Some("measure"));
        let odd =
            "Failed to deserialize the JSON body into the target type: expected value at line 1";
        assert_eq!(json_error_field(odd), None);
        assert_eq!(
            json_error_field("Expected request with `Content-Type: application/json`"),
            None
        );
    }
}
