//! ONNX models read for their weights: `graph.initializer` (and subgraph and sparse
//! initializers) as tensors, the model's facts as `onnx.*` metadata. Bottom-up: `wire.rs`
//! (protobuf fields as ranges), `data_type.rs` (codes, typed fields, sizes), `tensor.rs` (one
//! `TensorProto`), `graph.rs` (the walk over the model), `to_index.rs` (rules, the index),
//! `typed.rs` (typed fields decoded), `format.rs` (the seam). External data files are opened
//! by the model layer (`model/onnx_external.rs`).

pub mod data_type;
mod format;
mod graph;
mod tensor;
mod to_index;
mod typed;
pub(crate) mod wire;
pub mod write;

pub use format::{Onnx, DEFAULT_MAX_GRAPH_LEN};
pub use graph::MAX_GRAPH_DEPTH;
pub use to_index::{
    check_location, ATTR_CHECKSUM, ATTR_GRAPH, ATTR_LENGTH, ATTR_LOCATION, ATTR_OFFSET,
    SPARSE_LAYOUT, STRING_LAYOUT,
};
