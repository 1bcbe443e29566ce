//! Whole-file fuzzing: whatever our reader accepts, our writer must write back to a file that
//! reads as the same tensors, and that is byte-identical to what the reference writer makes of
//! the same tensors. Neither step may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::{BTreeMap, HashMap};
use tensorsmith::index::MetaValue;
use tensorsmith::safetensors::{parse_bytes, Writer};
use tensorsmith::OpenOptions;

fuzz_target!(|file: &[u8]| {
    let opts = OpenOptions::new().with_packed_ints(false);
    let Ok(index) = parse_bytes(file, &opts) else {
        return;
    };
    let meta: BTreeMap<String, String> = index
        .metadata
        .iter()
        .map(|(k, v)| match v {
            MetaValue::Str(s) => (k.clone(), s.clone()),
            other => panic!("non-string metadata {other:?}"),
        })
        .collect();
    let bytes_of = |t: &tensorsmith::index::TensorInfo| {
        let r = t.data_range();
        &file[r.start as usize..r.end as usize]
    };

    let mut w = Writer::new();
    if !meta.is_empty() {
        w.metadata(meta.clone());
    }
    for t in &index.tensors {
        w.add(&t.name, t.dtype, &t.shape, bytes_of(t))
            .expect("a tensor our reader accepted is writable");
    }
    let out = w.to_bytes().expect("write to memory");

    let again = parse_bytes(&out, &opts).expect("our output reads back");
    assert_eq!(again.tensors.len(), index.tensors.len());
    for t in &index.tensors {
        let u = again.get(&t.name).expect("tensor survives");
        assert_eq!((u.dtype, &u.shape), (t.dtype, &t.shape));
        let r = u.data_range();
        assert_eq!(&out[r.start as usize..r.end as usize], bytes_of(t));
    }
    assert_eq!(again.metadata, index.metadata);

    // Byte identity with the reference writer on the same tensors and metadata.
    let views: Vec<(String, safetensors::tensor::TensorView)> = index
        .tensors
        .iter()
        .map(|t| {
            let dtype: safetensors::Dtype =
                serde_json_dtype(t.dtype.safetensors_name()).expect("reference dtype");
            let shape: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
            let view = safetensors::tensor::TensorView::new(dtype, shape, bytes_of(t))
                .expect("reference accepts the view");
            (t.name.clone(), view)
        })
        .collect();
    let meta_keys = meta.len();
    let ref_meta: Option<HashMap<String, String>> =
        (!meta.is_empty()).then(|| meta.into_iter().collect());
    let reference = safetensors::serialize(views, ref_meta).expect("reference serializes");
    if meta_keys <= 1 {
        assert_eq!(out, reference, "writer output differs from the reference");
    } else {
        // The reference keeps metadata in a HashMap, so its key order varies from run to run;
        // everything else must still match: same length, same tensor bytes, same index.
        assert_eq!(out.len(), reference.len());
        let theirs = parse_bytes(&reference, &opts).expect("reference output reads");
        assert_eq!(theirs, again);
        let data_start = again.header_len as usize;
        assert_eq!(out[data_start..], reference[data_start..]);
    }
});

/// The reference's `Dtype` by its header name.
fn serde_json_dtype(name: &str) -> Option<safetensors::Dtype> {
    use safetensors::Dtype::*;
    Some(match name {
        "BOOL" => BOOL,
        "F4" => F4,
        "F6_E2M3" => F6_E2M3,
        "F6_E3M2" => F6_E3M2,
        "U8" => U8,
        "I8" => I8,
        "F8_E5M2" => F8_E5M2,
        "F8_E4M3" => F8_E4M3,
        "F8_E8M0" => F8_E8M0,
        "F8_E4M3FNUZ" => F8_E4M3FNUZ,
        "F8_E5M2FNUZ" => F8_E5M2FNUZ,
        "I16" => I16,
        "U16" => U16,
        "F16" => F16,
        "BF16" => BF16,
        "I32" => I32,
        "U32" => U32,
        "F32" => F32,
        "C64" => C64,
        "F64" => F64,
        "I64" => I64,
        "U64" => U64,
        _ => return None,
    })
}
