#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the real
formats: tcp frames of every opcode and status, gdrstore.v1 requests of every kind (encoded by
protoc from text), the shipped config and the volume specs of the docs, token files, sizes with
every unit. Run it again after a format changes: python3 tests/fuzz/make_seeds.py
Inputs a fuzzer found (crash-*, regressions) are kept in the same folders; this script only
rewrites the files it names.
"""
import os
import shutil
import struct
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
PROTO_DIR = os.path.join(ROOT, "proto")
PROTO = "gdrstore/v1/gdrstore.proto"


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- tcp_frame_fuzz: byte 0 picks the payload cap (0: kMaxPayload, 1: 1 MiB); then frames.
MAGIC, VERSION = 0x54524447, 1
WRITE_REQ, READ_REQ, WRITE_ACK, READ_DATA = 1, 2, 3, 4
OK, BAD_RKEY, OUT_OF_BOUNDS, ACCESS_DENIED, INTERNAL = 0, 1, 2, 3, 4


def frame(op, status=OK, rkey=0x1234ABCD, length=0, address=0x7F0000001000, tag=1, payload=b""):
    return struct.pack("<IBBHIIQQ", MAGIC, VERSION, op, status, rkey, length, address, tag) + payload


def tcp_frame_seeds():
    data = bytes(range(16))
    put("tcp_frame_fuzz", "write_req", b"\x00" + frame(WRITE_REQ, length=16, payload=data))
    put("tcp_frame_fuzz", "read_req", b"\x00" + frame(READ_REQ, length=4096, tag=2))
    put("tcp_frame_fuzz", "write_ack", b"\x01" + frame(WRITE_ACK, length=16))
    put("tcp_frame_fuzz", "read_data", b"\x01" + frame(READ_DATA, length=8, payload=b"GDRDATA!"))
    for name, st in (("bad_rkey", BAD_RKEY), ("out_of_bounds", OUT_OF_BOUNDS),
                     ("access_denied", ACCESS_DENIED), ("internal", INTERNAL)):
        put("tcp_frame_fuzz", "write_ack_" + name, b"\x01" + frame(WRITE_ACK, st, length=16))
        put("tcp_frame_fuzz", "read_data_" + name, b"\x01" + frame(READ_DATA, st, length=4096))
    # What a target reads from one link: a burst of requests, payloads in between.
    put("tcp_frame_fuzz", "request_stream", b"\x00" + b"".join([
        frame(WRITE_REQ, length=16, tag=10, payload=data),
        frame(READ_REQ, length=1 << 20, tag=11, address=0x7F0000100000),
        frame(WRITE_REQ, length=3, tag=12, address=0x7F0000000FFF, payload=b"abc"),
        frame(READ_REQ, length=1, tag=13, rkey=0xFFFFFFFF),
    ]))
    # What the daemon's link reads back: acks and data, one refusal among them.
    put("tcp_frame_fuzz", "response_stream", b"\x01" + b"".join([
        frame(WRITE_ACK, length=16, tag=10),
        frame(READ_DATA, length=4, tag=11, payload=b"\x01\x02\x03\x04"),
        frame(WRITE_ACK, OUT_OF_BOUNDS, length=3, tag=12),
        frame(READ_DATA, BAD_RKEY, length=1, tag=13),
    ]))
    # A payload cut short: the reader waits for the rest.
    put("tcp_frame_fuzz", "truncated_payload", b"\x00" + frame(WRITE_REQ, length=64, payload=data))


# --- transfer_op_fuzz: byte 0 = message (0 Write, 1 Read, 2 Stream) | offered (4 tcp, 8 rc,
# 16 dc); then the message as protoc encodes it from text.
TCP, RC, DC = 4, 8, 16


def encode(message, text):
    return subprocess.run(
        ["protoc", "--proto_path=" + PROTO_DIR, "--encode=gdrstore.v1." + message, PROTO],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


def op_text(volume="vol0", offset=4096, length=8192, address=0x7F0000001003, rkey=0x1234,
            endpoint='tcp { host: "127.0.0.1" port: 40000 }'):
    return ('extent { volume: "%s" offset: %d length: %d } '
            'buffer { address: %d length: %d rkey: %d %s }'
            % (volume, offset, length, address, length, rkey, endpoint))


DC_GID = 'dc { dct_number: 4660 dc_key: 12345 gid: "\\376\\200\\000\\000\\000\\000\\000\\000' \
         '\\002\\002\\311\\377\\376\\000\\000\\001" mtu: 4096 }'
DC_LID = "dc { dct_number: 16777215 dc_key: 1 lid: 7 }"
RC_EP = "rc { connection_id: 3 }"


def transfer_op_seeds():
    all_offered = TCP | RC | DC
    cases = {
        "write_tcp": (0 | TCP, "WriteRequest", op_text()),
        "read_tcp_sync": (1 | TCP, "ReadRequest", op_text() + " sync: true"),
        "write_rc": (0 | TCP | RC, "WriteRequest", op_text(endpoint=RC_EP)),
        "read_dc_gid": (1 | all_offered, "ReadRequest", op_text(endpoint=DC_GID)),
        "write_dc_lid": (0 | all_offered, "WriteRequest", op_text(endpoint=DC_LID)),
        "write_tail_of_volume": (0 | TCP, "WriteRequest",
                                 op_text(offset=(1 << 20) - 4096, length=4096)),
        "read_odd_volume": (1 | TCP, "ReadRequest", op_text(volume="odd", offset=1, length=12344)),
        "write_small_max": (0 | TCP, "WriteRequest", op_text(volume="small", offset=0, length=4096)),
        "write_ipv6_host": (0 | TCP, "WriteRequest",
                            op_text(endpoint='tcp { host: "::1" port: 65535 }')),
        # Refused ones, each for one reason.
        "write_length_zero": (0 | TCP, "WriteRequest", op_text(length=0)),
        "write_past_end": (0 | TCP, "WriteRequest", op_text(offset=(1 << 20) - 1, length=2)),
        "write_offset_overflow": (0 | TCP, "WriteRequest",
                                  op_text(offset=(1 << 64) - 4096, length=8192)),
        "write_address_wraps": (0 | TCP, "WriteRequest",
                                op_text(address=(1 << 64) - 4096, length=8192)),
        "write_unknown_volume": (0 | TCP, "WriteRequest", op_text(volume="nope")),
        "write_rkey_zero": (0 | TCP, "WriteRequest", op_text(rkey=0)),
        "write_rc_not_offered": (0 | TCP, "WriteRequest", op_text(endpoint=RC_EP)),
        "write_no_endpoint": (0 | TCP, "WriteRequest", op_text(endpoint="")),
        "write_no_buffer": (0 | TCP, "WriteRequest", 'extent { volume: "vol0" length: 1 }'),
        "stream_mixed": (2 | all_offered, "StreamRequest", " ".join([
            "ops { id: 1 write { %s } }" % op_text(),
            "ops { id: 2 read { %s sync: true } }" % op_text(endpoint=RC_EP),
            "ops { id: 3 read { %s } }" % op_text(volume="small", offset=4095, length=1,
                                                   endpoint=DC_LID),
            "ops { id: 4 }",
            "ops { id: 5 write { %s } }" % op_text(length=(256 << 10) + 1),
        ])),
    }
    for name, (selector, message, text) in cases.items():
        put("transfer_op_fuzz", name, bytes([selector]) + encode(message, text))


# --- volume_spec_fuzz: the specs of deploy/ and docs/.
def volume_spec_seeds():
    specs = {
        "memory": "vol0=256MiB",
        "memory_bytes": "vol0=268435456",
        "file_timed": "nvme0=256MiB,file=/var/lib/gdrstored/nvme0.img,latency_us=80,bandwidth=3GiB/s",
        "file_4gib": "nvme0=4GiB,file=/var/lib/gdrstored/nvme0.img,latency_us=80,bandwidth=3GiB/s",
        "hdd": "hdd=64MiB,file=/srv/gdrstored/hdd.img,latency_us=4000,bandwidth=200MiB/s",
        "scratch": "scratch=64MiB",
        "name_chars": "A.b-c_9=1k",
        "bad_relative_file": "v=1GiB,file=relative.img",
        "bad_repeated": "v=1GiB,latency_us=1,latency_us=2",
    }
    for name, text in specs.items():
        put("volume_spec_fuzz", name, text)


# --- daemon_config_fuzz: the shipped config, the docs' excerpt, small variants.
def daemon_config_seeds():
    shutil.copyfile(os.path.join(ROOT, "deploy", "systemd", "gdrstored.conf"),
                    os.path.join(CORPUS, "daemon_config_fuzz", "shipped_gdrstored.conf"))
    put("daemon_config_fuzz", "operations_excerpt.conf", "\n".join([
        'listen = "127.0.0.1:50051"',
        'volume = ["vol0=256MiB", "nvme0=256MiB,file=/var/lib/gdrstored/nvme0.img,'
        'latency_us=80,bandwidth=3GiB/s"]',
        'max-op-size = "256MiB"            # [reload]',
        'max-inflight-ops = 4096           # [reload]',
        'drain-timeout-ms = 10000          # [reload]',
        'log-level = "info"                # [reload]', ""]))
    put("daemon_config_fuzz", "tuned.conf", "\n".join([
        "# gdrstored test config",
        'listen = "[::1]:7001"',
        'volume = ["cfgvol=8KiB", "other=2MiB"]',
        'max-op-size = "8MiB"', 'chunk-size = "64KiB"', "max-inflight-ops = 33",
        'max-inflight-bytes = "1GiB"', "max-inflight-per-stream = 64",
        "tcp-max-links = 9", "tcp-links-per-target = 4", "op-timeout-ms = 1234",
        'rc = "off"', 'dc = "off"', 'rdma-poll-mode = "busy"', 'log-level = "warning"', ""]))
    put("daemon_config_fuzz", "rdma.conf", "\n".join([
        'rdma-device = "mlx5_0"', 'rc = "on"', "rdma-port = 1", "rdma-gid-index = 3",
        "rc-max-qps = 64", "rc-sq-depth = 256", "rc-traffic-class = 96",
        "rc-service-level = 3", 'dc = "auto"', "dci-count = 8", "dc-mtu = 4096",
        "dc-flow-label = 1048575", 'rdma-poll-mode = "event"', ""]))
    put("daemon_config_fuzz", "ini_section.conf",
        '[default]\nvolume = vol0=1GiB\nchunk-size = 4KiB\nlog-level = debug\n')


# --- token_file_fuzz
def token_file_seeds():
    put("token_file_fuzz", "one_token", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MDEy\n")
    put("token_file_fuzz", "rotation",
        "# new token first, old one after it, until every client has moved\n"
        "\n  N3dUb2tlbl9mb3JfdGhlX25ld19jbGllbnRz  \n"
        "b2xkVG9rZW5fc3RpbGxfYWNjZXB0ZWQ\n")
    put("token_file_fuzz", "crlf", "# windows editor\r\nAAAAAAAAAAAAAAAA\r\n\r\nBBBBBBBBBBBBBBBBBBBBB\r\n")
    put("token_file_fuzz", "longest", "x" * 1024 + "\n")
    put("token_file_fuzz", "bad_short", "short\n")
    put("token_file_fuzz", "bad_space", "two words here is too many\n")
    put("token_file_fuzz", "only_comments", "# nothing here\n\n")


# --- units_fuzz: every unit spelling, limits.
def units_seeds():
    for i, text in enumerate([
            "0", "17", "17b", "17 B", "4k", "4K", "4KB", "4KiB", "4kib", "64M", "64mb", "64MiB",
            "1g", "1GB", "1GiB", "2t", "2TB", "2TiB", " 8 KiB ", "007k", "16777215TiB",
            "18446744073709551615", "18446744073709551616", "16384TiB", "1.5G", "4PiB"]):
        put("units_fuzz", "size_%02d" % i, text)


if __name__ == "__main__":
    tcp_frame_seeds()
    transfer_op_seeds()
    volume_spec_seeds()
    os.makedirs(os.path.join(CORPUS, "daemon_config_fuzz"), exist_ok=True)
    daemon_config_seeds()
    token_file_seeds()
    units_seeds()
