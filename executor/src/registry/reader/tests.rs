//! The reader against a scripted registry on loopback, and its parts.
use super::*;

#[test]
fn only_loopback_is_read_over_plain_http() {
    let o = Origin::of_registry("127.0.0.1:5000").unwrap();
    assert_eq!(
        (o.https, o.host.as_str(), o.port),
        (false, "127.0.0.1", 5000)
    );
    let o = Origin::of_registry("registry.example.com").unwrap();
    assert_eq!((o.https, o.port), (true, 443));
    assert_eq!(
        Origin::of_registry("docker.io").unwrap().host,
        "registry-1.docker.io"
    );
    let redirect: Uri = "http://storage.example.com/blob".parse().unwrap();
    assert!(Origin::of(&redirect, false).is_err());
    let local: Uri = "http://[::1]:9000/token".parse().unwrap();
    let o = Origin::of(&local, false).unwrap();
    assert_eq!((o.https, o.authority().as_str()), (false, "[::1]:9000"));
    let ftp: Uri = "ftp://127.0.0.1/x".parse().unwrap();
    assert!(Origin::of(&ftp, false).is_err());
    // An HTTPS registry cannot point the reads at a local port in the
    // clear; a loopback registry may.
    let https = Origin::of_registry("registry.example.com").unwrap();
    let local: Uri = "http://127.0.0.1:9000/token".parse().unwrap();
    assert!(https.named_by(&local).is_err());
    let plain = Origin::of_registry("127.0.0.1:5000").unwrap();
    assert!(plain.named_by(&local).is_ok());
}

#[test]
fn a_token_challenge_is_read_whatever_its_spacing() {
    let p = challenge_params(
        r#"realm="https://auth.example.com/token",service="registry.example.com", scope="repository:a/b:pull""#,
    );
    assert_eq!(p["realm"], "https://auth.example.com/token");
    assert_eq!(p["service"], "registry.example.com");
    assert_eq!(p["scope"], "repository:a/b:pull");
    assert_eq!(encode("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
}

#[test]
fn content_that_is_not_its_digest_is_refused() {
    let body = br#"{"config":{"digest":"x"}}"#;
    let digest = format!("sha256:{}", hex::encode(sha2::Sha256::digest(body)));
    assert!(verify(&digest, body).is_ok());
    assert!(verify(&digest, b"{}").is_err());
    assert!(check_digest_form("sha256:../../x").is_err());
}

fn sha(body: &str) -> String {
    format!(
        "sha256:{}",
        hex::encode(sha2::Sha256::digest(body.as_bytes()))
    )
}

/// A scripted registry on loopback: a token challenge, a token service
/// that wants the credentials, an index, a manifest and a config behind
/// a redirect. `tamper` serves the wrong config.
async fn scripted(tamper: bool) -> (u16, String, tokio::task::JoinHandle<Vec<String>>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = r#"{"created":"2026-12-01T00:00:00Z","config":{"Labels":{"org.opencontainers.image.version":"2.1.0","org.opencontainers.image.revision":"9c2d1e0"}}}"#;
    let manifest = format!(
        r#"{{"schemaVersion":2,"config":{{"digest":"{}","size":1}},"layers":[]}}"#,
        sha(config)
    );
    let index = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"digest":"sha256:{}","platform":{{"os":"windows","architecture":"{}"}}}},{{"digest":"{}","platform":{{"os":"linux","architecture":"{}"}}}}]}}"#,
        "f".repeat(64),
        platform_arch(),
        sha(&manifest),
        platform_arch()
    );
    let index_digest = sha(&index);
    let answer_digest = index_digest.clone();
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode("ci:s3cret-pw")
    );
    let server = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Ok(Ok((mut conn, _))) =
            tokio::time::timeout(Duration::from_secs(2), listener.accept()).await
        {
            let mut buf = vec![0u8; 8192];
            let n = conn.read(&mut buf).await.unwrap();
            let head = String::from_utf8_lossy(&buf[..n]).to_string();
            let path = head.split(' ').nth(1).unwrap_or_default().to_string();
            let auth = head
                .lines()
                .find_map(|l| l.strip_prefix("authorization: "))
                .unwrap_or_default()
                .to_string();
            seen.push(format!("{path} {auth}"));
            let (status, extra, body) = if path.starts_with("/token") {
                if auth == basic && path.contains("scope=repository%3Ashop%2Fapi%3Apull") {
                    ("200 OK", String::new(), r#"{"token":"tok-1"}"#.to_string())
                } else {
                    ("401 Unauthorized", String::new(), String::new())
                }
            } else if path == "/storage/config" {
                let body = if tamper { "{}" } else { config };
                ("200 OK", String::new(), body.to_string())
            } else if auth != "Bearer tok-1" {
                (
                    "401 Unauthorized",
                    format!("WWW-Authenticate: Bearer realm=\"http://127.0.0.1:{port}/token\",service=\"test\"\r\n"),
                    String::new(),
                )
            } else if path.ends_with(&index_digest) {
                ("200 OK", String::new(), index.clone())
            } else if path.ends_with(&sha(&manifest)) {
                ("200 OK", String::new(), manifest.clone())
            } else if path.ends_with(&sha(config)) {
                (
                    "307 Temporary Redirect",
                    "Location: /storage/config\r\n".to_string(),
                    String::new(),
                )
            } else {
                ("404 Not Found", String::new(), String::new())
            };
            let answer = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
                body.len()
            );
            conn.write_all(answer.as_bytes()).await.unwrap();
        }
        seen
    });
    (port, answer_digest, server)
}

fn credentials(password: &str) -> Credentials {
    Credentials {
        username: Some("ci".into()),
        password: Some(password.into()),
        identitytoken: None,
    }
}

fn session(port: u16, creds: &Credentials) -> Session<'_> {
    let reference = ImageRef::parse(&format!("127.0.0.1:{port}/shop/api:2")).unwrap();
    let tls = Arc::new(tls_config(None).unwrap());
    Session::new(tls, &reference, Some(creds)).unwrap()
}

#[tokio::test]
async fn labels_are_read_through_a_token_an_index_and_a_redirect() {
    drydock_daemon::tls::install_crypto_provider();
    let (port, index, server) = scripted(false).await;
    let creds = credentials("s3cret-pw");
    let config = within(Duration::from_secs(10), async {
        session(port, &creds).image_config(&index).await
    })
    .await
    .expect("the labels");
    assert_eq!(config.labels["org.opencontainers.image.version"], "2.1.0");
    assert_eq!(
        config.labels["org.opencontainers.image.revision"],
        "9c2d1e0"
    );
    assert_eq!(config.created.as_deref(), Some("2026-12-01T00:00:00Z"));
    let seen = server.await.unwrap();
    // Read again: from memory, the registry is not asked (it is gone).
    let again = session(port, &creds)
        .image_config(&index)
        .await
        .expect("remembered");
    assert_eq!(again, config);
    // The storage the blob redirects to never sees an authorization.
    let storage: Vec<_> = seen.iter().filter(|s| s.starts_with("/storage")).collect();
    assert_eq!(storage, vec!["/storage/config "], "{seen:#?}");
    // The credentials go to the token service only.
    assert!(
        seen.iter()
            .filter(|s| s.contains("Basic"))
            .all(|s| s.starts_with("/token")),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn a_config_that_is_not_its_digest_or_no_credentials_is_an_error() {
    drydock_daemon::tls::install_crypto_provider();
    let (port, index, server) = scripted(true).await;
    let creds = credentials("s3cret-pw");
    let err = session(port, &creds)
        .image_config(&index)
        .await
        .unwrap_err();
    assert!(err.0.contains("not sha256:"), "{err}");
    server.abort();
    let (port, index, server) = scripted(false).await;
    let wrong = credentials("wrong-pw");
    let err = session(port, &wrong)
        .image_config(&index)
        .await
        .unwrap_err();
    assert!(err.0.contains("token service"), "{err}");
    assert!(!err.0.contains("wrong-pw"), "{err}");
    server.abort();
}
