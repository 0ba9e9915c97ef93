"""gdrstore: move bytes between a gdrstored daemon's volumes and memory you already own (torch
tensors, numpy and CuPy arrays, bytearrays), in place.

    import gdrstore
    c = gdrstore.Client("127.0.0.1:50051", transport="auto")
    c.get("vol0", 0, into=tensor)      # store -> tensor (the wire's Write RPC)
    c.put(tensor, "vol0", 0)           # tensor -> store (the wire's Read RPC)

    with gdrstore.connect("etcd://127.0.0.1:2379/prod") as cl:  # many daemons: a Cluster
        cl.put(tensor, "vol0", 0)      # striped over the members, R replicas each
        cl.get("vol0", 0, into=tensor)

gdrstore.connect(url) opens either kind ("HOST:PORT", "agent:PATH", "etcd://...",
"file:MEMBERS"); a Client and a Cluster take the same calls.
"""

from ._version import __version__
from .client import Client, Future, Moved, Stream, verify
from .cluster import Cluster, ClusterFuture, ClusterStream
from .errors import (Aborted, AlreadyExists, ArgumentOutOfRange, Cancelled, DataLoss,
                     DeadlineExceeded, Error, FailedPrecondition, Internal, InvalidArgument,
                     NotFound, OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated,
                     Unavailable, Unimplemented, Unknown)
from .memory import Memory, describe
from .store import Store
from .urls import connect

__all__ = [
    "connect", "Store", "Client", "Cluster", "Stream", "Future", "ClusterStream", "ClusterFuture",
    "Moved", "verify", "Memory", "describe", "Error",
    "Cancelled",
    "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound", "AlreadyExists",
    "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
    "Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated",
    "ArgumentOutOfRange",
]
