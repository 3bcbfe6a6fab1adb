"""The one exception type for mistakes a user can fix (bad flags, files, models), and notes.

The CLI turns a `SpecbenchError` into a single line on stderr and exit code 2; everything else
is a bug and keeps its traceback. A *note* (records set aside, records that measured nothing)
is held by `note` until the command ends: printed on stderr when it succeeds, dropped when it
fails, so that a failing command's one error line stays its only line.
"""

import difflib
from typing import Literal, overload

TEXT_MAX_CHARS = 65_536  # the bounds table's "text" row (`specbench.bounds.TEXT_BOUNDS`): a text key's longest value


class SpecbenchError(Exception):
    """A user-facing error: the message is the whole explanation, one line."""


_notes: list[str] = []


def note(message: str) -> None:
    """A one-line note for the user, printed when the command ends well (once per message)."""
    line = " ".join(str(message).split())
    if line not in _notes:
        _notes.append(line)


def take_notes() -> list[str]:
    """The notes held so far, in order; the list is emptied."""
    taken = list(_notes)
    _notes.clear()
    return taken


def did_you_mean(name: str, choices: list[str]) -> str:
    """A ' (did you mean X?)' suffix naming the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


def check_keys(keys, allowed, template: str, *, listing: str | None = None) -> None:
    """Refuse the first of ``keys`` not in ``allowed``: one line, ``template`` with ``{key}`` put in,
    a did-you-mean, and (``listing``) the allowed names, e.g. ``"backend own: unknown option '{key}'"``
    with ``listing="options"`` → ``backend own: unknown option 'kernel' (did you mean 'kernels'?)
    (options: kernels, compile, threads)``."""
    allowed = [str(name) for name in allowed]
    for key in keys:
        if key not in allowed:
            choices = f" ({listing}: {', '.join(allowed) or 'none'})" if listing else ""
            raise SpecbenchError(template.replace("{key}", str(key)) + did_you_mean(str(key), allowed) + choices)


def written(value) -> str:
    """``value`` as the user wrote it in a file, for messages: a YAML number keeps its text (``0x1F``, ``1e3``:
    `specbench.safe_files.WrittenInt`), true/false/null are YAML's words, anything else its short repr."""
    text = getattr(value, "written", None)
    if isinstance(text, str):
        return text
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@overload
def check_text(value: object, key: str, where: str, *, nullable: Literal[False] = False) -> str: ...


@overload
def check_text(value: object, key: str, where: str, *, nullable: bool) -> str | None: ...


def check_text(value: object, key: str, where: str, *, nullable: bool = False) -> str | None:
    """``value`` of the text-typed key ``key``, or one line naming the key and the value as written: YAML reads
    ``name: 0x1F`` as the number 31 and ``name: true`` as a boolean, and turning them back into text (``str``)
    would name a sweep ``31`` or ``True``. ``nullable``: None (the key left empty) passes as None."""
    if isinstance(value, str):
        if len(value) > TEXT_MAX_CHARS:
            raise SpecbenchError(
                f"{where + ': ' if where else ''}'{key}' must be text of at most {TEXT_MAX_CHARS:,} characters, "
                f"got {len(value):,} (the bounds table's row 'text')"
            )
        return value
    if value is None and nullable:
        return None
    shown = written(value)
    quote = "" if isinstance(value, (dict, list)) else f" (quote it for the text: {key}: '{shown}')"
    prefix = f"{where}: " if where else ""
    raise SpecbenchError(f"{prefix}'{key}' must be text, got {shown}{quote}")
