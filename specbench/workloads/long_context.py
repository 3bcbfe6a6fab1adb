"""Long-context prompts: documents × tasks × length bins, each document cut to its bin when encoded.

A prompt of bin b (target T_b tokens, tolerance ε) asks a task about a document prefix: the
task's template with the document's first L characters in place of ``{document}``. The prompt
is encoded with the target's own tokenizer (chat template included, `specbench.models.prompting`),
so its length n(L) is known exactly; L is the largest *line end* with

    n(L) ≤ min(T_b, window − max_new_tokens)        (the window part only when the caller knows it)

found by bisection over the document's line ends (n grows with L). When even the best line end
leaves n(L) < (1 − ε)·T_b — a single line longer than ε·T_b tokens, which long ShareGPT paragraphs
can be — the cut moves on to the last fitting word end inside the next line. A prompt that
still falls short (the document is too short, or the window too small for the bin) is refused
with a one-line error: every prompt of bin b holds between (1 − ε)·T_b and T_b tokens.

Prompt ids name the bin, the task and the document: ``long-context/4k/summarise/stdlib-3.11/argparse.py``.
Partition and sampling (`specbench.workloads.catalog`) act on the (document, task) pairs before
the bins are expanded, so every bin holds the same documents and tasks: bins differ in length only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache

from specbench.errors import SpecbenchError
from specbench.models.prompting import encode_conversation
from specbench.workloads.long_context_documents import read_documents
from specbench.workloads.long_context_spec import PLACEHOLDER, LongContextSpec
from specbench.workloads.prompt import ContextDocument, Prompt

CHARS_PER_TOKEN_CAP = 12  # no tokenizer packs more characters into a token of text: the search stops there


def pair_prompts(spec: LongContextSpec) -> tuple[list[Prompt], str]:
    """One prompt per (document, task), bin not yet chosen, and a description of the sources."""
    prompts, descriptions = [], []
    for source in spec.documents:
        documents, description = read_documents(source)
        descriptions.append(description)
        for document in documents:
            for task, template in spec.tasks:
                context = ContextDocument(
                    text=document.text, origin=document.origin, bin="", target_tokens=0, tolerance=spec.tolerance
                )
                prompts.append(
                    Prompt(
                        workload=spec.name,
                        prompt_id=f"{spec.id_prefix}/{task}/{document.doc_id}",
                        category=f"{document.kind}/{task}",
                        turns=(template,),
                        context=context,
                    )
                )
    return prompts, " + ".join(dict.fromkeys(descriptions))


def in_bins(pairs: list[Prompt], spec: LongContextSpec) -> list[Prompt]:
    """Every (document, task) prompt in every bin of ``spec``, bins in ascending length."""
    prefix = f"{spec.id_prefix}/"
    return [
        replace(
            p,
            prompt_id=f"{prefix}{label}/{p.prompt_id.removeprefix(prefix)}",
            context=replace(p.context, bin=label, target_tokens=tokens),
        )
        for label, tokens in spec.bins
        for p in pairs
    ]


# ----------------------------------------------------------------------------- fitting a document to a bin


def last_fitting(cuts: list[int], fits: Callable[[int], bool]) -> int | None:
    """The largest cut with ``fits(cut)`` by bisection (``fits`` true up to some cut, false after); None if none fits."""
    lo, hi, best = 0, len(cuts) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if fits(cuts[mid]):
            best, lo = cuts[mid], mid + 1
        else:
            hi = mid - 1
    return best


def line_ends(text: str, stop: int) -> list[int]:
    """Character offsets where a line of ``text`` ends (newline excluded) up to ``stop``, and the end if reached."""
    ends = [i for i, ch in enumerate(text[: stop + 1]) if ch == "\n" and i > 0]
    return ends + ([len(text)] if len(text) <= stop else [])


def word_ends(text: str, start: int, stop: int) -> list[int]:
    """Offsets in (start, stop) where a word ends (the next character is whitespace)."""
    return [i for i in range(start + 1, min(stop, len(text))) if text[i].isspace() and not text[i - 1].isspace()]


def encode_long_context(tokenizer, prompt: Prompt, *, chat: bool, token_limit: int | None = None) -> list[int]:
    """Token ids of a long-context prompt: its document cut so that the prompt fits its bin (module docstring).

    ``token_limit`` is what the model can take for the prompt (context window − max_new_tokens).
    A sweep encodes a prompt once per unit, so the last results are kept (keyed by the tokenizer
    object, the prompt, ``chat`` and the limit).
    """
    return list(_fitted_ids(tokenizer, prompt, chat, token_limit))


@lru_cache(maxsize=64)
def _fitted_ids(tokenizer, prompt: Prompt, chat: bool, token_limit: int | None) -> tuple[int, ...]:
    document = prompt.context
    floor = math.ceil((1 - document.tolerance) * document.target_tokens)
    budget = document.target_tokens if token_limit is None else min(document.target_tokens, token_limit)
    if budget < floor:
        raise SpecbenchError(
            f"{prompt.prompt_id}: bin {document.bin} needs prompts of at least {floor} tokens, but "
            f"the context window leaves {token_limit} for the prompt after max_new_tokens; "
            "choose smaller bins (e.g. :bin=1k,2k) or fewer new tokens"
        )
    before, after = prompt.turns[0].split(PLACEHOLDER)
    encoded: dict[int, list[int]] = {}  # cut → ids: the search revisits its last fitting cut

    def encode(cut: int) -> list[int]:
        if cut not in encoded:
            encoded[cut] = encode_conversation(tokenizer, [before + document.text[:cut] + after], chat=chat)
        return encoded[cut]

    def fits(cut: int) -> bool:
        return len(encode(cut)) <= budget

    text = document.text
    stop = CHARS_PER_TOKEN_CAP * budget
    cut = last_fitting(line_ends(text, stop), fits)
    if cut is None or len(encode(cut)) < floor:
        start = cut or 0
        following = next((end for end in line_ends(text, stop) if end > start), min(len(text), stop))
        cut = last_fitting(word_ends(text, start, following), fits) or cut
    ids = encode(cut) if cut is not None else []
    if len(ids) < floor:
        raise SpecbenchError(
            f"{prompt.prompt_id}: {document.origin} gives a prompt of {len(ids)} tokens, short of "
            f"bin {document.bin} ({floor}–{budget} tokens); the document is too short for this "
            "tokenizer (raise min_chars in the workload)"
        )
    return tuple(ids)
