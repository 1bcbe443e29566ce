//! `tensorsmith report MODEL -o PAGE.html`: one self-contained HTML page about a model
//! (summary, treemap of parameters by name, bits per weight by layer, a table of every
//! tensor; with `--stats`, each tensor's value statistics in it). The library builds and writes the page; this parses, calls and says what it wrote.

use crate::progress_view::{with_bar, QuietArgs};
use crate::render::{count, human_bytes};
use crate::{fail, shown, OpenArgs, EXIT_OK};
use clap::Args;
use std::path::PathBuf;
use std::time::Instant;
use tensorsmith::ops::report::{write_report, ReportOptions};
use tensorsmith::ops::stats::{stats, StatsOptions};

#[derive(Args)]
pub struct ReportArgs {
    /// A model: a file, a folder or shard index of a checkpoint, or an http(s):// URL (only
    /// the header is read), or a pipe (- for stdin: read whole into a temporary file first).
    model: std::ffi::OsString,
    /// The page to write (replaced atomically).
    #[arg(short, long, value_name = "PAGE.html")]
    output: PathBuf,
    /// The page's title (default: the model's file name).
    #[arg(long)]
    title: Option<String>,
    /// Read every tensor once and add its value statistics to the table (those of
    /// `tensorsmith stats`: range, mean, std, NaN/Inf/zeros, binary exponents, F16/BF16/FP8
    /// fit). Without it only the header is read.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    open: OpenArgs,
    #[command(flatten)]
    progress: QuietArgs,
}

pub fn run(a: &ReportArgs) -> u8 {
    let start = Instant::now();
    let model = match crate::input_arg::open_input(&a.model, &a.open.open_options()) {
        Ok(m) => m,
        Err(e) => return fail(&e),
    };
    let mut opts = ReportOptions::new();
    if let Some(t) = &a.title {
        opts = opts.with_title(t.clone());
    }
    if a.stats {
        let (measured, _) = with_bar(a.progress.shows(), "stats", || {
            stats(&model, &StatsOptions::default())
        });
        match measured {
            Ok(r) => opts = opts.with_stats_report(&r),
            Err(e) => return fail(&e),
        }
    }
    match write_report(&model, &a.output, &opts) {
        Ok(len) => {
            if a.progress.shows() {
                eprintln!(
                    "wrote {}: {}, {} in {:.1} s",
                    shown(&a.output),
                    count(model.index.tensors.len(), "tensor"),
                    human_bytes(len),
                    start.elapsed().as_secs_f64()
                );
            }
            EXIT_OK
        }
        Err(e) => fail(&e),
    }
}
