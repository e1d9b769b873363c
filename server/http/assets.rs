//! Static files (CSS, JS, the favicon, vendored uPlot), compiled into the binary and served
//! under `/static/`.
//!
//! Pages link each file by a name that carries its content's hash
//! (`/static/harrier.3f9a0c1d2e.css`, see [`url`]): such a name never changes meaning, so
//! it is served with `Cache-Control: public, max-age=31536000, immutable` and a browser
//! asks for it once per release. The plain name (`/static/harrier.css`) is still served,
//! revalidated each time (`no-cache` with an `ETag`, `304 Not Modified` when it matches).
//!
//! Text files are compressed once, at their best (brotli quality 11, gzip level 9), the
//! first time they are asked for, and sent as the client accepts (`br`, else `gzip`,
//! else as they are); the compression layer leaves answers that carry a
//! `Content-Encoding` alone and compresses the dynamic ones fast.

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

/// A text file compressed both ways.
struct Packed {
    br: Vec<u8>,
    gzip: Vec<u8>,
}

/// `data` compressed with brotli (quality 11, window 2^22) and gzip (level 9).
fn pack(data: &[u8]) -> Packed {
    use std::io::Write;
    let mut br = Vec::with_capacity(data.len() / 3);
    {
        let mut w = brotli::CompressorWriter::new(&mut br, 4096, 11, 22);
        // Writing into a Vec cannot fail.
        let _ = w.write_all(data);
    }
    let mut gz = flate2::write::GzEncoder::new(
        Vec::with_capacity(data.len() / 3),
        flate2::Compression::best(),
    );
    let _ = gz.write_all(data);
    Packed {
        br,
        gzip: gz.finish().unwrap_or_default(),
    }
}

/// The compressed forms of text file `file` (made on first use, then kept).
fn packed(file: &str, data: &[u8]) -> std::sync::Arc<Packed> {
    static PACKED: OnceLock<std::sync::Mutex<HashMap<String, std::sync::Arc<Packed>>>> =
        OnceLock::new();
    let cache = PACKED.get_or_init(Default::default);
    if let Some(p) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(file) {
        return p.clone();
    }
    let p = std::sync::Arc::new(pack(data));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(file.to_string(), p.clone());
    p
}

/// The encoding to send, from `Accept-Encoding`: `br` when accepted, else `gzip`, else
/// none. A coding listed with `q=0` is refused.
fn accepted(headers: &HeaderMap) -> Option<&'static str> {
    let value = headers.get(header::ACCEPT_ENCODING)?.to_str().ok()?;
    let accepts = |name: &str| {
        value.split(',').any(|item| {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .and_then(|q| q.trim().parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            coding.eq_ignore_ascii_case(name) && !refused
        })
    };
    if accepts("br") {
        Some("br")
    } else if accepts("gzip") {
        Some("gzip")
    } else {
        None
    }
}

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
    let text = mime.type_() == mime_guess::mime::TEXT
        || mime.subtype() == mime_guess::mime::JAVASCRIPT
        || mime.subtype() == mime_guess::mime::SVG;
    if !text {
        return (response_headers, data.data).into_response();
    }
    response_headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    let Some(coding) = accepted(&headers) else {
        return (response_headers, data.data).into_response();
    };
    let packed = packed(file, &data.data);
    let body = if coding == "br" {
        packed.br.clone()
    } else {
        packed.gzip.clone()
    };
    response_headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
    (response_headers, body).into_response()
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
    fn br_is_preferred_gzip_next_and_q0_refuses() {
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
            accepted(&h)
        };
        assert_eq!(with("gzip, deflate, br, zstd"), Some("br"));
        assert_eq!(with("gzip"), Some("gzip"));
        assert_eq!(with("br;q=0, gzip;q=0.5"), Some("gzip"));
        assert_eq!(with("identity"), None);
        assert_eq!(accepted(&HeaderMap::new()), None);
    }

    #[test]
    fn packed_files_unpack_to_the_file() {
        use std::io::Read;
        let data = Assets::get("harrier.js").unwrap().data;
        let p = pack(&data);
        assert!(p.br.len() < data.len() / 2 && p.gzip.len() < data.len() / 2);
        let mut back = Vec::new();
        brotli::Decompressor::new(&p.br[..], 4096)
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, &data[..]);
        back.clear();
        flate2::read::GzDecoder::new(&p.gzip[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, &data[..]);
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
