//! `tensorsmith stats MODEL`: value statistics of every tensor (count, min, max, mean, std,
//! NaN/Inf/zero/subnormal counts, binary exponents, F16/BF16/FP8 fit), a table or with
//! `--json` the stable document (`tensorsmith.stats/1`). `--check` exits 1 naming every
//! tensor with NaN or Inf, or a float tensor of more than one element that is all zero
//! (`--allow-zero GLOB` exempts). Exit 0 done (and checks passed), 1 a check failed, 2 error.

use crate::progress_view::{size_and_time, with_bar, QuietArgs};
use crate::render::{count, grouped, pad_left, pad_right, printable, width, NAME_COLUMN_MAX};
use crate::{fail, OpenArgs, EXIT_ERROR, EXIT_NO, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use tensorsmith::ops::name_glob::parse_all;
use tensorsmith::ops::stats::check::check;
use tensorsmith::ops::stats::json::stats_json_text;
use tensorsmith::ops::stats::{stats, StatsOptions, StatsReport, TensorStats, Values};

#[derive(Args)]
pub struct StatsArgs {
    /// A file, a folder or shard index of a checkpoint, an http(s):// URL, or
    /// a pipe (/dev/stdin), or - for stdin: read whole into a temporary file first.
    model: PathBuf,
    /// Print the machine-readable form (schema "tensorsmith.stats/1").
    #[arg(long)]
    json: bool,
    /// Measure only tensors whose name matches this pattern (`*`, `?`, `[a-z]`; repeat for
    /// several).
    #[arg(long, value_name = "GLOB")]
    tensors: Vec<String>,
    /// Exit 1 when any tensor holds NaN or Inf, or a float tensor of more than one element
    /// is all zero, naming each (on stdout; on stderr with --json).
    #[arg(long)]
    check: bool,
    /// With --check: tensors matching this pattern may be all zero (fresh biases, LoRA B
    /// matrices); repeat for several.
    #[arg(long, value_name = "GLOB", requires = "check")]
    allow_zero: Vec<String>,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: QuietArgs,
}

pub fn run(a: &StatsArgs) -> u8 {
    let (select, allow_zero) = match (parse_all(&a.tensors), parse_all(&a.allow_zero)) {
        (Ok(s), Ok(z)) => (s, z),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let model = match crate::input_arg::open_input(a.model.as_os_str(), &a.open.open_options()) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let show = a.progress.shows();
    let opts = StatsOptions { tensors: select };
    let (report, took) = with_bar(show, "stats", || stats(&model, &opts));
    let report = match report {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    if report.tensors.is_empty() && !a.tensors.is_empty() {
        eprintln!(
            "tensorsmith: no tensor of {} matches --tensors {}",
            crate::shown(&a.model),
            printable(&a.tensors.join(" "))
        );
        return EXIT_ERROR;
    }
    if show {
        let (bytes, _) = tensorsmith::progress::snapshot();
        eprintln!(
            "measured {}: {}",
            count(report.tensors.len(), "tensor"),
            size_and_time(bytes, took)
        );
    }
    if a.json {
        out!("{}", stats_json_text(&a.model, &report));
    } else {
        out!("{}", table(&report));
    }
    if !a.check {
        return EXIT_OK;
    }
    let problems = check(&report, &allow_zero);
    for p in &problems {
        let line = format!(
            "FAILED: {}: tensor '{}': {} (rule {})",
            crate::shown(&a.model),
            printable(&p.tensor),
            p.detail,
            p.rule
        );
        if a.json {
            eprintln!("{line}");
        } else {
            outln!("{line}");
        }
    }
    if problems.is_empty() {
        if !a.json {
            outln!(
                "ok: {}: no NaN, no Inf, no all-zero float tensor",
                crate::shown(&a.model)
            );
        }
        EXIT_OK
    } else {
        if !a.json {
            outln!(
                "failed: {}: {}",
                crate::shown(&a.model),
                count(problems.len(), "problem")
            );
        }
        EXIT_NO
    }
}

/// Up to four significant digits: `0.01234`, `1.235e-07`, `6.55e+04` style.
fn sig(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return x.to_string();
    }
    let e = x.abs().log10().floor() as i32;
    if !(-3..6).contains(&e) {
        return format!("{x:.3e}");
    }
    let s = format!("{x:.*}", (3 - e).max(0) as usize);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A fraction as a percentage: `0%` for none, `-` where there is nothing to count (no
/// elements). `-` in the table always means "does not apply", never zero.
fn pct(n: u64, of: u64) -> String {
    if of == 0 {
        return "-".into();
    }
    format!("{}%", sig(n as f64 / of as f64 * 100.0))
}

fn row(t: &TensorStats) -> Vec<String> {
    let mut r = vec![
        printable(&t.name),
        t.type_name.to_string(),
        grouped(t.elements),
    ];
    let dash = || "-".to_string();
    match &t.values {
        Values::NotMeasured(why) => r.push(format!("not measured: {why}")),
        Values::Float { acc: a, .. } => {
            let some = a.finite > 0;
            let opt = |x: f64| if some { sig(x) } else { dash() };
            r.push(opt(a.min));
            r.push(opt(a.max));
            r.push(opt(a.mean));
            r.push(a.variance().map_or_else(dash, |v| sig(v.sqrt())));
            r.push(grouped(a.nan));
            r.push(grouped(a.pos_inf + a.neg_inf));
            r.push(pct(a.zeros, a.elements));
            r.push(pct(a.subnormals, a.elements));
            let e: Vec<i32> = a.exponents().map(|(e, _)| e).collect();
            r.push(match (e.first(), e.last()) {
                (Some(lo), Some(hi)) => format!("{lo}..{hi}"),
                _ => dash(),
            });
            for k in [0, 1, 2, 3] {
                r.push(format!(
                    "{}/{}",
                    pct(a.overflow[k], a.elements),
                    pct(a.flush[k], a.elements)
                ));
            }
        }
        Values::Int { acc, .. } => {
            let some = acc.count > 0;
            r.push(if some { acc.min.to_string() } else { dash() });
            r.push(if some { acc.max.to_string() } else { dash() });
            r.push(if some { sig(acc.mean) } else { dash() });
            r.push(acc.variance().map_or_else(dash, |v| sig(v.sqrt())));
            r.extend(["0".into(), "0".into()]);
            r.push(pct(acc.zeros, acc.count));
            r.extend(std::iter::repeat_n(dash(), 6));
        }
    }
    r
}

/// The table: one row per tensor; the fit columns are overflow/flush-to-zero percentages.
fn table(report: &StatsReport) -> String {
    use std::fmt::Write as _;
    let head: Vec<String> = [
        "tensor", "type", "elements", "min", "max", "mean", "std", "nan", "inf", "zero", "subn",
        "log2|x|", "f16 o/f", "bf16 o/f", "e4m3 o/f", "e5m2 o/f",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rows: Vec<Vec<String>> = report.tensors.iter().map(row).collect();
    // Each column as wide as its widest cell in terminal columns, except that the name
    // column stops at NAME_COLUMN_MAX (a longer name shifts only its own row).
    let mut widths = vec![0usize; head.len()];
    for r in std::iter::once(&head).chain(&rows) {
        // A "not measured" row's last cell spans the rest.
        let cells = if r.len() < head.len() {
            &r[..r.len() - 1]
        } else {
            &r[..]
        };
        for (w, c) in widths.iter_mut().zip(cells) {
            *w = (*w).max(width(c));
        }
    }
    widths[0] = widths[0].min(NAME_COLUMN_MAX.max(width(&head[0])));
    let mut s = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i == 0 || i == 1 || r.len() < head.len() && i == r.len() - 1 {
                let _ = write!(line, "{}  ", pad_right(c, widths[i]));
            } else {
                let _ = write!(line, "{}  ", pad_left(c, widths[i]));
            }
        }
        let _ = writeln!(s, "{}", line.trim_end());
    }
    let measured = report
        .tensors
        .iter()
        .filter(|t| !matches!(t.values, Values::NotMeasured(_)))
        .count();
    let _ = writeln!(
        s,
        "{} measured, {} not",
        count(measured, "tensor"),
        grouped((report.tensors.len() - measured) as u64)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_short() {
        assert_eq!(sig(0.012345), "0.01235");
        assert_eq!(sig(1.5), "1.5");
        assert_eq!(sig(-65504.0), "-65504");
        assert_eq!(sig(1e-7), "1.000e-7");
        assert_eq!(sig(3e6), "3.000e6");
        assert_eq!(pct(1, 3), "33.33%");
        assert_eq!(pct(0, 3), "0%");
        assert_eq!(pct(0, 0), "-");
    }
}
