"""What to deploy once the recommendation has met fresh prompts: the sweep's choice, or the contender that beat it.

A confirmation (`specbench.analysis.recommendation.confirmation`) is evidence too, and a user should not have to
read two reports to learn which γ to deploy. Per confirmed target, from its last look:

* **confirmed** — the prediction held and no contender is ahead by more than ε (none beats it, or the best one's
  advantage is confidently under ε): deploy the recommendation;
* **beaten** — a contender is confidently ahead of the recommendation by more than ε: deploy the contender (its
  settings are printed with the same engine builders as the recommendation's);
* **missed** — the prediction missed (a yes that does not pay on fresh prompts, a no that would have paid, or a
  size outside the predicted interval) and no contender is confidently ahead: the recommendation stands with the
  realized numbers, and the line says what missed;
* **not settled** — otherwise: which part is open (the prediction, the regret or both) and the fresh prompts that
  would settle it.

`specbench recommend` prints these beside its verdicts; `specbench tune` ends with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.analysis.recommendation.confirm_report import Report, TargetLooks
from specbench.analysis.recommendation.confirm_targets import Arm, Outcome
from specbench.analysis.verdicts.verdict import NO

CONFIRMED, BEATEN, MISSED, NOT_SETTLED, NOT_RUN = "confirmed", "beaten", "missed", "not settled", "not run"


@dataclass(frozen=True)
class Deployment:
    """What one confirmed target says to deploy."""

    target: str  # the target's name (a workload, or a workload at a load)
    workload: str
    concurrency: int
    temperature: float
    status: str  # CONFIRMED, BEATEN, MISSED, NOT_SETTLED, NOT_RUN
    arm: Arm | None  # the configuration to deploy (None: target only after a confirmed no)
    speculate: bool
    text: str

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "workload": self.workload,
            "concurrency": self.concurrency,
            "temperature": self.temperature,
            "status": self.status,
            "deploy": None if self.arm is None else self.arm.as_dict(),
            "speculate": self.speculate,
            "text": self.text,
        }


def deployments(report: Report | None) -> list[Deployment]:
    """One `Deployment` per target of a confirmation (none without one)."""
    if report is None:
        return []
    return [deployment(state) for state in report.targets.values()]


def deployment(state: TargetLooks) -> Deployment:
    """The deployment one target's looks support (module docstring)."""
    target, last = state.target, state.last
    reference = target.reference
    said_no = target.prediction is not None and target.prediction.answer == NO
    speculate = reference.role != "baseline"

    def make(status: str, arm: Arm | None, text: str) -> Deployment:
        deploy = arm is not None and arm.role != "baseline"
        return Deployment(
            target.name, target.workload, target.concurrency, target.temperature, status, arm, deploy, text
        )

    if last is None:
        return make(NOT_RUN, reference if speculate else None, f"{target.name}: not confirmed yet ({state.status})")
    regret, check = last.regret, last.check
    where = f"on {last.n_prompts} fresh prompts"
    if regret.beaten and regret.best is not None:
        winner = next((a for a in target.arms if a.name == regret.best), None)
        return make(
            BEATEN,
            winner,
            f"{target.name}: deploy {regret.best} — it beats {reference.name} by more than "
            f"{regret.tolerance * 100:.0f} % {where} ({regret.ratio_text} its tokens/s)",
        )
    held = check is None or check.outcome == Outcome.HELD
    if check is not None and check.outcome == Outcome.MISSED and regret.settled:
        return make(
            MISSED,
            reference if speculate else None,
            f"{target.name}: the prediction missed {where} ({check.reason}); no contender is more than "
            f"{regret.tolerance * 100:.0f} % ahead: {_name(reference, said_no)} stands, at its realized "
            f"{check.realized.text}",
        )
    if held and regret.settled:
        return make(
            CONFIRMED,
            reference if speculate else None,
            f"{target.name}: {_name(reference, said_no)} confirmed {where} — {regret.text}",
        )
    open_parts = []
    if check is not None and not check.outcome.settled:
        open_parts.append("the prediction")
    if not regret.settled:
        open_parts.append("the regret against its contenders")
    needed = last.prompts_needed
    settle = f"about {needed} fresh prompts would settle it" if needed else "more fresh prompts or a larger --budget"
    return make(
        NOT_SETTLED,
        reference if speculate else None,
        f"{target.name}: not settled — {' and '.join(open_parts) or 'the confirmation'} {where}; {settle} "
        f"({state.status})",
    )


def _name(arm: Arm, said_no: bool) -> str:
    return "no speculation (the target alone)" if said_no or arm.role == "baseline" else arm.name


__all__ = ["BEATEN", "CONFIRMED", "MISSED", "NOT_RUN", "NOT_SETTLED", "Deployment", "deployment", "deployments"]
