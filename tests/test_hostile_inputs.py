"""What specbench promises a hostile user: exit codes that mean what they say, one line on stderr,
no traceback, and no record of a results folder changed by a command that failed.

* bad values and bad files against every command -> exit 2, one line (`CASES`);
* an internal error -> exit 1, the traceback in a log file named on one line; Ctrl-C -> 130
  (`test_internal_error_*`, `test_interrupt_*`, per command);
* two writers on one folder, SIGINT then resume, SIGKILL then resume (subprocesses);
* a damaged model cache is refused or rebuilt, never loaded.

Runs on tiny random models and --dry-run where a real run is not needed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench.records.lock import LOCK_FILE
from specbench.records.store import load_records
from tests.cli_helpers import invoke

FAKE_PID = 424242
TINY = ["--target", "tiny-random-llama", "--drafter", "ngram", "--gamma", "1", "--prompts", "2", "-n", "6"]
PROMPTS = [
    "Tell me about tea.",
    "Count to ten please.",
    "Why is the sky blue?",
    "Name a prime number.",
    "Write a haiku.",
    "Say hello in French.",
]


# ----------------------------------------------------------------------------- fixtures


def _write_prompts(path: Path, n: int = 4) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS[:n])))
    return path


@pytest.fixture(scope="module")
def done_folder(tmp_path_factory):
    """A finished tiny sweep: every case that needs a results folder gets a copy of it."""
    base = tmp_path_factory.mktemp("hostile")
    prompts = _write_prompts(base / "prompts.jsonl")
    out = base / "done"
    result = invoke("sweep", "--name", "done", *TINY, "--workload", f"jsonl:{prompts}:field=text:id=id", "--out", out)
    assert result.exit_code == 0, result.output
    return out, prompts


def _snapshot(folder: Path) -> dict:
    """name -> sha256 of the records and run.json of a results folder."""
    files = sorted((folder / "records").rglob("*.parquet")) + [folder / "run.json"]
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.exists()}


@pytest.fixture()
def env(tmp_path, done_folder):
    """Paths every case may name, keyed for str.format: a results folder R and bad files of every kind."""
    src, prompts = done_folder
    R = tmp_path / "R"
    shutil.copytree(src, R)
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "latin1.txt").write_bytes("name: caf\xe9\ngammas: [1]\n".encode("latin-1"))
    (tmp_path / "truncated.yaml").write_text("name: x\ngammas: [1, 2\n")
    (tmp_path / "huge.yaml").write_text("name: x\n" + "# padding padding padding padding\n" * 70_000)
    (tmp_path / "huge.txt").write_text("tea " * (5 * 2**20 // 4 + 10))
    (tmp_path / "laughs.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nname: laughs\n"
    )
    (tmp_path / "deep.yaml").write_text("name: x\ngammas: " + "[" * 200 + "]" * 200 + "\n")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    (tmp_path / "afile").write_text("not a folder\n")
    ro = tmp_path / "readonly"
    ro.mkdir()
    ro.chmod(0o555)
    ro_results = tmp_path / "R_ro"
    shutil.copytree(src, ro_results)
    ro_results.chmod(0o555)
    bad = {}
    for name, text in {
        "list": "[]\n",
        "empty": "{}\n",
        "scalar": "7\n",
        "nan": '{"sweep": NaN}\n',
        "nohash": '{"kind": "sweep", "sweep": {"name": "x"}}\n',
    }.items():
        folder = tmp_path / f"R_{name}"
        shutil.copytree(src, folder)
        (folder / "run.json").write_text(text)
        bad[f"R_{name}"] = folder
    broken = tmp_path / "R_broken"
    shutil.copytree(src, broken)
    part = sorted((broken / "records").glob("*.parquet"))[0]
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])  # a truncated parquet file
    spec_yaml = tmp_path / "spec.yaml"
    spec_yaml.write_text(
        f"name: y\ntarget: tiny-random-llama\ndrafters: [ngram]\ngammas: [1]\nmax_new_tokens: 6\n"
        f"workloads: [{{name: 'jsonl:{prompts}:field=text:id=id', count: 2}}]\n"
    )
    paths = {
        "tmp": tmp_path,
        "R": R,
        "prompts": prompts,
        "W": f"jsonl:{prompts}:field=text:id=id",
        "ro": ro,
        "R_ro": ro_results,
        "R_broken": broken,
        "spec": spec_yaml,
        **bad,
    }
    yield {k: str(v) for k, v in paths.items()}
    ro.chmod(0o755)
    ro_results.chmod(0o755)


def assert_one_line(result, code: int, *needles: str) -> str:
    """Exit ``code``, exactly one line on stderr (no traceback), naming every needle."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def other_writer():
    """Hold a folder's writer lock from 'another process' (another open file description + a fake PID)."""
    held = []

    def hold(folder: str) -> None:
        fd = os.open(Path(folder) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(fd, 0)
        os.write(fd, f"{FAKE_PID}\n".encode())
        held.append(fd)

    yield hold
    for fd in held:
        os.close(fd)


# ----------------------------------------------------------------------------- bad values and files: exit 2

SW = ["sweep", "--name", "h", *TINY, "--workload", "{W}"]
DRY = [*SW, "--dry-run"]
RUN = ["run", "--target", "tiny-random-llama", "-n", "4", "--gamma", "2"]
HAS_CUDA = False
try:  # noqa: SIM105
    import torch

    HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover
    pass

# (id, argv with {placeholders}, needles in the one line)
CASES = [
    # sweep: names and values (dry runs: nothing loads)
    (
        "sweep-name-traversal",
        ["sweep", "--name", "../../escape", *TINY, "--workload", "{W}", "--dry-run"],
        ["not allowed"],
    ),
    ("sweep-name-slash", ["sweep", "--name", "a/b", *TINY, "--workload", "{W}", "--dry-run"], ["not allowed"]),
    ("sweep-name-dot", ["sweep", "--name", ".hidden", *TINY, "--workload", "{W}", "--dry-run"], ["not allowed"]),
    ("sweep-name-space", ["sweep", "--name", "a b", *TINY, "--workload", "{W}", "--dry-run"], ["not allowed"]),
    ("sweep-temperature-nan", [*DRY, "--temperature", "nan"], ["finite"]),
    ("sweep-temperature-inf", [*DRY, "--temperature", "inf"], ["finite"]),
    ("sweep-temperature-negative", [*DRY, "--temperature", "-1"], ["0.001 to 100"]),
    ("sweep-temperature-text", [*DRY, "--temperature", "warm"], ["comma-separated"]),
    ("sweep-gamma-huge", [*DRY, "--gamma", "100000"], ["from 0 to 128"]),
    ("sweep-gamma-text", [*DRY, "--gamma", "two"], ["comma-separated"]),
    ("sweep-top-p-zero", [*DRY, "--top-p", "0"], ["top-p", "> 0"]),
    ("sweep-top-p-nan", [*DRY, "--top-p", "nan"], ["finite"]),
    ("sweep-drafter-param-text", [*DRY, "--drafter", "ngram:n_min=abc"], ["n_min", "integer"]),
    ("sweep-drafter-param-zero", [*DRY, "--drafter", "ngram:n_min=0"], ["n_min"]),
    ("sweep-drafter-param-order", [*DRY, "--drafter", "ngram:n_min=5,n_max=2"], ["n_min <= n_max"]),
    ("sweep-drafter-param-unknown", [*DRY, "--drafter", "ngram:bogus=1"], ["no parameter 'bogus'"]),
    ("sweep-drafter-unknown", [*DRY, "--drafter", "nosuch"], ["unknown drafter"]),
    ("sweep-shard", [*DRY, "--shard", "3/2"], ["--shard"]),
    ("sweep-mode", [*DRY, "--mode", "sideways"], ["unknown mode"]),
    ("sweep-dtype", [*DRY, "--dtype", "fp8"], ["dtype"]),
    (
        "sweep-configs-over-limit",
        [
            "sweep",
            "--name",
            "h",
            "--target",
            "tiny-random-llama",
            "--drafter",
            "ngram",
            "--gamma",
            ",".join(map(str, range(1, 129))),
            "--temperature",
            ",".join(f"0.{i:03d}" for i in range(1, 200)),
            "--workload",
            "{W}",
            "--dry-run",
        ],
        ["configurations", "limit"],
    ),
    # sweep: folders and real runs that must stop before measuring
    ("sweep-out-is-file", [*SW, "--out", "{tmp}/afile"], ["is a file"]),
    ("sweep-out-under-file", [*SW, "--out", "{tmp}/afile/sub"], ["is a file"]),
    ("sweep-out-read-only", [*SW, "--out", "{ro}/new"], ["read-only"]),
    ("sweep-results-read-only", [*SW, "--out", "{R_ro}"], ["read-only"]),
    ("sweep-out-symlink-loop", [*SW, "--out", "{tmp}/loop_a"], ["loop_a"]),
    ("sweep-device-unknown", [*SW, "--device", "tpu", "--out", "{tmp}/new"], ["unknown device"]),
    ("sweep-target-typo", [*SW, "--target", "tiny-random-lama", "--out", "{tmp}/new"], ["tiny-random-llama"]),
    ("sweep-context-window", [*SW, "-n", "100000", "--out", "{tmp}/new"], ["context window", "by"]),
    (
        "sweep-grid-needs-yes",
        [
            "sweep",
            "--name",
            "h",
            "--target",
            "tiny-random-llama",
            "--drafter",
            "ngram",
            "--gamma",
            ",".join(map(str, range(1, 101))),
            "--temperature",
            ",".join(f"0.{i:02d}" for i in range(1, 31)),
            "--prompts",
            "2",
            "--workload",
            "{W}",
            "--out",
            "{tmp}/new",
        ],
        ["--yes", "units"],
    ),
    ("sweep-different-spec", [*SW, "--gamma", "2", "--out", "{R}"], ["different sweep spec"]),
    ("sweep-run-json-list", [*SW, "--out", "{R_list}"], ["not a specbench run.json"]),
    ("sweep-run-json-empty", [*SW, "--out", "{R_empty}"], ["lacks sweep"]),
    ("sweep-run-json-scalar", [*SW, "--out", "{R_scalar}"], ["not a specbench run.json"]),
    ("sweep-run-json-nan", [*SW, "--out", "{R_nan}"], ["run.json"]),
    ("sweep-run-json-no-hash", [*SW, "--out", "{R_nohash}"], ["no spec hash"]),
    ("sweep-in-use", [*SW, "--out", "{R}"], [f"in use by PID {FAKE_PID}"]),
    # sweep files
    ("sweep-yaml-binary", ["sweep", "{tmp}/binary.bin", "--dry-run"], ["binary"]),
    ("sweep-yaml-latin1", ["sweep", "{tmp}/latin1.txt", "--dry-run"], ["UTF-8"]),
    ("sweep-yaml-truncated", ["sweep", "{tmp}/truncated.yaml", "--dry-run"], ["malformed YAML"]),
    ("sweep-yaml-huge", ["sweep", "{tmp}/huge.yaml", "--dry-run"], ["MiB limit"]),
    ("sweep-yaml-aliases", ["sweep", "{tmp}/laughs.yaml", "--dry-run"], ["not allowed"]),
    ("sweep-yaml-deep", ["sweep", "{tmp}/deep.yaml", "--dry-run"], ["deeper"]),
    ("sweep-yaml-list", ["sweep", "{tmp}/list.yaml", "--dry-run"], ["mapping"]),
    ("sweep-yaml-symlink-loop", ["sweep", "{tmp}/loop_a", "--dry-run"], ["loop_a"]),
    ("sweep-yaml-directory", ["sweep", "{tmp}", "--dry-run"], ["directory"]),
    ("sweep-yaml-missing", ["sweep", "{tmp}/nope.yaml", "--dry-run"], ["not found"]),
    ("sweep-yaml-ignore-eos-string", ["sweep", "{spec}", "--dry-run"], ["ignore_eos", "true or false"]),
    ("sweep-yaml-temperature-nan", ["sweep", "{spec}", "--dry-run"], ["finite"]),
    ("sweep-yaml-compile-number", ["sweep", "{spec}", "--dry-run"], ["compile", "true or false"]),
    ("sweep-yaml-name-traversal", ["sweep", "{spec}", "--dry-run"], ["not allowed"]),
    ("sweep-yaml-drafter-param", ["sweep", "{spec}", "--dry-run"], ["n_max", "integer"]),
    # run
    ("run-prompt-binary", [*RUN, "--prompt-file", "{tmp}/binary.bin"], ["binary"]),
    ("run-prompt-latin1", [*RUN, "--prompt-file", "{tmp}/latin1.txt"], ["UTF-8"]),
    ("run-prompt-missing", [*RUN, "--prompt-file", "{tmp}/nope.txt"], ["not found"]),
    ("run-prompt-huge", [*RUN, "--prompt-file", "{tmp}/huge.txt"], ["MiB limit"]),
    ("run-prompt-symlink-loop", [*RUN, "--prompt-file", "{tmp}/loop_a"], ["loop_a"]),
    ("run-prompt-directory", [*RUN, "--prompt-file", "{tmp}"], ["directory"]),
    ("run-temperature-inf", [*RUN, "--prompt", "hi", "--temperature", "inf"], ["finite"]),
    ("run-temperature-nan", [*RUN, "--prompt", "hi", "--temperature", "nan"], ["--temperature"]),
    ("run-top-p", [*RUN, "--prompt", "hi", "--top-p", "2"], ["top-p"]),
    ("run-drafter-param-text", [*RUN, "--prompt", "hi", "--drafter-param", "n_min=abc"], ["n_min", "integer"]),
    (
        "run-context-window",
        ["run", "--target", "tiny-random-llama", "--prompt", "hi", "-n", "100000"],
        ["context window", "by"],
    ),
    ("run-target-unknown", [*RUN, "--prompt", "hi", "--target", "no-such-model"], ["no-such-model"]),
    ("run-tree-unknown", [*RUN, "--prompt", "hi", "--tree", "pyramid"], ["pyramid"]),
    ("run-empty-prompt", [*RUN, "--prompt", "   "], ["empty prompt"]),
    # readers
    ("show-run-json-list", ["results", "show", "{R_list}"], ["not a specbench run.json"]),
    ("show-run-json-empty", ["results", "show", "{R_empty}"], ["lacks sweep"]),
    ("show-csv-directory", ["results", "show", "{R}", "--csv", "{tmp}"], ["is a directory"]),
    ("show-csv-read-only", ["results", "show", "{R}", "--csv", "{ro}/t.csv"], ["read-only"]),
    ("show-truncated-parquet", ["results", "show", "{R_broken}"], ["broken results file"]),
    ("show-missing-folder", ["results", "show", "{tmp}/nope"], ["not found"]),
    ("show-a-file", ["results", "show", "{tmp}/afile"], ["afile"]),
    ("fit-run-json-list", ["fit", "{R_list}"], ["not a specbench run.json"]),
    ("recommend-run-json-empty", ["recommend", "{R_empty}"], ["lacks sweep"]),
    ("plot-run-json-scalar", ["plot", "{R_scalar}", "--out", "{tmp}/plots"], ["not a specbench run.json"]),
    ("plot-out-is-file", ["plot", "{R}", "--out", "{tmp}/afile"], ["is a file"]),
    ("merge-out-is-file", ["results", "merge", "{R}", "--out", "{tmp}/afile"], ["is a file"]),
    ("merge-broken-source", ["results", "merge", "{R_list}", "--out", "{tmp}/merged"], ["run.json"]),
    ("merge-in-use", ["results", "merge", "{R_empty}", "--out", "{R}"], [f"in use by PID {FAKE_PID}"]),
    # profile
    (
        "profile-out-is-file",
        [
            "profile",
            "--target",
            "tiny-random-llama",
            "--batch",
            "1",
            "--context",
            "8",
            "--verify-tokens",
            "1",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--out",
            "{tmp}/afile",
        ],
        ["is a file"],
    ),
    (
        "profile-out-read-only",
        [
            "profile",
            "--target",
            "tiny-random-llama",
            "--batch",
            "1",
            "--context",
            "8",
            "--verify-tokens",
            "1",
            "--out",
            "{ro}/p",
        ],
        ["read-only"],
    ),
    (
        "profile-in-use",
        [
            "profile",
            "--target",
            "tiny-random-llama",
            "--batch",
            "1",
            "--context",
            "8",
            "--verify-tokens",
            "1",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--out",
            "{tmp}/p",
            "--force",
        ],
        [f"in use by PID {FAKE_PID}"],
    ),
    (
        "profile-batch-zero",
        ["profile", "--target", "tiny-random-llama", "--batch", "0", "--out", "{tmp}/p"],
        ["--batch"],
    ),
    (
        "profile-verify-tokens-text",
        ["profile", "--target", "tiny-random-llama", "--verify-tokens", "abc", "--out", "{tmp}/p"],
        ["--verify-tokens"],
    ),
    # other commands
    ("workloads-unknown", ["workloads", "show", "nosuch"], ["nosuch"]),
    ("models-pull-random", ["models", "pull", "tiny-random-llama"], ["random"]),
    ("unknown-flag", ["sweep", "--bogus"], ["bogus"]),
]

# Round 3 (issue 30): each class has its own fix and at least two cases here; the fuzz tests
# (tests/test_fuzz.py) try the classes on generated inputs.
PROFILE = ["profile", "--target", "tiny-random-llama", "--context", "8", "--verify-tokens", "1", "--out", "{tmp}/p"]
TRAIN = ["train-drafter", "--type", "medusa", "--target", "tiny-random-llama", "--out", "{tmp}/d"]
BOUNDS_CASES = [  # one bounds table (specbench/bounds.py) for every number: flags, YAML keys, options
    ("fit-bootstrap-huge", ["fit", "{R}", "--bootstrap", "1000000000"], ["--bootstrap", "from 39 to 10000"]),
    ("recommend-bootstrap-huge", ["recommend", "{R}", "--bootstrap", "1000000000"], ["--bootstrap", "10000"]),
    ("plot-bootstrap-huge", ["plot", "{R}", "--bootstrap", "1000000000", "--out", "{tmp}/plots"], ["--bootstrap"]),
    ("recommend-max-gamma-huge", ["recommend", "{R}", "--max-gamma", "1000000000"], ["--max-gamma", "to 128"]),
    ("plot-max-gamma-huge", ["plot", "{R}", "--max-gamma", "100000", "--out", "{tmp}/plots"], ["--max-gamma"]),
    ("recommend-price-nan", ["recommend", "{R}", "--price-per-hour", "nan"], ["--price-per-hour", "finite"]),
    ("plot-price-negative", ["plot", "{R}", "--price-per-hour", "-1", "--out", "{tmp}/plots"], ["--price-per-hour"]),
    ("compare-margin-huge", ["compare", "{R}", "{R}", "--margin", "2"], ["--margin", "< 1"]),
    ("compare-other-folder", ["compare", "{R}", "{tmp}"], ["run.json"]),
    ("sweep-yaml-price-inf", ["sweep", "{spec}", "--dry-run"], ["price_per_hour", "finite"]),
    ("run-gamma-huge", [*RUN, "--prompt", "hi", "--gamma", "100000"], ["--gamma", "from 0 to 128"]),
    ("run-temperature-tiny", [*RUN, "--prompt", "hi", "--temperature", "1e-300"], ["--temperature", "0.001"]),
    ("sweep-temperature-tiny", [*DRY, "--temperature", "1e-300"], ["temperatures", "0.001"]),
    ("sweep-threads-huge", [*DRY, "--threads", "1000000"], ["threads", "from 1 to 1024"]),
    ("profile-batch-huge", [*PROFILE, "--batch", "1000000"], ["--batch", "from 1 to 4096"]),
    ("profile-batch-range-huge", [*PROFILE, "--batch", "1..1000000000"], ["--batch", "4096"]),
    ("profile-threads-huge", [*PROFILE, "--threads", "1000000"], ["--threads", "1024"]),
    ("train-heads-huge", [*TRAIN, "--heads", "1000000"], ["--heads", "from 1 to 64"]),
    ("train-threads-huge", [*TRAIN, "--threads", "1000000"], ["--threads", "1024"]),
    ("train-lr-nan", [*TRAIN, "--lr", "nan"], ["--lr", "finite"]),
    ("train-lr-huge", [*TRAIN, "--lr", "1e9"], ["--lr", "<= 10"]),
    ("workloads-count-huge", ["workloads", "show", "{W}", "--count", "100000000"], ["--count", "1,000,000"]),
    ("sweep-yaml-seed-nan", ["sweep", "{spec}", "--dry-run"], ["seed", "finite"]),
    ("sweep-yaml-max-new-tokens-inf", ["sweep", "{spec}", "--dry-run"], ["max_new_tokens", "finite"]),
    ("sweep-yaml-warmup-inf", ["sweep", "{spec}", "--dry-run"], ["timing.warmup_s", "finite"]),
    ("sweep-yaml-retries-huge", ["sweep", "{spec}", "--dry-run"], ["timing.retries", "from 0 to 100"]),
    ("sweep-yaml-tree-topk-huge", ["sweep", "{spec}", "--dry-run"], ["topk", "512"]),
]
OPTION_CASES = [  # one validated options model per backend, checked at --dry-run
    ("sweep-yaml-openai-timeout-text", ["sweep", "{spec}", "--dry-run"], ["timeout_s", "got 'abc'"]),
    ("sweep-yaml-openai-timeout-zero", ["sweep", "{spec}", "--dry-run"], ["timeout_s", "> 0"]),
    ("sweep-yaml-openai-api-key-crlf", ["sweep", "{spec}", "--dry-run"], ["api_key", "line breaks"]),
    ("sweep-yaml-openai-warmup-string", ["sweep", "{spec}", "--dry-run"], ["warmup", "true or false"]),
    ("sweep-yaml-openai-url-port", ["sweep", "{spec}", "--dry-run"], ["url", "port outside"]),
    ("sweep-yaml-openai-url-scheme", ["sweep", "{spec}", "--dry-run"], ["url", "http://"]),
    ("sweep-yaml-openai-url-credentials", ["sweep", "{spec}", "--dry-run"], ["url", "api_key"]),
    ("sweep-yaml-openai-no-url", ["sweep", "{spec}", "--dry-run"], ["needs the option url"]),
    ("sweep-yaml-server-port", ["sweep", "{spec}", "--dry-run"], ["port", "65535"]),
    ("sweep-yaml-server-env", ["sweep", "{spec}", "--dry-run"], ["env"]),
    ("sweep-yaml-own-kernels", ["sweep", "{spec}", "--dry-run"], ["kernels", "auto, triton, torch"]),
]
LIFECYCLE_CASES = [  # --out '' is never the current directory; --prompt and --prompt-file conflict
    ("sweep-out-empty", [*SW, "--out", ""], ["--out", "empty path"]),
    ("profile-out-empty", ["profile", "--target", "tiny-random-llama", "--out", ""], ["--out", "empty path"]),
    ("plot-out-empty", ["plot", "{R}", "--out", " "], ["--out", "empty path"]),
    ("merge-out-empty", ["results", "merge", "{R}", "--out", ""], ["--out", "empty path"]),
    ("train-out-empty", ["train-drafter", "--type", "medusa", "--out", ""], ["--out", "empty path"]),
    ("export-out-empty", ["export-drafter", "eagle", "--out", ""], ["--out", "empty path"]),
    ("run-prompt-and-prompt-file", [*RUN, "--prompt", "hi", "--prompt-file", "{prompts}"], ["not both"]),
]
CASES += BOUNDS_CASES + OPTION_CASES + LIFECYCLE_CASES
if not HAS_CUDA:
    CASES.append(("sweep-device-cuda", [*SW, "--device", "cuda", "--out", "{tmp}/new"], ["CUDA"]))
    CASES.append(("run-device-cuda", [*RUN, "--prompt", "hi", "--device", "cuda"], ["CUDA"]))

# sweep YAMLs written for the cases named above
SPEC_EDITS = {
    "sweep-yaml-ignore-eos-string": {"ignore_eos": "false"},
    "sweep-yaml-temperature-nan": {"temperatures": [float("nan")]},
    "sweep-yaml-compile-number": {"compile": 1},
    "sweep-yaml-name-traversal": {"name": "../../escape"},
    "sweep-yaml-drafter-param": {"drafters": [{"type": "ngram", "params": {"n_max": "abc"}}]},
    "sweep-yaml-seed-nan": {"seed": float("nan")},
    "sweep-yaml-max-new-tokens-inf": {"max_new_tokens": float("inf")},
    "sweep-yaml-warmup-inf": {"timing": {"warmup_s": float("inf")}},
    "sweep-yaml-retries-huge": {"timing": {"retries": 10**12}},
    "sweep-yaml-price-inf": {"price_per_hour": float("inf")},
    "sweep-yaml-tree-topk-huge": {"trees": ["dynamic:topk=99999999999,nodes=8"]},
    "sweep-yaml-openai-timeout-text": {"backend": {"name": "openai", "url": "http://127.0.0.1:9", "timeout_s": "abc"}},
    "sweep-yaml-openai-timeout-zero": {"backend": {"name": "openai", "url": "http://127.0.0.1:9", "timeout_s": 0}},
    "sweep-yaml-openai-api-key-crlf": {
        "backend": {"name": "openai", "url": "http://127.0.0.1:9", "api_key": "sk-1\r\nX-Injected: yes"}
    },
    "sweep-yaml-openai-warmup-string": {"backend": {"name": "openai", "url": "http://127.0.0.1:9", "warmup": "false"}},
    "sweep-yaml-openai-url-port": {"backend": {"name": "openai", "url": "http://127.0.0.1:99999"}},
    "sweep-yaml-openai-url-scheme": {"backend": {"name": "openai", "url": "127.0.0.1:8000"}},
    "sweep-yaml-openai-url-credentials": {"backend": {"name": "openai", "url": "http://user:pw@127.0.0.1:8000"}},
    "sweep-yaml-openai-no-url": {"backend": {"name": "openai", "timeout_s": 5}},
    "sweep-yaml-server-port": {"backend": {"name": "vllm-server", "port": 70000}},
    "sweep-yaml-server-env": {"backend": {"name": "vllm-server", "env": {"BAD NAME": "1"}}},
    "sweep-yaml-own-kernels": {"backend": {"name": "own", "kernels": "cuda-magic"}},
}


@pytest.mark.parametrize("case_id,argv,needles", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2(env, other_writer, case_id, argv, needles):
    import yaml

    if case_id in SPEC_EDITS:
        spec = yaml.safe_load(Path(env["spec"]).read_text())
        spec.update(SPEC_EDITS[case_id])
        Path(env["spec"]).write_text(yaml.safe_dump(spec))
    if case_id.endswith("in-use"):
        target = Path(env["tmp"]) / "p" if case_id.startswith("profile") else Path(env["R"])
        target.mkdir(exist_ok=True)
        other_writer(str(target))
    before = _snapshot(Path(env["R"]))
    result = invoke(*[a.format(**env) for a in argv])
    assert_one_line(result, 2, *[n.format(**env) for n in needles])
    assert _snapshot(Path(env["R"])) == before, "a failed command changed records"
    assert not (Path(env["tmp"]).parent / "escape").exists() and not Path("escape").exists()


def test_case_count():
    assert len(CASES) + 2 * len(PER_COMMAND) + 6 >= 60


# ----------------------------------------------------------------------------- exit codes per command: 1 and 130

# command line, and a function the command calls (patched to fail where the command module looks it up)
PER_COMMAND = [
    ("sweep", [*SW, "--out", "{tmp}/new"], "specbench.measure.run.runner.SweepRunner.run"),
    ("run", [*RUN, "--prompt", "hi"], "specbench.backends.own_engine.run_prompt"),
    ("results-show", ["results", "show", "{R}"], "specbench.cli.results_cmd.configuration_table"),
    ("results-merge", ["results", "merge", "{R}", "--out", "{tmp}/m"], "specbench.cli.results_cmd.merge_folders"),
    ("fit", ["fit", "{R}"], "specbench.cli.fit_cmd.fit_acceptance"),
    ("recommend", ["recommend", "{R}"], "specbench.cli.recommend_cmd.recommend"),
    ("plot", ["plot", "{R}", "--out", "{tmp}/plots"], "specbench.figures.report_page.build_report"),
    ("compare", ["compare", "{R}", "{R}"], "specbench.cli.compare_cmd.compare"),
    (
        "profile",
        [
            "profile",
            "--target",
            "tiny-random-llama",
            "--batch",
            "1",
            "--context",
            "8",
            "--verify-tokens",
            "1",
            "--out",
            "{tmp}/p",
        ],
        "specbench.profile.profiler.plan_profile",
    ),
    ("workloads-list", ["workloads", "list"], "specbench.cli.workloads_cmd.workload_names"),
    ("models-list", ["models", "list"], "specbench.cli.models_cmd.alias_status"),
]


def _patch(monkeypatch, dotted: str, exc: BaseException) -> None:
    def fail(*args, **kwargs):
        raise exc

    monkeypatch.setattr(dotted, fail)


@pytest.mark.parametrize("name,argv,target", PER_COMMAND, ids=[c[0] for c in PER_COMMAND])
def test_internal_error_is_exit_1_with_a_log(env, monkeypatch, name, argv, target):
    logs = Path(env["tmp"]) / "logs"
    monkeypatch.setenv("SPECBENCH_LOG_DIR", str(logs))
    _patch(monkeypatch, target, RuntimeError("deliberate bug"))
    before = _snapshot(Path(env["R"]))
    result = invoke(*[a.format(**env) for a in argv])
    line = assert_one_line(result, 1, "internal error", "deliberate bug", str(logs))
    log = Path(line.split("traceback in ", 1)[1].split(";")[0])
    assert log.is_file() and "Traceback" in log.read_text() and "deliberate bug" in log.read_text()
    assert _snapshot(Path(env["R"])) == before


@pytest.mark.parametrize("name,argv,target", PER_COMMAND, ids=[c[0] for c in PER_COMMAND])
def test_interrupt_is_exit_130(env, monkeypatch, name, argv, target):
    _patch(monkeypatch, target, KeyboardInterrupt())
    before = _snapshot(Path(env["R"]))
    result = invoke(*[a.format(**env) for a in argv])
    assert_one_line(result, 130, "interrupted")
    assert _snapshot(Path(env["R"])) == before


def test_good_commands_exit_0_and_json_is_strict(env):
    result = invoke("run", "--target", "tiny-random-llama", "--prompt", "hi", "-n", "4", "--drafter", "none", "--json")
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text)  # strict JSON: NaN would have been written as null
    assert invoke("results", "show", env["R"]).exit_code == 0
    assert invoke(*[a.format(**env) for a in DRY]).exit_code == 0


# ----------------------------------------------------------------------------- validation order


def test_typo_in_target_does_not_block_the_corrected_command(env):
    out = Path(env["tmp"]) / "typo"
    args = ["sweep", "--name", "t", *TINY, "--workload", env["W"], "--out", str(out)]
    assert_one_line(invoke(*args[:-2], "--target", "tiny-random-lama", "--out", str(out)), 2, "tiny-random-llama")
    assert not (out / "run.json").exists(), "run.json is written only after the models load"
    result = invoke(*args)
    assert result.exit_code == 0, result.output
    info = json.loads((out / "run.json").read_text())
    records = load_records(out)
    assert records["weights_sha256"].notna().all()
    assert set(records["weights_sha256"]) == {info["models"]["tiny-random-llama"]}


def test_force_sets_old_records_aside(env):
    R = Path(env["R"])
    old = load_records(R)
    result = invoke(*[a.format(**env) for a in SW], "--gamma", "2", "--out", env["R"], "--force")
    assert result.exit_code == 0, result.output
    new = load_records(R)
    assert set(new["gamma"]) == {0, 2}, "only the current spec's records are read"
    archived = list((R / "records").glob("old-*/*.parquet"))
    assert archived, "the old spec's records are kept in records/old-SPECHASH/"
    shown = invoke("results", "show", env["R"])
    assert shown.exit_code == 0
    assert f"{len(old)} record(s) of an earlier sweep spec are set aside" in shown.stderr


def test_grid_limit_counts_without_expanding_and_yes_lifts_it(env):
    from specbench.errors import SpecbenchError
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.grid.units import expand_units, load_workloads
    from specbench.measure.grid.validate import MAX_UNITS, check_grid_size, count_units

    spec = build_spec(
        {
            "name": "g",
            "target": "tiny-random-llama",
            "drafters": ["ngram"],
            "gammas": list(range(1, 101)),
            "temperatures": [i / 100 for i in range(1, 31)],
            "workloads": [{"name": env["W"], "count": 2}],
        }
    )
    workloads = load_workloads(spec)
    units, _ = count_units(spec, workloads)
    assert units == len(expand_units(spec, workloads)) == 2 * 30 * 101 > MAX_UNITS
    with pytest.raises(SpecbenchError, match="--yes"):
        check_grid_size(spec, workloads)
    assert check_grid_size(spec, workloads, yes=True) == units


# ----------------------------------------------------------------------------- the model cache


def _tiny_entry(cache: Path, key: str = "tiny-entry") -> Path:
    """A real cache entry (manifest with hashes) holding a tiny random Llama."""
    from specbench.models import cache as model_cache
    from specbench.models.resolve import load_model

    tiny = load_model("tiny-random-llama")

    def writer(folder: Path) -> None:
        tiny.model.save_pretrained(str(folder))
        (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 4096}))

    return model_cache.build_entry(key, "tiny-random-llama", writer)


def test_cache_entry_proves_its_content(tmp_path, monkeypatch):
    from specbench.models import cache as model_cache

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    entry = _tiny_entry(tmp_path)
    manifest = json.loads((entry / model_cache.MANIFEST).read_text())
    assert manifest["format"] == model_cache.CACHE_FORMAT
    assert all(len(meta["sha256"]) == 64 for meta in manifest["files"].values())
    assert model_cache.is_valid(entry)
    # config.json edited, same size, mtime restored: small files are always rehashed
    config = entry / "config.json"
    st = config.stat()
    text = config.read_text()
    config.write_text(text.replace('"num_hidden_layers": 2', '"num_hidden_layers": 3'))
    os.utime(config, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "config.json" in model_cache.damage(entry)
    config.write_text(text)
    assert model_cache.is_valid(entry), "restored content proves itself again (the stamp is refreshed)"
    # weights overwritten in the middle
    weights = entry / "model.safetensors"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = os.urandom(64)
    weights.write_bytes(bytes(data))
    assert "model.safetensors" in model_cache.damage(entry)
    # the CLI refuses the damaged folder in one line, exit 2
    assert_one_line(
        invoke("run", "--target", str(entry), "--prompt", "hi", "-n", "2", "--drafter", "none"),
        2,
        "does not match its cache manifest",
    )
    # building the entry again replaces the damaged one
    rebuilt = _tiny_entry(tmp_path)
    assert rebuilt == entry and model_cache.is_valid(entry)


def test_large_weights_are_trusted_by_stamp_not_rehashed(tmp_path, monkeypatch):
    from specbench.models import cache as model_cache
    from specbench.models import integrity

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    entry = _tiny_entry(tmp_path)
    monkeypatch.setattr(integrity, "ALWAYS_HASH_BYTES", 1024)
    calls = []
    real = integrity.file_sha256
    monkeypatch.setattr(integrity, "file_sha256", lambda p: calls.append(Path(p).name) or real(p))
    assert model_cache.is_valid(entry)
    assert "model.safetensors" not in calls, "an unchanged stamp is trusted without rehashing"
    os.utime(entry / "model.safetensors")  # touched, content unchanged: rehashed once, still valid
    assert model_cache.is_valid(entry) and "model.safetensors" in calls


def test_damaged_alias_entry_is_rebuilt_from_its_source(tmp_path, monkeypatch):
    """An alias's entry whose content changed is rebuilt (here from a fake source), never loaded as is."""
    from specbench.models import cache as model_cache
    from specbench.models import resolve

    monkeypatch.setenv("SPECBENCH_CACHE", str(tmp_path / "cache"))
    entry = _tiny_entry(tmp_path, key="fake-alias")
    (entry / "config.json").write_text((entry / "config.json").read_text() + " ")
    built = []
    monkeypatch.setattr(resolve, "installed_package_file", lambda *a: tmp_path / "fake.gguf")
    monkeypatch.setattr(
        resolve, "gguf_cache_entry", lambda path, key=None: built.append(key) or _tiny_entry(tmp_path, key=key)
    )
    folder = resolve._alias_folder("fake-alias", {"source": "pypi-gguf", "package": "x", "file": "y"})
    assert built == ["fake-alias"] and model_cache.is_valid(Path(folder))


# ----------------------------------------------------------------------------- processes: lock, SIGINT, SIGKILL


def _slow_sweep(tmp_path: Path, out: Path, n_prompts: int = 4) -> list[str]:
    """A sweep of 3 × n_prompts units, each long enough (64 forced tokens) to be interrupted between units."""
    prompts = _write_prompts(tmp_path / "slow.jsonl", n_prompts)
    return [
        sys.executable,
        "-m",
        "specbench",
        "sweep",
        "--name",
        "slow",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram",
        "--gamma",
        "1,2",
        "--workload",
        f"jsonl:{prompts}:field=text:id=id",
        "--prompts",
        str(n_prompts),
        "-n",
        "64",
        "--ignore-eos",
        "--out",
        str(out),
    ]


def _wait_for_units(out: Path, n: int, proc, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"sweep ended early: {proc.returncode} {proc.stderr.read().decode()[-2000:]}")
        if (out / "records").exists() and len(list((out / "records").glob("unit-*.parquet"))) >= n:
            return
        time.sleep(0.05)
    proc.kill()
    pytest.fail("sweep too slow to reach the wanted units")


def _expected_units(cmd: list[str]) -> set[str]:
    """unit ids of the slow sweep's grid (the spec built the way the CLI builds it)."""
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.run.runner import expand_units, load_workloads

    workload = next(a for a in cmd if a.startswith("jsonl:"))
    count = int(cmd[cmd.index("--prompts") + 1])
    spec = build_spec(
        {
            "name": "slow",
            "target": "tiny-random-llama",
            "gammas": [1, 2],
            "ignore_eos": True,
            "drafters": ["ngram"],
            "max_new_tokens": 64,
            "workloads": [{"name": workload, "count": count}],
        }
    )
    return {u.unit_id for u in expand_units(spec, load_workloads(spec))}


def test_second_writer_is_refused_then_sigint_exits_130_and_resume_completes(tmp_path):
    out = tmp_path / "busy"
    cmd = _slow_sweep(tmp_path, out)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_units(out, 2, proc)
    before = _snapshot(out)
    second = invoke(*cmd[3:])  # the same spec, in this process: refused while the first runs
    assert_one_line(second, 2, f"in use by PID {proc.pid}")
    other = invoke(*cmd[3:-2], "--gamma", "4", "--out", str(out))  # a different spec at the same time
    assert_one_line(other, 2, f"in use by PID {proc.pid}")
    assert set(before) <= set(_snapshot(out)), "the refused writers removed nothing"
    reader = invoke("results", "show", str(out))  # readers work during the sweep, on whole records
    assert reader.exit_code == 0, reader.output
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err.decode()[-2000:]
    err = err.decode()
    assert "Traceback" not in err and "interrupted" in err
    partial = load_records(out)
    assert len(partial) >= 2 and partial["unit_id"].is_unique
    assert not [p for p in (out / "records").iterdir() if p.name.startswith(".")], "no half-written files"
    resumed = invoke(*cmd[3:])
    assert resumed.exit_code == 0, resumed.output
    final = load_records(out)
    assert final["unit_id"].is_unique and set(final["unit_id"]) == _expected_units(cmd)
    kept = final.set_index("unit_id").loc[list(partial["unit_id"])]
    assert (kept["timestamp"].values == partial.set_index("unit_id")["timestamp"].values).all(), (
        "units measured before the interrupt were kept, not measured again"
    )


def test_sigkill_then_resume_loses_nothing_and_duplicates_nothing(tmp_path):
    out = tmp_path / "killed"
    cmd = _slow_sweep(tmp_path, out, n_prompts=3)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for_units(out, 2, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = load_records(out)
    resumed = invoke(*cmd[3:])  # the lock died with the killed process
    assert resumed.exit_code == 0, resumed.output
    final = load_records(out)
    assert final["unit_id"].is_unique and set(final["unit_id"]) == _expected_units(cmd)
    assert set(partial["unit_id"]) <= set(final["unit_id"])


# ----------------------------------------------------------------------------- round 3: user text is never markup

MARKUP = ["[/]", "[link=https://example.com]click[/link]", "[bold red]x", ":thumbs_up:", "[/bold]"]


def _evil_folder(env) -> Path:
    """The finished folder with Rich markup in its sweep name and in every text column a record has
    (written before names were checked, or data of a workload)."""
    from specbench.records.store import ResultsStore

    folder = Path(env["tmp"]) / "evil"
    shutil.copytree(env["R"], folder)
    info = json.loads((folder / "run.json").read_text())
    info["sweep"]["name"] = "x[/]y[link=z]"
    (folder / "run.json").write_text(json.dumps(info))
    records = load_records(folder)
    for column, value in (("workload", "w[/]"), ("prompt_id", "p[link=x]1"), ("category", "[bold]c")):
        records[column] = value
    ResultsStore(folder).replace_records(records)
    return folder


@pytest.mark.parametrize(
    "command",
    [
        ["results", "show"],
        ["fit", "--by", "category"],
        ["recommend", "--bootstrap", "40"],
        ["plot", "--bootstrap", "40", "--out", "{tmp}/evil-plots"],
    ],
    ids=["show", "fit", "recommend", "plot"],
)
def test_markup_in_results_is_printed_as_written(env, command):
    folder = _evil_folder(env)
    result = invoke(command[0], *[c.format(**env) for c in command[1:]], folder)
    assert result.exit_code == 0, result.output
    if command[0] in ("results", "fit"):
        assert "w[/]" in result.stdout
    if command[0] == "results":
        assert "x[/]y[link=z]" in result.stdout


def test_markup_in_workload_ids_and_categories_is_printed_as_written(tmp_path):
    path = tmp_path / "evil.jsonl"
    path.write_text("".join(json.dumps({"id": f"p{m}", "text": f"say {m}", "cat": m}) + "\n" for m in MARKUP))
    result = invoke("workloads", "show", f"jsonl:{path}:field=text:id=id:category=cat")
    assert result.exit_code == 0, result.output
    for m in MARKUP:
        assert m in result.stdout, m


def test_sweep_progress_prints_data_literally():
    """The sweep's progress thread renders prompt ids and configuration labels from data; with markup in
    them it used to raise MarkupError mid-run. Rendered here on a forced terminal."""
    import io
    from types import SimpleNamespace

    from rich.console import Console

    from specbench.cli.sweep_cmd import SweepProgress

    buffer = io.StringIO()
    progress = SweepProgress(Console(file=buffer, force_terminal=True, width=200))  # a console with markup on
    unit = SimpleNamespace(
        config=SimpleNamespace(label="ngram(n_max=[/]) γ=2 T=0"),
        prompt=SimpleNamespace(prompt_id="evil/[link=x]p1"),
        turn=1,
    )
    with progress:
        progress.status("loading target [bold]x")
        progress.begin(total=2, done=1)
        progress.unit_started(unit)
        progress.progress.refresh()
    text = buffer.getvalue()
    assert "evil/[link=x]p1" in text and "ngram(n_max=[/])" in text


def test_one_escaping_path_in_the_cli():
    """Every console comes from cli.views.render (markup off); no command parses markup or makes its own
    progress text column; nothing outside render.py escapes."""
    import ast

    cli = Path(__file__).resolve().parents[1] / "specbench" / "cli"
    offences = []
    for path in sorted(cli.glob("*.py")):
        if path.name == "render.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in ("Console", "TextColumn", "from_markup", "escape", "render_markup"):
                    offences.append(f"{path.name}:{node.lineno} {name}(...)")
            if isinstance(node, ast.ImportFrom) and node.module == "rich.markup":
                offences.append(f"{path.name}:{node.lineno} imports rich.markup")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and any(tag in node.value for tag in ("[bold]", "[green]", "[yellow]", "[dim]", "[/"))
            ):
                offences.append(f"{path.name}:{node.lineno} markup in {node.value[:30]!r}")
    assert not offences, offences


# ----------------------------------------------------------------------------- round 3: records hold the γ that ran


def test_medusa_gamma_beyond_its_heads_is_refused_by_run():
    result = invoke("run", "--prompt", "hi", "--drafter", "medusa", "--gamma", "10", "-n", "4")
    assert_one_line(result, 2, "medusa", "at most 4", "γ = 10")


def test_medusa_gamma_beyond_its_heads_is_refused_by_a_sweep_before_run_json(env):
    out = Path(env["tmp"]) / "medusa"
    result = invoke(
        "sweep",
        "--name",
        "m",
        "--target",
        "smollm2-135m",
        "--drafter",
        "medusa",
        "--gamma",
        "2,10",
        "--prompts",
        "1",
        "-n",
        "4",
        "--workload",
        env["W"],
        "--out",
        out,
    )
    assert_one_line(result, 2, "medusa", "at most 4", "γ = 10")
    assert not out.exists(), "nothing written: not run.json, not a lock file"


def _zero_token_folder(env, which: str) -> Path:
    """The finished folder as a server that ignored stream=true left it: records with 0 tokens (all of
    them, the speculative ones, or one prompt's speculative record)."""
    from specbench.records.store import ResultsStore

    folder = Path(env["tmp"]) / f"zero-{which}"
    shutil.copytree(env["R"], folder)
    records = load_records(folder)
    speculative = records.index[records["gamma"] > 0]
    rows = {"all": records.index, "speculative": speculative, "one": speculative[:1]}[which]
    for column in ("new_tokens", "decode_tokens", "rounds", "drafted", "accepted"):
        records.loc[rows, column] = 0
    for column in ("tokens_per_s", "decode_s", "tau", "alpha", "prefill_s"):
        records.loc[rows, column] = float("nan")
    for column in ("output_ids", "round_drafted", "round_accepted", "round_depth"):
        records[column] = [[] if i in set(rows) else v for i, v in zip(records.index, records[column])]
    ResultsStore(folder).replace_records(records)
    return folder


@pytest.mark.parametrize(
    "command", [["fit"], ["recommend"], ["plot", "--out", "{tmp}/zero-plots"]], ids=["fit", "recommend", "plot"]
)
def test_zero_token_records_are_one_line_not_a_division_by_zero(env, command):
    folder = _zero_token_folder(env, "all")
    result = invoke(command[0], folder, *[c.format(**env) for c in command[1:]])
    assert_one_line(result, 2, "generated a decode token", "nothing to fit")
    shown = invoke("results", "show", folder)
    assert shown.exit_code == 0 and "100%" not in shown.stdout, "no greedy identity claimed for empty outputs"


def test_zero_token_records_are_left_out_with_a_note(env):
    only_baseline = _zero_token_folder(env, "speculative")
    assert_one_line(invoke("fit", only_baseline), 2, "no speculative records")  # one line: the note is dropped
    assert_one_line(invoke("recommend", only_baseline), 2, "no speculative records")
    partly = _zero_token_folder(env, "one")
    result = invoke("fit", partly)
    assert result.exit_code == 0, result.output
    assert "1 record(s)" in result.stderr and "generated no decode token and are left out" in result.stderr


# ----------------------------------------------------------------------------- round 3: folder lifecycle


@pytest.mark.parametrize(
    "mistake",
    [["--target", "tiny-random-lama"], ["--drafter", "draft-model:model=tiny-random-v512"]],
    ids=["target-typo", "tokenizer-mismatch"],
)
def test_a_failed_sweep_leaves_no_lock_and_no_folder(env, mistake):
    """The lock is released on every failure path — also after it was taken (the models load under it)
    — and the lock file and a folder the sweep created are removed again."""
    out = Path(env["tmp"]) / "failed" / "deeper"
    args = ["sweep", "--name", "t", *TINY, "--workload", env["W"], *mistake, "--out", str(out)]
    result = invoke(*args)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert not out.exists() and not out.parent.exists()
    existing = Path(env["tmp"]) / "existing"
    existing.mkdir()
    assert invoke(*args[:-1], str(existing)).exit_code == 2
    assert list(existing.iterdir()) == [], "no .specbench.lock left behind in a folder that existed"


def test_lock_file_is_removed_after_a_finished_sweep_and_a_merge(env):
    R = Path(env["R"])
    assert invoke(*[a.format(**env) for a in SW], "--out", env["R"]).exit_code == 0
    assert not (R / LOCK_FILE).exists()
    merged = Path(env["tmp"]) / "merged"
    assert invoke("results", "merge", env["R"], "--out", merged).exit_code == 0
    assert not (merged / LOCK_FILE).exists() and (merged / "run.json").exists()


def test_profile_force_over_a_sweep_sets_the_sweep_aside(env):
    R = Path(env["R"])
    before = _snapshot(R)
    result = invoke(
        "profile",
        "--target",
        "tiny-random-llama",
        "--batch",
        "1",
        "--context",
        "8",
        "--verify-tokens",
        "1",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--out",
        env["R"],
        "--force",
    )
    assert result.exit_code == 0, result.output
    aside = [p for p in R.iterdir() if p.name.startswith("old-sweep-")]
    assert len(aside) == 1 and _snapshot(aside[0]) == before, "the sweep's run.json and records, unchanged"
    assert json.loads((R / "run.json").read_text())["kind"] == "specbench-cost-profile"
    assert invoke("results", "show", aside[0]).exit_code == 0, "the set-aside sweep is still a results folder"


def test_sweep_force_over_a_profile_sets_the_profile_aside(env):
    P = Path(env["tmp"]) / "prof"
    assert (
        invoke(
            "profile",
            "--target",
            "tiny-random-llama",
            "--batch",
            "1",
            "--context",
            "8",
            "--verify-tokens",
            "1",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--out",
            P,
        ).exit_code
        == 0
    )
    profile = (P / "run.json").read_bytes()
    refused = invoke(*[a.format(**env) for a in SW], "--out", P)
    assert_one_line(refused, 2, "cost-profile", "--force")
    result = invoke(*[a.format(**env) for a in SW], "--out", P, "--force")
    assert result.exit_code == 0, result.output
    aside = [p for p in P.iterdir() if p.name.startswith("old-")]
    assert len(aside) == 1 and (aside[0] / "run.json").read_bytes() == profile
    assert (aside[0] / "profile.parquet").exists()
    assert json.loads((P / "run.json").read_text())["kind"] == "sweep" and len(load_records(P)) > 0


# ----------------------------------------------------------------------------- round 3: leftovers


def test_a_shard_without_prompts_runs_nothing_like_its_dry_run_and_merges(env, tmp_path):
    """--dry-run says 0 units for a shard that gets no prompt; the run agrees (exit 0, a run.json that
    records the shard) and `results merge` of all the shards works."""
    base = ["sweep", "--name", "sh", *TINY, "--workload", env["W"]]
    counts = {}
    for i in range(4):
        dry = invoke(*base, "--shard", f"{i}/4", "--dry-run")
        assert dry.exit_code == 0, dry.output
        counts[i] = int(dry.stdout.split(" units,")[0].split()[-1])
    empty = [i for i, n in counts.items() if n == 0]
    assert empty, counts  # 2 prompts over 4 shards: at least two shards get none
    for i in range(4):
        result = invoke(*base, "--shard", f"{i}/4", "--out", tmp_path / f"s{i}")
        assert result.exit_code == 0, result.output
    assert "0 units" in invoke(*base, "--shard", f"{empty[0]}/4", "--out", tmp_path / f"s{empty[0]}").stdout
    merged = invoke("results", "merge", *[tmp_path / f"s{i}" for i in range(4)], "--out", tmp_path / "all")
    assert merged.exit_code == 0, merged.output
    assert len(load_records(tmp_path / "all")) == sum(counts.values())
    info = json.loads((tmp_path / "all" / "run.json").read_text())
    assert sorted(map(tuple, info["shards"])) == [(i, 4) for i in range(4)] and info["models"]


def _export_under_a_file_size_limit(out: Path, limit: int) -> subprocess.CompletedProcess:
    """`specbench export-drafter` in a process whose files may not grow past ``limit`` bytes (RLIMIT_FSIZE,
    SIGXFSZ ignored): the kernel refuses the write as a full disk would."""
    import resource

    def limit_writes():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "specbench", "export-drafter", "eagle3", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=limit_writes,
    )


def test_a_full_disk_during_export_is_one_line(tmp_path, smollm2):
    out = tmp_path / "exported"
    proc = _export_under_a_file_size_limit(out, 256 * 1024)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert "cannot write exported checkpoint" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists(), "no half-written checkpoint is left"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("mount") is None, reason="a tmpfs mount needs root")
def test_a_full_tmpfs_during_export_is_one_line(tmp_path, smollm2):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mount refused (a container without the capability)")
    try:
        result = invoke("export-drafter", "medusa", "--out", disk / "medusa")
        assert_one_line(result, 2, "cannot write exported checkpoint", "No space left on device")
        assert not (disk / "medusa").exists()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


@pytest.mark.skipif(not Path("/dev/full").is_char_device(), reason="no /dev/full here")
def test_a_full_disk_during_the_csv_summary_is_one_line_and_removes_nothing_it_did_not_make(env):
    """/dev/full answers every write with ENOSPC: the line names the file; the device itself (a file this
    command did not create) is never removed as a 'partial file'."""
    result = invoke("results", "show", env["R"], "--csv", "/dev/full")
    assert_one_line(result, 2, "cannot write the CSV summary /dev/full", "No space left on device")
    assert Path("/dev/full").is_char_device()


def test_the_bounds_table_is_documented_row_by_row():
    """docs/bounds.md lists every row of specbench.bounds.BOUNDS with its range and reason."""
    from specbench.bounds import BOUNDS

    text = (Path(__file__).resolve().parents[1] / "docs" / "bounds.md").read_text()
    for name, bound in BOUNDS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}` |")), None)
        assert row is not None, f"docs/bounds.md has no row {name}"
        assert bound.describe() in row and bound.reason in row, row
