//! Per-request data for the load generator: a feeder's rows and the `{{column}}` templates
//! they fill (the body of `--body-template`, the URL's path and query, header values).
//!
//! Owns [`Feeder`] (rows parsed from a CSV file with a header row, or from JSON Lines: one
//! object of string or number values per line) and [`Template`] (text split once into
//! literal and placeholder parts, each placeholder bound to a feeder column, so rendering a
//! request is copying slices into one buffer of the right size). Must not read files or the
//! clock: the command line reads the files, the engine in `sources::load` takes a row per
//! request (in order, wrapping around) and renders.
//!
//! Placeholder syntax: `{{name}}` (spaces inside the braces are ignored), as Gatling's and
//! JMeter's CSV feeders name their columns; a value is inserted as it is in the feeder
//! (in the URL it is percent-encoded).

use std::ops::Range;

/// Rows of named values, taken one per request.
#[derive(Debug, Clone, PartialEq)]
pub struct Feeder {
    /// The file's name as given, for messages.
    pub name: String,
    /// Column names, in the file's order (CSV) or the first object's key order (JSON Lines).
    pub columns: Vec<String>,
    /// Values row by row (`columns.len()` per row).
    values: Vec<String>,
    /// Line of each row in the file (1-based), for messages.
    lines: Vec<u64>,
}

/// A feeder or template that cannot be used; the message names the file, the line (or byte
/// offset) and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

fn err(msg: String) -> TemplateError {
    TemplateError(msg)
}

impl Feeder {
    /// A feeder from a CSV file's bytes: a header row naming the columns, then one row per
    /// request (RFC 4180 quoting, as the `csv` crate reads it). `name` is the file's name.
    pub fn from_csv(name: &str, bytes: &[u8]) -> Result<Feeder, TemplateError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .from_reader(bytes);
        let columns: Vec<String> = reader
            .headers()
            .map_err(|e| err(format!("{name} line 1: cannot read the header row: {e}")))?
            .iter()
            .map(|c| c.trim().to_string())
            .collect();
        check_columns(name, &columns)?;
        let mut feeder = Feeder {
            name: name.to_string(),
            columns,
            values: Vec::new(),
            lines: Vec::new(),
        };
        let mut record = csv::StringRecord::new();
        loop {
            match reader.read_record(&mut record) {
                Ok(false) => break,
                Ok(true) => {
                    let line = record.position().map_or(0, |p| p.line());
                    feeder.values.extend(record.iter().map(str::to_string));
                    feeder.lines.push(line);
                }
                Err(e) => {
                    let line = e.position().map_or(0, |p| p.line());
                    let what = match e.kind() {
                        csv::ErrorKind::UnequalLengths {
                            expected_len, len, ..
                        } => format!(
                            "{len} values, expected {expected_len} (the header row's columns: {})",
                            feeder.columns.join(", ")
                        ),
                        _ => e.to_string(),
                    };
                    return Err(err(format!("{name} line {line}: {what}")));
                }
            }
        }
        feeder.non_empty()
    }

    /// A feeder from a JSON Lines file's text: one object per line whose values are strings
    /// or numbers (blank lines are skipped). The first object's keys are the columns; every
    /// later object must have the same keys.
    pub fn from_jsonl(name: &str, text: &str) -> Result<Feeder, TemplateError> {
        let mut feeder = Feeder {
            name: name.to_string(),
            columns: Vec::new(),
            values: Vec::new(),
            lines: Vec::new(),
        };
        for (i, line) in text.lines().enumerate() {
            let n = i as u64 + 1;
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
                err(format!(
                    "{name} line {n} column {}: not JSON: {e}",
                    e.column()
                ))
            })?;
            let serde_json::Value::Object(object) = value else {
                return Err(err(format!(
                    "{name} line {n}: expected a JSON object such as {{\"user\": \"ann\", \"id\": 7}}"
                )));
            };
            if feeder.lines.is_empty() {
                feeder.columns = object.keys().cloned().collect();
                check_columns(name, &feeder.columns)?;
            }
            if object.len() != feeder.columns.len() {
                let extra: Vec<&str> = object
                    .keys()
                    .filter(|k| !feeder.columns.contains(k))
                    .map(String::as_str)
                    .collect();
                if !extra.is_empty() {
                    return Err(err(format!(
                        "{name} line {n}: key {} is not a column of the first object ({})",
                        extra.join(", "),
                        feeder.columns.join(", ")
                    )));
                }
            }
            for column in &feeder.columns {
                let v = match object.get(column) {
                    Some(serde_json::Value::String(s)) => s.clone(),
                    Some(serde_json::Value::Number(x)) => x.to_string(),
                    Some(other) => {
                        return Err(err(format!(
                            "{name} line {n}: {column:?} is {other}, expected a string or a number"
                        )));
                    }
                    None => {
                        return Err(err(format!(
                            "{name} line {n}: key {column:?} is missing (columns: {})",
                            feeder.columns.join(", ")
                        )));
                    }
                };
                feeder.values.push(v);
            }
            feeder.lines.push(n);
        }
        feeder.non_empty()
    }

    fn non_empty(self) -> Result<Feeder, TemplateError> {
        if self.lines.is_empty() {
            return Err(err(format!(
                "{}: no rows (a feeder needs at least one)",
                self.name
            )));
        }
        Ok(self)
    }

    /// Rows (at least one).
    pub fn rows(&self) -> usize {
        self.lines.len()
    }

    /// Row `i` (0-based, wrapping around past the last row): its values by column.
    #[inline]
    pub fn row(&self, i: usize) -> &[String] {
        let width = self.columns.len();
        let r = i % self.rows();
        &self.values[r * width..(r + 1) * width]
    }

    /// The file line row `i` (wrapping) came from, 1-based.
    pub fn line_of(&self, i: usize) -> u64 {
        self.lines[i % self.rows()]
    }

    /// `users.csv: id, name, email` — for messages.
    pub fn describe(&self) -> String {
        format!("{} has columns {}", self.name, self.columns.join(", "))
    }
}

fn check_columns(name: &str, columns: &[String]) -> Result<(), TemplateError> {
    if columns.is_empty() || columns.iter().all(String::is_empty) {
        return Err(err(format!("{name} line 1: no column names")));
    }
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(err(format!("{name} line 1: column {c:?} appears twice")));
        }
    }
    Ok(())
}

/// One piece of a template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    /// Bytes of the template's text.
    Literal(Range<usize>),
    /// A feeder column's index.
    Column(usize),
}

/// Text with `{{column}}` placeholders, split into parts once and bound to a feeder's
/// columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    text: String,
    parts: Vec<Part>,
    /// Bytes of the literal parts.
    literal_len: usize,
}

impl Template {
    /// Splits `text` into literal and placeholder parts and binds each placeholder to a
    /// column of `feeder`. `what` names the text in messages (`body.xml`, `the URL`,
    /// `header X-User`).
    ///
    /// Errors: a `{{` without its `}}` (with the line and byte offset), an empty name, a
    /// placeholder without a feeder, or one naming no column of the feeder (the message
    /// lists the feeder's columns).
    pub fn parse(
        what: &str,
        text: &str,
        feeder: Option<&Feeder>,
    ) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut literal_len = 0;
        let mut at = 0;
        let mut push_literal = |parts: &mut Vec<Part>, r: Range<usize>| {
            if !r.is_empty() {
                literal_len += r.len();
                parts.push(Part::Literal(r));
            }
        };
        while let Some(i) = text[at..].find("{{") {
            let open = at + i;
            push_literal(&mut parts, at..open);
            let line = text[..open].matches('\n').count() + 1;
            let Some(j) = text[open + 2..].find("}}") else {
                return Err(err(format!(
                    "{what} line {line} (byte {open}): `{{{{` is not closed by `}}}}`"
                )));
            };
            let name = text[open + 2..open + 2 + j].trim();
            if name.is_empty() || name.contains("{{") {
                return Err(err(format!(
                    "{what} line {line} (byte {open}): expected a column name between `{{{{` and `}}}}`"
                )));
            }
            let Some(feeder) = feeder else {
                return Err(err(format!(
                    "{what} line {line}: placeholder {{{{{name}}}}} needs a --feeder with a column {name:?}"
                )));
            };
            let Some(column) = feeder.columns.iter().position(|c| c == name) else {
                return Err(err(format!(
                    "{what} line {line}: placeholder {{{{{name}}}}} is not a column of the feeder ({})",
                    feeder.describe()
                )));
            };
            parts.push(Part::Column(column));
            at = open + 2 + j + 2;
        }
        push_literal(&mut parts, at..text.len());
        Ok(Template {
            text: text.to_string(),
            parts,
            literal_len,
        })
    }

    /// No placeholders: every request gets the same text.
    pub fn is_literal(&self) -> bool {
        !self.parts.iter().any(|p| matches!(p, Part::Column(_)))
    }

    /// The text as written (placeholders included).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Length of the template filled from `row`, bytes.
    #[inline]
    pub fn len_with(&self, row: &[String]) -> usize {
        self.literal_len
            + self
                .parts
                .iter()
                .map(|p| match p {
                    Part::Column(c) => row[*c].len(),
                    Part::Literal(_) => 0,
                })
                .sum::<usize>()
    }

    /// Appends the template filled from `row` (a [`Feeder::row`]) to `out`.
    #[inline]
    pub fn render_into(&self, row: &[String], out: &mut Vec<u8>) {
        for p in &self.parts {
            match p {
                Part::Literal(r) => out.extend_from_slice(&self.text.as_bytes()[r.clone()]),
                Part::Column(c) => out.extend_from_slice(row[*c].as_bytes()),
            }
        }
    }

    /// The template filled from `row`, in one allocation of the exact size.
    #[inline]
    pub fn render(&self, row: &[String]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len_with(row));
        self.render_into(row, &mut out);
        out
    }

    /// The template filled from `row` with each value percent-encoded (every byte but
    /// RFC 3986's unreserved characters), for a URL's path and query.
    pub fn render_url(&self, row: &[String]) -> String {
        let mut out = String::with_capacity(self.len_with(row));
        for p in &self.parts {
            match p {
                Part::Literal(r) => out.push_str(&self.text[r.clone()]),
                Part::Column(c) => out.push_str(&crate::domain::format::path_segment(&row[*c])),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "id,name,email\n1,Ann,ann@example.com\n2,\"Bo, Jr\",bo@example.com\n";

    #[test]
    fn csv_rows_wrap_around_in_order() {
        let f = Feeder::from_csv("users.csv", CSV.as_bytes()).unwrap();
        assert_eq!(f.columns, ["id", "name", "email"]);
        assert_eq!(f.rows(), 2);
        assert_eq!(f.row(0), ["1", "Ann", "ann@example.com"]);
        assert_eq!(f.row(1)[1], "Bo, Jr");
        assert_eq!(f.row(2), f.row(0), "past the last row: the first again");
        assert_eq!((f.line_of(0), f.line_of(1), f.line_of(3)), (2, 3, 3));
    }

    #[test]
    fn jsonl_rows_take_strings_and_numbers() {
        let f = Feeder::from_jsonl(
            "users.jsonl",
            "{\"user\":\"ann\",\"id\":7}\n\n{\"id\":8.5,\"user\":\"bo\"}\n",
        )
        .unwrap();
        // Key order is the first object's as serde_json keeps it (sorted).
        assert_eq!(f.columns, ["id", "user"]);
        assert_eq!(f.row(0), ["7", "ann"]);
        assert_eq!(f.row(1), ["8.5", "bo"]);
        assert_eq!(f.line_of(1), 3);
    }

    #[test]
    fn malformed_feeders_name_the_file_and_line() {
        let e = Feeder::from_csv("users.csv", b"id,name\n1,Ann\n2\n3,Cy\n").unwrap_err();
        assert_eq!(
            e.0,
            "users.csv line 3: 1 values, expected 2 (the header row's columns: id, name)"
        );
        let e = Feeder::from_csv("u.csv", b"id,id\n1,2\n").unwrap_err();
        assert!(
            e.0.contains("u.csv line 1: column \"id\" appears twice"),
            "{e}"
        );
        let e = Feeder::from_csv("empty.csv", b"id,name\n").unwrap_err();
        assert!(e.0.contains("empty.csv: no rows"), "{e}");
        let e = Feeder::from_jsonl("u.jsonl", "{\"a\":1}\n{\"a\":\n").unwrap_err();
        assert!(e.0.starts_with("u.jsonl line 2 column"), "{e}");
        let e = Feeder::from_jsonl("u.jsonl", "{\"a\":1}\n[1]\n").unwrap_err();
        assert!(
            e.0.starts_with("u.jsonl line 2: expected a JSON object"),
            "{e}"
        );
        let e = Feeder::from_jsonl("u.jsonl", "{\"a\":1}\n{\"a\":{\"b\":1}}\n").unwrap_err();
        assert!(
            e.0.contains("line 2: \"a\" is {\"b\":1}, expected a string"),
            "{e}"
        );
        let e = Feeder::from_jsonl("u.jsonl", "{\"a\":1,\"b\":2}\n{\"a\":3}\n").unwrap_err();
        assert!(e.0.contains("line 2: key \"b\" is missing"), "{e}");
        let e = Feeder::from_jsonl("u.jsonl", "{\"a\":1}\n{\"a\":3,\"c\":4}\n").unwrap_err();
        assert!(e.0.contains("line 2: key c is not a column"), "{e}");
    }

    #[test]
    fn templates_split_once_and_render_rows() {
        let f = Feeder::from_csv("users.csv", CSV.as_bytes()).unwrap();
        let t = Template::parse(
            "body.xml",
            "<user id=\"{{id}}\"><name>{{ name }}</name><mail>{{email}}</mail></user>",
            Some(&f),
        )
        .unwrap();
        assert!(!t.is_literal());
        assert_eq!(
            t.parts.len(),
            7,
            "literal, id, literal, name, literal, email, literal"
        );
        let out = t.render(f.row(1));
        assert_eq!(
            String::from_utf8(out.clone()).unwrap(),
            "<user id=\"2\"><name>Bo, Jr</name><mail>bo@example.com</mail></user>"
        );
        assert_eq!(
            out.capacity(),
            out.len(),
            "one allocation of the exact size"
        );
        assert_eq!(t.len_with(f.row(1)), out.len());
        let url = Template::parse("the URL", "/users/{{name}}?mail={{email}}", Some(&f)).unwrap();
        assert_eq!(
            url.render_url(f.row(1)),
            "/users/Bo%2C%20Jr?mail=bo%40example.com"
        );
        let plain = Template::parse("body.xml", "<ping/>", None).unwrap();
        assert!(plain.is_literal());
        assert_eq!(plain.render(&[]), b"<ping/>");
        let edges = Template::parse("t", "{{id}}{{id}}", Some(&f)).unwrap();
        assert_eq!(edges.render(f.row(0)), b"11");
    }

    #[test]
    fn unknown_placeholders_are_refused_naming_the_columns() {
        let f = Feeder::from_csv("users.csv", CSV.as_bytes()).unwrap();
        let e = Template::parse("body.xml", "<a>\n{{userid}}</a>", Some(&f)).unwrap_err();
        assert_eq!(
            e.0,
            "body.xml line 2: placeholder {{userid}} is not a column of the feeder (users.csv has columns id, name, email)"
        );
        let e = Template::parse("body.xml", "<a>{{id</a>", Some(&f)).unwrap_err();
        assert_eq!(e.0, "body.xml line 1 (byte 3): `{{` is not closed by `}}`");
        let e = Template::parse("body.xml", "{{ }}", Some(&f)).unwrap_err();
        assert!(e.0.contains("expected a column name"), "{e}");
        let e = Template::parse("header X-User", "{{id}}", None).unwrap_err();
        assert!(
            e.0.contains("header X-User line 1: placeholder {{id}} needs a --feeder"),
            "{e}"
        );
    }
}
