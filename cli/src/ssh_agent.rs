//! An ssh-agent, asked to sign (the agent protocol of OpenSSH, over the
//! socket `$SSH_AUTH_SOCK` names): how an approver whose key never touches
//! disk signs an approval. The secret stays in the agent, or in the
//! security key behind it; the CLI sees the public key and the signature.

use std::io::{Read as _, Write as _};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{bail, Context as _};
use drydock_proto::approval::ssh::{put_string, SshPublicKey};

const FAILURE: u8 = 5;
const REQUEST_IDENTITIES: u8 = 11;
const IDENTITIES_ANSWER: u8 = 12;
const SIGN_REQUEST: u8 = 13;
const SIGN_RESPONSE: u8 = 14;
/// The longest answer read (a list of keys, or one signature).
const MAX_ANSWER: usize = 256 * 1024;
/// A security key waits for a touch.
const TIMEOUT: Duration = Duration::from_secs(90);

fn connect() -> anyhow::Result<UnixStream> {
    let path = std::env::var_os("SSH_AUTH_SOCK").context(
        "SSH_AUTH_SOCK is not set: start an ssh-agent (`eval $(ssh-agent)`) and add the key (`ssh-add`)",
    )?;
    let stream = UnixStream::connect(&path)
        .with_context(|| format!("cannot reach the ssh-agent at {}", path.to_string_lossy()))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    Ok(stream)
}

/// One request and its answer: (type, payload).
fn call(kind: u8, payload: &[u8]) -> anyhow::Result<(u8, Vec<u8>)> {
    let mut stream = connect()?;
    let mut frame = ((payload.len() + 1) as u32).to_be_bytes().to_vec();
    frame.push(kind);
    frame.extend_from_slice(payload);
    stream
        .write_all(&frame)
        .context("writing to the ssh-agent")?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .context("reading the ssh-agent's answer (a security key not touched in time?)")?;
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 || len > MAX_ANSWER {
        bail!("the ssh-agent answered {len} bytes, which is no answer drydock reads");
    }
    let mut body = vec![0u8; len];
    stream
        .read_exact(&mut body)
        .context("reading the ssh-agent's answer")?;
    let payload = body.split_off(1);
    Ok((body[0], payload))
}

/// A string of the wire encoding at the front of `buf`.
fn take_string<'a>(buf: &mut &'a [u8]) -> anyhow::Result<&'a [u8]> {
    let Some((len, rest)) = buf.split_first_chunk::<4>() else {
        bail!("the ssh-agent's answer is cut short");
    };
    let len = u32::from_be_bytes(*len) as usize;
    if len > rest.len() {
        bail!("the ssh-agent's answer is cut short");
    }
    let (s, rest) = rest.split_at(len);
    *buf = rest;
    Ok(s)
}

/// The keys the agent holds that can approve (Ed25519, P-256 and their
/// security-key kinds), with their comments.
pub fn identities() -> anyhow::Result<Vec<(SshPublicKey, String)>> {
    let (kind, answer) = call(REQUEST_IDENTITIES, &[])?;
    if kind != IDENTITIES_ANSWER {
        bail!("the ssh-agent refused to list its keys");
    }
    let mut buf = answer.as_slice();
    let Some((n, rest)) = buf.split_first_chunk::<4>() else {
        bail!("the ssh-agent's answer is cut short");
    };
    buf = rest;
    let mut keys = Vec::new();
    for _ in 0..u32::from_be_bytes(*n) {
        let blob = take_string(&mut buf)?;
        let comment = String::from_utf8_lossy(take_string(&mut buf)?).into_owned();
        if let Ok(key) = SshPublicKey::from_blob(blob) {
            keys.push((key, comment));
        }
    }
    Ok(keys)
}

/// The agent's signature blob by `key` over `data`.
pub fn sign(key: &SshPublicKey, data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut payload = Vec::new();
    put_string(&mut payload, &key.blob);
    put_string(&mut payload, data);
    payload.extend_from_slice(&0u32.to_be_bytes());
    let (kind, answer) = call(SIGN_REQUEST, &payload)?;
    match kind {
        SIGN_RESPONSE => {
            let mut buf = answer.as_slice();
            Ok(take_string(&mut buf)?.to_vec())
        }
        FAILURE => bail!(
            "the ssh-agent did not sign with {}: is the key loaded (`ssh-add -l`)? A security key needs a touch",
            key.kind.name()
        ),
        other => bail!("the ssh-agent answered message {other} to a signing request"),
    }
}
