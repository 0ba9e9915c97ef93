"""Every binding of the connection options carries every option the one definition lists
(client/include/gdrstore/connection_options.h): the C struct and the library's conversion are
made from the list by the preprocessor; the Python ctypes struct, Client's and Cluster's keyword
arguments, gdrctl's and gdragent's flags (read from their --help) and the workload CLI's are
checked here against it. A new option, or one a binding drops, fails here naming both."""

import ctypes
import inspect
import os
import re
import subprocess

import pytest

import gdrstore
from gdrstore import _native
from gdrstore.workload.__main__ import parser

HERE = os.path.dirname(os.path.abspath(__file__))
HEADER = os.path.join(HERE, "..", "..", "client", "include", "gdrstore", "connection_options.h")
COLUMNS = ("field", "c_type", "from_c", "member", "gdrctl", "gdragent", "workload", "python",
           "cluster")
C_TYPES = {"const char*": ctypes.c_char_p, "uint32_t": ctypes.c_uint32}


def entries(macro, letter, columns):
    """The entries of list `macro` (each `letter`(...)) as dicts of `columns`, in its order."""
    with open(HEADER) as f:
        text = f.read()
    body = text[text.index(f"#define {macro}({letter})"):]
    body = re.sub(r"/\*.*?\*/", " ", body, flags=re.S).replace("\\\n", " ")
    body = body[:body.index("\n")]  # the definition: one line once its lines are joined
    out = []
    for args in re.findall(rf"\b{letter}\(([^()]*)\)", body):
        values = [a.strip().strip('"') for a in args.split(",")]
        assert len(values) == len(columns), f"entry {args!r} has {len(values)} columns"
        out.append(dict(zip(columns, values)))
    return out


OPTIONS = entries("GDRSTORE_CONNECTION_OPTIONS", "X", COLUMNS)
# The C++-only options the command lines share (gdrctl and gdragent flags).
CXX_OPTIONS = entries("GDRSTORE_CXX_CONNECTION_OPTIONS", "Y", ("member", "gdrctl", "gdragent"))


def build_binary(*parts):
    bin_dir = os.path.dirname(os.path.dirname(os.path.abspath(
        os.environ.get("GDRSTORED_BIN", os.path.join(HERE, "..", "..", "build", "daemon",
                                                     "gdrstored")))))
    path = os.path.join(bin_dir, *parts)
    if not os.path.exists(path):
        pytest.skip(f"no {path} (build it)")
    return path


def help_flags(argv):
    p = subprocess.run(argv + ["--help"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", p.stdout))


def test_the_definition_reads_as_the_columns_say():
    assert len(OPTIONS) >= 15 and len(CXX_OPTIONS) >= 6
    assert [o["field"] for o in OPTIONS][:6] == ["daemon_address", "transport", "token",
                                                 "token_file", "rdma_device", "rpc_timeout_ms"]
    for o in OPTIONS:
        assert o["c_type"] in C_TYPES, o
        assert o["cluster"] in ("0", "1"), o
        for column in ("gdrctl", "gdragent", "workload"):
            assert o[column] == "" or re.fullmatch(r"--[a-z0-9-]+", o[column]), (column, o)


def test_the_python_ctypes_struct_has_every_field_in_order_and_type():
    fields = _native.ClientOptions._fields_
    assert fields[0] == ("struct_size", ctypes.c_size_t)
    assert [(n, t) for n, t in fields[1:]] == [(o["field"], C_TYPES[o["c_type"]])
                                               for o in OPTIONS]


@pytest.mark.parametrize("kind", [gdrstore.Client, gdrstore.Cluster])
def test_client_and_cluster_take_every_option_as_a_keyword(kind):
    taken = set(inspect.signature(kind.__init__).parameters)
    for o in OPTIONS:
        if kind is gdrstore.Client or o["cluster"] == "1":
            assert o["python"] in taken, f"{kind.__name__} lacks {o['python']}= ({o['field']})"


def test_gdrctl_takes_every_option_as_a_flag():
    flags = help_flags([build_binary("client", "gdrctl")])
    missing = [(o.get("field", o.get("member")), o["gdrctl"]) for o in OPTIONS + CXX_OPTIONS
               if o["gdrctl"] not in flags | {""}]
    assert not missing, f"gdrctl --help lacks {missing}"


def test_gdragent_takes_every_option_as_a_flag():
    flags = help_flags([build_binary("agent", "gdragent")])
    missing = [(o.get("field", o.get("member")), o["gdragent"]) for o in OPTIONS + CXX_OPTIONS
               if o["gdragent"] not in flags | {""}]
    assert not missing, f"gdragent --help lacks {missing}"


@pytest.mark.parametrize("workload", ["train", "checkpoint", "kvcache"])
def test_the_workload_cli_takes_every_option_as_a_flag(workload):
    sub = parser()._subparsers._group_actions[0].choices[workload]
    flags = {s for a in sub._actions for s in a.option_strings}
    missing = [(o["field"], o["workload"]) for o in OPTIONS
               if o["workload"] not in flags | {""}]
    assert not missing, f"gdrctl workload {workload} lacks {missing}"
