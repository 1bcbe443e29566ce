//! What a conversion may change: the output format's options (zTensor version, compression,
//! digests; safetensors shard size; GGUF quantization and metadata keys), float casts, densifying, dropping metadata. One options
//! type for every output format, built with [`ConvertOptions::new`] and `with_*` methods.

use crate::cast::Rounding;
use crate::digest::DigestKind;
use crate::dtype::DType;
use crate::ggml_type::GgmlType;
use crate::gguf::GgufValue;
use crate::index::ZtVersion;
use crate::ztensor::Compression;

/// Options for [`crate::ops::convert::convert`].
///
/// ```
/// use tensorsmith::ops::convert::ConvertOptions;
/// use tensorsmith::dtype::DType;
/// let o = ConvertOptions::new().with_dtype(DType::F16).with_shard_size(5_000_000_000);
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConvertOptions {
    /// Cast float tensors (F64, F32, F16, BF16) to this dtype; others are copied as they are.
    pub(crate) dtype: Option<DType>,
    pub(crate) rounding: Rounding,
    /// Safetensors: shards of at most this many tensor bytes each, plus their index. GGUF:
    /// parts of at most this many tensor bytes (gguf-py's `split_max_size`).
    pub(crate) shard_size: Option<u64>,
    /// GGUF: parts of at most this many tensors (gguf-py's `split_max_tensors`).
    pub(crate) split_max_tensors: Option<u64>,
    /// GGUF: a first part with the metadata and no tensor (gguf-py's `small_first_shard`).
    pub(crate) split_small_first: bool,
    /// Write sparse tensors as dense ones instead of refusing them.
    pub(crate) densify: bool,
    /// zTensor output in this version (also chosen by an output name ending in `.zt`: v2).
    pub(crate) zt_version: Option<ZtVersion>,
    /// zTensor: compression of every part.
    pub(crate) compression: Option<Compression>,
    /// The digest every part (zTensor) or tensor (safetensors: `tensorsmith.digest`) records.
    pub(crate) digest: Option<DigestKind>,
    /// zTensor v0.1 has no file metadata: drop it instead of refusing.
    pub(crate) drop_metadata: bool,
    pub(crate) append: bool,
    /// GGUF: quantize float tensors to this block type (where their rows are whole blocks).
    pub(crate) quantize: Option<GgmlType>,
    /// GGUF: each tensor's type chosen as llama-quantize does for this file type.
    pub(crate) quantize_mix: Option<crate::ggml_quant::mix::FileType>,
    /// GGUF, with a mix: llama-imatrix's importance matrix at this path, as llama-quantize's
    /// `--imatrix` takes it.
    pub(crate) imatrix: Option<std::path::PathBuf>,
    /// GGUF: metadata keys set (replaced or added).
    pub(crate) gguf_set: Vec<(String, GgufValue)>,
    /// ONNX output: the model whose graph is written with the input's tensors.
    pub(crate) onnx_template: Option<std::path::PathBuf>,
    /// ONNX output: every tensor in the external data file (not only those over 1,024 bytes).
    pub(crate) external_data: bool,
    /// ONNX output: input tensors the template lacks are left out instead of refused.
    pub(crate) allow_extra: bool,
    /// The store settings of an `s3://` output (`--storage-option`, `storage_options=`).
    pub(crate) storage: crate::bytes::StorageOptions,
    /// Copy tensors without checking the digests their input records (`ops::digest_guard`).
    pub(crate) skip_digest_check: bool,
    /// Safetensors output: the longest JSON header written (default: the reference's 100 MB).
    pub(crate) max_header_len: Option<u64>,
    /// A Hugging Face folder to GGUF: the converter's output type (`--outtype`).
    pub(crate) outtype: Option<crate::hf_gguf::OutType>,
    /// A Hugging Face folder to GGUF: the llama.cpp pre-tokenizer name of its BPE tokenizer.
    pub(crate) pre_tokenizer: Option<String>,
    /// A Hugging Face folder to GGUF: its tensors as they are (names, types), not as
    /// llama.cpp's converter writes them.
    pub(crate) keep_names: bool,
}

impl ConvertOptions {
    /// Safetensors output (zTensor v2 for a `.zt` name), no casts, nothing dropped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Copy tensors without checking the digests the input records (by default a tensor
    /// whose bytes no longer match its recorded digest fails the conversion, naming it).
    pub fn with_skip_digest_check(mut self, yes: bool) -> Self {
        self.skip_digest_check = yes;
        self
    }

    /// Safetensors output: headers up to `bytes` long (by default the reference's 100 MB,
    /// past which neither its reader nor ours opens a file without a raised limit).
    pub fn with_max_header_len(mut self, bytes: impl Into<Option<u64>>) -> Self {
        self.max_header_len = bytes.into();
        self
    }

    /// Cast float tensors (F64, F32, F16, BF16) to `dtype`, one of those four; tensors of
    /// other dtypes are copied as they are. `None` casts nothing.
    pub fn with_dtype(mut self, dtype: impl Into<Option<DType>>) -> Self {
        self.dtype = dtype.into();
        self
    }

    /// How casts narrow floats to 16 bits: to nearest (the default) or by truncation.
    pub fn with_rounding(mut self, rounding: Rounding) -> Self {
        self.rounding = rounding;
        self
    }

    /// Safetensors output: shards of at most `bytes` tensor bytes each, plus their index file.
    /// GGUF output: parts of at most that many tensor bytes (gguf-py's `split_max_size`).
    pub fn with_shard_size(mut self, bytes: impl Into<Option<u64>>) -> Self {
        self.shard_size = bytes.into();
        self
    }

    /// GGUF output: parts of at most `n` tensors each.
    pub fn with_split_max_tensors(mut self, n: impl Into<Option<u64>>) -> Self {
        self.split_max_tensors = n.into();
        self
    }

    /// GGUF output: a first part holding the metadata and no tensor.
    pub fn with_split_small_first(mut self, yes: bool) -> Self {
        self.split_small_first = yes;
        self
    }

    /// Write sparse tensors (zTensor CSR/COO, ONNX sparse initializers) as dense ones instead
    /// of refusing them.
    pub fn with_densify(mut self, yes: bool) -> Self {
        self.densify = yes;
        self
    }

    /// zTensor output in this version (an output name ending in `.zt` alone chooses v2).
    pub fn with_zt_version(mut self, version: impl Into<Option<ZtVersion>>) -> Self {
        self.zt_version = version.into();
        self
    }

    /// zTensor output: compress every part this way.
    pub fn with_compression(mut self, compression: impl Into<Option<Compression>>) -> Self {
        self.compression = compression.into();
        self
    }

    /// The digest every part (zTensor) or tensor (safetensors, under `tensorsmith.digest`)
    /// records.
    pub fn with_digest(mut self, digest: impl Into<Option<DigestKind>>) -> Self {
        self.digest = digest.into();
        self
    }

    /// zTensor v0.1 output, which has no file metadata: drop the input's metadata instead of
    /// refusing the conversion.
    pub fn with_drop_metadata(mut self, yes: bool) -> Self {
        self.drop_metadata = yes;
        self
    }

    /// Add the input's tensors to an existing zTensor v2 output instead of replacing it
    /// (names already there are refused; see `ztensor::append`).
    pub fn with_append(mut self, yes: bool) -> Self {
        self.append = yes;
        self
    }

    /// The store settings of an `s3://` output (credentials, endpoint, part size and
    /// concurrency of the upload); unset ones come from the environment.
    pub fn with_storage_options(mut self, storage: crate::bytes::StorageOptions) -> Self {
        self.storage = storage;
        self
    }

    /// GGUF output: quantize float tensors of two or more dimensions whose rows are whole
    /// blocks to `ty` (one of `ggml_quant::can_quantize`); others keep their float type.
    pub fn with_quantize(mut self, ty: impl Into<Option<GgmlType>>) -> Self {
        self.quantize = ty.into();
        self
    }

    /// GGUF output: each tensor's type chosen as llama-quantize (llama.cpp's
    /// `llama_model_quantize`) chooses it for the file type `ft` (`Q4_K_M`, …), from the
    /// input's llama.cpp tensor names and hyper-parameters (a GGUF input's `{arch}.*` keys);
    /// `general.file_type` and `general.quantization_version` are set as it sets them.
    pub fn with_quantize_mix(
        mut self,
        ft: impl Into<Option<crate::ggml_quant::mix::FileType>>,
    ) -> Self {
        self.quantize_mix = ft.into();
        self
    }

    /// A Hugging Face folder to GGUF: the output type as `convert_hf_to_gguf.py --outtype`
    /// names it (F32, F16, BF16, Q8_0, TQ1_0, TQ2_0; `Auto`, the default, as it guesses).
    pub fn with_outtype(mut self, t: impl Into<Option<crate::hf_gguf::OutType>>) -> Self {
        self.outtype = t.into();
        self
    }

    /// A Hugging Face folder to GGUF: the llama.cpp name of its BPE pre-tokenizer (for a
    /// tokenizer whose pre-tokenizer is not recognised).
    pub fn with_pre_tokenizer(mut self, name: impl Into<Option<String>>) -> Self {
        self.pre_tokenizer = name.into();
        self
    }

    /// A Hugging Face folder to GGUF: keep its tensors' names and types (no llama.cpp
    /// conversion).
    pub fn with_keep_names(mut self, yes: bool) -> Self {
        self.keep_names = yes;
        self
    }

    /// GGUF output with a llama-quantize mix: quantize with the importance matrix of
    /// llama-imatrix's file at `path` (GGUF or legacy `.dat`), as `llama-quantize --imatrix`
    /// does: the mix chosen as with an imatrix, each tensor quantized with its weights, and
    /// the `quantize.imatrix.*` keys recorded (the path as given).
    pub fn with_imatrix(mut self, path: impl Into<Option<std::path::PathBuf>>) -> Self {
        self.imatrix = path.into();
        self
    }

    /// ONNX output (a name ending in `.onnx`): the template whose graph is written with the
    /// input's tensors.
    pub fn with_onnx_template(mut self, path: impl Into<Option<std::path::PathBuf>>) -> Self {
        self.onnx_template = path.into();
        self
    }

    /// ONNX output: every tensor in the external data file.
    pub fn with_external_data(mut self, yes: bool) -> Self {
        self.external_data = yes;
        self
    }

    /// ONNX output: leave out input tensors the template lacks instead of refusing them.
    pub fn with_allow_extra(mut self, yes: bool) -> Self {
        self.allow_extra = yes;
        self
    }

    /// GGUF output: set metadata `key` to `value` (replaced in place, or added).
    pub fn with_gguf_key(mut self, key: impl Into<String>, value: GgufValue) -> Self {
        self.gguf_set.push((key.into(), value));
        self
    }
}

/// `5GB` (decimal, as Hugging Face means it), `2GiB` (binary), `123` (bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("bad size '{s}'"))?;
    let mult: f64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1.0,
        "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "TB" => 1e12,
        "KIB" => 1024.0,
        "MIB" => 1024.0 * 1024.0,
        "GIB" => 1024.0 * 1024.0 * 1024.0,
        "TIB" => 1024f64.powi(4),
        u => return Err(format!("unknown size unit '{u}' in '{s}'")),
    };
    let v = (n * mult).round();
    if !(1.0..=u64::MAX as f64).contains(&v) {
        return Err(format!("size '{s}' out of range"));
    }
    Ok(v as u64)
}
