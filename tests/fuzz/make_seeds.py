#!/usr/bin/env python3
"""Write the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME/).

ckpt_read: checkpoints in the format of src/kvstore/kv_internal.h (version 1), valid ones with
integer and string keys, several dtypes, momentum and an empty store, and a few damaged ones
(their names start with "bad-"), so that the fuzzer starts from the reader's deep paths. Two of
the damaged ones have a changed value or momentum byte under a recomputed whole-file CRC, so
that only the key's own CRC can refuse them. The test kv_ckpt_format reads every seed back:
valid ones must load, damaged ones must be refused.
parse_size: sizes and near-sizes as text.
tuning: tuning files (docs/tuning.md): the hand-written ones of tests/tune/files (valid and
damaged), and one shaped like mpiar-tune's output with every member.
engine: cases of fuzz_engine (the header of fuzz_engine.c: algorithm, p, count, segment,
dtype/op, mode and flags, fault, data seed, operations) followed by scheduler bytes: every
mode, in-place and check, small tag bounds and split messages, both broadcasts, each fault, p=1
and count 0. Byte 0 picks the algorithm modulo the number of entries (43 allreduce entries, then
the 2 broadcasts, when written).

Usage: make_seeds.py [CORPUS_DIR] (default: the corpus directory next to this script)
"""
import os
import struct
import sys

DTYPE_SIZE = [1, 1, 4, 4, 8, 8, 2, 2, 4, 8]  # int8 .. float64, as enum mpiar_dtype


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), reflected, as the library computes it."""
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def checkpoint(keys):
    """keys: (name or None, integer id, dtype, value bytes, momentum bytes or None)."""
    records = b""
    data = b""
    for name, ident, dtype, value, mom in keys:
        nb = name.encode() if name is not None else b""
        count = len(value) // DTYPE_SIZE[dtype]
        records += struct.pack("<BBBBIqQII8x", 1 if name is not None else 0, dtype,
                               1 if mom is not None else 0, 0, len(nb),
                               0 if name is not None else ident, count, crc32c(value),
                               crc32c(mom) if mom is not None else 0) + nb
        data += value + (mom if mom is not None else b"")
    size = 32 + len(records) + len(data) + 4
    body = b"MPIARKV\0" + struct.pack("<IIQQ", 1, 0, len(keys), size) + records + data
    return body + struct.pack("<I", crc32c(body))


def reseal(body_and_trailer):
    """The file with its trailer recomputed over the bytes before it, as a writer would."""
    body = body_and_trailer[:-4]
    return body + struct.pack("<I", crc32c(body))


def data_offset(ckpt):
    """Where the first key's data starts: after the header and every record with its name."""
    nkeys = struct.unpack_from("<Q", ckpt, 16)[0]
    off = 32
    for _ in range(nkeys):
        off += 40 + struct.unpack_from("<I", ckpt, off + 4)[0]
    return off


def flip(data, pos):
    return data[:pos] + bytes([data[pos] ^ 0x10]) + data[pos + 1:]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    ck = os.path.join(root, "ckpt_read")
    ps = os.path.join(root, "parse_size")
    os.makedirs(ck, exist_ok=True)
    os.makedirs(ps, exist_ok=True)
    f32 = struct.pack("<4f", 1.0, -2.5, 0.0, 3.25)
    seeds = {
        "valid-empty": [],
        "valid-int-f32": [(None, 7, 8, f32, None)],
        "valid-str-momentum": [("fc1.weight", 0, 8, f32, struct.pack("<4f", 0.5, 0, 0, -1))],
        "valid-many": [(None, -42, 4, struct.pack("<2q", 1, -1), None),
                       ("b", 0, 7, bytes(range(6)), bytes(6)),
                       ("", 0, 1, b"", None),
                       ("layer3.bias", 0, 9, struct.pack("<d", 1e300), None),
                       (None, 2**63 - 1, 6, bytes([0, 60, 0, 188]), None)],
    }
    for name, keys in seeds.items():
        with open(os.path.join(ck, name), "wb") as f:
            f.write(checkpoint(keys))
    good = checkpoint(seeds["valid-many"])
    bad = {
        "bad-truncated": good[:len(good) // 2],
        "bad-crc": good[:-1] + bytes([good[-1] ^ 1]),
        "bad-version": good[:8] + struct.pack("<I", 2) + good[12:],
        "bad-count": good[:16] + struct.pack("<Q", 1 << 40) + good[24:],
    }
    # One key with a 16-byte value and a 16-byte momentum: a byte of each changed in turn.
    mom = checkpoint(seeds["valid-str-momentum"])
    at = data_offset(mom)
    bad["bad-value-crc"] = reseal(flip(mom, at + 1))
    bad["bad-momentum-crc"] = reseal(flip(mom, at + 16 + 1))
    for name, content in bad.items():
        with open(os.path.join(ck, name), "wb") as f:
            f.write(content)
    sizes = ["0", "1", "4096", "64K", "64k", "1M", "2G", "16KiB", "1kb", "3MB",
             "18446744073709551615", "18446744073709551616", "17179869183G", "17179869184G",
             "1T", "", " 1", "-1", "+1", "1.5K", "1Kx", "1KiBB", "0x10", "007"]
    for i, text in enumerate(sizes):
        with open(os.path.join(ps, "size-%02d" % i), "w") as f:
            f.write(text)
    tuning_seeds(os.path.join(root, "tuning"))
    engine_seeds(os.path.join(root, "engine"))
    schedule_file_seeds(os.path.join(root, "schedule_file"))


def engine_seeds(out):
    """fuzz_engine cases: a 10-byte header, then bytes for the scheduler (xorshift, fixed)."""
    os.makedirs(out, exist_ok=True)
    state = [0x9E3779B97F4A7C15]

    def sched(n):
        b = bytearray()
        for _ in range(n):
            x = state[0]
            x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
            x ^= x >> 7
            x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
            state[0] = x
            b.append(x & 0xFF)
        return bytes(b)

    # flags (byte 5): mode in bits 0-1 (0 blocking, 1 nonblocking, 2 persistent), 4 in place,
    # 8 check, 16 reproducible, 32/64 tag bound 65535/32767, 128 messages of 24 bytes.
    # fault (byte 6): 12 send, 13 silent, 14 long, 15 argument mismatch.
    cases = {
        #                alg  p  count seg dt/op flags fault frank seed ops
        "ring-int64-sum": ([0, 3, 13, 0, 4, 0x00, 0, 0, 1, 0], 64),
        "ring-seg-nonblocking": ([0, 5, 40, 3, 5, 0x09, 0, 0, 2, 2], 256),
        "rabenseifner-f32-sum": ([1, 4, 21, 0, 8, 0x11, 0, 0, 3, 1], 128),
        "rd-int32-bxor-persistent": ([2, 7, 9, 0, 62, 0x06, 0, 0, 4, 2], 128),
        "hier-f16-max-probed": ([3, 6, 33, 2, 36, 0xA0, 0, 0, 5, 0], 256),
        "swing-u8-prod-check": ([6, 9, 17, 0, 11, 0x0C, 0, 0, 6, 1], 128),
        "knomial-bf16-avg": ([10, 5, 11, 0, 47, 0x41, 0, 0, 7, 1], 128),
        "direct-f64-min-split": ([13, 8, 24, 0, 29, 0x82, 0, 0, 8, 2], 256),
        "rm-k3-int8-max": ([20, 10, 30, 4, 30, 0x04, 0, 0, 9, 0], 128),
        "repro-halving-f32": ([18, 12, 50, 0, 8, 0x10, 0, 0, 10, 0], 256),
        "bcast-binomial": ([43, 6, 20, 3, 0, 0x01, 0, 0, 11, 10], 128),
        "bcast-scatter-allgather": ([44, 9, 37, 0, 9, 0x8A, 0, 0, 12, 23], 256),
        "p1": ([2, 0, 5, 0, 4, 0x00, 0, 0, 13, 2], 0),
        "count0": ([1, 5, 0, 0, 4, 0x08, 0, 0, 14, 1], 16),
        "fault-send": ([0, 4, 12, 0, 4, 0x00, 12, 0x21, 15, 0], 128),
        "fault-silent": ([1, 5, 16, 0, 4, 0x00, 13, 2, 16, 0], 64),
        "fault-long": ([2, 3, 7, 0, 4, 0x00, 14, 1, 17, 0], 64),
        "fault-mismatch": ([0, 6, 10, 0, 4, 0x01, 15, 0x33, 18, 1], 128),
    }
    for name, (header, n) in cases.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(header) + sched(n))


def tuning_seeds(out):
    """Tuning files: tests/tune/files/*.json and a full one as mpiar-tune writes it."""
    os.makedirs(out, exist_ok=True)
    files = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tune", "files")
    for name in sorted(os.listdir(files)):
        if name.endswith(".json"):
            with open(os.path.join(files, name), "rb") as src, \
                    open(os.path.join(out, name[:-5]), "wb") as dst:
                dst.write(src.read())
    gamma = ",\n".join('      "%s": %.17g' % (d, 5e-11 * (1 + i % 3)) for i, d in enumerate(
        ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
         "float32", "float64"]))
    ranges = ",\n".join(
        '      {"min_bytes": %d, "max_bytes": %s, "algorithm": "%s", "segment_bytes": %d}' % r
        for r in [(0, "4096", "recursive_doubling", 0), (4097, "65536", "rabenseifner", 0),
                  (65537, "8388608", "ring", 0), (8388609, "null", "ring", 4194304)])
    full = """{
  "format": "mpiar-tuning",
  "version": 1,
  "created": "2026-12-01T00:00:00Z",
  "mpiar_version": "0.2.0",
  "fingerprint": {
    "mpi_library": "MPICH Version: 4.0.2",
    "cpu": "Intel(R) Xeon(R) Processor",
    "kernel_level": "avx512"
  },
  "topology": {"ranks": 8, "nodes": 2, "ranks_per_node": 4},
  "model": {
    "alpha": 1.0e-06,
    "beta": 1.1e-10,
    "alpha_inter": 5.0e-06,
    "beta_inter": 8.0e-10,
    "gamma": {
%s
    }
  },
  "tables": [
    {"dtype": "float32", "ranges": [
%s
    ]},
    {"dtype": "bfloat16", "ranges": [
      {"min_bytes": 0, "max_bytes": null, "algorithm": "ring", "segment_bytes": 65536}
    ]}
  ],
  "measurements": {"load_average": {"start": "1.0", "end": "1.0"}, "sweeps": []}
}
""" % (gamma, ranges)
    with open(os.path.join(out, "valid-full"), "w") as f:
        f.write(full)


def schedule_file_seeds(out):
    """Schedule files (docs/schedules.md): the examples of examples/schedules written by
    python/mpiar/schedule.py, a hand-written one with every header key, comments and CRLF, and
    damaged ones (names starting with "bad-")."""
    import importlib.util
    os.makedirs(out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        "mpiar.schedule", os.path.join(here, "..", "..", "python", "mpiar", "schedule.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["mpiar.schedule"] = module
    spec.loader.exec_module(module)
    sys.path.insert(0, os.path.join(here, "..", "..", "examples", "schedules"))
    import bidirectional_ring
    import recursive_doubling
    import ring
    texts = {}
    for mod, ps in ((ring, (2, 3)), (recursive_doubling, (3, 4)), (bidirectional_ring, (2,))):
        for p in ps:
            texts["%s-p%d" % (mod.__name__, p)] = mod.build(p).text()
    texts["header-comments-crlf"] = (
        "# a ring on two ranks\r\nmpiar-schedule 1\r\nname two\r\ncollective allreduce\r\n"
        "ranks 2\r\nchunks 2\r\nscratch 1\r\ninplace yes\r\norder canonical\r\nrank 0\r\n"
        "send 1 0 i0 1\r\nrecv 1 0 s0 1\r\nreduce o1 i1 s0 1 final : 1\r\n"
        "send 1 1 o1 1 : 2\r\nrecv 1 1 o0 1 : 0\r\nrank 1\r\nsend 0 0 i1 1\r\n"
        "recv 0 0 s0 1\r\nreduce o0 s0 i0 1 final : 1\r\nsend 0 1 o0 1 : 2\r\n"
        "recv 0 1 o1 1 : 0\r\nend\r\n")
    good = texts["ring-p2"]
    texts["bad-truncated"] = good[:len(good) // 2]
    texts["bad-version"] = good.replace("mpiar-schedule 1", "mpiar-schedule 2")
    texts["bad-peer"] = good.replace("send 1 0", "send 7 0", 1)
    texts["bad-dependency"] = good.replace(": 1", ": 9", 1)
    texts["bad-operand"] = good.replace("i0 1", "i1 2", 1)
    for name, text in texts.items():
        with open(os.path.join(out, name), "w", newline="") as f:
            f.write(text)


if __name__ == "__main__":
    main()
