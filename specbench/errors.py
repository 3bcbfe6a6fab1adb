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
