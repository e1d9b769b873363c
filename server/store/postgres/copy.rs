//! `COPY … FROM STDIN` for the bulk rows of an import (per-second buckets, statistics,
//! error groups, rejected rows): a row encoder for COPY's text format and the loop that
//! streams the encoded rows to the server in chunks.
//!
//! Hand-written because sqlx has no encoder for COPY rows: `PgConnection::copy_in_raw`
//! takes the bytes of whatever format the statement names, and sqlx's `Encode` impls write
//! the binary wire format of bind parameters, not COPY text. The rules followed are those of
//! the text format (<https://www.postgresql.org/docs/current/sql-copy.html>, "Text
//! Format"): one line per row, columns separated by a tab, `\N` for NULL, and in a value a
//! backslash, tab, newline and carriage return written as `\\`, `\t`, `\n`, `\r`; a
//! `bytea` value is its hex form (`\x…`), whose backslash is doubled like any other.
//!
//! A COPY runs on the connection of the caller's transaction, so an import stays one
//! transaction: a failed COPY fails the import and leaves nothing behind.

use sqlx::PgConnection;

use crate::store::Result;

/// Bytes encoded before they are sent as one `CopyData` message.
const SEND_BYTES: usize = 1 << 20;

/// Rows being encoded in COPY's text format. Each value method appends one column; the
/// caller ends each row with [`CopyRows::end_row`].
#[derive(Debug)]
pub(super) struct CopyRows {
    buf: Vec<u8>,
    /// No column written yet in the current row (no tab before the next one).
    row_start: bool,
}

impl CopyRows {
    fn with_capacity(bytes: usize) -> CopyRows {
        CopyRows {
            buf: Vec::with_capacity(bytes),
            row_start: true,
        }
    }

    fn sep(&mut self) {
        if !self.row_start {
            self.buf.push(b'\t');
        }
        self.row_start = false;
    }

    fn null(&mut self) -> &mut Self {
        self.sep();
        self.buf.extend_from_slice(b"\\N");
        self
    }

    /// A `bigint` column.
    pub fn int(&mut self, v: i64) -> &mut Self {
        self.sep();
        self.buf
            .extend_from_slice(itoa_buf(v, &mut [0u8; 20]).as_bytes());
        self
    }

    /// A nullable `bigint` column.
    pub fn opt_int(&mut self, v: Option<i64>) -> &mut Self {
        match v {
            Some(v) => self.int(v),
            None => self.null(),
        }
    }

    /// A nullable `double precision` column. Rust's `Display` writes the shortest decimal
    /// that reads back as the same `f64` (never an exponent), which PostgreSQL reads
    /// exactly; NaN and the infinities get PostgreSQL's spellings.
    pub fn float(&mut self, v: Option<f64>) -> &mut Self {
        let Some(v) = v else { return self.null() };
        self.sep();
        if v.is_nan() {
            self.buf.extend_from_slice(b"NaN");
        } else if v.is_infinite() {
            let s: &[u8] = if v > 0.0 { b"Infinity" } else { b"-Infinity" };
            self.buf.extend_from_slice(s);
        } else {
            use std::io::Write;
            write!(self.buf, "{v}").expect("writing to a Vec cannot fail");
        }
        self
    }

    /// A `boolean` column.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.sep();
        self.buf.push(if v { b't' } else { b'f' });
        self
    }

    /// A nullable `text` column, escaped.
    pub fn text(&mut self, v: Option<&str>) -> &mut Self {
        let Some(v) = v else { return self.null() };
        self.sep();
        for &b in v.as_bytes() {
            match b {
                b'\\' => self.buf.extend_from_slice(b"\\\\"),
                b'\t' => self.buf.extend_from_slice(b"\\t"),
                b'\n' => self.buf.extend_from_slice(b"\\n"),
                b'\r' => self.buf.extend_from_slice(b"\\r"),
                _ => self.buf.push(b),
            }
        }
        self
    }

    /// A nullable `bytea` column: `\\x` then two hex digits per byte.
    pub fn bytea(&mut self, v: Option<&[u8]>) -> &mut Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let Some(v) = v else { return self.null() };
        self.sep();
        self.buf.reserve(3 + 2 * v.len());
        self.buf.extend_from_slice(b"\\\\x");
        for &b in v {
            self.buf.push(HEX[usize::from(b >> 4)]);
            self.buf.push(HEX[usize::from(b & 0xf)]);
        }
        self
    }

    /// Ends the current row.
    pub fn end_row(&mut self) {
        self.buf.push(b'\n');
        self.row_start = true;
    }
}

/// `v` in decimal, written into `out` (no allocation per value).
fn itoa_buf(v: i64, out: &mut [u8; 20]) -> &str {
    let mut n = v.unsigned_abs();
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        out[i] = b'-';
    }
    std::str::from_utf8(&out[i..]).expect("ASCII digits")
}

/// Runs `statement` (a `COPY table (columns) FROM STDIN` in text format) on `conn` and
/// streams `rows` to it, each written by `write` (one value method per column, in the
/// statement's order; the row is ended here). Nothing is sent when there are no rows.
/// Returns the rows the server stored.
pub(super) async fn copy_in<T>(
    conn: &mut PgConnection,
    statement: &str,
    rows: impl IntoIterator<Item = T>,
    mut write: impl FnMut(&mut CopyRows, T),
) -> Result<u64> {
    let mut rows = rows.into_iter().peekable();
    if rows.peek().is_none() {
        return Ok(0);
    }
    let mut copy = conn.copy_in_raw(statement).await?;
    let mut out = CopyRows::with_capacity(SEND_BYTES + (64 << 10));
    for row in rows {
        write(&mut out, row);
        out.end_row();
        if out.buf.len() >= SEND_BYTES {
            copy.send(out.buf.as_slice()).await?;
            out.buf.clear();
        }
    }
    if !out.buf.is_empty() {
        copy.send(out.buf.as_slice()).await?;
    }
    Ok(copy.finish().await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(f: impl FnOnce(&mut CopyRows)) -> String {
        let mut r = CopyRows::with_capacity(0);
        f(&mut r);
        r.end_row();
        String::from_utf8(r.buf).unwrap()
    }

    #[test]
    fn columns_are_tab_separated_and_rows_end_in_a_newline() {
        let s = row(|r| {
            r.int(1).int(-42).opt_int(None).bool(true).bool(false);
        });
        assert_eq!(s, "1\t-42\t\\N\tt\tf\n");
        let mut r = CopyRows::with_capacity(0);
        r.int(1);
        r.end_row();
        r.int(2).int(3);
        r.end_row();
        assert_eq!(r.buf, b"1\n2\t3\n", "a new row starts without a tab");
    }

    #[test]
    fn integers_cover_the_whole_range() {
        for v in [0, 7, 10, -1, 1_796_000_000_000, i64::MAX, i64::MIN] {
            assert_eq!(
                row(|r| {
                    r.int(v);
                }),
                format!("{v}\n")
            );
        }
    }

    #[test]
    fn text_escapes_backslash_tab_newline_and_carriage_return() {
        let s = row(|r| {
            r.text(Some("a\\b\tc\nd\re \\N \"q\", é"));
        });
        assert_eq!(s, "a\\\\b\\tc\\nd\\re \\\\N \"q\", é\n");
        assert_eq!(
            row(|r| {
                r.text(None);
            }),
            "\\N\n",
            "NULL"
        );
        assert_eq!(
            row(|r| {
                r.text(Some(""));
            }),
            "\n",
            "empty, not NULL"
        );
        assert_eq!(
            row(|r| {
                r.text(Some("\\N"));
            }),
            "\\\\N\n",
            "the text \\N is not NULL"
        );
    }

    #[test]
    fn bytea_is_hex_with_its_backslash_doubled() {
        assert_eq!(
            row(|r| {
                r.bytea(Some(&[0x00, 0x1f, 0xab, 0xff]));
            }),
            "\\\\x001fabff\n"
        );
        assert_eq!(
            row(|r| {
                r.bytea(Some(&[]));
            }),
            "\\\\x\n",
            "empty, not NULL"
        );
        assert_eq!(
            row(|r| {
                r.bytea(None);
            }),
            "\\N\n"
        );
    }

    #[test]
    fn floats_read_back_exactly() {
        for v in [
            0.0,
            -0.0,
            0.1,
            20.5,
            1e-7,
            1.0 / 3.0,
            6.02e23,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let s = row(|r| {
                r.float(Some(v));
            });
            let back: f64 = s.trim_end().parse().unwrap();
            assert_eq!(back.to_bits(), v.to_bits(), "{v} written as {s:?}");
        }
        assert_eq!(
            row(|r| {
                r.float(Some(f64::NAN));
            }),
            "NaN\n"
        );
        assert_eq!(
            row(|r| {
                r.float(Some(f64::INFINITY));
            }),
            "Infinity\n"
        );
        assert_eq!(
            row(|r| {
                r.float(Some(f64::NEG_INFINITY));
            }),
            "-Infinity\n"
        );
        assert_eq!(
            row(|r| {
                r.float(None);
            }),
            "\\N\n"
        );
    }
}
