"""Fuzzing instead of lists: generated inputs against the sweep spec parser (YAML and flags), the
workload loaders, the records reader and the OpenAI client (against a fake server answering
generated garbage).

The property, for every input: it ends in a result or in a one-line user error (a
`SpecbenchError`; through the CLI: exit 2 and one ``specbench: error:`` line) — never a
traceback (any other exception fails the test, exit 1 through the CLI), never beyond a bounded
time or memory (`bounded`: wall time and the tracemalloc peak of each example).

Two Hypothesis profiles run the same properties:

* the default suite: a short, derandomized run (`SHORT`, about a minute for the file on two
  cores), so a finding is reproducible and CI stays fast;
* ``make test-fuzz`` (pytest marker ``fuzz``, the ``*_long`` tests): `LONG`, random seeds and
  thousands of examples per property, about ten minutes. A finding is printed with the input
  Hypothesis shrank it to, and kept in ``.hypothesis/`` to be replayed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specbench.errors import SpecbenchError
from tests.cli_helpers import invoke

_HEALTH = [
    HealthCheck.too_slow,
    HealthCheck.function_scoped_fixture,
    HealthCheck.data_too_large,
    HealthCheck.filter_too_much,
]
SHORT = settings(deadline=None, derandomize=True, database=None, suppress_health_check=_HEALTH, print_blob=True)
LONG = settings(deadline=None, suppress_health_check=_HEALTH, print_blob=True)
PROMPTS = ["Tell me about tea.", "Count to ten please.", "Why is the sky blue?", "Name a prime number."]
FUZZ_DIR = Path(tempfile.gettempdir()) / f"specbench-fuzz-{os.getpid()}"
PROMPT_FILE = FUZZ_DIR / "prompts.jsonl"
LIMIT_S = 60.0  # wall time of one example (a dry run on a busy 2-core machine takes well under a second)
LIMIT_MIB = 256  # Python-level allocations of one example (tracemalloc peak)


def long_scale() -> float:
    """``SPECBENCH_FUZZ_SCALE`` (``make test-fuzz FUZZ_SCALE=0.1``): the long run's example counts times
    this factor (default 1, about ten minutes; 0.1 is a one-minute check)."""
    text = os.environ.get("SPECBENCH_FUZZ_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        raise pytest.UsageError(f"SPECBENCH_FUZZ_SCALE must be a number, got {text!r}") from None
    if not 0 < scale <= 100:
        raise pytest.UsageError(f"SPECBENCH_FUZZ_SCALE must be > 0 and <= 100, got {text!r}")
    return scale


def fuzz(strategy, short: int, long: int):
    """The property ``prop(value)`` as two tests: the default suite's (`SHORT`, ``short`` examples) and
    the long run's (`LONG`, ``long`` examples times `long_scale`, marker fuzz). The counts size each
    property to its cost (a parser call takes milliseconds, a CLI dry run or a server exchange a few
    hundred)."""

    def make(prop):
        examples = max(1, round(long * long_scale()))
        return (
            settings(SHORT, max_examples=short)(given(strategy)(prop)),
            pytest.mark.fuzz(settings(LONG, max_examples=examples)(given(strategy)(prop))),
        )

    return make


@contextmanager
def bounded(seconds: float = LIMIT_S, mib: float = LIMIT_MIB):
    """The block must end within ``seconds`` and allocate at most ``mib`` MiB at its peak."""
    tracemalloc.start()
    started = time.monotonic()
    try:
        yield
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    assert elapsed <= seconds, f"took {elapsed:.1f} s (bound {seconds} s)"
    assert peak <= mib * 2**20, f"allocated {peak / 2**20:.0f} MiB at its peak (bound {mib} MiB)"


def result_or_user_error(fn, *args, **kwargs):
    """``fn(...)``'s result, or the `SpecbenchError` it raised; anything else propagates (a bug)."""
    try:
        return fn(*args, **kwargs)
    except SpecbenchError as exc:
        assert str(exc).strip(), "an empty error message"
        return exc


def cli_outcome(*args) -> None:
    """``specbench ARGS``: exit 0, or exit 2 with exactly one 'specbench: error:' line; never 1 or a traceback."""
    result = invoke(*args)
    assert result.exit_code in (0, 2), (result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("specbench: error:"), result.stderr


# ----------------------------------------------------------------------------- generated values

NUMBERS = st.one_of(
    st.integers(min_value=-3, max_value=300),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 2, 1e-300, 1e309, -0.0]),
)
TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["", " ", "[/]", "[link=x]y", "é\u200b", "nan", "-1", "1e9", "../x", "a\nb", "\x00", "auto", "true"]
    ),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)
ANY = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.one_of(TEXT, st.integers(0, 3)), inner, max_size=4)
    ),
    max_leaves=12,
)
JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**40), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=10),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=16,
)


def either(good, bad=ANY):
    """Mostly near-valid values (to reach deep code), sometimes anything at all."""
    return st.one_of(good, good, bad)


DRAFTERS = st.sampled_from(
    [
        "ngram",
        "ngram:n_min=2,n_max=4",
        "ngram:n_min=0",
        "ngram:n_max=99999",
        "draft-model",
        "medusa",
        "eagle",
        "nosuch",
        "ngram:bogus=1",
        "ngram:n_min=abc",
        "",
    ]
)
TREES = st.sampled_from(
    [
        "chain",
        "2x2",
        "3x2x1",
        "dynamic:topk=3,nodes=8",
        "dynamic:topk=99999999999,nodes=3",
        "dynamic:depth=1000",
        "dynamic:lambda=nan",
        "paths:/nonexistent.yaml",
        "@nosuch",
        "x",
        "0x2",
        "9" * 30,
        "",
    ]
)


def sweep_specs(workload: str):
    """Sweep spec mappings around a valid one, each key near-valid or anything."""
    gamma = st.integers(min_value=-2, max_value=200)
    options = st.dictionaries(
        st.sampled_from(
            [
                "url",
                "timeout_s",
                "api_key",
                "warmup",
                "port",
                "model",
                "threads",
                "kernels",
                "max_num_seqs",
                "env",
                "extra_args",
                "bogus",
            ]
        ),
        either(
            st.sampled_from(
                [
                    "http://127.0.0.1:8000",
                    "http://[::1]:9",
                    "ftp://x",
                    "http://x:99999",
                    "k\r\nX: y",
                    5,
                    0,
                    True,
                    "false",
                ]
            )
        ),
        max_size=3,
    )
    keys = {
        "name": either(st.sampled_from(["f", "a.b-c_1", "../x", ".h", "x" * 120])),
        "gammas": either(st.lists(gamma, max_size=4)),
        "temperatures": either(st.lists(st.sampled_from([0, 0.7, 1e-300, -1, 101, math.nan, math.inf]), max_size=3)),
        "drafters": either(
            st.lists(
                st.one_of(
                    DRAFTERS,
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["ngram", "draft-model", "nosuch"])},
                        optional={"params": st.dictionaries(st.one_of(TEXT, st.integers(0, 2)), SCALARS, max_size=2)},
                    ),
                ),
                max_size=3,
            )
        ),
        "trees": either(st.lists(TREES, max_size=3)),
        "workloads": either(
            st.lists(
                st.fixed_dictionaries(
                    {"name": st.sampled_from([workload, "nosuch", f"{workload}:chat=maybe", "jsonl:/nonexistent"])},
                    optional={"count": NUMBERS, "split": TEXT, "max_new_tokens": NUMBERS},
                ),
                max_size=2,
            )
        ),
        "seed": NUMBERS,
        "max_new_tokens": NUMBERS,
        "repeats": NUMBERS,
        "top_p": NUMBERS,
        "top_k": NUMBERS,
        "ignore_eos": SCALARS,
        "compile": SCALARS,
        "threads": either(st.sampled_from([1, 2, "auto", "3", 0, 5000])),
        "mode": either(st.sampled_from(["live", "replay", "both", "sideways"])),
        "calibration": either(
            st.fixed_dictionaries({}, optional={"gammas": st.lists(gamma, max_size=3), "prompts": NUMBERS})
        ),
        "timing": either(
            st.fixed_dictionaries(
                {},
                optional={
                    "order": st.sampled_from(["bracket", "abba", "x"]),
                    "warmup_s": NUMBERS,
                    "retries": NUMBERS,
                    "max_other_cores": NUMBERS,
                },
            )
        ),
        "backend": either(
            st.one_of(
                st.sampled_from(["own", "openai", "vllm", "vllm-server", "nosuch"]),
                st.builds(
                    lambda name, opts: {"name": name, **opts},
                    st.sampled_from(["own", "openai", "vllm", "vllm-server"]),
                    options,
                ),
            )
        ),
        "concurrency": either(st.lists(st.integers(min_value=-1, max_value=5000), max_size=3)),
        "request_rates": either(st.lists(NUMBERS, max_size=3)),
        "arrivals": either(st.sampled_from(["poisson", "constant", "poison"])),
        "schedules": either(
            st.lists(
                st.sampled_from(
                    [
                        "fixed",
                        "heuristic",
                        "dspark",
                        "nosuch",
                        {"name": "threshold", "threshold": 0.4},
                        {"name": "threshold", "threshold": math.nan},
                    ]
                ),
                max_size=2,
            )
        ),
        "strategy": either(
            st.lists(
                st.sampled_from(["sequential", {"name": "nested", "prepared": 2}, {"name": "nested", "prepared": -1}]),
                max_size=2,
            )
        ),
        "kernels": either(st.sampled_from(["auto", "torch", "cuda"])),
        "dtype": either(st.sampled_from(["fp32", "x"])),
        "description": ANY,
        "bogus_key": ANY,
        "adaptive": either(
            st.one_of(
                st.booleans(),
                st.fixed_dictionaries(
                    {},
                    optional={
                        "batch": NUMBERS,
                        "first": NUMBERS,
                        "max_prompts": NUMBERS,
                        "calibration_batch": NUMBERS,
                        "budget": either(st.sampled_from(["10m", "90s", "1.5h", "-1s", "1e9h", 0, "nan"])),
                    },
                ),
            )
        ),
    }
    base = {
        "name": "f",
        "target": "tiny-random-llama",
        "drafters": ["ngram"],
        "gammas": [1, 2],
        "workloads": [{"name": workload, "count": 2}],
        "max_new_tokens": 8,
    }
    return st.fixed_dictionaries({}, optional=keys).map(lambda changes: {**base, **changes})


def _dry_run(raw: dict):
    """What `sweep --dry-run` does after parsing: load the workloads, count, expand a grid of bounded size."""
    from specbench.measure.grid.sweep import build_spec
    from specbench.measure.grid.units import expand_units, in_shard, load_workloads
    from specbench.measure.grid.validate import check_grid_size

    spec = build_spec(raw, where="fuzz")
    workloads = load_workloads(spec)
    check_grid_size(spec, workloads, (0, 1), yes=True, in_shard=in_shard)
    return expand_units(spec, workloads, (0, 1))


# ----------------------------------------------------------------------------- the sweep spec parser


def _workload_name() -> str:
    return f"jsonl:{PROMPT_FILE}:field=text:id=id"


def _sweep_args() -> list[str]:
    """A valid `specbench sweep` command line on the fuzz prompts (tiny target, ngram)."""
    return [
        "sweep",
        "--name",
        "f",
        "--target",
        "tiny-random-llama",
        "--drafter",
        "ngram",
        "--workload",
        _workload_name(),
    ]


@pytest.fixture(scope="module", autouse=True)
def _fuzz_files():
    """The fuzz tests' files live in a temporary folder of this process (each xdist worker has its own).
    One untimed dry run first, so that no example pays for the first imports of torch and transformers."""
    FUZZ_DIR.mkdir(parents=True, exist_ok=True)
    PROMPT_FILE.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(PROMPTS)))
    import specbench.backends.servers.openai_server  # noqa: F401 - imported here, not inside a timed example
    import specbench.figures.report  # noqa: F401

    assert invoke(*_sweep_args(), "--dry-run").exit_code == 0
    yield
    shutil.rmtree(FUZZ_DIR, ignore_errors=True)
    _RECORDS.clear()


@pytest.fixture(scope="module", autouse=True)
def _memory_ceiling():
    """A ceiling on this process's address space while fuzzing (what it uses now + 6 GiB): an input that
    makes specbench allocate without bound fails its example with MemoryError instead of pushing a shared
    machine into the OOM killer."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as statm:
        used = int(statm.read().split()[0]) * resource.getpagesize()
    ceiling = used + 6 * 2**30
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@fuzz(sweep_specs(_workload_name()), short=200, long=12000)
def spec_mapping(raw):
    with bounded():
        result_or_user_error(_dry_run, raw)


test_spec_mapping, test_spec_mapping_long = spec_mapping


def _mutate(text: str, edits: list[tuple[int, str]]) -> str:
    for position, piece in edits:
        position %= max(len(text), 1)
        text = text[:position] + piece + text[position:]
    return text


@fuzz(
    st.tuples(
        sweep_specs(_workload_name()),
        st.lists(
            st.tuples(
                st.integers(0, 10_000),
                st.sampled_from(
                    [
                        ":",
                        "-",
                        "[",
                        "]",
                        "{",
                        "&a ",
                        "*a",
                        "!!python/object:os.system",
                        "\t",
                        "\n",
                        "'",
                        '"',
                        "\x00",
                        "é",
                        "  ",
                        "#",
                    ]
                ),
            ),
            max_size=4,
        ),
    ),
    short=60,
    long=6000,
)
def spec_yaml(case):
    """The YAML text of a spec, then edited at random places (broken quoting, tags, anchors, tabs, NUL)."""
    raw, edits = case
    from specbench.measure.grid.sweep import build_spec, load_spec_file

    text = _mutate(yaml.safe_dump(json.loads(json.dumps(raw, default=str)), allow_unicode=True), edits)
    path = FUZZ_DIR.joinpath("fuzz_spec.yaml")
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with bounded():
        loaded = result_or_user_error(load_spec_file, path)
        if isinstance(loaded, dict):
            result_or_user_error(build_spec, loaded, where=str(path))


test_spec_yaml, test_spec_yaml_long = spec_yaml

FLAG_VALUES = st.one_of(
    st.sampled_from(
        [
            "1",
            "0",
            "-1",
            "2,4",
            "1,,2",
            "nan",
            "inf",
            "1e309",
            "1e-300",
            "99999999999",
            "9" * 40,
            "auto",
            "abc",
            "",
            " ",
            "[/]",
            "0.5",
            "1/2",
            "3/2",
            "ngram:n_max=2",
        ]
    ),
    st.text(max_size=8),
)
FLAGS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "--gamma",
                "--temperature",
                "--top-p",
                "--top-k",
                "--prompts",
                "-n",
                "--repeats",
                "--seed",
                "--threads",
                "--tree",
                "--drafter",
                "--mode",
                "--shard",
                "--concurrency",
                "--backend",
                "--dtype",
                "--kernels",
                "--name",
                "--max-prompts",
                "--batch",
                "--budget",
                "--request-rate",
                "--arrivals",
            ]
        ),
        FLAG_VALUES,
    ),
    max_size=4,
)


@fuzz(FLAGS, short=60, long=2000)
def spec_flags(flags):
    """`specbench sweep ... --dry-run` with generated flag values."""
    args = [*_sweep_args(), "-n", "8"]
    for flag, value in flags:
        args += [flag, value]
    with bounded():
        cli_outcome(*args, "--dry-run")


test_spec_flags, test_spec_flags_long = spec_flags


# ----------------------------------------------------------------------------- the workload loaders

JSONL_LINES = st.lists(
    st.one_of(
        JSON_VALUES.map(json.dumps),
        st.fixed_dictionaries(
            {"text": either(st.text(max_size=30)), "id": either(st.integers(0, 5))}, optional={"category": ANY}
        ).map(lambda d: json.dumps(d, default=str)),
        st.text(max_size=20),
        st.just("{"),
        st.just("\x00"),
        st.just("\ufeff{}"),
    ),
    max_size=6,
)
JSONL_OPTIONS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "field=text",
                "id=id",
                "category=category",
                "chat=false",
                "chat=maybe",
                "max_new_tokens=5",
                "max_new_tokens=99999999",
                "max_new_tokens=²",
                "bogus=1",
                "field=",
                "",
            ]
        ),
        st.text(alphabet="=:,a", max_size=6),
    ),
    max_size=4,
)


@fuzz(st.tuples(JSONL_LINES, JSONL_OPTIONS, st.one_of(st.none(), st.binary(max_size=40))), short=60, long=6000)
def jsonl_workload(case):
    from specbench.workloads.catalog import load_workload

    lines, options, raw = case
    path = FUZZ_DIR.joinpath("fuzz_workload.jsonl")
    path.write_bytes(raw if raw is not None else "\n".join(lines).encode("utf-8", "surrogatepass"))
    with bounded():
        result_or_user_error(load_workload, ":".join([f"jsonl:{path}", *options]), split="all")


test_jsonl_workload, test_jsonl_workload_long = jsonl_workload

WORKLOAD_FILES = st.fixed_dictionaries(
    {
        "name": either(st.sampled_from(["w", "", " "])),
        "sources": either(
            st.lists(
                st.fixed_dictionaries(
                    {"path": st.just(str(PROMPT_FILE))}, optional={"format": either(st.sampled_from(["jsonl", "csv"]))}
                ),
                max_size=2,
            )
        ),
    },
    optional={
        "max_new_tokens": NUMBERS,
        "sampling": either(st.fixed_dictionaries({}, optional={"count": NUMBERS, "seed": NUMBERS})),
        "train_percent": NUMBERS,
        "fields": either(st.fixed_dictionaries({}, optional={"turns": TEXT, "id": TEXT, "category": TEXT})),
        "filter": either(st.fixed_dictionaries({}, optional={"min_chars": NUMBERS, "max_chars": NUMBERS})),
        "id_format": TEXT,
        "chat": SCALARS,
        "category": SCALARS,
        "bogus": ANY,
    },
)


@fuzz(WORKLOAD_FILES, short=60, long=6000)
def workload_file(data):
    from specbench.workloads.catalog import load_workload

    path = FUZZ_DIR.joinpath("fuzz_workload.yaml")
    path.write_text(yaml.safe_dump(json.loads(json.dumps(data, default=str)), allow_unicode=True))
    with bounded():
        result_or_user_error(load_workload, str(path), split="all")


test_workload_file, test_workload_file_long = workload_file


# ----------------------------------------------------------------------------- the records reader

DAMAGE = st.one_of(
    st.tuples(
        st.just("run.json"),
        st.one_of(
            JSON_VALUES.map(lambda v: json.dumps(v).encode()),
            st.binary(max_size=60),
            st.just(b'{"sweep": NaN}'),
            st.just(b'{"sweep": {"name": "[/]"}, "spec_hash": "x"}'),
        ),
    ),
    st.tuples(st.just("truncate"), st.integers(min_value=0, max_value=100_000)),
    st.tuples(
        st.just("flip"), st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 255)), min_size=1, max_size=8)
    ),
    st.tuples(
        st.just("frame"),
        st.dictionaries(
            st.sampled_from(
                ["unit_id", "gamma", "workload", "drafter_label", "decode_tokens", "output_ids", "temperature"]
            ),
            st.lists(st.one_of(st.integers(-5, 5), st.text(max_size=4), st.none()), min_size=2, max_size=2),
            min_size=1,
            max_size=4,
        ),
    ),
    st.tuples(st.just("zero"), st.booleans()),
)


def _damage(folder: Path, damage) -> None:
    import pandas as pd

    from specbench.records.store import ResultsStore, load_records, record_files

    kind, arg = damage
    part = record_files(folder)[0]
    if kind == "run.json":
        (folder / "run.json").write_bytes(arg)
    elif kind == "truncate":
        data = part.read_bytes()
        part.write_bytes(data[: arg % max(len(data), 1)])
    elif kind == "flip":
        data = bytearray(part.read_bytes())
        for position, byte in arg:
            data[position % len(data)] = byte
        part.write_bytes(bytes(data))
    elif kind == "frame":  # a parquet file of the wrong columns and types
        frame = pd.DataFrame({k: [str(x) if isinstance(x, str) else x for x in v] for k, v in arg.items()})
        try:
            frame.to_parquet(folder / "records" / "unit-zzz.parquet")
        except Exception:  # noqa: BLE001 - pyarrow refused the mixed column: write bytes instead
            (folder / "records" / "unit-zzz.parquet").write_bytes(b"PAR1 not really")
    elif kind == "zero":  # records that generated nothing (all of them, or the speculative ones)
        frame = load_records(folder)
        rows = frame.index if arg else frame.index[frame["gamma"] > 0]
        for col in ("new_tokens", "decode_tokens", "rounds", "drafted", "accepted"):
            frame.loc[rows, col] = 0
        for col in ("tokens_per_s", "decode_s", "tau", "alpha"):
            frame.loc[rows, col] = math.nan
        frame["output_ids"] = [[] if i in set(rows) else v for i, v in zip(frame.index, frame["output_ids"])]
        ResultsStore(folder).replace_records(frame)


@fuzz(DAMAGE, short=25, long=400)
def damaged_results(damage):
    """`results show`, `fit` and `recommend` on a results folder with one kind of damage."""
    source = _records_source()
    folder = source.with_name("damaged")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(source, folder)
    _damage(folder, damage)
    with bounded(mib=512):
        cli_outcome("results", "show", folder)
        cli_outcome("fit", folder, "--bootstrap", "40")
        cli_outcome("recommend", folder, "--bootstrap", "40", "--max-gamma", "4")


_RECORDS: list[Path] = []


def _records_source() -> Path:
    if not _RECORDS:
        from tests.synthetic_results import SyntheticDrafter, write_synthetic_results

        _RECORDS.append(
            write_synthetic_results(
                FUZZ_DIR / "results" / "base", [SyntheticDrafter(alpha=0.7, gammas=(1, 2))], n_prompts=4
            )
        )
    return _RECORDS[0]


test_damaged_results, test_damaged_results_long = damaged_results


# ----------------------------------------------------------------------------- the OpenAI client vs garbage


class _Tokenizer:
    """Stands in for the target's tokenizer (a server that streams text but no token ids)."""

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 1000 for c in text]


@pytest.fixture(scope="module")
def garbage_server():
    """The fake server (tests/fake_openai_server.py), its answers replaced per example by generated bytes."""
    from specbench.backends.servers import openai_server
    from tests.fake_openai_server import FakeServer

    saved = openai_server.load_tokenizer, openai_server.resolve_model_location
    openai_server.load_tokenizer = lambda location: _Tokenizer()
    openai_server.resolve_model_location = lambda spec: spec
    try:
        with FakeServer(k=2, delay_s=0.0) as fake:
            yield fake
    finally:
        openai_server.load_tokenizer, openai_server.resolve_model_location = saved


GARBAGE_DEADLINE_S = 1.0  # the backend's timeout_s: an answer cut short (a Content-Length too long) waits this long
INTS = st.one_of(st.integers(min_value=-2, max_value=40), st.integers(min_value=-(2**40), max_value=2**70))
CHUNKS = st.one_of(
    JSON_VALUES,
    st.fixed_dictionaries(
        {
            "choices": either(
                st.lists(
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "text": either(st.text(max_size=5)),
                            "token_ids": either(st.lists(INTS, max_size=4)),
                            "finish_reason": either(st.sampled_from(["length", "stop", None])),
                        },
                    ),
                    max_size=2,
                )
            )
        },
        optional={
            "usage": either(st.fixed_dictionaries({}, optional={"completion_tokens": INTS, "prompt_tokens": INTS})),
            "metrics": either(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "time_to_first_token_ms": NUMBERS,
                        "generation_time_ms": NUMBERS,
                        "mean_itl_ms": NUMBERS,
                        "speculative_decoding": either(
                            st.fixed_dictionaries(
                                {},
                                optional={
                                    "num_spec_tokens": INTS,
                                    "per_step_accepted": st.lists(INTS, max_size=4),
                                    "per_step_drafted": st.lists(INTS, max_size=4),
                                },
                            )
                        ),
                    },
                )
            ),
            "error": st.one_of(st.none(), st.text(max_size=5)),
        },
    ),
)


def _sse(chunks: list, lines: list[str], done: bool) -> bytes:
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "".join(f"{x}\n" for x in lines)
    return (body + ("data: [DONE]\n\n" if done else "")).encode("utf-8", "surrogatepass")


def _http_answer(status: int, kind: str, length: str, extra: str, body: bytes) -> bytes:
    """An HTTP/1.1 answer of generated status, headers and body, its Content-Length right, wrong or absent."""
    lengths = {
        "exact": f"Content-Length: {len(body)}\r\n",
        "short": f"Content-Length: {max(len(body) - 3, 0)}\r\n",
        "long": f"Content-Length: {len(body) + 50}\r\n",
        "junk": "Content-Length: x1\r\n",
        "none": "",
    }
    head = f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\n{lengths[length]}{extra}Connection: close\r\n\r\n"
    return head.encode("utf-8", "surrogatepass") + body


BODIES = st.one_of(
    st.builds(_sse, st.lists(CHUNKS, max_size=4), st.lists(st.text(max_size=8), max_size=2), st.booleans()),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=100),
)
ANSWERS = st.one_of(
    st.binary(max_size=300),
    st.builds(
        _http_answer,
        st.sampled_from([200, 200, 200, 204, 404, 500, 302, 199, 999]),
        st.sampled_from(["text/event-stream", "text/event-stream; charset=utf-8", "application/json", "", "x\x7f"]),
        st.sampled_from(["none", "none", "exact", "short", "long", "junk"]),
        st.sampled_from(["", "", "Content-Encoding: gzip\r\n", "Transfer-Encoding: chunked\r\n", "X: \xff\r\n"]),
        BODIES,
    ),
)


@fuzz(
    st.tuples(
        st.sampled_from(["/v1/completions", "/v1/completions", "/v1/completions", "/v1/models", "/metrics"]), ANSWERS
    ),
    short=60,
    long=1200,
)
def garbage_answers(garbage_server, case):
    """A request through the openai backend whose server answers one path with generated bytes."""
    from specbench.backends.base import Request
    from specbench.backends.servers.openai_server import OpenAIServerBackend
    from specbench.measure.grid.sweep_spec import DrafterConfig, RunConfig

    path, answer = case
    garbage_server.state.script = {path: answer}
    config = RunConfig(DrafterConfig("ngram", ()), 2, "chain", 0.0, 1.0, 0)

    def measure():
        backend = OpenAIServerBackend(
            {"url": garbage_server.url, "timeout_s": GARBAGE_DEADLINE_S, "warmup": False},
            target="t",
            device="cpu",
            dtype="fp32",
            seed=0,
        )
        backend.start(lambda message: None)
        return backend.generate_batch(config, [Request([1, 2, 3], 4, 0, False)], 1)

    with bounded(seconds=20):
        result_or_user_error(measure)


test_garbage_answers, test_garbage_answers_long = garbage_answers
