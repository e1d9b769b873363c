//! Static files (CSS, JS, the favicon, vendored uPlot), compiled into the binary and served
//! under `/static/`.
//!
//! Pages link each file by a name that carries its content's hash
//! (`/static/harrier.3f9a0c1d2e.css`, see [`url`]): such a name never changes meaning, so
//! it is served with `Cache-Control: public, max-age=31536000, immutable` and a browser
//! asks for it once per release. The plain name (`/static/harrier.css`) is still served,
//! revalidated each time (`no-cache` with an `ETag`, `304 Not Modified` when it matches).

use std::collections::HashMap;
use std::sync::OnceLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rust_embed::RustEmbed;

#[derive(RustEmbed)]
#[folder = "static/"]
struct Assets;

/// Hex digits of the content hash put in a file's name: 40 bits, plenty to tell the
/// releases of one file apart.
const HASH_DIGITS: usize = 10;

/// For each file: plain name → hashed name, and hashed name → (plain name, ETag).
struct Names {
    hashed: HashMap<String, String>,
    plain: HashMap<String, (String, String)>,
}

fn names() -> &'static Names {
    static NAMES: OnceLock<Names> = OnceLock::new();
    NAMES.get_or_init(|| {
        let mut names = Names {
            hashed: HashMap::new(),
            plain: HashMap::new(),
        };
        for file in Assets::iter() {
            let Some(data) = Assets::get(&file) else {
                continue;
            };
            let hex: String = data
                .metadata
                .sha256_hash()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let hashed = hashed_name(&file, &hex[..HASH_DIGITS]);
            names
                .plain
                .insert(hashed.clone(), (file.to_string(), format!("\"{hex}\"")));
            names.hashed.insert(file.to_string(), hashed);
        }
        names
    })
}

/// `dir/name.min.css` with hash `h` → `dir/name.min.h.css` (the hash before the last
/// extension, so the type is still read from the name).
fn hashed_name(file: &str, hash: &str) -> String {
    let slash = file.rfind('/').map_or(0, |i| i + 1);
    match file[slash..].rfind('.') {
        Some(dot) if dot > 0 => {
            let dot = slash + dot;
            format!("{}.{hash}{}", &file[..dot], &file[dot..])
        }
        _ => format!("{file}.{hash}"),
    }
}

/// The URL a page links static file `file` (a path under `static/`) by: its hashed name,
/// e.g. `url("harrier.css")` → `/static/harrier.3f9a0c1d2e.css`. A file that does not exist
/// keeps its plain name (and answers 404).
pub fn url(file: &str) -> String {
    match names().hashed.get(file) {
        Some(hashed) => format!("/static/{hashed}"),
        None => format!("/static/{file}"),
    }
}

/// `GET /static/{*path}`: a hashed name as immutable, a plain name revalidated by ETag.
pub async fn serve(Path(path): Path<String>, headers: HeaderMap) -> Response {
    let names = names();
    let (file, immutable) = match names.plain.get(&path) {
        Some((plain, _)) => (plain.as_str(), true),
        None => (path.as_str(), false),
    };
    let Some(data) = Assets::get(file) else {
        return (StatusCode::NOT_FOUND, "no such static file").into_response();
    };
    let etag = names
        .hashed
        .get(file)
        .and_then(|h| names.plain.get(h))
        .map(|(_, etag)| etag.clone())
        .unwrap_or_default();
    let cache = if immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let mime = mime_guess::from_path(file).first_or_octet_stream();
    let mut response_headers = HeaderMap::new();
    response_headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        response_headers.insert(header::ETAG, v);
    }
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    if matches && !etag.is_empty() {
        return (StatusCode::NOT_MODIFIED, response_headers).into_response();
    }
    if let Ok(v) = HeaderValue::from_str(mime.as_ref()) {
        response_headers.insert(header::CONTENT_TYPE, v);
    }
    (response_headers, data.data).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_goes_before_the_last_extension() {
        assert_eq!(hashed_name("harrier.css", "ab12"), "harrier.ab12.css");
        assert_eq!(
            hashed_name("vendor/uplot-1.6.32/uPlot.min.css", "ab12"),
            "vendor/uplot-1.6.32/uPlot.min.ab12.css"
        );
        assert_eq!(hashed_name("LICENSE", "ab12"), "LICENSE.ab12");
    }

    #[test]
    fn every_file_has_a_hashed_url_that_names_it() {
        let u = url("harrier.css");
        assert!(
            u.starts_with("/static/harrier.") && u.ends_with(".css"),
            "{u}"
        );
        assert_eq!(u.len(), "/static/harrier..css".len() + HASH_DIGITS);
        let hashed = u.trim_start_matches("/static/");
        assert_eq!(names().plain[hashed].0, "harrier.css");
        assert_eq!(url("missing.css"), "/static/missing.css");
    }
}
