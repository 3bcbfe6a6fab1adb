"""Commit-msg hook: the subject line of a commit message is at most 72 characters.

`git log --oneline` shows the subject alone, so it must say what the commit does in one short line; the detail
goes in the body, after a blank line. Run by pre-commit at the commit-msg stage (.pre-commit-config.yaml) with
the message file as its argument. Lines git strips (comments, and everything below the scissors line of
`git commit -v`) are not part of the message. Exit 0 when the subject fits, 1 with one line saying why not.
"""

from __future__ import annotations

import sys
from pathlib import Path

MAX_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"


def subject_of(message: str) -> str:
    """The first line of the message that git keeps: not a comment, not blank, above the scissors."""
    for line in message.split(SCISSORS, 1)[0].splitlines():
        if line.strip() and not line.startswith("#"):
            return line.rstrip()
    return ""


def problem(message: str) -> str | None:
    """Why the message's subject does not fit, or None when it does (an empty message is git's to refuse)."""
    subject = subject_of(message)
    if len(subject) > MAX_SUBJECT:
        return (
            f"commit subject has {len(subject)} characters (at most {MAX_SUBJECT}): "
            "say what the commit does in one short line, the detail in the body after a blank line"
        )
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: check_commit_msg.py COMMIT_MSG_FILE", file=sys.stderr)
        return 2
    found = problem(Path(argv[0]).read_text(encoding="utf-8", errors="replace"))
    if found:
        print(f"check_commit_msg: {found}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
