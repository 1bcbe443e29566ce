#!/usr/bin/env bash
# `dataset write` to s3:// against the server's floor: 256 MiB of float32 rows (Parquet, 64
# shards of 4 MiB) written to a local folder and to moto (in memory, on 127.0.0.1), and the
# same shard files uploaded by boto3 alone (upload_file, 10 threads: the floor of the same
# bytes), twice each, with wall time and peak RSS (/usr/bin/time).
#
#     cargo build --profile test-release -p tensorsmith-cli
#     benches/dataset_s3_write.sh
#
# moto keeps objects in memory: both sides mostly measure the server (the ratio is what
# counts). Environment: TENSORSMITH_BIN (default target/test-release/tensorsmith).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${TENSORSMITH_BIN:-target/test-release/tensorsmith}
PY=.venv/bin/python
WORK=$(mktemp -d)
PORT=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
$PY -c "from moto.server import main; main(['-H', '127.0.0.1', '-p', '$PORT'])" >/dev/null 2>&1 &
MOTO=$!
trap 'kill $MOTO; rm -rf "$WORK"' EXIT
export AWS_ACCESS_KEY_ID=AKIABENCH AWS_SECRET_ACCESS_KEY=benchsecret AWS_REGION=us-east-1
export AWS_ENDPOINT_URL=http://127.0.0.1:$PORT
$PY - "$WORK/in.parquet" <<'PY'
import socket, sys, time
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
n, d = 65536, 1024
v = np.random.default_rng(0).standard_normal(n * d, dtype=np.float32)
pq.write_table(pa.table({"x": pa.FixedSizeListArray.from_arrays(pa.array(v), d)}), sys.argv[1])
for _ in range(300):
    try:
        import boto3
        boto3.client("s3").create_bucket(Bucket="bench")
        break
    except Exception:
        time.sleep(0.1)
PY
for i in 1 2; do
  /usr/bin/time -f "local write: %e s, peak RSS %M KiB" "$B" dataset write "$WORK/in.parquet" \
      "$WORK/local" --batch-size 1024 --dtype F32 --mode overwrite --retain 0 2>&1 | tail -1
  /usr/bin/time -f "s3 write:    %e s, peak RSS %M KiB" "$B" dataset write "$WORK/in.parquet" \
      "s3://bench/ds$i" --batch-size 1024 --dtype F32 2>&1 | tail -1
  $PY - "$WORK/local" "floor$i" <<'PY'
import glob, os, sys, time
from concurrent.futures import ThreadPoolExecutor
import boto3
s3 = boto3.client("s3")
files = sorted(glob.glob(os.path.join(sys.argv[1], "part-*.safetensors")))
t = time.time()
with ThreadPoolExecutor(10) as ex:
    list(ex.map(lambda f: s3.upload_file(f, "bench", f"{sys.argv[2]}/{os.path.basename(f)}"), files))
mib = sum(map(os.path.getsize, files)) / 2**20
print(f"boto3 floor: {time.time() - t:.2f} s for {mib:.0f} MiB in {len(files)} files")
PY
done
