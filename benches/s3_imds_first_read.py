"""A cold process's first ranged read of an S3 object with credentials from the EC2 instance
metadata service (IMDSv2), tensorsmith against boto3, in one run, alternating, on stand-ins
(tests/python/aws_standins.py: IMDS, and a SigV4-checking proxy in front of moto).

    .venv/bin/python benches/s3_imds_first_read.py [--runs 15] [--bin target/release/tensorsmith]

tensorsmith: `inspect --json s3://…` (the header by one ranged GET, credentials from IMDS);
boto3: a new interpreter that imports boto3, makes a client (IMDS found by botocore's chain)
and reads the first 64 KiB by a ranged GET_object. The floor: `tensorsmith --version` (the
process start alone). Reports medians and the ratio."""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
from aws_standins import Standins  # noqa: E402
from local_servers import moto  # noqa: E402

BOTO = """
import boto3, os
s3 = boto3.client('s3', endpoint_url=os.environ['AWS_ENDPOINT_URL_S3'])
b = s3.get_object(Bucket='models', Key='m.safetensors', Range='bytes=0-65535')['Body'].read()
assert len(b) == 65536
"""


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "tensorsmith"))
    a = ap.parse_args()
    gen = moto()
    endpoint = next(gen)
    import boto3
    import numpy as np
    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="x",
                      aws_secret_access_key="y", region_name="us-east-1")
    s3.create_bucket(Bucket="models")
    import tensorsmith
    data = tensorsmith.save({f"t{i}": np.zeros(1 << 18, np.float32) for i in range(8)})
    s3.put_object(Bucket="models", Key="m.safetensors", Body=data)
    with tempfile.TemporaryDirectory() as d, Standins(endpoint, lifetime=3600) as s:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(s.envs(d)["imds"])
        ours, boto, floor = [], [], []
        for _ in range(a.runs):
            ours.append(timed([a.bin, "inspect", "--json", "s3://models/m.safetensors"], env))
            boto.append(timed([sys.executable, "-c", BOTO], env))
            floor.append(timed([a.bin, "--version"], env))
        issued = len(s.issuer.issues("imds"))
    next(gen, None)
    m = {k: statistics.median(v) * 1000 for k, v in
         {"tensorsmith": ours, "boto3": boto, "floor": floor}.items()}
    print(f"runs {a.runs}, IMDS credentials issued {issued}")
    print(f"tensorsmith inspect (IMDS, ranged GET): {m['tensorsmith']:.1f} ms median")
    print(f"boto3 get_object Range (IMDS):          {m['boto3']:.1f} ms median")
    print(f"process start floor (--version):        {m['floor']:.1f} ms median")
    print(f"ratio boto3/tensorsmith: {m['boto3'] / m['tensorsmith']:.2f}x "
          f"(target: tensorsmith <= 1.2x boto3)")


if __name__ == "__main__":
    main()
