"""Clean-up that never hides the error it cleans up after. A run that fails leaves clients,
streams and volumes to close and take away, and with the daemon gone each of those fails too;
Python lets an error raised in clean-up replace the one being handled, so the user saw the
clean-up's `Connection refused` and not the rank's error. Here a clean-up error is noted on the
error that ended the run (its __notes__, PEP 678: printed after it by gdrctl workload and by
Python 3.11's tracebacks) and is raised only when nothing else was."""

from typing import Any, Callable, List, Optional


def add_note(error: BaseException, text: str) -> None:
    """BaseException.add_note, on Python < 3.11 too."""
    notes = getattr(error, "__notes__", None)
    if not isinstance(notes, list):
        notes = []
        error.__notes__ = notes  # what BaseException.add_note keeps
    notes.append(text)


def note(primary: BaseException, what: str, error: BaseException) -> None:
    """Adds `error`, raised by the clean-up step `what` after `primary`, to `primary`'s notes
    (with `error`'s own notes after it)."""
    add_note(primary, f"then, {what}: {type(error).__name__}: {error}")
    for n in getattr(error, "__notes__", None) or ():
        add_note(primary, f"  {n}")


def notes(error: BaseException) -> List[str]:
    """The clean-up errors noted on `error`, in the order they came."""
    return [str(n) for n in getattr(error, "__notes__", None) or ()]


class Cleanup:
    """Runs clean-up steps after `primary` (the error that ended the work; None when it
    succeeded). Every step runs. A step's error is noted on `primary`; without one, the first
    step's error becomes it (the later ones noted on that) and raise_first() raises it."""

    def __init__(self, primary: Optional[BaseException] = None):
        self.primary = primary
        self._own: Optional[BaseException] = None

    def run(self, what: str, step: Callable[[], Any]) -> None:
        try:
            step()
        except Exception as e:  # noted, never in place of the error before it
            if self.primary is None:
                self.primary = self._own = e
            else:
                note(self.primary, what, e)

    def raise_first(self) -> None:
        """Raises the first step's error when there was no primary error (the primary one is
        the caller's to raise)."""
        if self._own is not None:
            raise self._own


class closing:  # noqa: N801 (named as contextlib.closing, which it stands in for)
    """`with closing(obj, "what") as obj:` closes `obj` at the end. When the block raised, an
    error of the close is noted on the block's error rather than replacing it (a Stream's or a
    Client's own __exit__ would replace it)."""

    def __init__(self, obj: Any, what: str):
        self._obj = obj
        self._what = what

    def __enter__(self) -> Any:
        return self._obj

    def __exit__(self, _type, error, _tb) -> bool:
        c = Cleanup(error)
        c.run(self._what, self._obj.close)
        c.raise_first()
        return False
