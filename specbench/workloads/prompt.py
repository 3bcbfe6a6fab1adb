"""One prompt of a workload, and the long document a long-context prompt is built around."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContextDocument:
    """A long document, cut to a token budget when its prompt is encoded (`specbench.workloads.long_context`).

    The prompt's turn holds the task text with a ``{document}`` placeholder; encoding puts the
    longest line-boundary prefix of ``text`` there whose whole prompt (chat template included)
    fits ``target_tokens``, and refuses one shorter than ``(1 − tolerance) · target_tokens``.
    """

    text: str  # the whole document, longer than any bin needs
    origin: str  # what it is, for a reader: 'python 3.11 stdlib: json/decoder.py', 'sharegpt conversation X'
    bin: str  # bin label, e.g. '4k'
    target_tokens: int  # the bin's prompt length in tokens, e.g. 4096
    tolerance: float  # accepted shortfall below target_tokens, as a fraction (0.1: ≥ 90 % of it)


@dataclass(frozen=True)
class Prompt:
    """One conversation to run: its user turns, asked one after another."""

    workload: str
    prompt_id: str  # stable id, e.g. "mt-bench/81", "HumanEval/0", "sharegpt/<conversation id>"
    category: str
    turns: tuple[str, ...]  # user turns; MT-Bench has 2, the others 1
    context: ContextDocument | None = None  # long-context prompts: the document the turn's {document} holds
    bin: str | None = None  # the context-length bin of a prompt written to one (SPEED-Bench's throughput_8k: '8k')
    # stream workloads (`specbench.workloads.stream`): the prompt's place in the stream, its segment's label, and
    # its own workload's chat setting (None: the workload's)
    stream_position: int | None = None
    segment: str | None = None
    chat: bool | None = None

    @property
    def context_bin(self) -> str | None:
        """The context-length bin of a long-context prompt ('1k', ... '7k') or of a prompt set's length split
        (SPEED-Bench's '1k' … '32k'); None for other prompts."""
        return self.bin if self.context is None else self.context.bin
