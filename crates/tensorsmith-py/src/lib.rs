//! The `tensorsmith._native` extension module: the Rust core as the Python package
//! `tensorsmith` uses it (python/tensorsmith wraps these in the public API).

mod batch_pipe;
mod buffer;
mod checks;
mod dataset;
mod errors;
mod fetch;
mod file;
mod ops;
mod quant;
mod reader;
mod save;
mod stats;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<buffer::Bytes>()?;
    m.add_class::<file::File>()?;
    m.add_class::<dataset::DatasetReader>()?;
    m.add_class::<dataset::JobHeartbeat>()?;
    m.add_function(wrap_pyfunction!(fetch::fetch_into, m)?)?;
    m.add_function(wrap_pyfunction!(save::serialize, m)?)?;
    m.add_function(wrap_pyfunction!(save::serialize_file, m)?)?;
    m.add_function(wrap_pyfunction!(save::parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(ops::inspect_json, m)?)?;
    m.add_function(wrap_pyfunction!(ops::hash, m)?)?;
    m.add_function(wrap_pyfunction!(ops::diff_json, m)?)?;
    m.add_function(wrap_pyfunction!(stats::stats_json, m)?)?;
    m.add_function(wrap_pyfunction!(ops::convert, m)?)?;
    m.add_function(wrap_pyfunction!(ops::report, m)?)?;
    m.add_function(wrap_pyfunction!(ops::parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(quant::quantize, m)?)?;
    m.add_function(wrap_pyfunction!(checks::validate_json, m)?)?;
    m.add_function(wrap_pyfunction!(checks::verify_json, m)?)?;
    m.add_function(wrap_pyfunction!(checks::dataset_info_json, m)?)?;
    m.add_function(wrap_pyfunction!(checks::dataset_verify_json, m)?)?;
    m.add_function(wrap_pyfunction!(checks::dataset_clean_json, m)?)?;
    m.add_function(wrap_pyfunction!(checks::dataset_export, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::check_options, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_job_task, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::task_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_job_range, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::commit_job_reports, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::abort_job_shards, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::dataset_exists, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::input_files, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
