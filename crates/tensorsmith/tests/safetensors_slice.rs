//! Slicing along leading dimensions: contiguous selections borrow from the map, others are
//! gathered; bounds and sub-byte alignment are checked.

// One range slices the first dimension; a reversed range is a deliberate bad input.
#![allow(clippy::single_range_in_vec_init, clippy::reversed_empty_ranges)]

use tensorsmith::bytes::Backend;
use tensorsmith::dtype::DType;
use tensorsmith::safetensors::{SafetensorsFile, Writer};
use tensorsmith::ErrorKind;
use tensorsmith::OpenOptions;

fn file_with(
    dtype: DType,
    shape: &[u64],
    data: Vec<u8>,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.safetensors");
    let mut w = Writer::new();
    w.add("t", dtype, shape, data).unwrap();
    w.write_file(&p).unwrap();
    (dir, p)
}

#[test]
fn first_dimension_slices_borrow_and_inner_ones_gather() {
    // u8 tensor [4, 3, 2] holding 0..24.
    let (_d, p) = file_with(DType::U8, &[4, 3, 2], (0..24).collect());
    let f = SafetensorsFile::open(&p).unwrap();
    let v = f.tensor("t").unwrap();

    let (shape, bytes) = v.slice(&[1..3]).unwrap();
    assert_eq!(shape, [2, 3, 2]);
    assert_eq!(&bytes[..], &(6..18).collect::<Vec<u8>>()[..]);
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));

    let (shape, bytes) = v.slice(&[2..3, 1..3]).unwrap();
    assert_eq!(shape, [1, 2, 2]);
    assert_eq!(&bytes[..], &[14, 15, 16, 17]);
    assert!(matches!(bytes, std::borrow::Cow::Borrowed(_)));

    let (shape, bytes) = v.slice(&[0..4, 2..3]).unwrap();
    assert_eq!(shape, [4, 1, 2]);
    assert_eq!(&bytes[..], &[4, 5, 10, 11, 16, 17, 22, 23]);

    let (shape, bytes) = v.slice(&[1..3, 0..3, 1..2]).unwrap();
    assert_eq!(shape, [2, 3, 1]);
    assert_eq!(&bytes[..], &[7, 9, 11, 13, 15, 17]);

    let (shape, bytes) = v.slice(&[]).unwrap();
    assert_eq!(shape, [4, 3, 2]);
    assert_eq!(bytes.len(), 24);

    let (shape, bytes) = v.slice(&[2..2]).unwrap();
    assert_eq!(shape, [0, 3, 2]);
    assert!(bytes.is_empty());
}

#[test]
fn slices_multi_byte_elements_with_the_pread_backend() {
    let vals: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (_d, p) = file_with(DType::F32, &[3, 4], data);
    let opts = OpenOptions::new().with_backend(Backend::Pread);
    let f = SafetensorsFile::open_with(&p, &opts).unwrap();
    let v = f.tensor("t").unwrap();
    assert!(!v.is_borrowed());
    let (shape, bytes) = v.slice(&[1..3, 1..3]).unwrap();
    assert_eq!(shape, [2, 2]);
    let got: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [5.0, 6.0, 9.0, 10.0]);
}

#[test]
fn rejects_out_of_bounds_too_many_ranges_and_split_bytes() {
    let (_d, p) = file_with(DType::U8, &[4, 3], vec![0; 12]);
    let f = SafetensorsFile::open(&p).unwrap();
    let v = f.tensor("t").unwrap();
    for ranges in [&[0..5][..], &[3..2][..], &[0..1, 0..1, 0..1][..]] {
        let e = v.slice(ranges).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::BadSlice(_)), "{e}");
        assert_eq!(e.tensor(), Some("t"));
    }
    // F4: two elements per byte; a slice starting mid-byte cannot be expressed in bytes.
    let (_d, p) = file_with(DType::F4, &[2, 3], vec![0; 3]);
    let f = SafetensorsFile::open(&p).unwrap();
    let v = f.tensor("t").unwrap();
    assert!(v.slice(&[1..2]).is_err());
    assert!(v.slice(&[0..2]).is_ok());
    assert!(matches!(
        f.tensor("missing").unwrap_err().kind(),
        ErrorKind::NoSuchTensor
    ));
}
