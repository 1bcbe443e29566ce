//! `tensorsmith diff A B`: what differs between two models, in any formats, local or remote.
//! Exit 0 when they are the same, 1 when they differ, 2 on error.

use crate::render::{grouped, printable};
use crate::{fail, OpenArgs, EXIT_NO, EXIT_OK};
use clap::{Args, ValueEnum};
use std::fmt::Write as _;
use tensorsmith::index::MetaValue;
use tensorsmith::ops::diff::{compare_values, diff_structure, Diff, TensorDesc};
use tensorsmith::ops::diff_json::to_json;
use tensorsmith::ops::inspect::meta_json;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Style {
    Text,
    Json,
    Md,
}

#[derive(Args)]
pub struct DiffArgs {
    /// A file or http(s):// URL.
    a: String,
    /// A file or http(s):// URL.
    b: String,
    /// Also compare the values of tensors present in both (across dtypes and formats).
    #[arg(long)]
    values: bool,
    /// With --values, list identical tensors too.
    #[arg(long, requires = "values")]
    all: bool,
    /// Same as --format json.
    #[arg(long, conflicts_with = "format")]
    json: bool,
    #[arg(long, value_enum, default_value = "text")]
    format: Style,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: crate::progress_view::QuietArgs,
}

pub fn run(a: &DiffArgs) -> u8 {
    let opts = a.open.open_options();
    let (ma, mb) = match (
        crate::open_model(&a.a, &opts),
        crate::open_model(&a.b, &opts),
    ) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let mut d = diff_structure(&ma.index, &mb.index);
    if a.values {
        let show = a.progress.shows();
        let (r, took) = crate::progress_view::with_bar(show, "diff", || {
            compare_values(&mut d, &ma, &mb, a.all)
        });
        if let Err(e) = r {
            return fail(&e);
        }
        if show {
            let (bytes, _) = tensorsmith::progress::snapshot();
            eprintln!(
                "compared values: {}",
                crate::progress_view::size_and_time(bytes, took)
            );
        }
    }
    let style = if a.json { Style::Json } else { a.format };
    let out = match style {
        Style::Json => {
            let mut s = serde_json::to_string_pretty(&to_json(&a.a, &a.b, &d)).expect("JSON");
            s.push('\n');
            s
        }
        Style::Text => text(&a.a, &a.b, &d),
        Style::Md => markdown(&a.a, &a.b, &d),
    };
    out!("{out}");
    if d.is_same() {
        EXIT_OK
    } else {
        EXIT_NO
    }
}

fn shape(s: &[u64]) -> String {
    format!("{s:?}")
}

fn meta_text(v: &MetaValue) -> String {
    match v {
        MetaValue::Str(s) => printable(s),
        other => printable(&meta_json(other).to_string()),
    }
}

fn text(a: &str, b: &str, d: &Diff) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "--- {}\n+++ {}", printable(a), printable(b));
    if d.is_same() {
        let _ = writeln!(
            s,
            "same structure and metadata{}",
            if d.values_compared { " and values" } else { "" }
        );
        for v in &d.values {
            let _ = writeln!(s, "= values {}: identical", printable(&v.name));
        }
        return s;
    }
    for t in &d.removed {
        let _ = writeln!(
            s,
            "- tensor {}  {} {}",
            printable(&t.name),
            t.dtype,
            shape(&t.shape)
        );
    }
    for t in &d.added {
        let _ = writeln!(
            s,
            "+ tensor {}  {} {}",
            printable(&t.name),
            t.dtype,
            shape(&t.shape)
        );
    }
    for c in &d.changed {
        let _ = writeln!(
            s,
            "~ tensor {}  {} {} ({} B) -> {} {} ({} B)",
            printable(&c.a.name),
            c.a.dtype,
            shape(&c.a.shape),
            grouped(c.a.byte_length),
            c.b.dtype,
            shape(&c.b.shape),
            grouped(c.b.byte_length)
        );
    }
    for (k, v) in &d.meta_removed {
        let _ = writeln!(s, "- metadata {}: {}", printable(k), meta_text(v));
    }
    for (k, v) in &d.meta_added {
        let _ = writeln!(s, "+ metadata {}: {}", printable(k), meta_text(v));
    }
    for (k, x, y) in &d.meta_changed {
        let _ = writeln!(
            s,
            "~ metadata {}: {} -> {}",
            printable(k),
            meta_text(x),
            meta_text(y)
        );
    }
    for v in &d.values {
        if v.identical {
            let _ = writeln!(s, "= values {}: identical", printable(&v.name));
        } else {
            let _ = writeln!(
                s,
                "~ values {}: {} of {} elements differ, max |a-b| {:e}, mean |a-b| {:e}",
                printable(&v.name),
                grouped(v.differing),
                grouped(v.elements),
                v.max_abs_diff,
                v.mean_abs_diff
            );
        }
    }
    for n in &d.not_compared {
        let _ = writeln!(
            s,
            "? values {}: not compared ({})",
            printable(&n.name),
            n.reason
        );
    }
    let _ = writeln!(
        s,
        "{} added, {} removed, {} changed tensors; {} added, {} removed, {} changed metadata{}",
        d.added.len(),
        d.removed.len(),
        d.changed.len(),
        d.meta_added.len(),
        d.meta_removed.len(),
        d.meta_changed.len(),
        if d.values_compared {
            format!(
                "; {} with different values",
                crate::render::count(d.values.iter().filter(|v| !v.identical).count(), "tensor")
            )
        } else {
            String::new()
        }
    );
    s
}

/// Markdown: a table per section; `|` in names is escaped.
fn markdown(a: &str, b: &str, d: &Diff) -> String {
    let cell = |x: &str| printable(x).replace('|', "\\|");
    let mut s = String::new();
    let _ = writeln!(s, "# diff `{}` → `{}`\n", cell(a), cell(b));
    if d.is_same() {
        let _ = writeln!(
            s,
            "Same structure and metadata{}.",
            if d.values_compared { " and values" } else { "" }
        );
        return s;
    }
    if !(d.added.is_empty() && d.removed.is_empty() && d.changed.is_empty()) {
        let _ = writeln!(
            s,
            "## Tensors\n\n| change | name | a | b |\n|---|---|---|---|"
        );
        let desc =
            |t: &TensorDesc| format!("{} {} ({} B)", t.dtype, shape(&t.shape), t.byte_length);
        for t in &d.removed {
            let _ = writeln!(s, "| removed | {} | {} | |", cell(&t.name), desc(t));
        }
        for t in &d.added {
            let _ = writeln!(s, "| added | {} | | {} |", cell(&t.name), desc(t));
        }
        for c in &d.changed {
            let _ = writeln!(
                s,
                "| changed ({}) | {} | {} | {} |",
                c.fields().join(", "),
                cell(&c.a.name),
                desc(&c.a),
                desc(&c.b)
            );
        }
        s.push('\n');
    }
    if !(d.meta_added.is_empty() && d.meta_removed.is_empty() && d.meta_changed.is_empty()) {
        let _ = writeln!(
            s,
            "## Metadata\n\n| change | key | a | b |\n|---|---|---|---|"
        );
        for (k, v) in &d.meta_removed {
            let _ = writeln!(s, "| removed | {} | {} | |", cell(k), cell(&meta_text(v)));
        }
        for (k, v) in &d.meta_added {
            let _ = writeln!(s, "| added | {} | | {} |", cell(k), cell(&meta_text(v)));
        }
        for (k, x, y) in &d.meta_changed {
            let _ = writeln!(
                s,
                "| changed | {} | {} | {} |",
                cell(k),
                cell(&meta_text(x)),
                cell(&meta_text(y))
            );
        }
        s.push('\n');
    }
    if d.values_compared && !(d.values.is_empty() && d.not_compared.is_empty()) {
        let _ = writeln!(s, "## Values\n\n| name | differing | elements | max abs diff | mean abs diff |\n|---|---|---|---|---|");
        for v in &d.values {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:e} | {:e} |",
                cell(&v.name),
                v.differing,
                v.elements,
                v.max_abs_diff,
                v.mean_abs_diff
            );
        }
        for n in &d.not_compared {
            let _ = writeln!(
                s,
                "| {} | not compared: {} | | | |",
                cell(&n.name),
                cell(&n.reason)
            );
        }
    }
    s
}
