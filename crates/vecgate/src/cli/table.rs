//! Aligned tables like `ip` and `vppctl` print, and cells of JSON values.

use serde_json::Value;

/// Aligned columns; the last column is not padded.
pub fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            }
        }
        s.trim_end().to_owned() + "\n"
    };
    let mut out = line(head.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

pub(super) fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "-".into(),
        Value::Bool(b) => if *b { "on" } else { "off" }.into(),
        Value::Array(a) => a.iter().map(s).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn rows(v: &Value, keys: &[&str]) -> Vec<Vec<String>> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|o| keys.iter().map(|k| s(&o[*k])).collect())
                .collect()
        })
        .unwrap_or_default()
}

/// The columns of a list view: (header, JSON key of each element).
pub(super) type Columns = &'static [(&'static str, &'static str)];

/// The elements of the JSON array `v` as a table of `cols`.
pub(super) fn columns_table(v: &Value, cols: Columns) -> String {
    let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let keys: Vec<&str> = cols.iter().map(|c| c.1).collect();
    table(&head, &rows(v, &keys))
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn table_aligns() {
        let t = table(
            &["A", "Bee"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "22".into()],
            ],
        );
        assert_eq!(t, "A    Bee\nxyz  1\nq    22\n");
    }
}
