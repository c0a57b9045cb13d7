//! Approver keys held by an ssh-agent (and so, for `sk-` keys, by a FIDO
//! security key): OpenSSH public keys and SSHSIG signatures
//! (`PROTOCOL.sshsig` of OpenSSH) over the exact claims bytes, in the
//! namespace [`NAMESPACE`].
//!
//! What is signed is `SSHSIG ‖ string(namespace) ‖ string("") ‖
//! string(hash) ‖ string(hash(claims))`, as `ssh-keygen -Y sign -n
//! drydock-approval` signs a file of the claims; the namespace keeps a
//! signature made for anything else (a git commit, a file) from counting
//! as an approval. A security key's signature covers that through its own
//! frame (the application's and the data's SHA-256, the flags and a
//! counter), and counts only with its user-presence flag set.

use ring::digest;

/// The SSHSIG namespace of an approval.
pub const NAMESPACE: &str = "drydock-approval";
/// User presence: the security key was touched.
const FLAG_USER_PRESENT: u8 = 0x01;
/// The longest SSHSIG blob read.
const MAX_SIGNATURE_BYTES: usize = 4096;

/// The key kinds an approver may hold in an ssh-agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshKind {
    Ed25519,
    SkEd25519,
    EcdsaP256,
    SkEcdsaP256,
}

impl SshKind {
    fn of(name: &str) -> Option<SshKind> {
        Some(match name {
            "ssh-ed25519" => SshKind::Ed25519,
            "sk-ssh-ed25519@openssh.com" => SshKind::SkEd25519,
            "ecdsa-sha2-nistp256" => SshKind::EcdsaP256,
            "sk-ecdsa-sha2-nistp256@openssh.com" => SshKind::SkEcdsaP256,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            SshKind::Ed25519 => "ssh-ed25519",
            SshKind::SkEd25519 => "sk-ssh-ed25519@openssh.com",
            SshKind::EcdsaP256 => "ecdsa-sha2-nistp256",
            SshKind::SkEcdsaP256 => "sk-ecdsa-sha2-nistp256@openssh.com",
        }
    }

    /// A FIDO security key's: its signatures carry flags and a counter.
    pub fn is_security_key(self) -> bool {
        matches!(self, SshKind::SkEd25519 | SshKind::SkEcdsaP256)
    }

    fn is_ed25519(self) -> bool {
        matches!(self, SshKind::Ed25519 | SshKind::SkEd25519)
    }
}

/// An OpenSSH public key of a kind above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshPublicKey {
    pub kind: SshKind,
    /// The key's wire form, as the agent and SSHSIG carry it.
    pub blob: Vec<u8>,
    /// The raw key: 32 bytes (Ed25519) or an uncompressed P-256 point.
    point: Vec<u8>,
    /// A security key's application (`ssh:` unless chosen otherwise).
    application: Option<String>,
}

/// Why an ssh key or signature is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SshError(pub String);

fn err<T>(m: impl Into<String>) -> Result<T, SshError> {
    Err(SshError(m.into()))
}

/// The SSH wire encoding, read.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Result<u32, SshError> {
        let (head, rest) = self
            .0
            .split_first_chunk::<4>()
            .ok_or_else(|| SshError("truncated".into()))?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn byte(&mut self) -> Result<u8, SshError> {
        let (b, rest) = self
            .0
            .split_first()
            .ok_or_else(|| SshError("truncated".into()))?;
        self.0 = rest;
        Ok(*b)
    }

    fn string(&mut self) -> Result<&'a [u8], SshError> {
        let len = self.u32()? as usize;
        if len > self.0.len() {
            return err("truncated");
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(s)
    }

    fn text(&mut self) -> Result<&'a str, SshError> {
        std::str::from_utf8(self.string()?).map_err(|_| SshError("not UTF-8".into()))
    }

    fn end(&self) -> Result<(), SshError> {
        match self.0.is_empty() {
            true => Ok(()),
            false => err("trailing bytes"),
        }
    }
}

/// `string` of the SSH wire encoding, appended.
pub fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_be_bytes());
    out.extend_from_slice(s);
}

impl SshPublicKey {
    /// A line of an `authorized_keys` or `.pub` file: `TYPE BASE64
    /// [COMMENT]`.
    pub fn parse(line: &str) -> Result<SshPublicKey, SshError> {
        use base64::Engine as _;
        let mut words = line.split_whitespace();
        let (Some(name), Some(body)) = (words.next(), words.next()) else {
            return err("not `TYPE BASE64 [COMMENT]`");
        };
        let blob = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|_| SshError("its key is not base64".into()))?;
        let key = SshPublicKey::from_blob(&blob)?;
        if key.kind.name() != name {
            return err(format!(
                "it says {name} but holds a {} key",
                key.kind.name()
            ));
        }
        Ok(key)
    }

    /// A key's wire form.
    pub fn from_blob(blob: &[u8]) -> Result<SshPublicKey, SshError> {
        let mut r = Reader(blob);
        let name = r.text()?;
        let Some(kind) = SshKind::of(name) else {
            return err(format!(
                "{} keys are not supported: use ssh-ed25519, ecdsa-sha2-nistp256 or their sk- (security key) kinds",
                name.chars().take(64).collect::<String>()
            ));
        };
        let point = if kind.is_ed25519() {
            let k = r.string()?;
            if k.len() != 32 {
                return err("an Ed25519 key is 32 bytes");
            }
            k.to_vec()
        } else {
            if r.text()? != "nistp256" {
                return err("an ecdsa-sha2-nistp256 key names curve nistp256");
            }
            let q = r.string()?;
            if q.len() != 65 || q[0] != 0x04 {
                return err("a P-256 key is an uncompressed point of 65 bytes");
            }
            q.to_vec()
        };
        let application = match kind.is_security_key() {
            true => Some(r.text()?.to_string()),
            false => None,
        };
        r.end()?;
        Ok(SshPublicKey {
            kind,
            blob: blob.to_vec(),
            point,
            application,
        })
    }

    /// The raw key: 32 bytes (Ed25519) or an uncompressed P-256 point.
    pub fn point(&self) -> &[u8] {
        &self.point
    }

    /// The `TYPE BASE64` line.
    pub fn to_line(&self) -> String {
        use base64::Engine as _;
        format!(
            "{} {}",
            self.kind.name(),
            base64::engine::general_purpose::STANDARD.encode(&self.blob)
        )
    }
}

/// What an ssh-agent is asked to sign for `message` (SSHSIG, SHA-512).
pub fn signed_data(message: &[u8]) -> Vec<u8> {
    hashed_data(&digest::SHA512, b"sha512", message)
}

fn hashed_data(hash: &'static digest::Algorithm, name: &[u8], message: &[u8]) -> Vec<u8> {
    let mut out = b"SSHSIG".to_vec();
    put_string(&mut out, NAMESPACE.as_bytes());
    put_string(&mut out, b"");
    put_string(&mut out, name);
    put_string(&mut out, digest::digest(hash, message).as_ref());
    out
}

/// The SSHSIG blob of `signature` (as the agent answered it) by `key`.
pub fn wrap(key: &SshPublicKey, signature: &[u8]) -> Vec<u8> {
    let mut out = b"SSHSIG".to_vec();
    out.extend_from_slice(&1u32.to_be_bytes());
    put_string(&mut out, &key.blob);
    put_string(&mut out, NAMESPACE.as_bytes());
    put_string(&mut out, b"");
    put_string(&mut out, b"sha512");
    put_string(&mut out, signature);
    out
}

/// Check an SSHSIG blob over `message` by `key`, in [`NAMESPACE`].
pub fn verify(sshsig: &[u8], message: &[u8], key: &SshPublicKey) -> Result<(), SshError> {
    if sshsig.len() > MAX_SIGNATURE_BYTES {
        return err("longer than any SSHSIG signature");
    }
    let body = sshsig
        .strip_prefix(b"SSHSIG")
        .ok_or_else(|| SshError("not an SSHSIG signature".into()))?;
    let mut r = Reader(body);
    if r.u32()? != 1 {
        return err("SSHSIG version is not 1");
    }
    if r.string()? != key.blob.as_slice() {
        return err("made by another key than the approver's");
    }
    let namespace = r.string()?;
    if namespace != NAMESPACE.as_bytes() {
        return err(format!(
            "made for namespace `{}`, not `{NAMESPACE}`",
            String::from_utf8_lossy(namespace)
                .chars()
                .take(64)
                .collect::<String>()
        ));
    }
    let _reserved = r.string()?;
    let (hash, hash_name): (&'static digest::Algorithm, &[u8]) = match r.string()? {
        b"sha512" => (&digest::SHA512, b"sha512"),
        b"sha256" => (&digest::SHA256, b"sha256"),
        _ => return err("hash is neither sha512 nor sha256"),
    };
    let signature = r.string()?;
    r.end()?;
    check(key, signature, &hashed_data(hash, hash_name, message))
}

/// A signature blob (`string(type) ‖ string(sig) [‖ flags ‖ counter]`)
/// over `data`.
fn check(key: &SshPublicKey, signature: &[u8], data: &[u8]) -> Result<(), SshError> {
    let mut r = Reader(signature);
    if r.text()? != key.kind.name() {
        return err("its signature is of another key kind");
    }
    let raw = r.string()?;
    let signed = match &key.application {
        Some(application) => {
            let flags = r.byte()?;
            let counter = r.u32()?;
            if flags & FLAG_USER_PRESENT == 0 {
                return err("the security key was not touched (no user presence)");
            }
            let mut framed = digest::digest(&digest::SHA256, application.as_bytes())
                .as_ref()
                .to_vec();
            framed.push(flags);
            framed.extend_from_slice(&counter.to_be_bytes());
            framed.extend_from_slice(digest::digest(&digest::SHA256, data).as_ref());
            framed
        }
        None => data.to_vec(),
    };
    r.end()?;
    let ok = if key.kind.is_ed25519() {
        ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key.point)
            .verify(&signed, raw)
    } else {
        let fixed = ecdsa_fixed(raw)?;
        ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_FIXED,
            &key.point,
        )
        .verify(&signed, &fixed)
    };
    ok.map_err(|_| SshError("the signature does not verify".into()))
}

/// An SSH ECDSA signature (`mpint r ‖ mpint s`) as 64 fixed bytes.
fn ecdsa_fixed(raw: &[u8]) -> Result<[u8; 64], SshError> {
    let mut r = Reader(raw);
    let mut out = [0u8; 64];
    for half in out.chunks_mut(32) {
        let n = r.string()?;
        let n = match n.split_first() {
            Some((0, rest)) => rest,
            _ => n,
        };
        if n.len() > 32 {
            return err("an ECDSA signature's number is too long");
        }
        half[32 - n.len()..].copy_from_slice(n);
    }
    r.end()?;
    Ok(out)
}

#[cfg(test)]
mod tests;
