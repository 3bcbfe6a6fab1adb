"""Attach mode: a backend measuring a server the user runs (``url:``) gets none of the options of a server
specbench launches, neither as a default nor as a refusal; the documented llama.cpp attach example runs end to
end against the fake llama-server (tests/fake_openai_server.py), and an unreachable address is its own line."""

from __future__ import annotations

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from specbench.backends import registry
from specbench.backends.options import BACKEND_OPTIONS, LAUNCH, applies, check_option_mode
from specbench.bounds import BOUNDS
from specbench.errors import SpecbenchError
from specbench.records.store import load_records
from tests.attach_example import attach_sweep
from tests.cli_helpers import assert_user_error, invoke, jsonl_workload
from tests.fake_openai_server import FakeServer

UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there
ATTACHING = registry.names(attach_option="url")


def launch_options(backend: str) -> list[str]:
    return sorted(key for key, option in BACKEND_OPTIONS[backend].items() if option.mode == LAUNCH)


def test_the_backends_with_an_attach_mode_are_known():
    assert set(ATTACHING) >= {"openai", "llamacpp-server"}
    assert launch_options("llamacpp-server")  # the property below has something to hold for


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    backend=st.sampled_from(ATTACHING),
    max_concurrency=st.integers(1, int(BOUNDS["slots"].high)),
    timeout_s=st.none() | st.integers(1, 600),
)
def test_an_attached_backend_gets_no_launch_option(backend, max_concurrency, timeout_s):
    """Built as a sweep builds it (`registry.make_backend`, sized by the sweep's largest concurrency), an attached
    backend is not refused, and no launch option reaches it: every option it holds applies with ``url``."""
    options = {"url": UNREACHABLE, **({"timeout_s": timeout_s} if timeout_s is not None else {})}
    built = registry.make_backend(
        backend, options, target="smollm2-135m", device="cpu", dtype="fp32", max_concurrency=max_concurrency
    )
    held = {**getattr(built, "server_options", {}), **built.options}
    assert "url" in held
    assert [key for key in held if not applies(backend, key, held)] == []
    assert not any(key in held for key in launch_options(backend))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(data=st.data())
def test_a_launch_option_the_user_gives_with_url_is_refused_by_name(data):
    backend = data.draw(st.sampled_from([name for name in ATTACHING if launch_options(name)]))
    key = data.draw(st.sampled_from(launch_options(backend)))
    try:
        check_option_mode(backend, {"url": UNREACHABLE, key: 1}, "w")
    except SpecbenchError as exc:
        assert f"option(s) {key} are for a server specbench launches" in str(exc)
    else:
        raise AssertionError(f"{backend}: {key} with url was not refused")
    check_option_mode(backend, {key: 1}, "w")  # without url it is the backend's own to take


def test_the_documented_attach_example_runs_end_to_end_on_a_fake_llama_server(tmp_path, prompts_file):
    """docs/backends-llamacpp.md's ``url:`` example, read from the page, measures 2 prompts at concurrency 2
    through `specbench sweep` (dry run first, as a user would) and writes one record per unit."""
    with FakeServer(k=2, dialect="llamacpp") as fake:
        spec = tmp_path / "attach.yaml"
        spec.write_text(yaml.safe_dump(attach_sweep(fake.url, jsonl_workload(prompts_file, 2))))
        dry = invoke("sweep", spec, "--dry-run")
        assert dry.exit_code == 0, dry.output
        done = invoke("sweep", spec, "--out", tmp_path / "out")
        assert done.exit_code == 0, done.output
        assert fake.state.requests > 0
    records = load_records(tmp_path / "out")
    assert len(records) == 4  # 2 prompts × (target alone, ngram-simple γ 2)
    assert set(records["gamma"]) == {0, 2} and (records["new_tokens"] == 8).all()


def test_an_unreachable_attach_address_is_its_own_line(tmp_path, prompts_file):
    spec = tmp_path / "attach.yaml"
    spec.write_text(yaml.safe_dump(attach_sweep(UNREACHABLE, jsonl_workload(prompts_file, 2))))
    result = invoke("sweep", spec, "--out", tmp_path / "out")
    assert_user_error(result, f"cannot reach the server at {UNREACHABLE}")
    assert "parallel" not in result.stderr
