//! A tar stream as the engine's build endpoint reads a context: regular
//! files, executables and symbolic links, in ustar form with a PAX header
//! for a name or a link target too long for it. Directories are implied
//! by the paths (the engine makes them).

/// One tar block.
const BLOCK: usize = 512;

/// What a member is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File { executable: bool },
    Symlink,
}

/// A tar archive being written, in memory.
#[derive(Debug, Default)]
pub struct TarWriter {
    out: Vec<u8>,
}

impl TarWriter {
    pub fn new() -> TarWriter {
        TarWriter::default()
    }

    pub fn len(&self) -> usize {
        self.out.len()
    }

    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Append a member: `data` is a file's content, or a link's target.
    pub fn append(&mut self, path: &str, kind: Kind, data: &[u8], mtime: u64) {
        let (mode, flag, size, link) = match kind {
            Kind::File { executable } => (
                if executable { 0o755 } else { 0o644 },
                b'0',
                data.len() as u64,
                &[][..],
            ),
            Kind::Symlink => (0o777, b'2', 0, data),
        };
        let mut pax = Vec::new();
        if path.len() > 100 {
            pax.extend(pax_record("path", path.as_bytes()));
        }
        if link.len() > 100 {
            pax.extend(pax_record("linkpath", link));
        }
        if !pax.is_empty() {
            let h = header(b"././@PaxHeader", 0o644, pax.len() as u64, b'x', b"", mtime);
            self.out.extend_from_slice(&h);
            self.push_padded(&pax);
        }
        let short = |b: &[u8]| -> Vec<u8> { b.iter().copied().take(100).collect() };
        let h = header(
            &short(path.as_bytes()),
            mode,
            size,
            flag,
            &short(link),
            mtime,
        );
        self.out.extend_from_slice(&h);
        if matches!(kind, Kind::File { .. }) {
            self.push_padded(data);
        }
    }

    /// The archive, with its two closing zero blocks.
    pub fn finish(mut self) -> Vec<u8> {
        self.out.extend_from_slice(&[0u8; 2 * BLOCK]);
        self.out
    }

    fn push_padded(&mut self, data: &[u8]) {
        self.out.extend_from_slice(data);
        let rest = data.len() % BLOCK;
        if rest != 0 {
            self.out.extend(std::iter::repeat_n(0u8, BLOCK - rest));
        }
    }
}

/// `"<len> key=value\n"`, where `<len>` counts the whole record, itself
/// included.
fn pax_record(key: &str, value: &[u8]) -> Vec<u8> {
    let body = key.len() + value.len() + 3; // ' ', '=', '\n'
    let mut len = body + 1;
    while len != body + len.to_string().len() {
        len = body + len.to_string().len();
    }
    let mut r = format!("{len} {key}=").into_bytes();
    r.extend_from_slice(value);
    r.push(b'\n');
    r
}

fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(&text.as_bytes()[text.len() - width..]);
    field[width] = 0;
}

fn header(name: &[u8], mode: u32, size: u64, flag: u8, link: &[u8], mtime: u64) -> [u8; BLOCK] {
    let mut h = [0u8; BLOCK];
    h[..name.len()].copy_from_slice(name);
    octal(&mut h[100..108], u64::from(mode));
    octal(&mut h[108..116], 0);
    octal(&mut h[116..124], 0);
    octal(&mut h[124..136], size);
    octal(&mut h[136..148], mtime);
    h[156] = flag;
    h[157..157 + link.len()].copy_from_slice(link);
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    // The checksum is computed with its own field as spaces.
    h[148..156].copy_from_slice(b"        ");
    let sum: u64 = h.iter().map(|&b| u64::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn pax_records_count_their_own_length() {
        for value in [&b"x"[..], &[b'a'; 95][..], &[b'a'; 200][..]] {
            let r = pax_record("path", value);
            let len: usize = std::str::from_utf8(&r[..r.iter().position(|&b| b == b' ').unwrap()])
                .unwrap()
                .parse()
                .unwrap();
            assert_eq!(len, r.len());
        }
    }

    /// The system's `tar` reads what this writes: names long and short,
    /// an executable, a link.
    #[test]
    fn tar_reads_the_archive_back() {
        let long = format!("{}/deep.txt", "d".repeat(120));
        let mut t = TarWriter::new();
        t.append(
            "Dockerfile",
            Kind::File { executable: false },
            b"FROM scratch\n",
            1_700_000_000,
        );
        t.append(
            "bin/run",
            Kind::File { executable: true },
            b"#!/bin/sh\n",
            1_700_000_000,
        );
        t.append(
            &long,
            Kind::File { executable: false },
            &[b'z'; 700],
            1_700_000_000,
        );
        t.append("link", Kind::Symlink, b"bin/run", 1_700_000_000);
        let bytes = t.finish();
        assert_eq!(bytes.len() % BLOCK, 0);
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("c.tar");
        std::fs::write(&archive, &bytes).unwrap();
        let out = Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(dir.path())
            .output()
            .expect("tar");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            std::fs::read(dir.path().join("Dockerfile")).unwrap(),
            b"FROM scratch\n"
        );
        assert_eq!(
            std::fs::read(dir.path().join(&long)).unwrap(),
            vec![b'z'; 700]
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("bin/run"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111, "executable");
        assert_eq!(
            std::fs::read_link(dir.path().join("link")).unwrap(),
            std::path::PathBuf::from("bin/run")
        );
    }
}
