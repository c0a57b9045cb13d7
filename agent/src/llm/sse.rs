//! A minimal Server-Sent Events decoder: bytes in, `(event, data)` out.
//! Events end at a blank line; several `data:` lines join with `\n`.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: Option<String>,
    data: Vec<String>,
}

/// Bound on one unterminated line, so a hostile server cannot grow memory
/// without end.
const MAX_LINE: usize = 4 * 1024 * 1024;

impl SseDecoder {
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<SseEvent>, String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() || self.event.is_some() {
                    out.push(SseEvent {
                        event: self.event.take(),
                        data: std::mem::take(&mut self.data).join("\n"),
                    });
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => self.data.push(value.to_string()),
                "event" => self.event = Some(value.to_string()),
                _ => {}
            }
        }
        if self.buf.len() > MAX_LINE {
            return Err("an SSE line exceeds 4 MiB".into());
        }
        Ok(out)
    }

    /// An event the stream left without its closing blank line.
    pub fn finish(&mut self) -> Option<SseEvent> {
        if self.data.is_empty() {
            return None;
        }
        Some(SseEvent {
            event: self.event.take(),
            data: std::mem::take(&mut self.data).join("\n"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks_are_reassembled() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"data: {\"a\"").unwrap().is_empty());
        let ev = d
            .push(b":1}\r\n\r\nevent: x\ndata: y\n\n: ping\n\n")
            .unwrap();
        assert_eq!(ev.len(), 2);
        assert_eq!(ev[0].data, "{\"a\":1}");
        assert_eq!(ev[1].event.as_deref(), Some("x"));
    }
}
