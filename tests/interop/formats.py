"""Independent readers and writers of safetensors and npy files, for the interop tests in
tests/lua/test_io.lua. Written from the format specifications with the standard library
(struct, json, ast); numpy, and the safetensors package, are used as well when installed.

  formats.py probe                     -> JSON: which optional modules are importable
  formats.py read-st PATH              -> JSON: {"tensors": {name: {dtype, shape, values}}, "metadata": {...}}
  formats.py write-st PATH             writes a known file (see KNOWN below), unaligned on purpose
  formats.py read-npy PATH             -> JSON: {dtype, shape, values}
  formats.py write-npy PATH DESCR      writes arange(6).reshape(2, 3) with that dtype ('<f4', '|b1', ...)
"""
import ast
import json
import struct
import sys

try:
    import numpy
except ImportError:
    numpy = None

ST_FORMATS = {"F32": ("f", 4), "F64": ("d", 8), "I32": ("i", 4), "I64": ("q", 8), "U8": ("B", 1), "BOOL": ("?", 1)}
NPY_FORMATS = {"<f4": ("f", 4), "<f8": ("d", 8), "<i4": ("i", 4), "<i8": ("q", 8), "|u1": ("B", 1), "|b1": ("?", 1)}


def product(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def unpack(fmt, size, data, count):
    assert len(data) == size * count, (len(data), size, count)
    values = list(struct.unpack("<%d%s" % (count, fmt), data))
    return values


def read_st(path):
    with open(path, "rb") as f:
        blob = f.read()
    (hlen,) = struct.unpack("<Q", blob[:8])
    assert (8 + hlen) % 8 == 0, "data section not 8-byte aligned"
    header = json.loads(blob[8 : 8 + hlen])
    data = blob[8 + hlen :]
    meta = header.pop("__metadata__", {})
    out = {}
    spans = []
    for name, info in header.items():
        begin, end = info["data_offsets"]
        fmt, size = ST_FORMATS[info["dtype"]]
        assert begin % size == 0, "%s is not aligned to its element size" % name
        count = product(info["shape"])
        values = unpack(fmt, size, data[begin:end], count)
        if numpy is not None:
            np_dtype = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1", "BOOL": "?"}[info["dtype"]]
            arr = numpy.frombuffer(data[begin:end], dtype=np_dtype).reshape(info["shape"])
            assert arr.flatten().tolist() == values
        out[name] = {"dtype": info["dtype"], "shape": info["shape"], "values": values}
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for begin, end in spans:
        assert begin == pos, "hole or overlap at %d" % begin
        pos = end
    assert pos == len(data), "unindexed bytes after the tensors"
    result = {"tensors": out, "metadata": meta, "numpy": numpy is not None}
    try:
        from safetensors.numpy import load_file

        loaded = load_file(path)
        assert sorted(loaded) == sorted(out)
        for name, arr in loaded.items():
            assert arr.flatten().tolist() == out[name]["values"], name
        result["safetensors"] = True
    except ImportError:
        result["safetensors"] = False
    return result


# A file as another writer might lay it out: the U8 tensor first, so the F32 and I64 data
# after it start at odd offsets; metadata last; header padded with a newline and spaces.
KNOWN = [
    ("bytes", "U8", [3], struct.pack("<3B", 1, 2, 255)),
    ("weight", "F32", [2, 3], struct.pack("<6f", 0.5, -1.0, 2.0, 3.25, -4.5, 1e-3)),
    ("big", "I64", [2], struct.pack("<2q", -(2**40), 2**62)),
    ("mask", "BOOL", [2, 1], struct.pack("<2?", True, False)),
    ("scalar", "F64", [], struct.pack("<d", 3.141592653589793)),
    ("i32", "I32", [2], struct.pack("<2i", -7, 2**31 - 1)),
    ("empty", "F32", [0, 4], b""),
]


def write_st(path):
    header = {}
    data = b""
    for name, dtype, shape, raw in KNOWN:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"writer": "formats.py", "epoch": "7"}
    text = json.dumps(header).encode() + b"\n"
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def read_npy(path):
    if numpy is not None:
        arr = numpy.load(path)
        descr = arr.dtype.str
        return {"dtype": descr, "shape": list(arr.shape), "values": arr.flatten().tolist(), "numpy": True}
    with open(path, "rb") as f:
        blob = f.read()
    assert blob[:6] == b"\x93NUMPY", "bad magic"
    major = blob[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", blob[8:10])
        start = 10
    else:
        (hlen,) = struct.unpack("<I", blob[8:12])
        start = 12
    assert (start + hlen) % 64 == 0, "data not 64-byte aligned"
    header = ast.literal_eval(blob[start : start + hlen].decode("latin1"))
    fmt, size = NPY_FORMATS[header["descr"]]
    assert header["fortran_order"] is False
    count = product(header["shape"])
    values = unpack(fmt, size, blob[start + hlen :], count)
    return {"dtype": header["descr"], "shape": list(header["shape"]), "values": values, "numpy": False}


def write_npy(path, descr):
    if numpy is not None:
        numpy.save(path, numpy.arange(6).reshape(2, 3).astype(numpy.dtype(descr)), allow_pickle=False)
        return
    fmt, size = NPY_FORMATS[descr]
    values = [bool(v) for v in range(6)] if fmt == "?" else list(range(6))
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (2, 3), }" % descr
    text += " " * (-(10 + len(text) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode() + struct.pack("<6" + fmt, *values))


def main(argv):
    cmd = argv[1]
    if cmd == "probe":
        try:
            import safetensors  # noqa: F401

            have_st = True
        except ImportError:
            have_st = False
        print(json.dumps({"numpy": numpy is not None, "safetensors": have_st}))
    elif cmd == "read-st":
        print(json.dumps(read_st(argv[2])))
    elif cmd == "write-st":
        write_st(argv[2])
    elif cmd == "read-npy":
        print(json.dumps(read_npy(argv[2])))
    elif cmd == "write-npy":
        write_npy(argv[2], argv[3])
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main(sys.argv)
