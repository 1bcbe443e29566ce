//! A Spark task's Arrow stream handed to the Rust writer on another thread: the calling
//! thread pulls batches from the stream (each pull takes the GIL inside pyarrow while Spark
//! produces the batch), the writer thread fills, writes and fsyncs shards from them. A
//! bounded queue of batches (moved, never copied) lies between the two.

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{ArrowError, SchemaRef};
use std::sync::mpsc::{sync_channel, Receiver};

/// Batches pulled ahead of the writer (each a few thousand rows: bounded memory).
const AHEAD: usize = 2;

/// The writer's end: a `RecordBatchReader` over the queue.
pub struct Queued {
    schema: SchemaRef,
    rx: Receiver<Result<RecordBatch, ArrowError>>,
}

impl Iterator for Queued {
    type Item = Result<RecordBatch, ArrowError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rx.recv().ok()
    }
}

impl RecordBatchReader for Queued {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// Runs `write` on a thread of its own over the batches of `source`, which this thread
/// pulls meanwhile. When `write` returns early (an error), its end of the queue is dropped
/// and pulling stops. A pull error is handed to the writer as the stream's error.
pub fn pipelined<T: Send>(
    source: impl RecordBatchReader,
    write: impl FnOnce(Queued) -> T + Send,
) -> T {
    let (tx, rx) = sync_channel(AHEAD);
    let queued = Queued {
        schema: source.schema(),
        rx,
    };
    std::thread::scope(|s| {
        let writer = s.spawn(move || write(queued));
        for b in source {
            let failed = b.is_err();
            if tx.send(b).is_err() || failed {
                break;
            }
        }
        drop(tx);
        writer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
