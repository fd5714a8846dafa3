"""Reads a safetensors file by hand (numpy only), for tools/make_hf_folder.py and
tools/check_hf_layout.py: an 8-byte little-endian header length, a JSON header
{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "U8": np.uint8}


def read_safetensors(path):
    """The tensors of `path` as numpy arrays by name, in the order of their data in the file.

    Exits with a message naming the tensor when its dtype is not one of DTYPES.
    """
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in DTYPES:
            sys.exit(f"{path}: tensor {name} has dtype {info['dtype']}; expected one of {sorted(DTYPES)}")
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"]).copy()
    order = sorted(out, key=lambda k: header[k]["data_offsets"][0])
    return {k: out[k] for k in order}
