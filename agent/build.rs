//! The OpenAPI document the agent serves (`GET /api/v1/openapi.json`) is
//! `docs/openapi.json`, kept pretty-printed for readers; the daemon carries
//! it without the whitespace outside strings (half its bytes), compressed
//! (zlib, a fifth of that), so the agent's image stays small. A unit test
//! keeps the file equal to what the vocabulary's types generate.

use std::path::Path;

fn main() {
    let source = Path::new("../docs/openapi.json");
    println!("cargo:rerun-if-changed={}", source.display());
    let text = match std::fs::read_to_string(source) {
        Ok(t) => t,
        Err(e) => panic!("cannot read {}: {e}", source.display()),
    };
    let out_dir = match std::env::var("OUT_DIR") {
        Ok(d) => d,
        Err(e) => panic!("OUT_DIR is not set: {e}"),
    };
    let packed = miniz_oxide::deflate::compress_to_vec_zlib(minify(&text).as_bytes(), 10);
    if let Err(e) = std::fs::write(Path::new(&out_dir).join("openapi.json.zlib"), packed) {
        panic!("cannot write the compressed document: {e}");
    }
}

/// JSON without the whitespace between tokens; strings (and their escapes)
/// are copied as they are.
fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_whitespace() {
            out.push(c);
        }
    }
    out
}
