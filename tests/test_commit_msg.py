"""The commit-msg hook (scripts/check_commit_msg.py): subjects of at most 72 characters, wired into pre-commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "check_commit_msg.py"
sys.path.insert(0, str(SCRIPT.parent))
from check_commit_msg import MAX_SUBJECT, SCISSORS, problem, subject_of  # noqa: E402


def test_a_subject_of_72_characters_passes_and_73_fails():
    assert problem("x" * MAX_SUBJECT + "\n\nA body line may be as long as it needs to be: " + "y" * 200) is None
    assert "73 characters" in problem("x" * (MAX_SUBJECT + 1) + "\n")


def test_the_subject_is_the_first_line_git_keeps():
    message = "# Please enter the commit message\n\nFix the thing\n\nbody\n"
    assert subject_of(message) == "Fix the thing"
    long_comment = "# " + "c" * 200 + "\nShort subject\n"
    assert problem(long_comment) is None
    below_scissors = f"Short subject\n{SCISSORS}\n" + "d" * 200
    assert subject_of(below_scissors) == "Short subject" and problem(below_scissors) is None
    assert subject_of(f"# only comments\n{SCISSORS}\n{'e' * 100}\n") == ""  # git refuses it; not this hook's job


def test_characters_not_bytes_are_counted():
    assert problem("γ" * MAX_SUBJECT) is None  # 144 bytes in UTF-8, 72 characters


def test_the_script_ends_1_with_one_line_on_a_long_subject(tmp_path):
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("Load view and report read the summary's schedule_asked directly (always there)\n")
    bad = subprocess.run([sys.executable, SCRIPT, message], capture_output=True, text=True)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    message.write_text("Read schedule_asked from the summary directly\n\nThe fallbacks were dead.\n")
    good = subprocess.run([sys.executable, SCRIPT, message], capture_output=True, text=True)
    assert good.returncode == 0 and not good.stderr


def test_pre_commit_runs_it_at_the_commit_msg_stage():
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    assert "commit-msg" in config["default_install_hook_types"]  # `pre-commit install` sets up the hook
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    (hook,) = [h for h in hooks if "check_commit_msg.py" in h["entry"]]
    assert hook["stages"] == ["commit-msg"]
    assert (ROOT / hook["entry"].split()[-1]).is_file()
