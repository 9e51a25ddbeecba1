//! Streaming compact JSON.

use std::io::{self, BufWriter, Write};

/// A `Write` adapter counting the bytes that pass through it.
pub(super) struct Counting<W> {
    pub(super) inner: W,
    pub(super) bytes: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Minimal streaming JSON writer: tracks commas per nesting level, writes nothing else.
pub(super) struct Json<W: Write> {
    pub(super) out: BufWriter<Counting<W>>,
    /// Per open container: whether a value has been written (a comma is due).
    pub(super) levels: Vec<bool>,
    pub(super) after_key: bool,
}

impl<W: Write> Json<W> {
    pub(super) fn new(inner: W) -> Self {
        Self {
            out: BufWriter::with_capacity(1 << 20, Counting { inner, bytes: 0 }),
            levels: Vec::new(),
            after_key: false,
        }
    }

    /// Flushes and returns the number of bytes written.
    pub(super) fn finish(self) -> io::Result<u64> {
        let mut counting = self.out.into_inner().map_err(|e| e.into_error())?;
        counting.flush()?;
        Ok(counting.bytes)
    }

    pub(super) fn separate(&mut self) -> io::Result<()> {
        if self.after_key {
            self.after_key = false;
        } else if let Some(due) = self.levels.last_mut() {
            if *due {
                self.out.write_all(b",")?;
            }
            *due = true;
        }
        Ok(())
    }

    pub(super) fn write_str(&mut self, s: &str) -> io::Result<()> {
        if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
            self.out.write_all(b"\"")?;
            self.out.write_all(s.as_bytes())?;
            self.out.write_all(b"\"")
        } else {
            serde_json::to_writer(&mut self.out, s).map_err(io::Error::from)
        }
    }

    pub(super) fn begin_object(&mut self) -> io::Result<()> {
        self.separate()?;
        self.levels.push(false);
        self.out.write_all(b"{")
    }

    pub(super) fn end_object(&mut self) -> io::Result<()> {
        self.levels.pop();
        self.out.write_all(b"}")
    }

    pub(super) fn begin_array(&mut self) -> io::Result<()> {
        self.separate()?;
        self.levels.push(false);
        self.out.write_all(b"[")
    }

    pub(super) fn end_array(&mut self) -> io::Result<()> {
        self.levels.pop();
        self.out.write_all(b"]")
    }

    pub(super) fn key(&mut self, key: &str) -> io::Result<()> {
        self.separate()?;
        self.write_str(key)?;
        self.out.write_all(b":")?;
        self.after_key = true;
        Ok(())
    }

    pub(super) fn string(&mut self, s: &str) -> io::Result<()> {
        self.separate()?;
        self.write_str(s)
    }

    /// Writes `"./" + path` as a string.
    pub(super) fn file_key(&mut self, path: &str) -> io::Result<()> {
        self.separate()?;
        self.out.write_all(b"\"./")?;
        self.out.write_all(path.as_bytes())?;
        self.out.write_all(b"\"")
    }

    /// Writes `"./" + path` as an object key.
    pub(super) fn file_key_field(&mut self, path: &str) -> io::Result<()> {
        self.file_key(path)?;
        self.out.write_all(b":")?;
        self.after_key = true;
        Ok(())
    }

    pub(super) fn uint(&mut self, n: u64) -> io::Result<()> {
        self.separate()?;
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.out.write_all(&digits[at..])
    }

    pub(super) fn float(&mut self, x: f64) -> io::Result<()> {
        self.separate()?;
        serde_json::to_writer(&mut self.out, &x).map_err(io::Error::from)
    }

    pub(super) fn boolean(&mut self, b: bool) -> io::Result<()> {
        self.separate()?;
        self.out
            .write_all(if b { b"true" as &[u8] } else { b"false" })
    }

    pub(super) fn field_str(&mut self, key: &str, value: &str) -> io::Result<()> {
        self.key(key)?;
        self.string(value)
    }

    pub(super) fn field_uint(&mut self, key: &str, value: u64) -> io::Result<()> {
        self.key(key)?;
        self.uint(value)
    }

    pub(super) fn field_bool(&mut self, key: &str, value: bool) -> io::Result<()> {
        self.key(key)?;
        self.boolean(value)
    }

    pub(super) fn field_lines(&mut self, start: u32, end: u32) -> io::Result<()> {
        self.key("lines")?;
        self.begin_array()?;
        self.uint(u64::from(start))?;
        self.uint(u64::from(end))?;
        self.end_array()
    }
}
