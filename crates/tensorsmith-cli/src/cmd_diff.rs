//! `tensorsmith diff A B`: what differs between two models, in any formats, local or remote.
//! Exit 0 when they are the same, 1 when they differ, 2 on error. With `--values --html PAGE`
//! also a self-contained page of the value errors (the library's `diff_page`).

use crate::input_arg::shown_name;
use crate::render::{grouped, printable};
use crate::{fail, OpenArgs, EXIT_NO, EXIT_OK};
use clap::{Args, ValueEnum};
use std::fmt::Write as _;
use std::path::PathBuf;
use tensorsmith::index::MetaValue;
use tensorsmith::ops::diff::json::to_json;
use tensorsmith::ops::diff::pairing::{pair_tensors, NameMap, PairOptions, RenameRule};
use tensorsmith::ops::diff::{compare_paired, diff_paired, Diff, TensorDesc};
use tensorsmith::ops::inspect::meta_text as meta_text_of;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Style {
    Text,
    Json,
    Md,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MapArg {
    /// The llama map when exactly one side is GGUF with general.architecture = llama.
    Auto,
    /// The llama map (Hugging Face <-> GGUF names, Q/K rows put back in order).
    Llama,
    /// Names as they are (and --rename).
    None,
}

#[derive(Args)]
pub struct DiffArgs {
    /// A file (any name; a pipe, or - for stdin, is read whole into a temporary file first)
    /// or http(s):// URL.
    a: std::ffi::OsString,
    /// The same for B.
    b: std::ffi::OsString,
    /// Also compare the values of tensors present in both (across dtypes and formats).
    #[arg(long)]
    values: bool,
    /// With --values, list identical tensors too.
    #[arg(long, requires = "values")]
    all: bool,
    /// With --values, also write a self-contained HTML page of the value errors (error by
    /// layer per tensor role, the worst twenty tensors, every pair).
    #[arg(long, value_name = "PAGE.html", requires = "values")]
    html: Option<PathBuf>,
    /// Pair A's tensor FROM with B's tensor TO (repeatable; the first matching rule wins).
    /// Whole-name patterns: `*` matches any text, `{N}` digits; TO reuses the captures in
    /// order: 'model.*=*', 'h.{N}.attn=blk.{N}.attn_qkv'.
    #[arg(long, value_name = "FROM=TO")]
    rename: Vec<String>,
    /// Name map between Hugging Face and GGUF llama names (after --rename).
    #[arg(long, value_enum, default_value = "auto")]
    name_map: MapArg,
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
        crate::input_arg::open_input(&a.a, &opts),
        crate::input_arg::open_input(&a.b, &opts),
    ) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let rules: Result<Vec<RenameRule>, String> =
        a.rename.iter().map(|r| RenameRule::parse(r)).collect();
    let opts = PairOptions {
        rules: match rules {
            Ok(r) => r,
            Err(e) => return fail(&e),
        },
        name_map: match a.name_map {
            MapArg::Auto => NameMap::Auto,
            MapArg::Llama => NameMap::Llama,
            MapArg::None => NameMap::None,
        },
    };
    let pairing = match pair_tensors(&ma.index, &mb.index, &opts) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let mut d = diff_paired(&ma.index, &mb.index, &pairing);
    if a.values {
        let show = a.progress.shows();
        // The page and the JSON list every pair, identical ones too (with zero error).
        let all = a.all || a.html.is_some() || a.json || a.format == Style::Json;
        let (r, took) = crate::progress_view::with_bar(show, "diff", || {
            compare_paired(&mut d, &ma, &mb, &pairing, all)
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
    let (an, bn) = (shown_name(&a.a), shown_name(&a.b));
    let json = to_json(&an, &bn, &d);
    if let Some(page) = &a.html {
        let title = format!("diff {} → {}", file_name(&an), file_name(&bn));
        match tensorsmith::ops::diff::page::write_diff_page(page, &title, &json) {
            Ok(len) if a.progress.shows() => eprintln!(
                "wrote {}: {}, {}",
                crate::shown(page),
                crate::render::count(d.values.len(), "pair"),
                crate::render::human_bytes(len)
            ),
            Ok(_) => {}
            Err(e) => return fail(&e),
        }
    }
    let style = if a.json { Style::Json } else { a.format };
    let out = match style {
        Style::Json => {
            let mut s = serde_json::to_string_pretty(&json).expect("JSON");
            s.push('\n');
            s
        }
        Style::Text => text(&an, &bn, &d),
        Style::Md => markdown(&an, &bn, &d),
    };
    out!("{out}");
    if d.is_same() {
        EXIT_OK
    } else {
        EXIT_NO
    }
}

fn file_name(l: &str) -> &str {
    let l = l.trim_end_matches('/');
    l.rsplit('/').next().unwrap_or(l)
}

/// An optional metric as text (`-` where undefined).
fn opt(x: Option<f64>) -> String {
    x.map_or("-".to_owned(), |x| format!("{x:.4e}"))
}

fn shape(s: &[u64]) -> String {
    format!("{s:?}")
}

fn meta_text(v: &MetaValue) -> String {
    match v {
        MetaValue::Str(s) => printable(s),
        other => printable(&meta_text_of(other)),
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
            "~ tensor {}{}  {} {} ({} B) -> {} {} ({} B)",
            printable(&c.a.name),
            if c.a.name == c.b.name {
                String::new()
            } else {
                format!(" -> {}", printable(&c.b.name))
            },
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
                "~ values {}{}: {} of {} elements differ, max |a-b| {:e}, mean |a-b| {:e}, \
                 RMSE {}, rel RMSE {}, cosine {}, SNR {} dB",
                printable(&v.name),
                v.b_name
                    .as_ref()
                    .map_or(String::new(), |b| format!(" -> {}", printable(b))),
                grouped(v.differing),
                grouped(v.elements),
                v.max_abs_diff,
                v.mean_abs_diff,
                opt(v.metrics.rmse),
                opt(v.metrics.rel_rmse),
                opt(v.metrics.cosine),
                v.metrics
                    .snr_db
                    .map_or("-".to_owned(), |x| format!("{x:.2}"))
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
        "{} added, {} removed, {}; {} added, {} removed, {} changed metadata{}",
        d.added.len(),
        d.removed.len(),
        crate::render::count(d.changed.len(), "changed tensor"),
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
