//! The rules an ONNX model can break: one variant each, wrapped in [`crate::ErrorKind::Onnx`].
//! It lives beside the error type, not in `onnx/`, so that the ground layer owns no format.

/// A broken ONNX rule. Offsets are absolute byte positions in the `.onnx` file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxRule {
    /// A protobuf varint of more than the 10 bytes a 64-bit value can take.
    #[error("ONNX: varint at byte {offset} is longer than 10 bytes")]
    VarintTooLong {
        /// Where the varint starts.
        offset: u64,
    },
    /// A protobuf value that runs past the end of the message holding it (or of the file):
    /// the model is truncated or damaged.
    #[error("ONNX: {what} at byte {offset} runs past the end of its message ({needed} bytes needed, {available} left)")]
    PastEnd {
        /// What was being read (a varint, a fixed-width value, a length-delimited field).
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// How many bytes it needs.
        needed: u64,
        /// How many bytes of the enclosing message are left from there.
        available: u64,
    },
    /// A protobuf field tag whose wire type is none of varint, fixed64, length-delimited and
    /// fixed32 (3 and 4, the deprecated groups, are refused too).
    #[error("ONNX: wire type {wire_type} at byte {offset} is not a protobuf wire type (or a deprecated group)")]
    BadWireType {
        /// The wire type as written in the field's tag.
        wire_type: u8,
        /// Where the field's tag starts.
        offset: u64,
    },
    /// A protobuf field tag of field number 0, which protobuf does not allow.
    #[error("ONNX: field number 0 at byte {offset}")]
    FieldZero {
        /// Where the field's tag starts.
        offset: u64,
    },
    /// A known field of an ONNX message stored with another wire type than the ONNX schema
    /// gives it.
    #[error("ONNX: {message}.{field} at byte {offset} has wire type {wire_type}, not {expected}")]
    WrongWireType {
        /// The protobuf message the field belongs to (for example "TensorProto").
        message: &'static str,
        /// The field's name in the ONNX schema.
        field: &'static str,
        /// Where the field's tag starts.
        offset: u64,
        /// The wire type as written in the field's tag.
        wire_type: u8,
        /// The wire type the schema gives the field, by name ("varint", "length-delimited", …).
        expected: &'static str,
    },
    /// A string field (a tensor name, an external-data key or value, …) that is not valid
    /// UTF-8.
    #[error("ONNX: {what} is not valid UTF-8 (at byte {offset})")]
    NotUtf8 {
        /// Which string it is.
        what: &'static str,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// Subgraphs (the bodies of `If` and `Loop` nodes, held in node attributes) nested
    /// deeper than the reader follows.
    #[error("ONNX: graphs nested deeper than {limit} levels")]
    TooDeep {
        /// The deepest nesting the reader accepts.
        limit: usize,
    },
    /// A `ModelProto` without a graph: the file parses as protobuf but is no ONNX model.
    #[error("ONNX: the model has no graph (ModelProto field 7); not an ONNX model?")]
    NoGraph,
    /// A model whose graph (everything in the `.onnx` file but the weights) is larger than
    /// the reader allows (`--max-header-size`; protobuf's 2 GiB by default).
    #[error("ONNX: the graph takes {len} bytes outside the weights, over the limit of {limit} (--max-header-size)")]
    GraphTooLarge {
        /// The model's bytes other than the weights stored in it.
        len: u64,
        /// The largest graph the reader accepts, in bytes.
        limit: u64,
    },
    /// A tensor whose `data_type` is none of the ONNX tensor types.
    #[error("ONNX: data_type {0} is not a known tensor type (1 to 28)")]
    UnknownDataType(
        /// The `data_type` as written in the tensor.
        i64,
    ),
    /// A tensor with a negative entry in its `dims`.
    #[error("ONNX: negative dimension {0}")]
    NegativeDim(
        /// The dimension as written in the tensor's `dims`.
        i64,
    ),
    /// A tensor whose element count (the product of its `dims`) does not fit in 64 bits.
    #[error("ONNX: the product of the dims overflows")]
    DimsOverflow,
    /// A tensor stored as a segment of a larger one, which this library does not read.
    #[error("ONNX: the tensor has a segment (field 3); segmented tensors are not supported")]
    Segment,
    /// A tensor whose values field holds another number of bytes than its `dims` and
    /// `data_type` need (or not a whole number of values).
    #[error("ONNX: {field} holds {actual} bytes but dims and data_type need {expected}")]
    DataLength {
        /// The field holding the values (`raw_data`, `float_data`, …).
        field: &'static str,
        /// The byte length `dims` and `data_type` need.
        expected: u64,
        /// The byte length the field holds.
        actual: u64,
    },
    /// A tensor whose typed values field holds another number of values than its `dims`
    /// and `data_type` need.
    #[error("ONNX: {field} holds {actual} values but dims and data_type need {expected}")]
    ValueCount {
        /// The typed field holding the values (`float_data`, `string_data`, …).
        field: &'static str,
        /// The number of values `dims` gives (and `data_type` packs them into).
        expected: u64,
        /// The number of values the field holds.
        actual: u64,
    },
    /// A tensor whose values are in a field that the ONNX schema does not use for its type
    /// (such as strings in `raw_data`).
    #[error("ONNX: {field} cannot hold {dtype} values")]
    FieldForType {
        /// The field the values are in.
        field: &'static str,
        /// The tensor's type, by name.
        dtype: &'static str,
    },
    /// A tensor whose values are given in two places (two of `raw_data`, a typed field and
    /// external data).
    #[error("ONNX: values are given twice ({first} and {second})")]
    TwoValueFields {
        /// The first field that holds values.
        first: &'static str,
        /// The second one.
        second: &'static str,
    },
    /// A tensor of one or more elements whose values are nowhere.
    #[error("ONNX: the tensor has {elements} elements but no values (no raw_data, typed field or external data)")]
    NoValues {
        /// The tensor's element count (the product of its `dims`).
        elements: u64,
    },
    /// Two initializers of one name; the error's tensor names it.
    #[error("ONNX: initializer name appears twice")]
    DuplicateName,
    /// A tensor's `external_data` entries that break the rules: no or an empty `location`,
    /// a location with `..` or an absolute path, an `offset` or `length` that is not a decimal
    /// number or overflows.
    #[error("ONNX: external data: {0}")]
    External(
        /// The entry, and what is wrong with it.
        String,
    ),
    /// A file of external data (beside the `.onnx`) that cannot be used for the tensors that
    /// point into it.
    #[error("ONNX: external data '{location}': {rule}")]
    ExternalFile {
        /// The file's `location`, as written in the model.
        location: String,
        /// What is wrong with the file (it cannot be opened, is not a regular file, is too
        /// short for the tensor's bytes, …).
        rule: String,
    },
    /// A sparse initializer that breaks the rules: its values or indices missing, values
    /// that are not a rank-1 numeric tensor, indices that are not int64 or do not fit the
    /// values and the shape.
    #[error("ONNX: sparse initializer: {0}")]
    Sparse(
        /// What is wrong with it.
        String,
    ),
    /// A folder opened as a model that holds more than one `.onnx` file, so it is not clear
    /// which is meant.
    #[error("ONNX: the folder holds several ONNX models ({0}); name one")]
    SeveralModels(
        /// The models' file names, comma-separated.
        String,
    ),
}

impl From<OnnxRule> for super::Error {
    fn from(r: OnnxRule) -> Self {
        super::Error::new(super::ErrorKind::Onnx(r))
    }
}
