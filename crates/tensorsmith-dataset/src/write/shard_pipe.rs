//! Where a batch-mode task hands its filled shards: written inline (the task waits), or, for
//! a pipelined task (a Spark task fed by a stream), written and fsynced on a thread of their
//! own while the task fills the next. At most two shards are in flight: the one being
//! written and the one being filled. A shard enters the task's report only once its file is
//! complete and synced, in the order the task filled them.

use crate::error::{DatasetError, Result};
use crate::write::shard_record::{record_written, write_shard_file, ShardTensors, WrittenShard};
use crate::write::task_context::Ctx;
use crate::write::task_report::TaskReport;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// A filled shard for the writer: its name, tensors and sample count.
type Job = (String, ShardTensors, u64);

pub(crate) struct ShardSink<'a> {
    ctx: &'a Ctx<'a>,
    pipe: Option<Pipe>,
}

struct Pipe {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Result<WrittenShard>>,
    /// Shards handed to the writer and not yet recorded (0 or 1).
    in_flight: usize,
}

/// Runs `f` with the shard sink of `ctx`'s tasks: pipelined when `ctx.pipelined`.
pub(crate) fn with_shard_sink<T>(
    ctx: &Ctx,
    f: impl FnOnce(&mut ShardSink) -> Result<T>,
) -> Result<T> {
    if !ctx.pipelined {
        return f(&mut ShardSink { ctx, pipe: None });
    }
    std::thread::scope(|s| {
        // Capacity 0: the writer takes a shard only when it has finished the last one.
        let (jobs, todo) = sync_channel::<Job>(0);
        let (done_tx, done) = sync_channel::<Result<WrittenShard>>(1);
        s.spawn(move || {
            for (name, tensors, n) in todo {
                let r = write_shard_file(ctx, name, tensors, n, true);
                let failed = r.is_err();
                if done_tx.send(r).is_err() || failed {
                    break;
                }
            }
        });
        let mut sink = ShardSink {
            ctx,
            pipe: Some(Pipe {
                jobs: Some(jobs),
                done,
                in_flight: 0,
            }),
        };
        // On an error the sink is dropped here, which closes the writer's queue: the thread
        // ends before the scope waits for it.
        f(&mut sink)
    })
}

impl ShardSink<'_> {
    /// Hands over a filled shard; returns the buffers of a shard done with (empty vectors
    /// when none is yet), for the next shard to fill.
    pub fn submit(
        &mut self,
        name: String,
        tensors: ShardTensors,
        samples: u64,
        out: &mut TaskReport,
    ) -> Result<Vec<Vec<u8>>> {
        let ctx = self.ctx;
        let Some(pipe) = self.pipe.as_mut() else {
            let w = write_shard_file(ctx, name, tensors, samples, false)?;
            return Ok(record_written(ctx, w, out));
        };
        let buffers = match pipe.in_flight {
            0 => Vec::new(),
            _ => pipe.wait(ctx, out)?,
        };
        let jobs = pipe.jobs.as_ref().expect("open until finish");
        if jobs.send((name, tensors, samples)).is_err() {
            // The writer stopped: its error is waiting.
            return Err(pipe.error());
        }
        pipe.in_flight = 1;
        Ok(buffers)
    }

    /// Waits for the shard in flight, if any, and records it.
    pub fn finish(&mut self, out: &mut TaskReport) -> Result<()> {
        if let Some(pipe) = self.pipe.as_mut() {
            pipe.jobs = None;
            if pipe.in_flight > 0 {
                pipe.wait(self.ctx, out)?;
            }
        }
        Ok(())
    }
}

impl Pipe {
    fn wait(&mut self, ctx: &Ctx, out: &mut TaskReport) -> Result<Vec<Vec<u8>>> {
        self.in_flight = 0;
        match self.done.recv() {
            Ok(r) => Ok(record_written(ctx, r?, out)),
            Err(_) => Err(writer_gone()),
        }
    }

    fn error(&mut self) -> DatasetError {
        self.in_flight = 0;
        match self.done.recv() {
            Ok(Err(e)) => e,
            _ => writer_gone(),
        }
    }
}

fn writer_gone() -> DatasetError {
    DatasetError::input("the shard writer thread ended without a result")
}
