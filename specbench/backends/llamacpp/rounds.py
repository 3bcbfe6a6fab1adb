"""llama.cpp's rounds of one request, rebuilt from the counts its stream carries with every token.

llama-server reports no per-round figures, but with ``timings_per_token`` each streamed token's chunk carries
the request's running totals: ``tokens_predicted`` (tokens generated so far), ``timings.draft_n`` (tokens drafted
so far) and ``timings.draft_n_accepted`` (draft tokens accepted so far). In its loop
(tools/server/server-context.cpp, ``update_slots``) a round adds its draft to ``draft_n`` before the target
verifies it, adds the accepted count to ``draft_n_accepted`` after, and only then sends the round's tokens — the
accepted drafts and the target's own token, all with the same totals. So, token by token after the first (which
comes from the prefill):

* the totals grew by (d, a) > 0 at this token: a round that drafted d tokens and accepted a begins here;
* they did not grow and the open round has emitted fewer than its a + 1 tokens: the same round goes on;
* otherwise: a decode step without a draft (an n-gram with no match, a draft dropped under n_min) — a round
  that drafted 0 tokens and emitted 1.

A round whose accepted tokens ran past a stop (end of sequence) emits fewer than a + 1; the record keeps what it
emitted. The one loss: llama-server sends no chunk for a token that ends mid-way through a UTF-8 character (its
text waits for the next token's), so such a token's totals are not seen. Its round is then assumed unchanged
(the next seen token carries the growth), the step counts stay right in total, and the result says it is not
exact (`Steps.exact`). Pure Python; `tests/test_llamacpp_backend.py` checks it against simulated streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class Mark:
    """The running totals one streamed token carried: after ``n`` generated tokens, ``drafted`` tokens drafted
    and ``accepted`` accepted in all."""

    n: int
    drafted: int
    accepted: int


@dataclass
class Steps:
    """A request's decode steps as (drafted, accepted, emitted); ``exact``: every token's totals were seen."""

    rounds: list[list[int]] = field(default_factory=list)  # [drafted, accepted, emitted]: grows as tokens join
    exact: bool = True

    @property
    def drafted(self) -> int:
        return sum(d for d, _, _ in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(a for _, a, _ in self.rounds)

    @property
    def emitted(self) -> int:
        return sum(e for _, _, e in self.rounds)

    @property
    def verify_steps(self) -> int:
        """Rounds that carried a draft (llama.cpp's ``spec_decode_num_drafts``)."""
        return sum(1 for d, _, _ in self.rounds if d > 0)

    def per_position(self, depth: int) -> list[int]:
        """Rounds whose draft position i (0-based, < ``depth``) was accepted (llama.cpp's
        ``num_accepted_tokens_per_pos``)."""
        counts = [0] * depth
        for _, a, _ in self.rounds:
            for i in range(min(a, depth)):
                counts[i] += 1
        return counts


def rebuild(marks: list[Mark], final: Mark) -> Steps:
    """The decode steps of a request whose streamed tokens carried ``marks`` (in order) and whose closing chunk
    said ``final`` (its totals; it carries no token). Totals that go down, or marks past the final count, are
    one `SpecbenchError` line."""
    steps = Steps()
    if final.n == 0 and not marks:
        return steps  # nothing generated
    open_round: list[int] | None = None  # [drafted, accepted, emitted] of the round tokens may still join
    previous = Mark(1, 0, 0)  # the first token: from the prefill, before any draft

    def unchanged_token() -> None:
        nonlocal open_round
        if open_round is not None and open_round[2] < open_round[1] + 1:
            open_round[2] += 1
        else:
            open_round = [0, 0, 1]
            steps.rounds.append(open_round)

    def advance(mark: Mark, carries_token: bool) -> None:
        nonlocal open_round, previous
        grew_d, grew_a = mark.drafted - previous.drafted, mark.accepted - previous.accepted
        if grew_d < 0 or grew_a < 0 or mark.n < previous.n:
            raise SpecbenchError(f"llama.cpp's running totals went down within one request ({previous} → {mark})")
        unseen = mark.n - previous.n - (1 if carries_token else 0)
        if unseen:
            steps.exact = False
        for _ in range(max(unseen, 0)):
            unchanged_token()
        if carries_token and (grew_d or grew_a):
            open_round = [grew_d, grew_a, 1]
            steps.rounds.append(open_round)
        elif carries_token:
            unchanged_token()
        elif grew_d or grew_a:  # growth no seen token carried: give it to the last round
            steps.exact = False
            if open_round is None:
                open_round = [0, 0, 0]
                steps.rounds.append(open_round)
            open_round[0] += grew_d
            open_round[1] += grew_a
        previous = mark

    for mark in marks:
        if mark.n <= 1:
            if mark.drafted or mark.accepted:
                raise SpecbenchError(f"llama.cpp reported drafts before the first token ({mark})")
            continue
        advance(mark, carries_token=True)
    if final.n < previous.n:
        raise SpecbenchError(f"llama.cpp's closing chunk counts {final.n} tokens but {previous.n} were streamed")
    advance(final, carries_token=False)
    return steps
