"""gRPC status codes as exception classes, each carrying the daemon's (or library's) message."""


class Error(Exception):
    """A failed call: `code` is the gRPC status code, `code_name` its name."""

    code = 2
    code_name = "UNKNOWN"


def _make(code, name, doc):
    cls = type("".join(p.capitalize() for p in name.split("_")), (Error,),
               {"code": code, "code_name": name, "__doc__": doc})
    return cls


Cancelled = _make(1, "CANCELLED", "The op was cancelled (e.g. the daemon is shutting down).")
Unknown = _make(2, "UNKNOWN", "An error without a more precise code.")
InvalidArgument = _make(3, "INVALID_ARGUMENT", "A bad argument: range, volume name, pointer.")
DeadlineExceeded = _make(4, "DEADLINE_EXCEEDED", "The op did not finish within its deadline.")
NotFound = _make(5, "NOT_FOUND", "No such volume (or device, or GPU).")
AlreadyExists = _make(6, "ALREADY_EXISTS", "Already exists.")
PermissionDenied = _make(7, "PERMISSION_DENIED", "Refused: rkey, read-only memory, grants.")
ResourceExhausted = _make(8, "RESOURCE_EXHAUSTED", "Too much in flight; retry later.")
FailedPrecondition = _make(9, "FAILED_PRECONDITION", "The system is not in a state for this.")
Aborted = _make(10, "ABORTED", "Aborted.")
OutOfRange = _make(11, "OUT_OF_RANGE", "Past the end of a volume or buffer.")
Unimplemented = _make(12, "UNIMPLEMENTED", "Not offered by this daemon or build.")
Internal = _make(13, "INTERNAL", "An internal error.")
Unavailable = _make(14, "UNAVAILABLE", "The daemon (or a target) cannot be reached.")
DataLoss = _make(15, "DATA_LOSS", "Bytes differ from what was expected, or were lost.")
Unauthenticated = _make(16, "UNAUTHENTICATED", "No or a wrong token.")



class ArgumentOutOfRange(InvalidArgument, OverflowError):
    """An integer argument outside what its C type carries (an offset or length past 2^64, a
    negative size, a timeout too long): refused before ctypes would wrap it. Both an
    InvalidArgument and an OverflowError."""


_BY_CODE = {c.code: c for c in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound,
                                AlreadyExists, PermissionDenied, ResourceExhausted,
                                FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal,
                                Unavailable, DataLoss, Unauthenticated)}


def from_status(code, message):
    """The exception for gRPC status `code` with `message`."""
    return _BY_CODE.get(code, Unknown)(message)


def close_after(close, error) -> None:
    """Runs `close` at the end of a `with` block. When the block raised `error`, an error of
    the close is noted on it (PEP 678 notes, printed after it) instead of replacing it: with
    the daemon gone, a Stream's close fails too, and Python would show that failure instead of
    the block's own."""
    if error is None:
        close()
        return
    try:
        close()
    except Exception as e:  # noqa: BLE001 (noted on the block's error, never lost)
        notes = getattr(error, "__notes__", None)
        if not isinstance(notes, list):
            notes = []
            error.__notes__ = notes
        notes.append(f"then, closing: {type(e).__name__}: {e}")
