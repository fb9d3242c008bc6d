#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Seed corpora for the fuzz targets, cut from a real trace and real channel snapshots.

    split_corpus.py OUTDIR TRACE [CHANNEL_SNAPSHOT...]

OUTDIR/trace:   inputs for fuzz_trace (the bytes after the 40-byte file header):
                the first K records with a rebuilt (matching) trailer, one record
                of every type with a trailer, slices of the record stream without
                a trailer, and a few cut mid-record.
OUTDIR/channel: inputs for fuzz_channel (4 selector bytes + a channel image of 16
                slots and 8 string entries) in the harness's repair modes, and the
                same image as a raw, self-consistent file.
OUTDIR/cupti:   inputs for fuzz_cupti: a kind selector and a small plausible record.
Layouts: schemas/trace.md, schemas/channel.md.
"""
import os
import struct
import sys

FILE_HDR = 40
HDR = struct.Struct("<HHHHIIQ")  # struct sb_hdr: 24 bytes
TRAILER, TYPE_MAX = 63, 64


def records(body):
    at = 0
    while at + HDR.size <= len(body):
        t, size = struct.unpack_from("<HH", body, at)
        if size < HDR.size or size % 8 or at + size > len(body):
            break
        yield t, body[at:at + size]
        at += size


def trailer(recs, start_ns=1, end_ns=2, reason=1):
    counts = [0] * TYPE_MAX
    for t, _ in recs:
        if t < TYPE_MAX:
            counts[t] += 1
    size = HDR.size + 8 * TYPE_MAX + 8 + 8 + 4 + 4
    return (HDR.pack(TRAILER, size, 0, 0, 0, 0, end_ns) + struct.pack("<64Q", *counts) +
            struct.pack("<QQII", 0, start_ns, reason, 0))


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def trace_seeds(out, path):
    with open(path, "rb") as f:
        data = f.read()
    body = data[FILE_HDR:]
    recs = [r for r in records(body) if r[0] != TRAILER]
    d = os.path.join(out, "trace")
    n = 0
    for k in (4, 16, 64, 256):
        part = recs[:k]
        write(d, "head-%d" % k, b"".join(r for _, r in part) + trailer(part))
        n += 1
    first = {}
    for t, r in recs:
        first.setdefault(t, r)
    kinds = [(t, first[t]) for t in sorted(first)]
    write(d, "every-type", b"".join(r for _, r in kinds) + trailer(kinds))
    n += 1
    step = max(1, len(recs) // 12)
    for i in range(0, len(recs), step):
        part = recs[i:i + 48]
        write(d, "slice-%d" % i, b"".join(r for _, r in part))
        n += 1
    blob = b"".join(r for _, r in recs[:32])
    for cut in (3, 24, 61, len(blob) - 5):
        if 0 < cut < len(blob):
            write(d, "cut-%d" % cut, blob[:cut])
            n += 1
    return n


def channel_seeds(out, snaps):
    d = os.path.join(out, "channel")
    n = 0
    for i, path in enumerate(snaps):
        with open(path, "rb") as f:
            data = f.read()
        if len(data) < 512 or data[:8] != b"SBGPUCH\0":
            continue
        cap = struct.unpack_from("<I", data, 76)[0]
        if cap != 16:
            continue
        ring = data[512:512 + 16 * 128]
        strings_off = 512 + 16 * 128
        strings = data[strings_off:strings_off + 8 * 128]
        image = bytearray(data[:512] + ring + strings)
        for flags in (0x0f, 0x1f, 0x07, 0x03, 0x01):
            write(d, "snap%d-flags%02x" % (i, flags), bytes([flags, 0, 7, 0]) + bytes(image))
            n += 1
        # the raw mode takes the file as it is: make its header describe 8 strings
        struct.pack_into("<I", image, 92, 8)
        struct.pack_into("<Q", image, 16, len(image))
        write(d, "snap%d-raw" % i, bytes([0, 0, 0, 0]) + bytes(image))
        n += 1
    return n


def cupti_seeds(out):
    d = os.path.join(out, "cupti")
    for sel in range(10):
        for variant, extra in ((0, b""), (0x20, b"train_step\0"), (0x10, b"")):
            rec = bytearray(256)
            # small distinct numbers everywhere, so any start/end offset holds a valid pair
            for j in range(0, 256, 8):
                struct.pack_into("<Q", rec, j, 1000 + j * 10)
            write(d, "kind%d-%02x" % (sel, variant), bytes([sel | variant]) + bytes(rec) + extra)
    return 30


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, trace = sys.argv[1], sys.argv[2]
    n = trace_seeds(out, trace)
    c = channel_seeds(out, sys.argv[3:])
    u = cupti_seeds(out)
    print("corpus: %d trace, %d channel, %d cupti seeds in %s" % (n, c, u, out))


if __name__ == "__main__":
    main()
