"""The one exception type for mistakes a user can fix (bad flags, files, models).

The CLI turns it into a single line on stderr and exit code 2; everything else is a bug
and keeps its traceback.
"""

import difflib


class SpecbenchError(Exception):
    """A user-facing error: the message is the whole explanation, one line."""


def did_you_mean(name: str, choices: list[str]) -> str:
    """A ' (did you mean X?)' suffix naming the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
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
