#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from the real
formats: tcp frames of every opcode and status and the proof exchange's, gdrstore.v1 requests
of every kind (encoded by protoc from text, tcp endpoints with a valid secret), the shipped
config and the volume specs of the docs, credential files with grants and san: lines, sizes
with every unit, addresses, prefixes and gRPC peers, etcd:// URLs, handoff protocol packets of every type. Run it again after a format changes: python3 tests/fuzz/make_seeds.py
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


# --- tcp_frame_fuzz: byte 0 picks the payload cap (bits 0-2; 0: kMaxPayload, 1: 1 MiB) and
# whether the link opens with the proof exchange (0x80: as the initiator reads it, HELLO then
# PROOF; 0x88: as the target does, CHALLENGE); then frames.
MAGIC, VERSION = 0x54524447, 2
WRITE_REQ, READ_REQ, WRITE_ACK, READ_DATA, HELLO, CHALLENGE, PROOF = 1, 2, 3, 4, 5, 6, 7
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
    # The proof exchange: each frame alone, then a link's opening as each side reads it.
    nonce_t, nonce_d, proof = bytes(range(32)), bytes(range(32, 64)), bytes(range(0xA0, 0xC0))

    def hs(op, body):
        return frame(op, OK, rkey=0, length=32, address=0, tag=0, payload=body)

    put("tcp_frame_fuzz", "hello", b"\x00" + hs(HELLO, nonce_t))
    put("tcp_frame_fuzz", "challenge", b"\x00" + hs(CHALLENGE, nonce_d))
    put("tcp_frame_fuzz", "proof", b"\x00" + hs(PROOF, proof))
    put("tcp_frame_fuzz", "initiator_opening", b"\x81" + hs(HELLO, nonce_t) + hs(PROOF, proof)
        + frame(WRITE_ACK, length=16, tag=1) + frame(READ_DATA, length=4, tag=2, payload=b"abcd"))
    put("tcp_frame_fuzz", "target_opening", b"\x88" + hs(CHALLENGE, nonce_d)
        + frame(WRITE_REQ, length=16, tag=1, payload=data) + frame(READ_REQ, length=4, tag=2))
    # Refused: a handshake frame after the exchange, one with a tag, one of the old version.
    put("tcp_frame_fuzz", "hello_as_request", b"\x00" + frame(WRITE_REQ, length=16, payload=data)
        + hs(HELLO, nonce_t))
    put("tcp_frame_fuzz", "hello_with_tag",
        b"\x80" + frame(HELLO, OK, rkey=0, length=32, address=0, tag=7, payload=nonce_t))
    put("tcp_frame_fuzz", "proof_before_hello", b"\x80" + hs(PROOF, proof) + hs(HELLO, nonce_t))
    put("tcp_frame_fuzz", "version_1_request",
        b"\x00" + struct.pack("<IBBHIIQQ", MAGIC, 1, WRITE_REQ, OK, 1, 0, 0, 1))


# --- transfer_op_fuzz: byte 0 = message (0 Write, 1 Read, 2 Stream) | offered (4 tcp, 8 rc,
# 16 dc); then the message as protoc encodes it from text.
TCP, RC, DC = 4, 8, 16


def encode(message, text):
    return subprocess.run(
        ["protoc", "--proto_path=" + PROTO_DIR, "--encode=gdrstore.v1." + message, PROTO],
        input=text.encode(), stdout=subprocess.PIPE, check=True).stdout


# 32 bytes, as the client library makes them, written as a protobuf text escape.
SECRET = "".join("\\%03o" % b for b in bytes(range(0x80, 0xA0)))
TCP_EP = 'tcp { host: "127.0.0.1" port: 40000 secret: "%s" }' % SECRET


def op_text(volume="vol0", offset=4096, length=8192, address=0x7F0000001003, rkey=0x1234,
            endpoint=TCP_EP):
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
                            op_text(endpoint='tcp { host: "::1" port: 65535 secret: "%s" }'
                                    % SECRET)),
        "write_secret_16": (0 | TCP, "WriteRequest", op_text(
            endpoint='tcp { host: "localhost" port: 1 secret: "0123456789abcdef" }')),
        "read_secret_64": (1 | TCP, "ReadRequest", op_text(
            endpoint='tcp { host: "10.0.0.7" port: 7000 secret: "%s" }' % ("s" * 64))),
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
        "write_no_secret": (0 | TCP, "WriteRequest",
                            op_text(endpoint='tcp { host: "127.0.0.1" port: 40000 }')),
        "write_secret_15": (0 | TCP, "WriteRequest", op_text(
            endpoint='tcp { host: "127.0.0.1" port: 40000 secret: "0123456789abcde" }')),
        "read_secret_65": (1 | TCP, "ReadRequest", op_text(
            endpoint='tcp { host: "127.0.0.1" port: 40000 secret: "%s" }' % ("s" * 65))),
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
        "preset_override": "cold=1GiB,queue_depth=4,media=hdd,seed=9",
        "device_model": "lab=256MiB,latency_us=2000,p99_us=10000,read_bandwidth=40MiB/s,"
                        "write_bandwidth=20MiB/s,iops=3000,read_iops=2000,write_iops=1000,"
                        "queue_depth=16",
        "bad_p99": "v=1GiB,latency_us=500,p99_us=100",
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


# --- token_file_fuzz: bare tokens (the format before grants), grants, san: identities.
def token_file_seeds():
    put("token_file_fuzz", "one_token", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MDEy\n")
    put("token_file_fuzz", "grants",
        "# one line per client, what it may reach\n"
        "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MDEy name=trainer get=vol0,nvme0 put=scratch\n"
        "cmVhZGVyX29ubHlfdG9rZW5fMTIzNDU name=reader get=*   # every volume, read side\n"
        "d3JpdGVyX29ubHlfdG9rZW5fOTg3NjU put=nvme0\n"
        "san:spiffe://example.org/ns/ml/sa/trainer get=vol0 put=vol0\n"
        "san:node7.cluster.example name=node7 get=* put=*\n"
        "san:ops@example.org get=hdd\n"
        "san:10.0.0.7 put=scratch,vol0\n")
    put("token_file_fuzz", "only_sans", "san:spiffe://example.org/a\nsan:b.example get=v\n")
    put("token_file_fuzz", "client_file", "# client: first token wins\nsan:me.example\n"
        "Y2xpZW50X3Rva2VuX2Zvcl9ydW5z get=vol0\nb3RoZXJfdG9rZW5faWdub3JlZF9oZXJl\n")
    for name, line in (
            ("bad_star_beside_name", "AAAAAAAAAAAAAAAA get=*,vol0"),
            ("bad_volume_name", "AAAAAAAAAAAAAAAA put=vol/0"),
            ("bad_repeated_volume", "AAAAAAAAAAAAAAAA get=b,a,b"),
            ("bad_empty_volume", "AAAAAAAAAAAAAAAA get=a,,b"),
            ("bad_key", "AAAAAAAAAAAAAAAA got=a"),
            ("bad_token_as_key", "AAAAAAAAAAAAAAAA QkJCQkJCQkJCQkJCQkJC=a"),
            ("bad_key_twice", "AAAAAAAAAAAAAAAA get=a get=b"),
            ("bad_label", "AAAAAAAAAAAAAAAA name=a+b"),
            ("bad_same_label", "AAAAAAAAAAAAAAAA name=x\nBBBBBBBBBBBBBBBB name=x"),
            ("bad_same_token", "AAAAAAAAAAAAAAAA get=a\nAAAAAAAAAAAAAAAA put=b"),
            ("bad_same_san", "san:x.example\nsan:x.example get=a"),
            ("bad_empty_san", "san: get=a"),
            ("bad_field", "AAAAAAAAAAAAAAAA vol0")):
        put("token_file_fuzz", name, line + "\n")
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


# --- address_fuzz: the first line as an address, a prefix and a gRPC peer; a prefix is also
# matched against the address on the second line.
def address_seeds():
    for name, text in {
            "v4": "10.0.0.7", "v6": "fd00::7", "v6_full": "2001:0db8:0000:0000:0000:0000:0000:0001",
            "mapped": "::ffff:10.0.0.7", "loopback6": "::1", "loopback4": "127.0.0.1",
            "cidr_v4": "10.0.0.0/8\n10.1.2.3", "cidr_v6": "fd00::/8\nfd12::1",
            "cidr_v4_outside": "192.168.0.0/16\n192.169.0.1", "cidr_all": "0.0.0.0/0\n::ffff:1.2.3.4",
            "cidr_v6_all": "::/0\n1.2.3.4", "cidr_host": "10.0.0.1/32", "cidr_mapped": "::ffff:10.0.0.0/104",
            "cidr_host_bits": "10.0.0.1/8", "cidr_v6_host_bits": "fd00::1/64",
            "cidr_mapped_host_bits": "::ffff:10.0.0.1/100", "cidr_bad_bits": "10.0.0.0/33",
            "cidr_leading_zero_bits": "10.0.0.0/008",
            "peer_v4": "ipv4:10.0.0.7:41234", "peer_v6": "ipv6:[fd00::7]:41234",
            "peer_v6_encoded": "ipv6:%5Bfd00::7%5D:41234", "peer_v6_zone": "ipv6:[fe80::1%25eth0]:1",
            "peer_mapped": "ipv6:[::ffff:127.0.0.1]:65535", "peer_unix": "unix:/run/gdrstored.sock",
            "peer_abstract": "unix-abstract:gdr", "peer_inproc": "inproc:0x1234",
            "peer_bad_port": "ipv4:10.0.0.7:65536", "peer_name": "ipv4:localhost:80",
            "peer_v6_as_v4": "ipv4:::1:80"}.items():
        put("address_fuzz", name, text)


# --- etcd_url_fuzz: etcd:// URLs, good and each kind of bad.
def etcd_url_seeds():
    for name, text in {
            "one": "etcd://127.0.0.1:2379/gdr", "many": "etcd://a:1,b.example:2,[::1]:3/x/y/",
            "deep": "etcd://etcd-1:2379/cluster-a/v1_x.y", "no_scheme": "h:1/x",
            "http": "http://h:1/x", "empty_host": "etcd://:2379/x", "port_zero": "etcd://h:0/x",
            "port_big": "etcd://h:65536/x", "empty_endpoint": "etcd://h:1,,k:2/x",
            "no_prefix": "etcd://h:1/", "dotdot": "etcd://h:1/a/../b", "space": "etcd://h:1/a b",
            "twice": "etcd://h:1,h:1/x", "userinfo": "etcd://u@h:1/x"}.items():
        put("etcd_url_fuzz", name, text)


# --- fault_spec_fuzz: the rules of docs/simulation.md, every kind and field, and bad ones.
def fault_spec_seeds():
    for name, text in {
            "error": "kind=error,volume=ckpt,rate=0.01,code=UNAVAILABLE",
            "error_num": "kind=error,code=14,every=3,count=10,for=5s,seed=42",
            "stall_delay": "kind=stall,volume=v,ops=get,delay=250ms,every=2",
            "stall_window": "kind=stall,for=30s",
            "corrupt": "kind=corrupt,client=trainer-3,count=1",
            "drop_link": "kind=drop-link,client=127.0.0.1,ops=put",
            "qp_error": "kind=qp-error,volume=vol0,count=1",
            "rail_down": "kind=rail-down,rail=mlx5_1,for=2s",
            "bad_rate": "kind=error,rate=1.5", "bad_both": "kind=error,rate=0.5,every=2",
            "bad_kind": "kind=explode", "repeated": "kind=error,kind=stall", "empty": ""}.items():
        put("fault_spec_fuzz", name, text)


# --- trace_file_fuzz: the shipped checkpoint trace, its header alone, a cut record, and
# records out of bounds.
def trace_file_seeds():
    with open(os.path.join(ROOT, "tests", "data", "checkpoint_load_8ranks.trace"), "rb") as f:
        data = f.read()
    put("trace_file_fuzz", "checkpoint_8ranks", data)
    put("trace_file_fuzz", "header_only", data[:32])
    put("trace_file_fuzz", "cut_record", data[:200])
    # Hostile records (issue 29): each must be refused by the reader, naming the record and
    # the field, before replay or trace show does arithmetic on it.
    for name, fields in hostile_trace_records().items():
        put("trace_file_fuzz", name, hostile_trace(fields))


def trace_record(kind=0, code=0, client=0, volume=0, start=0, offset=0, length=4096, latency=1000):
    return struct.pack("<BBHIIIqQQQ", 1, kind, code, client, volume, 0, start, offset, length,
                       latency)


def hostile_trace(records):
    """A version-1 trace: header, volume 'vol0', client 'c', then `records` (dicts of fields)."""
    out = b"GDRTRACE" + struct.pack("<HHHHqQ", 1, 32, 48, 0, 1_700_000_000_000_000_000, 0)
    out += struct.pack("<BBHI", 2, 1, 4, 0) + b"vol0"
    out += struct.pack("<BBHI", 2, 2, 1, 0) + b"c"
    for r in records:
        out += trace_record(**r)
    return out


def hostile_trace_records():
    """Traces whose records are out of the reader's bounds (common/wire/trace_format.h)."""
    big = 2**63 + 4096  # twice this sums to 8192 in 64 bits; slots x this wraps
    return {
        "hostile_length_2p63_get": [dict(length=big), dict(length=big, start=10)],
        "hostile_length_2p63_put": [dict(kind=1, length=big), dict(kind=1, length=big)],
        "hostile_length_zero": [dict(length=0)],
        "hostile_length_over_2p47": [dict(length=2**47 + 1)],
        "hostile_offset_wraps": [dict(offset=2**64 - 4096, length=8192)],
        "hostile_latency_max": [dict(latency=2**64 - 1)],
        "hostile_start_min": [dict(start=-2**63, latency=1)],
        "hostile_start_max": [dict(start=2**63 - 1, latency=2**62)],
    }


# --- handoff_message_fuzz: byte 0 is the number of descriptors the packet came with (mod 3);
# then one handoff packet (common/wire/handoff_message.h): header magic "GDRH", version 1, type,
# request id, body length; little-endian bodies.
HANDOFF_MAGIC, HANDOFF_VERSION = 0x48524447, 1


def handoff(mtype, body, request_id=1):
    header = struct.pack("<IHHII", HANDOFF_MAGIC, HANDOFF_VERSION, mtype, request_id, len(body))
    return header + body


def hstr(s):
    return struct.pack("<H", len(s)) + s


def hregister(kind, writable, address, size, offset, allocation_size, handle=b"", gpu=b""):
    return (struct.pack("<BBHQQQQ", kind, 1 if writable else 0, 0, address, size, offset,
                        allocation_size) + handle.ljust(64, b"\0") + hstr(gpu))


def handoff_message_seeds():
    t = "handoff_message_fuzz"
    put(t, "hello", b"\x00" + handoff(1, hstr(b"trainer rank 0")))
    put(t, "hello_ok", b"\x00" + handoff(2, struct.pack("<Q", 0x1122334455667788) +
                                        bytes(range(16)) + hstr(b"gdragent 1.4.0")))
    put(t, "register_memfd", b"\x01" + handoff(3, hregister(1, True, 0x7F0000001000, 1 << 20,
                                                             4096, 0), 7))
    put(t, "register_gpu_ipc", b"\x00" + handoff(3, hregister(
        2, True, 0x7F8000000000, 4096, 8192, 1 << 21, bytes(range(64)), b"0000:b7:00.0"), 8))
    put(t, "register_gpu_vmm_fd", b"\x01" + handoff(3, hregister(
        3, False, 0x7F8000200000, 1 << 20, 0, 1 << 21, b"", b"0000:18:00.0"), 9))
    put(t, "register_gpu_vmm_chunks", b"\x00" + handoff(3, hregister(
        4, True, 0x7F8001000000, 3 << 20, 4096, 3 << 21, b"", b"0000:18:00.0"), 12))
    put(t, "register_chunk", b"\x01" + handoff(10, struct.pack("<Q", 20 << 20), 13))
    put(t, "chunk_staged", b"\x00" + handoff(11, struct.pack("<I", 3), 13))
    put(t, "registered", b"\x00" + handoff(4, struct.pack("<I", 0xDEADBEEF), 7))
    put(t, "deregister", b"\x00" + handoff(5, struct.pack("<I", 0xDEADBEEF), 10))
    put(t, "deregistered", b"\x00" + handoff(6, b"", 10))
    put(t, "open_channel", b"\x00" + handoff(7, b"", 11))
    put(t, "channel_open", b"\x01" + handoff(8, b"", 11))
    put(t, "error", b"\x00" + handoff(9, struct.pack("<I", 7) +
                                     hstr(b"uid 65534 is not admitted"), 1))
    # Near misses: the wrong descriptor count, a string past the end, a zero size.
    put(t, "register_memfd_no_fd", b"\x00" + handoff(3, hregister(1, True, 0x1000, 4096, 0, 0)))
    put(t, "hello_name_past_end", b"\x00" + handoff(1, struct.pack("<H", 40) + b"short"))
    put(t, "register_zero_size", b"\x01" + handoff(3, hregister(1, True, 0x1000, 0, 0, 0)))


if __name__ == "__main__":
    tcp_frame_seeds()
    transfer_op_seeds()
    volume_spec_seeds()
    os.makedirs(os.path.join(CORPUS, "daemon_config_fuzz"), exist_ok=True)
    daemon_config_seeds()
    token_file_seeds()
    units_seeds()
    address_seeds()
    etcd_url_seeds()
    fault_spec_seeds()
    trace_file_seeds()
    handoff_message_seeds()
