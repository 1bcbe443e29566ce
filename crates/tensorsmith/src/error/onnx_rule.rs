//! The rules an ONNX model can break: one variant each, wrapped in [`crate::ErrorKind::Onnx`].
//! It lives beside the error type, not in `onnx/`, so that the ground layer owns no format.

/// A broken ONNX rule. Offsets are absolute byte positions in the `.onnx` file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxRule {
    #[error("ONNX: varint at byte {offset} is longer than 10 bytes")]
    VarintTooLong { offset: u64 },
    #[error("ONNX: {what} at byte {offset} runs past the end of its message ({needed} bytes needed, {available} left)")]
    PastEnd {
        what: &'static str,
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("ONNX: wire type {wire_type} at byte {offset} is not a protobuf wire type (or a deprecated group)")]
    BadWireType { wire_type: u8, offset: u64 },
    #[error("ONNX: field number 0 at byte {offset}")]
    FieldZero { offset: u64 },
    #[error("ONNX: {message}.{field} at byte {offset} has wire type {wire_type}, not {expected}")]
    WrongWireType {
        message: &'static str,
        field: &'static str,
        offset: u64,
        wire_type: u8,
        expected: &'static str,
    },
    #[error("ONNX: {what} is not valid UTF-8 (at byte {offset})")]
    NotUtf8 { what: &'static str, offset: u64 },
    #[error("ONNX: graphs nested deeper than {limit} levels")]
    TooDeep { limit: usize },
    #[error("ONNX: the model has no graph (ModelProto field 7); not an ONNX model?")]
    NoGraph,
    #[error("ONNX: the graph takes {len} bytes outside the weights, over the limit of {limit} (--max-header-size)")]
    GraphTooLarge { len: u64, limit: u64 },
    #[error("ONNX: data_type {0} is not a known tensor type (1 to 28)")]
    UnknownDataType(i64),
    #[error("ONNX: negative dimension {0}")]
    NegativeDim(i64),
    #[error("ONNX: the product of the dims overflows")]
    DimsOverflow,
    #[error("ONNX: the tensor has a segment (field 3); segmented tensors are not supported")]
    Segment,
    #[error("ONNX: {field} holds {actual} bytes but dims and data_type need {expected}")]
    DataLength {
        field: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("ONNX: {field} holds {actual} values but dims and data_type need {expected}")]
    ValueCount {
        field: &'static str,
        expected: u64,
        actual: u64,
    },
    #[error("ONNX: {field} cannot hold {dtype} values")]
    FieldForType {
        field: &'static str,
        dtype: &'static str,
    },
    #[error("ONNX: values are given twice ({first} and {second})")]
    TwoValueFields {
        first: &'static str,
        second: &'static str,
    },
    #[error("ONNX: the tensor has {elements} elements but no values (no raw_data, typed field or external data)")]
    NoValues { elements: u64 },
    #[error("ONNX: initializer name appears twice")]
    DuplicateName,
    #[error("ONNX: external data: {0}")]
    External(String),
    #[error("ONNX: external data '{location}': {rule}")]
    ExternalFile { location: String, rule: String },
    #[error("ONNX: sparse initializer: {0}")]
    Sparse(String),
    #[error("ONNX: the folder holds several ONNX models ({0}); name one")]
    SeveralModels(String),
}

impl From<OnnxRule> for super::Error {
    fn from(r: OnnxRule) -> Self {
        super::Error::new(super::ErrorKind::Onnx(r))
    }
}
