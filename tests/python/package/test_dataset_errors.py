"""Dataset errors subclass the built-in exception a Python user would catch (as the README
promises): a missing folder FileNotFoundError, a missing KV key KeyError, a bad input or
option ValueError; every one is still a DatasetFailure and a TensorsmithError."""

import pyarrow as pa
import pytest

import tensorsmith
from tensorsmith.errors import DatasetFailure, TensorsmithError


@pytest.fixture
def kv(tmp_path):
    t = pa.table({"id": ["a", "b"], "v": pa.array([[1.0], [2.0]], type=pa.list_(pa.float32()))})
    tensorsmith.write_dataset(t, tmp_path / "kv", name_col="id", dtype="F32")
    return tensorsmith.Dataset(tmp_path / "kv"), t


def test_missing_folder_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such dataset folder") as e:
        tensorsmith.Dataset(tmp_path / "nope")
    assert isinstance(e.value, DatasetFailure) and isinstance(e.value, TensorsmithError)
    assert str(tmp_path / "nope") in str(e.value)


def test_a_file_is_not_a_dataset(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="a file, not a dataset"):
        tensorsmith.Dataset(tmp_path / "f.txt")


def test_missing_key_is_key_error_with_a_readable_message(kv):
    ds, _ = kv
    with pytest.raises(KeyError) as e:
        ds["nope"]
    assert isinstance(e.value, DatasetFailure)
    assert str(e.value) == "no tensor 'nope' in the dataset"
    assert ds["a__v"].tolist() == [1.0]


def test_bad_input_and_options_are_value_errors(kv, tmp_path):
    _, t = kv
    with pytest.raises(ValueError, match="not a tensor column"):
        tensorsmith.write_dataset(t, tmp_path / "b", batch_size=1)
    with pytest.raises(ValueError, match="a dtype is required"):
        tensorsmith.write_dataset(t.select(["v"]), tmp_path / "c", batch_size=1)
    with pytest.raises(ValueError):
        tensorsmith.write_dataset(t, tmp_path / "d", batch_size=1, dtype="F32", tail_strategy="later")
