"""Running the CLI in-process and checking the one-line, exit-2 contract for user errors."""

from __future__ import annotations

from typer.testing import CliRunner

from specbench.cli import app

runner = CliRunner()


def invoke(*args):
    """`specbench ARGS...` through Typer's CliRunner (paths and numbers are stringified)."""
    return runner.invoke(app, [str(a) for a in args])


def assert_user_error(result, *needles: str) -> None:
    """Exit code 2, exactly one line on stderr starting 'specbench: error:', containing every needle."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("specbench: error:"), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]


def write_sweep_yaml(folder, spec: dict, **overrides):
    """``spec`` updated with ``overrides``, written as ``folder/sweep.yaml``; returns the path."""
    import yaml

    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump({**spec, **overrides}))
    return path
