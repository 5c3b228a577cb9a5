"""PyTorch's side of tests/lua/test_nn_torch.lua: netcl's models.MLP checkpoints in and out of a
torch.nn.Sequential of the same layout. Safetensors files are read and written here with the
standard library and torch.frombuffer (the format is a JSON header and raw little-endian data);
the safetensors package is used instead when it is installed.

  torch_mlp.py probe                          exits 0 when torch imports
  torch_mlp.py logits CKPT INPUTS SIZES       loads CKPT (strict) into Sequential(Linear, ReLU, ...)
                                              with widths SIZES ("20,32,5"), prints JSON logits of
                                              the tensor "x" in INPUTS
  torch_mlp.py export OUT INPUTS SIZES SEED   writes a freshly initialized torch model's state_dict
                                              to OUT, and prints JSON logits of "x" in INPUTS
"""
import json
import struct
import sys

import torch

try:
    import safetensors.torch as st_torch
except ImportError:
    st_torch = None

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32}
NAMES = {v: k for k, v in DTYPES.items()}


def read_st(path):
    if st_torch is not None:
        return st_torch.load_file(path)
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        a, b = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]]
        if b > a:
            t = torch.frombuffer(bytearray(blob[base + a:base + b]), dtype=dtype)
        else:
            t = torch.empty(0, dtype=dtype)
        out[name] = t.reshape(entry["shape"])
    return out


def write_st(path, tensors):
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    if st_torch is not None:
        st_torch.save_file(tensors, path)
        return
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = t.numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def logits(model, inputs):
    x = read_st(inputs)["x"]
    with torch.no_grad():
        return model(x).tolist()


def main(argv):
    if argv[1] == "probe":
        return 0
    sizes = [int(s) for s in argv[4].split(",")]
    if argv[1] == "logits":
        model = mlp(sizes)
        model.load_state_dict(read_st(argv[2]), strict=True)
        json.dump({"logits": logits(model, argv[3])}, sys.stdout)
    elif argv[1] == "export":
        torch.manual_seed(int(argv[5]))
        model = mlp(sizes)
        write_st(argv[2], model.state_dict())
        json.dump({"logits": logits(model, argv[3])}, sys.stdout)
    else:
        print("unknown command " + argv[1], file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
