//! Aligned tables like `ip` and `vppctl` print, and their cells.

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

/// A value as a table cell: `-` for nothing, `on`/`off` for a switch,
/// a list joined by commas.
pub(super) trait Cell {
    fn cell(&self) -> String;
}

macro_rules! displayed {
    ($($t:ty),*) => {$(
        impl Cell for $t {
            fn cell(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
displayed!(String, str, u8, u16, u32, u64, i64);

impl Cell for bool {
    fn cell(&self) -> String {
        if *self { "on" } else { "off" }.into()
    }
}

impl<T: Cell> Cell for Option<T> {
    fn cell(&self) -> String {
        self.as_ref().map_or_else(|| "-".into(), Cell::cell)
    }
}

impl<T: Cell> Cell for Vec<T> {
    fn cell(&self) -> String {
        self.iter().map(Cell::cell).collect::<Vec<_>>().join(",")
    }
}

/// The columns of a list view: header, and the cell of an element.
pub(super) type Columns<T> = &'static [(&'static str, fn(&T) -> String)];

/// `items` as a table of `cols`.
pub(super) fn columns_table<T>(items: &[T], cols: Columns<T>) -> String {
    let head: Vec<&str> = cols.iter().map(|c| c.0).collect();
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|x| cols.iter().map(|c| (c.1)(x)).collect())
        .collect();
    table(&head, &rows)
}

#[cfg(test)]
mod tests {
    use super::{table, Cell};

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
        assert_eq!(Some(vec![1u64, 2]).cell(), "1,2");
        assert_eq!((None as Option<u32>, true).0.cell(), "-");
        assert_eq!(false.cell(), "off");
    }
}
