//! The console's static files, embedded in the binary: its style sheet, its script, and htmx
//! 2.0.11 (taken unchanged from the `htmx.org` npm package's `dist/htmx.min.js`, licensed 0BSD;
//! `assets/README.md` says how to replace it).

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};

use super::{Problem, secure};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: [Asset; 3] = [
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../assets/console.css"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/console.js"),
    },
    Asset {
        name: "htmx.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../assets/htmx.min.js"),
    },
];

/// The entity tag of an asset: the gateway's version and the file's length and a checksum,
/// so that a new build is fetched again.
fn etag_of(asset: &Asset) -> String {
    let sum = asset.body.iter().fold(0x811c_9dc5_u32, |hash, byte| {
        (hash ^ u32::from(*byte)).wrapping_mul(0x0100_0193)
    });
    format!(
        "\"{}-{:x}-{sum:08x}\"",
        env!("CARGO_PKG_VERSION"),
        asset.body.len()
    )
}

/// `GET /ui/assets/{name}`: public (no session needed: they hold nothing secret), revalidated
/// with an entity tag.
pub(crate) async fn asset(
    request: HttpRequest,
    name: web::Path<String>,
) -> Result<HttpResponse, Problem> {
    let asset = ASSETS
        .iter()
        .find(|asset| asset.name == name.as_str())
        .ok_or_else(|| Problem::not_found("no such file"))?;
    let etag = etag_of(asset);
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        HttpResponse::NotModified().finish()
    } else {
        HttpResponse::Ok()
            .content_type(asset.content_type)
            .body(asset.body)
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    Ok(secure(response))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_htmx_is_the_published_file() {
        // The SHA-256 of htmx.org 2.0.11's dist/htmx.min.js as npm serves it; a changed file
        // must be a deliberate upgrade (assets/README.md).
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(ASSETS[2].body);
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!(hex, HTMX_SHA256);
    }

    const HTMX_SHA256: &str = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717";
}
