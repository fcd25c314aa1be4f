//! The shell shared by every HTML page (`report`, `run`, `compare`, `sweep`, `wake report`
//! with `--html`): head and print-friendly CSS, headings, notes, preformatted text, a
//! sortable table, and the script that sorts it. Nothing is fetched: no fonts, scripts or
//! images from elsewhere. Every string given to these helpers is HTML-escaped here; only
//! SVG from [`crate::svg`] (which escapes its own text) is inserted as markup.

use std::fmt::Write;

use crate::svg::escape;
use crate::table::Table;

/// The value of a cell that is one number (`12.5`, `-3`, `+9.1%`).
fn number(text: &str) -> Option<f64> {
    text.trim().trim_end_matches('%').parse().ok()
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;font-size:12px}
table{border-collapse:collapse;font-size:12px}th,td{padding:2px 6px;border-bottom:1px solid #eee}
td.n{text-align:right;font-variant-numeric:tabular-nums}th{cursor:pointer;background:#f0f0f0;position:sticky;top:0}
.note{color:#666}svg{max-width:100%;height:auto}
table.kv td{vertical-align:top;border:0}table.kv td:first-child{white-space:nowrap;color:#555}
tfoot td{font-weight:bold;border-top:1px solid #999}li{margin:.3em 0}
@media print{th{position:static}pre{white-space:pre-wrap}svg,table{break-inside:avoid}}";

/// Sorts a `table.grid` by a clicked header (numbers descending first, text ascending first).
const SCRIPT: &str = "document.querySelectorAll('table.grid').forEach(function(t){
var hs=t.querySelectorAll('th');hs.forEach(function(h,i){h.addEventListener('click',function(){
var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows),num=h.dataset.num==='1';
var dir=h.dataset.dir==='a'?'d':'a';if(!h.dataset.dir){dir=num?'d':'a';}h.dataset.dir=dir;
rows.sort(function(x,y){var p=x.cells[i],q=y.cells[i],r;
if(num){var u=parseFloat(p.dataset.v),v=parseFloat(q.dataset.v);u=isNaN(u)?-Infinity:u;v=isNaN(v)?-Infinity:v;r=u-v;}
else{r=p.textContent.localeCompare(q.textContent);}return dir==='a'?r:-r;});
rows.forEach(function(r){b.appendChild(r);});});});});";

/// A column of a sortable table: its header and a tooltip describing it.
pub struct Column<'a> {
    pub header: &'a str,
    pub description: &'a str,
}

/// A page under construction; [`Page::finish`] closes it.
pub struct Page {
    out: String,
}

impl Page {
    /// The head (title, CSS) and the `<h1>`.
    pub fn new(title: &str) -> Self {
        let title = escape(title);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title><style>{STYLE}</style></head><body>"
        );
        let _ = writeln!(out, "<h1>{title}</h1>");
        Self { out }
    }

    /// A section heading.
    pub fn h2(&mut self, text: &str) {
        let _ = writeln!(self.out, "<h2>{}</h2>", escape(text));
    }

    /// A paragraph.
    pub fn p(&mut self, text: &str) {
        let _ = writeln!(self.out, "<p>{}</p>", escape(text));
    }

    /// A grey note under a plot (where its data come from).
    pub fn note(&mut self, text: &str) {
        let _ = writeln!(self.out, "<p class=\"note\">{}</p>", escape(text));
    }

    /// A note saying why a view is missing.
    pub fn unavailable(&mut self, why: &str) {
        self.note(&format!("Unavailable: {why}"));
    }

    /// Preformatted text (a terminal table, verbatim).
    pub fn pre(&mut self, text: &str) {
        let _ = writeln!(self.out, "<pre>{}</pre>", escape(text));
    }

    /// Label–value pairs as a two-column table whose values wrap.
    pub fn key_values(&mut self, items: &[(&str, String)]) {
        self.out.push_str("<table class=\"kv\">");
        for (k, v) in items {
            let _ = write!(
                self.out,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(k),
                escape(v)
            );
        }
        self.out.push_str("</table>\n");
    }

    /// A bulleted list; each item a line, or several joined by line breaks.
    pub fn list(&mut self, items: &[Vec<String>]) {
        self.out.push_str("<ul>");
        for lines in items {
            let escaped: Vec<String> = lines.iter().map(|l| escape(l)).collect();
            let _ = write!(self.out, "<li>{}</li>", escaped.join("<br>"));
        }
        self.out.push_str("</ul>\n");
    }

    /// A heading and text that wraps, one paragraph per line; skipped when empty.
    pub fn section_lines(&mut self, heading: &str, text: &str) {
        if text.trim().is_empty() {
            return;
        }
        self.h2(heading);
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            self.p(line.trim());
        }
    }

    /// An SVG image as rendered by [`crate::svg`] or this crate's HTML views (their text
    /// is escaped where they are built).
    pub fn svg(&mut self, svg: &str) {
        self.out.push_str(svg);
    }

    /// A table sorted by clicking a header. Each cell is its text and, for numeric cells,
    /// the value sorted by; a column is numeric when any of its cells is.
    pub fn sortable_table(&mut self, cols: &[Column<'_>], rows: &[Vec<(String, Option<f64>)>]) {
        self.sortable_table_with_totals(cols, rows, None);
    }

    /// [`Page::sortable_table`] with a totals row under it that stays put when sorting.
    pub fn sortable_table_with_totals(
        &mut self,
        cols: &[Column<'_>],
        rows: &[Vec<(String, Option<f64>)>],
        totals: Option<&[String]>,
    ) {
        let numeric: Vec<bool> = (0..cols.len())
            .map(|i| {
                rows.iter()
                    .any(|row| row.get(i).is_some_and(|c| c.1.is_some()))
            })
            .collect();
        self.out.push_str("<table class=\"grid\"><thead><tr>");
        for (c, num) in cols.iter().zip(&numeric) {
            let _ = write!(
                self.out,
                "<th data-num=\"{}\" title=\"{}\">{}</th>",
                u8::from(*num),
                escape(c.description),
                escape(c.header)
            );
        }
        self.out.push_str("</tr></thead><tbody>\n");
        for row in rows {
            self.out.push_str("<tr>");
            for (text, n) in row {
                match n {
                    Some(v) if v.is_finite() => {
                        let _ = write!(
                            self.out,
                            "<td class=\"n\" data-v=\"{v}\">{}</td>",
                            escape(text)
                        );
                    }
                    _ => {
                        let _ = write!(self.out, "<td>{}</td>", escape(text));
                    }
                }
            }
            self.out.push_str("</tr>\n");
        }
        self.out.push_str("</tbody>");
        if let Some(totals) = totals {
            self.out.push_str("<tfoot><tr>");
            for (t, num) in totals.iter().zip(&numeric) {
                let class = if *num { " class=\"n\"" } else { "" };
                let _ = write!(self.out, "<td{class}>{}</td>", escape(t));
            }
            self.out.push_str("</tr></tfoot>");
        }
        self.out.push_str("</table>\n");
    }

    /// A terminal [`Table`] as a sortable table: a cell whose text is a number (a sign and
    /// a trailing `%` allowed) sorts as one.
    pub fn table(&mut self, table: &Table) {
        let cols: Vec<Column<'_>> = table
            .headers()
            .iter()
            .map(|h| Column {
                header: h,
                description: "",
            })
            .collect();
        let rows: Vec<Vec<(String, Option<f64>)>> = table
            .rows()
            .iter()
            .map(|row| row.iter().map(|t| (t.clone(), number(t))).collect())
            .collect();
        self.sortable_table(&cols, &rows);
    }

    /// The script and the closing tags.
    pub fn finish(mut self) -> String {
        let _ = writeln!(self.out, "<script>{SCRIPT}</script>\n</body></html>");
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_string_is_escaped_and_numbers_sort_as_numbers() {
        let mut p = Page::new("t <b>");
        p.h2("h & <i>");
        p.note("n \"q\"");
        let mut t = Table::new(["name <x>", "J"]);
        t.row(["<i>pwn</i>", "12.5"]);
        p.table(&t);
        let html = p.finish();
        assert!(!html.contains("<i>") && !html.contains("<b>") && !html.contains("<x>"));
        assert!(html.contains("<title>t &lt;b&gt;</title>"));
        assert!(html.contains("<h2>h &amp; &lt;i&gt;</h2>"));
        assert!(html.contains("<td>&lt;i&gt;pwn&lt;/i&gt;</td>"));
        assert!(html.contains("<td class=\"n\" data-v=\"12.5\">12.5</td>"));
        assert!(
            html.contains("<th data-num=\"0\" title=\"\">name &lt;x&gt;</th><th data-num=\"1\"")
        );
        assert!(html.trim_end().ends_with("</html>"));
    }
}
