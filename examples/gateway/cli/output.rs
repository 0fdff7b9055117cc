//! How the client commands print: `-o table|wide|json|yaml`.
//!
//! `json` and `yaml` print the structured data as it is (pretty JSON, or YAML through
//! serde-saphyr), stable for scripts. `table` and `wide` print aligned columns (`wide` adds
//! columns) that fit the terminal: the width comes from the terminal stdout is, else `COLUMNS`,
//! else 100; when the columns are wider than that, the widest ones are cut down first and a
//! cut cell ends in `…`. Colour (bold headers, green/yellow/red states) only when stdout is a
//! terminal and `NO_COLOR` is unset. A single object prints as `FIELD VALUE` rows.

use std::io::{self, IsTerminal, Write};

use clap::ValueEnum;
use serde_json::Value;

/// The width a table gets when stdout is no terminal and `COLUMNS` is unset.
const DEFAULT_WIDTH: usize = 100;

/// Spaces between two columns.
const GAP: usize = 2;

/// The narrowest a column is cut to (or its natural width, when narrower).
const MIN_COLUMN: usize = 6;

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Aligned columns fitting the terminal.
    Table,
    /// The table with more columns.
    Wide,
    /// The structured data as JSON.
    Json,
    /// The structured data as YAML.
    Yaml,
}

impl Format {
    /// Whether this is `table` or `wide`.
    pub(crate) fn is_table(self) -> bool {
        matches!(self, Self::Table | Self::Wide)
    }
}

/// One column of a table: its header, and where a row's value is (a dotted path into the row
/// object, or a function of it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub(crate) header: &'static str,
    pub(crate) value: fn(&Value) -> String,
    /// Shown only with `-o wide`.
    pub(crate) wide: bool,
    /// Its values are states to colour.
    pub(crate) state: bool,
}

impl Column {
    /// A column showing `value` of each row.
    pub(crate) const fn new(header: &'static str, value: fn(&Value) -> String) -> Self {
        Self {
            header,
            value,
            wide: false,
            state: false,
        }
    }

    /// Shown only with `-o wide`.
    pub(crate) const fn wide(mut self) -> Self {
        self.wide = true;
        self
    }

    /// Coloured as a state.
    pub(crate) const fn state(mut self) -> Self {
        self.state = true;
        self
    }
}

/// Where the output goes and how it looks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Out {
    pub(crate) format: Format,
    color: bool,
    width: usize,
}

impl Out {
    /// The output for `format` on this process's stdout.
    pub(crate) fn detect(format: Format) -> Self {
        let tty = io::stdout().is_terminal();
        let color = tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let terminal = if tty {
            terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
        } else {
            None
        };
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<usize>().ok());
        let width = terminal.or(columns).filter(|w| *w > 0).unwrap_or(DEFAULT_WIDTH);
        Self { format, color, width }
    }

    /// Prints `data` as JSON or YAML.
    pub(crate) fn data(&self, data: &Value) {
        let text = match self.format {
            Format::Yaml => {
                let mut text = serde_saphyr::to_string(data).unwrap_or_else(|e| format!("# not YAML: {e}"));
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text
            }
            _ => {
                let mut text = serde_json::to_string_pretty(data).unwrap_or_else(|_| data.to_string());
                text.push('\n');
                text
            }
        };
        write_out(&text);
    }

    /// Prints `data` in the chosen format: JSON or YAML as it is, a table of `rows` (the
    /// objects of `data`) with `columns` otherwise.
    pub(crate) fn list(&self, data: &Value, columns: &[Column]) {
        if !self.format.is_table() {
            return self.data(data);
        }
        let rows = data.as_array().map(Vec::as_slice).unwrap_or_default();
        self.write_table(columns, rows);
    }

    /// Prints one object: JSON or YAML as it is, else `FIELD VALUE` rows (top-level fields;
    /// with `-o wide` every nested field by its dotted path).
    pub(crate) fn object(&self, data: &Value) {
        if !self.format.is_table() {
            return self.data(data);
        }
        let mut fields = Vec::new();
        flatten("", data, self.format == Format::Wide, &mut fields);
        let table = Table {
            headers: vec!["FIELD".to_owned(), "VALUE".to_owned()],
            rows: fields.into_iter().map(|(k, v)| vec![k, v]).collect(),
            states: vec![false, false],
        };
        write_out(&table.render(self.width, self.color));
    }

    /// Prints the table of `rows` with the columns of this format.
    pub(crate) fn write_table(&self, columns: &[Column], rows: &[Value]) {
        let table = Table::of(columns, rows, self.format == Format::Wide);
        write_out(&table.render(self.width, self.color));
    }

    /// The column widths for `columns` when rows arrive one by one (`events -f`): each as wide
    /// as its header or `typical`, fitted to the terminal.
    pub(crate) fn stream_widths(&self, columns: &[Column], typical: &[usize]) -> Vec<usize> {
        let shown: Vec<&Column> = shown(columns, self.format == Format::Wide).collect();
        let natural: Vec<usize> = shown
            .iter()
            .enumerate()
            .map(|(i, c)| c.header.len().max(typical.get(i).copied().unwrap_or(0)))
            .collect();
        fit(&natural, self.width)
    }

    /// One row of a streamed table, padded to `widths` (the header when `row` is `None`).
    pub(crate) fn stream_row(&self, columns: &[Column], widths: &[usize], row: Option<&Value>) {
        let shown: Vec<&Column> = shown(columns, self.format == Format::Wide).collect();
        let cells: Vec<String> = match row {
            None => shown.iter().map(|c| c.header.to_owned()).collect(),
            Some(row) => shown.iter().map(|c| clean((c.value)(row))).collect(),
        };
        let states: Vec<bool> = shown.iter().map(|c| c.state && row.is_some()).collect();
        let mut line = render_line(&cells, widths, &states, self.color, row.is_none());
        line.push('\n');
        write_out(&line);
    }

    /// Prints a line of text.
    pub(crate) fn line(&self, text: &str) {
        write_out(&format!("{text}\n"));
    }
}

/// Writes to stdout; a closed pipe (`| head`) is not an error worth a word.
fn write_out(text: &str) {
    let mut stdout = io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}

fn shown(columns: &[Column], wide: bool) -> impl Iterator<Item = &Column> {
    columns.iter().filter(move |c| wide || !c.wide)
}

/// Cells as text, ready to be fitted.
#[derive(Debug, Clone, PartialEq)]
struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Which columns are states to colour.
    states: Vec<bool>,
}

impl Table {
    fn of(columns: &[Column], rows: &[Value], wide: bool) -> Self {
        let shown: Vec<&Column> = shown(columns, wide).collect();
        Self {
            headers: shown.iter().map(|c| c.header.to_owned()).collect(),
            rows: rows
                .iter()
                .map(|row| shown.iter().map(|c| clean((c.value)(row))).collect())
                .collect(),
            states: shown.iter().map(|c| c.state).collect(),
        }
    }

    /// The table as lines of at most `width` characters (unless even the narrowest columns
    /// are wider), the header first.
    fn render(&self, width: usize, color: bool) -> String {
        let natural: Vec<usize> = (0..self.headers.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                    .chain([self.headers[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let widths = fit(&natural, width);
        let mut out = render_line(&self.headers, &widths, &self.states, color, true);
        out.push('\n');
        for row in &self.rows {
            out.push_str(&render_line(row, &widths, &self.states, color, false));
            out.push('\n');
        }
        out
    }
}

fn render_line(cells: &[String], widths: &[usize], states: &[bool], color: bool, header: bool) -> String {
    let last = widths.len().saturating_sub(1);
    let mut line = String::new();
    for (i, width) in widths.iter().enumerate() {
        let text = truncate(cells.get(i).map_or("", String::as_str), *width);
        let pad = width.saturating_sub(text.chars().count());
        let styled = match (color, header) {
            (true, true) => format!("\x1b[1m{text}\x1b[0m"),
            (true, false) if states.get(i).copied().unwrap_or(false) => match state_color(&text) {
                Some(code) => format!("\x1b[{code}m{text}\x1b[0m"),
                None => text,
            },
            _ => text,
        };
        line.push_str(&styled);
        if i < last {
            line.push_str(&" ".repeat(pad + GAP));
        }
    }
    line.trim_end().to_owned()
}

/// The ANSI colour of a state: green when good, yellow while on its way, red when bad.
fn state_color(state: &str) -> Option<&'static str> {
    match state.to_ascii_lowercase().as_str() {
        "running" | "connected" | "healthy" | "true" | "yes" | "completed" | "normal" | "ready" | "ok" => Some("32"),
        "starting" | "connecting" | "auth_required" | "awaiting_session" | "inprogress" | "in_progress"
        | "reauth_required" | "unknown" => Some("33"),
        "failed" | "unhealthy" | "false" | "no" | "error" | "warning" | "stopped" | "disconnected" => Some("31"),
        _ => None,
    }
}

/// How narrow the last column (the description or message, typically) gets before the others
/// are cut too.
const LAST_COLUMN_FIRST: usize = 24;

/// The widths for columns of `natural` widths within `width` characters (gaps included): all
/// natural when they fit; else the last column is cut first (down to [`LAST_COLUMN_FIRST`]);
/// then the widest are cut to a common cap, as high as fits, and the characters left over go to
/// the cut columns from the left. A column is never cut below [`MIN_COLUMN`] (or its natural
/// width).
fn fit(natural: &[usize], width: usize) -> Vec<usize> {
    let gaps = GAP * natural.len().saturating_sub(1);
    let room = width.saturating_sub(gaps);
    if natural.iter().sum::<usize>() <= room {
        return natural.to_vec();
    }
    let mut natural = natural.to_vec();
    if let Some((last, others)) = natural.split_last_mut() {
        let others: usize = others.iter().sum();
        let shortest = (*last).min(LAST_COLUMN_FIRST);
        if others + shortest <= room {
            *last = room - others;
            return natural;
        }
        *last = shortest;
    }
    let floor = |n: usize| n.min(MIN_COLUMN);
    let at_cap = |cap: usize| -> Vec<usize> { natural.iter().map(|&n| n.min(cap).max(floor(n))).collect() };
    let max = natural.iter().copied().max().unwrap_or(0);
    // The highest cap whose total fits (at the lowest, every column is at its floor).
    let (mut low, mut high) = (0, max);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if at_cap(mid).iter().sum::<usize>() <= room {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    let mut widths = at_cap(low);
    let mut spare = room.saturating_sub(widths.iter().sum());
    for (w, &n) in widths.iter_mut().zip(&natural) {
        if spare == 0 {
            break;
        }
        if *w < n {
            *w += 1;
            spare -= 1;
        }
    }
    widths
}

/// `text` cut to `width` characters, ending in `…` when cut.
pub(crate) fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut cut: String = text.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

/// A cell on one line: line breaks and tabs become spaces.
fn clean(text: String) -> String {
    if text.contains(['\n', '\r', '\t']) {
        text.replace(['\n', '\r', '\t'], " ")
    } else {
        text
    }
}

/// A value as a table cell: strings as they are, `-` for nothing, lists joined by `, `,
/// objects as compact JSON.
pub(crate) fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        Value::String(s) if s.is_empty() => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) if items.is_empty() => "-".to_owned(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(", "),
        Value::Object(map) if map.is_empty() => "-".to_owned(),
        Value::Object(_) => value.to_string(),
    }
}

/// The cell of the value at dotted `path` of `row` (`metadata.tools`).
pub(crate) fn at(row: &Value, path: &str) -> String {
    cell(lookup(row, path).unwrap_or(&Value::Null))
}

/// The value at dotted `path` of `row`.
pub(crate) fn lookup<'a>(row: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(row, |v, key| v.get(key))
}

/// The `(field, cell)` pairs of `value`: its top-level fields, or with `deep` every leaf by its
/// dotted path (`status.conditions.0.reason`).
fn flatten(prefix: &str, value: &Value, deep: bool, out: &mut Vec<(String, String)>) {
    let join = |key: &str| {
        if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) if deep || prefix.is_empty() => {
            for (key, v) in map {
                let nested = matches!(v, Value::Object(m) if !m.is_empty())
                    || matches!(v, Value::Array(a) if a.iter().any(|i| i.is_object() || i.is_array()));
                if deep && nested {
                    flatten(&join(key), v, deep, out);
                } else {
                    out.push((join(key), cell(v)));
                }
            }
        }
        Value::Array(items) if deep => {
            for (i, v) in items.iter().enumerate() {
                flatten(&join(&i.to_string()), v, deep, out);
            }
        }
        other => out.push((
            if prefix.is_empty() {
                "value".to_owned()
            } else {
                prefix.to_owned()
            },
            cell(other),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn columns_that_fit_keep_their_natural_widths() {
        assert_eq!(fit(&[4, 10, 20], 100), vec![4, 10, 20]);
        // Exactly the room: 4 + 10 + 20 + 2 gaps of 2.
        assert_eq!(fit(&[4, 10, 20], 38), vec![4, 10, 20]);
    }

    #[test]
    fn the_last_column_is_cut_first() {
        assert_eq!(fit(&[4, 12, 80], 60), vec![4, 12, 40]);
        // Down to 24 characters; past that every column is cut.
        assert_eq!(fit(&[10, 20, 80], 58), vec![10, 20, 24]);
    }

    #[test]
    fn then_the_widest_columns_are_cut_and_the_result_fills_the_width() {
        // The last is at 24 and still too wide: the others are cut to a common cap.
        assert_eq!(fit(&[30, 50, 70], 80), vec![26, 26, 24]);
        // A narrow column keeps its width while wider ones are cut.
        assert_eq!(fit(&[8, 50, 70], 80), vec![8, 44, 24]);

        let widths = fit(&[40, 50, 30], 60);
        assert_eq!(widths.iter().sum::<usize>() + 4, 60);
        assert!(widths[0].abs_diff(widths[1]) <= 1, "cut to a common cap: {widths:?}");
    }

    #[test]
    fn columns_are_not_cut_below_the_minimum_even_when_the_terminal_is_narrower() {
        let widths = fit(&[20, 20, 20], 10);
        assert_eq!(widths, vec![MIN_COLUMN; 3]);
        assert_eq!(fit(&[3, 40], 10), vec![3, MIN_COLUMN]);
    }

    #[test]
    fn cut_cells_end_in_an_ellipsis_and_count_characters_not_bytes() {
        assert_eq!(truncate("hello world", 5), "hell…");
        assert_eq!(truncate("hello", 5), "hello");
        assert_eq!(truncate("grüße aus köln", 6), "grüße…");
        assert_eq!(truncate("x", 0), "");
    }

    #[test]
    fn a_rendered_table_fits_the_width_and_marks_what_it_cut() {
        let columns = [
            Column::new("NAME", |r| at(r, "name")),
            Column::new("DESCRIPTION", |r| at(r, "description")),
        ];
        let rows = vec![
            json!({"name": "x_demo_echo", "description": "Echo a message back, and a great deal more text than fits"}),
            json!({"name": "x_demo_add", "description": "Add"}),
        ];
        let text = Table::of(&columns, &rows, false).render(40, false);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{text}");
        assert!(lines[0].starts_with("NAME         DESCRIPTION"), "{text}");
        assert!(
            lines[1].starts_with("x_demo_echo  Echo a message") && lines[1].ends_with('…'),
            "{text}"
        );
        assert_eq!(lines[2], "x_demo_add   Add");
    }

    #[test]
    fn wide_columns_show_only_in_wide_output() {
        let columns = [
            Column::new("NAME", |r| at(r, "name")),
            Column::new("SERVER", |r| at(r, "server")).wide(),
        ];
        let rows = vec![json!({"name": "t", "server": "demo"})];
        assert_eq!(Table::of(&columns, &rows, false).headers, vec!["NAME"]);
        assert_eq!(Table::of(&columns, &rows, true).headers, vec!["NAME", "SERVER"]);
    }

    #[test]
    fn states_are_coloured_only_when_asked_and_headers_are_bold() {
        let columns = [Column::new("STATE", |r| at(r, "state")).state()];
        let rows = vec![json!({"state": "running"}), json!({"state": "failed"})];
        let plain = Table::of(&columns, &rows, false).render(80, false);
        assert!(!plain.contains('\x1b'), "{plain:?}");
        let coloured = Table::of(&columns, &rows, false).render(80, true);
        assert!(coloured.contains("\x1b[1mSTATE\x1b[0m"), "{coloured:?}");
        assert!(coloured.contains("\x1b[32mrunning\x1b[0m"), "{coloured:?}");
        assert!(coloured.contains("\x1b[31mfailed\x1b[0m"), "{coloured:?}");
    }

    #[test]
    fn values_format_as_cells() {
        assert_eq!(cell(&json!(null)), "-");
        assert_eq!(cell(&json!("")), "-");
        assert_eq!(cell(&json!("a b")), "a b");
        assert_eq!(cell(&json!(true)), "true");
        assert_eq!(cell(&json!(3.5)), "3.5");
        assert_eq!(cell(&json!(["a", 2])), "a, 2");
        assert_eq!(cell(&json!([])), "-");
        assert_eq!(cell(&json!({"k": 1})), r#"{"k":1}"#);
        assert_eq!(at(&json!({"metadata": {"tools": 6}}), "metadata.tools"), "6");
        assert_eq!(at(&json!({}), "metadata.tools"), "-");
        assert_eq!(clean("two\nlines\tand tab".to_owned()), "two lines and tab");
    }

    #[test]
    fn an_object_flattens_to_fields_shallow_or_by_dotted_path() {
        let value = json!({"name": "demo", "status": {"conditions": [{"reason": "Running"}]}, "args": ["a", "b"]});
        let mut shallow = Vec::new();
        flatten("", &value, false, &mut shallow);
        shallow.sort();
        assert_eq!(
            shallow,
            vec![
                ("args".to_owned(), "a, b".to_owned()),
                ("name".to_owned(), "demo".to_owned()),
                (
                    "status".to_owned(),
                    r#"{"conditions":[{"reason":"Running"}]}"#.to_owned()
                ),
            ]
        );
        let mut deep = Vec::new();
        flatten("", &value, true, &mut deep);
        assert!(
            deep.contains(&("status.conditions.0.reason".to_owned(), "Running".to_owned())),
            "{deep:?}"
        );
        assert!(deep.contains(&("args".to_owned(), "a, b".to_owned())), "{deep:?}");
    }
}
