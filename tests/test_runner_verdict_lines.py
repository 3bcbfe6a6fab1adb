"""`SweepRunner.drive` tells its observer a policy's verdict lines once per change: after each judged look, and
at the close only when closing changed them (a confirmation printed its last verdicts twice)."""

from __future__ import annotations

from types import SimpleNamespace

from specbench.measure.run.runner import SweepRunner


class _Policy:
    """Two looks, then done; its verdict lines change after the first look only, or at the close."""

    def __init__(self, change_at_close: bool):
        self.looks = 0
        self.closed = False
        self.change_at_close = change_at_close

    def resume(self, records, finished):
        pass

    def propose(self, finished):
        if self.looks == 2:
            return None
        self.looks += 1
        return SimpleNamespace(units=[], title=f"look {self.looks}", budget_left_s=None)

    def observe(self, records, seconds):
        pass

    def close(self):
        self.closed = True

    def progress_lines(self):
        if self.closed and self.change_at_close:
            return ["target: its planned looks ended"]
        return ["target: not settled yet"] if self.looks < 2 else ["target: held"]


class _Runner:
    """What `SweepRunner.drive` uses of its runner; it keeps what the observer was told."""

    _show_verdicts = SweepRunner._show_verdicts

    def __init__(self, folder):
        self.store = SimpleNamespace(folder=folder, has_records=lambda: False)
        self.observer = SimpleNamespace(status=lambda message: None)
        self._cut_short = False
        self.told: list[list[str]] = []

    def _notify(self, event, *args):
        if event == "looks_done":
            self.told.append(list(args[0]))


def test_the_last_verdicts_are_told_once_and_a_change_at_the_close_is_told(tmp_path):
    runner = _Runner(tmp_path)
    SweepRunner.drive(runner, _Policy(change_at_close=False), set())
    assert runner.told == [["target: not settled yet"], ["target: held"]]
    runner = _Runner(tmp_path)
    SweepRunner.drive(runner, _Policy(change_at_close=True), set())
    assert runner.told[-1] == ["target: its planned looks ended"] and len(runner.told) == 3
