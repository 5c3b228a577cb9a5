"""Writes the seed corpus of the reader fuzz targets (corpus/<reader>/): valid files and one
file per kind of malformed input the readers reject. Re-run after adding a case; libFuzzer
adds the inputs it finds interesting to the same folders."""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(reader, name, data):
    d = os.path.join(HERE, "corpus", reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st(header, data=b"", pad=True):
    text = json.dumps(header, separators=(",", ":")).encode() if not isinstance(header, bytes) else header
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


F32_2 = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
D8 = struct.pack("<ff", 1.0, 2.0)

put("safetensors", "ok_one", st(F32_2, D8))
put("safetensors", "ok_many", st({
    "__metadata__": {"format": "pt"},
    "w": {"dtype": "F64", "shape": [2, 1], "data_offsets": [0, 16]},
    "i": {"dtype": "I32", "shape": [1], "data_offsets": [16, 20]},
    "b": {"dtype": "BOOL", "shape": [2], "data_offsets": [20, 22]},
    "u": {"dtype": "U8", "shape": [0, 3], "data_offsets": [22, 22]},
    "l": {"dtype": "I64", "shape": [], "data_offsets": [22, 30]}}, bytes(16) + bytes(4) + b"\x01\x00" + bytes(8)))
put("safetensors", "ok_empty", st({}))
put("safetensors", "bad_truncated-length", b"\x10\x00\x00")
put("safetensors", "bad_truncated-data", st(F32_2, D8)[:-3])
put("safetensors", "bad_header-past-end", struct.pack("<Q", 99999) + b"{}" + bytes(10))
put("safetensors", "bad_header-huge", b"\xff" * 8 + b"{}")
put("safetensors", "bad_not-json", st(b"{'a': 1}"))
put("safetensors", "bad_not-object", st([1, 2]))
put("safetensors", "bad_unknown-dtype", st({"a": {"dtype": "F33", "shape": [2], "data_offsets": [0, 8]}}, D8))
put("safetensors", "bad_foreign-dtype", st({"a": {"dtype": "I16", "shape": [4], "data_offsets": [0, 8]}}, D8))
put("safetensors", "ok_half", st({"h": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
                                  "b": {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]}}, D8))
put("safetensors", "bad_shape-bytes", st({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, D8))
put("safetensors", "bad_shape-overflow", st({"a": {"dtype": "F64", "shape": [2**62, 4], "data_offsets": [0, 8]}}, D8))
put("safetensors", "bad_offsets-range", st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, D8))
put("safetensors", "bad_offsets-reversed", st({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}, D8))
put("safetensors", "bad_overlap", st({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                      "b": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}, D8))
put("safetensors", "bad_hole", st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, D8))
put("safetensors", "bad_tail", st(F32_2, D8 + b"xx"))
put("safetensors", "bad_duplicate", st(b'{"a":{},"a":{}}'))
put("safetensors", "bad_bool", st({"m": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\x01\x07"))
put("safetensors", "bad_metadata", st({"__metadata__": {"epoch": 3}}))
put("safetensors", "bad_dims", st({"a": {"dtype": "U8", "shape": [1] * 9, "data_offsets": [0, 1]}}, b"x"))


def npy(header, data=b"", major=1):
    text = header + " " * (-(10 + len(header) + 1) % 64) + "\n"
    size = struct.pack("<H", len(text)) if major == 1 else struct.pack("<I", len(text))
    return b"\x93NUMPY" + bytes([major, 0]) + size + text.encode() + data


F4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"
put("npy", "ok_f4", npy(F4, bytes(16)))
put("npy", "ok_fortran", npy("{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3), }", bytes(48)))
put("npy", "ok_v2-bool", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", b"\x00\x01\x01", 2))
put("npy", "ok_scalar", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", bytes(8)))
put("npy", "ok_f2", npy("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", b"\x00\x3c\x00\x7c\x01\x00"))
put("npy", "bad_magic", b"PK\x03\x04" + bytes(40))
put("npy", "bad_short", b"\x93NUMPY")
put("npy", "bad_version", b"\x93NUMPY\x09\x00\x10\x00{}")
put("npy", "bad_header-past-end", b"\x93NUMPY\x01\x00\xff\xff{}")
put("npy", "bad_truncated", npy(F4, bytes(12)))
put("npy", "bad_extra", npy(F4, bytes(20)))
put("npy", "bad_dtype", npy(F4.replace("<f4", "<c16"), bytes(64)))
put("npy", "bad_big-endian", npy(F4.replace("<f4", ">f4"), bytes(16)))
put("npy", "bad_structured", npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", bytes(8)))
put("npy", "bad_missing-key", npy("{'descr': '<f4', 'shape': (2, 2), }", bytes(16)))
put("npy", "bad_duplicate-key", npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", bytes(8)))
put("npy", "bad_shape", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -1), }", bytes(8)))
put("npy", "bad_shape-overflow", npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"))
put("npy", "bad_unterminated", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,", bytes(8)))
put("npy", "bad_bool", npy("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", b"\x00\x03"))


def idx(code, dims, data):
    return bytes([0, 0, code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + data


put("idx", "ok_ubyte", idx(0x08, [2, 3], bytes(range(6))))
put("idx", "ok_float-gz", gzip.compress(idx(0x0D, [2], struct.pack(">ff", 1.5, -2.0)), mtime=0))
put("idx", "ok_short", idx(0x0B, [2], struct.pack(">hh", -3, 300)))
put("idx", "ok_two-members", gzip.compress(idx(0x08, [4], b"ab"), mtime=0) + gzip.compress(b"cd", mtime=0))
put("idx", "bad_magic", b"\x01\x02\x08\x01" + bytes(8))
put("idx", "bad_type", idx(0x07, [1], b"x"))
put("idx", "bad_zero-dims", b"\x00\x00\x08\x00")
put("idx", "bad_many-dims", b"\x00\x00\x08\x09" + bytes(36))
put("idx", "bad_short-header", b"\x00\x00\x08\x02" + bytes(4))
put("idx", "bad_truncated", idx(0x08, [2, 3], b"12345"))
put("idx", "bad_wrong-dims", idx(0x08, [2, 2], b"123456"))
put("idx", "bad_gz-truncated", gzip.compress(idx(0x08, [100], bytes(100)), mtime=0)[:20])
put("idx", "bad_gz-corrupt", b"\x1f\x8b\x08\x00" + bytes(6) + b"\xff" * 20)
put("idx", "bad_gz-garbage", gzip.compress(idx(0x08, [1], b"x"), mtime=0) + b"junk")
put("idx", "bad_gz-bomb-dims", gzip.compress(idx(0x08, [60000, 784], b""), mtime=0))


def cifar(labels):
    return b"".join(bytes([lab]) + bytes((lab * 7 + i) % 256 for i in range(3072)) for lab in labels)


put("cifar10", "ok_one", cifar([3]))
put("cifar10", "ok_three", cifar([0, 9, 5]))
put("cifar10", "bad_empty", b"")
put("cifar10", "bad_truncated", cifar([1, 2])[:-1])
put("cifar10", "bad_extra", cifar([1]) + b"x")
put("cifar10", "bad_label", cifar([4, 10]))
