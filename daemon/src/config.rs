//! Config files: YAML, unknown keys refused by the structs themselves, errors
//! that say which file and which key.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("config file {path} is invalid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config key `{key}` is invalid: {message}")]
    Invalid { key: &'static str, message: String },
}

/// An error naming `key`, for validation code.
pub fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

/// Read and parse `path`. serde_yaml_ng's messages already carry the key
/// path and position (`tls.cert: missing field ...`, `unknown field bogus`).
pub fn load_yaml<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_yaml_ng::from_str(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// Relative paths in a config file are relative to the file's folder, not to
/// wherever the daemon happened to be started.
pub fn resolve_relative(config_file: &Path, paths: &mut [&mut PathBuf]) {
    let Some(dir) = config_file.parent() else {
        return;
    };
    for p in paths.iter_mut() {
        if p.is_relative() {
            **p = dir.join(&**p);
        }
    }
}

/// A `host:port` socket address, or an error naming `key`.
pub fn socket_addr(key: &'static str, value: &str) -> Result<std::net::SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        invalid(
            key,
            format!("`{value}` is not an address like 127.0.0.1:7443"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sample {
        #[allow(dead_code)]
        name: String,
    }

    #[test]
    fn unknown_keys_and_missing_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.yaml");
        std::fs::write(&path, "name: a\nbogus: 1\n").unwrap();
        let err = load_yaml::<Sample>(&path).unwrap_err().to_string();
        assert!(err.contains("bogus") && err.contains("x.yaml"), "{err}");
        let err = load_yaml::<Sample>(&dir.path().join("none.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot read config file"), "{err}");
    }

    #[test]
    fn relative_paths_follow_the_config_file() {
        let mut a = PathBuf::from("certs/a.pem");
        let mut b = PathBuf::from("/abs/b.pem");
        resolve_relative(Path::new("/etc/drydock/agent.yaml"), &mut [&mut a, &mut b]);
        assert_eq!(a, PathBuf::from("/etc/drydock/certs/a.pem"));
        assert_eq!(b, PathBuf::from("/abs/b.pem"));
    }

    #[test]
    fn socket_addr_names_the_key() {
        assert!(socket_addr("listen", "127.0.0.1:1").is_ok());
        let err = socket_addr("listen", "nowhere").unwrap_err().to_string();
        assert!(err.contains("`listen`") && err.contains("nowhere"), "{err}");
    }
}
