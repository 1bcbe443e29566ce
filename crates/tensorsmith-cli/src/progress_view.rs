//! The progress bar of long commands (`convert`, `verify`, `hash --content`, `diff --values`)
//! and their one-line summary: on stderr, only when stderr is a terminal and `--quiet` is not
//! given. The library counts the bytes (`tensorsmith::progress`); this draws them.

use clap::Args;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Args, Clone)]
pub struct QuietArgs {
    /// No progress bar and no summary on stderr (warnings and notices still print).
    #[arg(long, short)]
    pub quiet: bool,
}

impl QuietArgs {
    /// Whether progress and summaries are shown: stderr is a terminal and `--quiet` not given.
    pub fn shows(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }
}

/// Runs `f` while a bar of the bytes handled (rate, ETA) is drawn, when `show`; returns what
/// `f` returned and how long it took.
pub fn with_bar<T>(show: bool, what: &str, f: impl FnOnce() -> T) -> (T, Duration) {
    tensorsmith::progress::reset();
    let start = Instant::now();
    if !show {
        let r = f();
        return (r, start.elapsed());
    }
    // Hidden until there is something to count.
    let bar = indicatif::ProgressBar::hidden();
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .expect("a valid template"),
    );
    bar.set_message(what.to_string());
    let done = AtomicBool::new(false);
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            // Nothing drawn for commands that end within a moment.
            std::thread::sleep(Duration::from_millis(300));
            while !done.load(Ordering::Relaxed) {
                let (at, total) = tensorsmith::progress::snapshot();
                if total > 0 {
                    if bar.is_hidden() {
                        bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                    }
                    bar.set_length(total.max(at));
                    bar.set_position(at);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let r = f();
        done.store(true, Ordering::Relaxed);
        r
    });
    bar.finish_and_clear();
    (r, start.elapsed())
}

/// "1.50 GiB in 2.3 s (652.1 MiB/s)": the summary's size and time.
pub fn size_and_time(bytes: u64, took: Duration) -> String {
    let secs = took.as_secs_f64();
    format!(
        "{} in {secs:.1} s ({}/s)",
        crate::render::human_bytes(bytes),
        crate::render::human_bytes((bytes as f64 / secs.max(1e-9)) as u64)
    )
}
