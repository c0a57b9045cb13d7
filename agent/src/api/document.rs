//! The OpenAPI document's bytes as the daemon carries them: compressed by
//! `build.rs` (zlib), sent so to a client that accepts `deflate`, and
//! inflated once for any other.

use std::sync::OnceLock;

/// `docs/openapi.json`, minified, as zlib.
const PACKED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/openapi.json.zlib"));

/// The body for a request with this `Accept-Encoding`, and the
/// `Content-Encoding` it is in (`None`: the JSON as it is).
pub fn document_for(accept_encoding: &str) -> (Vec<u8>, Option<&'static str>) {
    if accepts_deflate(accept_encoding) {
        return (PACKED.to_vec(), Some("deflate"));
    }
    static PLAIN: OnceLock<Vec<u8>> = OnceLock::new();
    let plain = PLAIN.get_or_init(|| {
        // Made by build.rs from the repository's file: it inflates, or the
        // build is broken (and the unit test below says so).
        miniz_oxide::inflate::decompress_to_vec_zlib(PACKED).unwrap_or_default()
    });
    (plain.clone(), None)
}

/// Whether `deflate` is among the codings, with a weight above zero.
fn accepts_deflate(header: &str) -> bool {
    header.split(',').any(|coding| {
        let mut parts = coding.split(';').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let zero = parts.any(|p| {
            p.strip_prefix("q=")
                .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q <= 0.0))
        });
        name.eq_ignore_ascii_case("deflate") && !zero
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_is_the_repositorys_compressed_or_not() {
        let repo: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json"))
                .expect("docs/openapi.json"),
        )
        .expect("JSON");
        let (plain, none) = document_for("gzip, br");
        assert_eq!(none, None);
        let served: serde_json::Value = serde_json::from_slice(&plain).expect("served JSON");
        assert_eq!(served, repo);
        let (packed, enc) = document_for("gzip, deflate");
        assert_eq!(enc, Some("deflate"));
        assert!(
            packed.len() * 3 < plain.len(),
            "{} of {}",
            packed.len(),
            plain.len()
        );
        assert_eq!(
            miniz_oxide::inflate::decompress_to_vec_zlib(&packed).expect("zlib"),
            plain
        );
        for (header, accepted) in [
            ("deflate", true),
            ("Deflate;q=0.5", true),
            ("deflate;q=0", false),
            ("deflate; q=0.0, gzip", false),
            ("", false),
            ("identity", false),
        ] {
            assert_eq!(accepts_deflate(header), accepted, "{header}");
        }
    }
}
