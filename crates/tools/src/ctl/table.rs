//! Plain-text tables: a header row and aligned columns, values picked by dotted paths.

use serde_json::Value;

/// A value as a cell: strings bare, the rest as JSON, missing as empty.
fn cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// `columns` are (header, dotted path) pairs.
pub fn render(items: &[Value], columns: &[(&str, &str)]) -> String {
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|item| columns.iter().map(|(_, p)| cell(lookup(item, p))).collect())
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let mut line = |cells: Vec<String>| {
        let text: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(text.join("  ").trim_end());
        out.push('\n');
    };
    line(columns.iter().map(|(h, _)| (*h).to_owned()).collect());
    for r in rows {
        line(r);
    }
    out
}

/// Key/value lines for one object.
pub fn render_pairs(v: &Value, rows: &[(&str, &str)]) -> String {
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, p)| format!("{k:<width$}  {}\n", cell(lookup(v, p))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn columns_line_up() {
        let items = [
            json!({"name": "a", "messages": 10, "stats": {"rate": 1.5}}),
            json!({"name": "longer", "messages": 2}),
        ];
        let t = render(
            &items,
            &[
                ("name", "name"),
                ("messages", "messages"),
                ("rate", "stats.rate"),
            ],
        );
        assert_eq!(
            t,
            "name    messages  rate\na       10        1.5\nlonger  2\n"
        );
        assert_eq!(
            render_pairs(&json!({"a": {"b": "x"}}), &[("key", "a.b")]),
            "key  x\n"
        );
    }
}
