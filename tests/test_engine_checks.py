"""Engine-settings checks without the engines: the vLLM check's subprocess protocol, its cache
and how a verdict lands on a setting; SGLang command lines through an argument parser."""

from __future__ import annotations

import argparse
import stat
import sys

import pytest

from specbench.analysis.settings.engine_settings import engine_settings
from specbench.cli.shell import engine_checks
from specbench.cli.shell.engine_checks import check_sglang_flags, validate_settings


@pytest.fixture()
def fake_vllm_python(tmp_path, monkeypatch):
    """An executable standing in for .venv-vllm's python: answers like the check script, rejecting
    any config with a key vLLM 0.32 does not have, and counting its runs."""
    monkeypatch.setattr(engine_checks, "cache_root", lambda: tmp_path / "cache")
    monkeypatch.delenv(engine_checks.SKIP_ENV, raising=False)
    runs = tmp_path / "runs"
    script = tmp_path / "venv" / "bin" / "python"
    script.parent.mkdir(parents=True)
    script.write_text(f"""#!{sys.executable}
import json, sys
open({str(runs)!r}, "a").write("run\\n")
items = json.load(sys.stdin)
known = {{"method", "model", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max",
         "num_speculative_tokens_per_batch_size"}}
out = []
for item in items:
    bad = sorted(set(item["config"]) - known)
    if bad:
        out.append({{"ok": False, "how": "fields", "error": "unknown key(s) " + ", ".join(bad)}})
    elif item["config"].get("model") and not item["target"]:
        out.append({{"ok": None, "how": "fields", "error": "keys valid; not built"}})
    else:
        out.append({{"ok": True, "how": "built", "error": ""}})
print("noise from the engine")
print("SPECBENCH-CHECK " + json.dumps({{"version": "0.32.0", "results": out}}))
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, runs


def test_vllm_verdicts_land_on_the_settings_and_are_cached(fake_vllm_python):
    python, runs = fake_vllm_python
    ngram = engine_settings("ngram", {"n_min": 1, "n_max": 3}, "chain", 2)
    draft = engine_settings("draft-model", {"model": "Qwen/x"}, "chain", 2)
    validate_settings([(ngram, None), (draft, None)], vllm_python=python)
    assert ngram["vllm"].supported and ngram["vllm"].checked.startswith("built as SpeculativeConfig by vLLM 0.32.0")
    assert draft["vllm"].supported and "not built" in draft["vllm"].checked
    again = engine_settings("ngram", {"n_min": 1, "n_max": 3}, "chain", 2)
    validate_settings([(again, None)], vllm_python=python)
    assert again["vllm"].checked == ngram["vllm"].checked
    assert runs.read_text().count("run") == 1  # the second check came from the cache


def test_a_rejected_config_is_unsupported_with_the_engines_message(fake_vllm_python):
    python, _ = fake_vllm_python
    settings = engine_settings("ngram", {}, "chain", 2)
    settings["vllm"].config["speculative_token_tree"] = "[(0,)]"  # what specbench used to emit
    validate_settings([(settings, None)], vllm_python=python)
    assert not settings["vllm"].supported
    assert "rejected by vLLM 0.32.0" in settings["vllm"].checked
    assert any("unknown key(s) speculative_token_tree" in note for note in settings["vllm"].notes)


def test_without_engines_the_versions_are_named(tmp_path, monkeypatch):
    monkeypatch.delenv(engine_checks.SKIP_ENV, raising=False)
    monkeypatch.setattr(engine_checks, "sglang_parser", lambda: None)
    settings = engine_settings("draft-model", {"model": "m"}, "chain", 3)
    validate_settings([(settings, None)], vllm_python=tmp_path / "missing" / "python")
    assert settings["vllm"].checked == "keys as in vLLM 0.32.0 (SpeculativeConfig); not validated here"
    assert "SGLang server_args.py at commit" in settings["sglang"].checked
    assert "transformers 5.19.0" in settings["transformers"].checked


def test_sglang_command_lines_through_a_parser():
    parser = argparse.ArgumentParser(exit_on_error=False)
    for flag in (
        "--model-path",
        "--speculative-algorithm",
        "--speculative-num-draft-tokens",
        "--speculative-ngram-min-bfs-breadth",
        "--speculative-ngram-max-bfs-breadth",
    ):
        parser.add_argument(flag)
    ngram = engine_settings("ngram", {"n_min": 1, "n_max": 3}, "chain", 4)["sglang"]
    assert check_sglang_flags(ngram.snippet, parser) == (True, "")
    old = ngram.snippet + " --speculative-ngram-max-match-window-size 3"  # the removed flag
    ok, error = check_sglang_flags(old, parser)
    assert not ok and "match-window" in error
