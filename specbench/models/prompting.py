"""Turning conversation turns into the token ids a model is prompted with."""

from __future__ import annotations

from specbench.errors import SpecbenchError


def has_chat_template(tokenizer) -> bool:
    return tokenizer is not None and bool(getattr(tokenizer, "chat_template", None))


def encode_conversation(tokenizer, user_turns: list[str], answers: list[str] = (), *, chat: bool = True) -> list[int]:
    """Token ids asking for the answer to the last user turn.

    user_turns[i] is followed by answers[i] for every earlier turn (len(answers) ==
    len(user_turns) - 1). With ``chat`` and a tokenizer that has a chat template, the template
    is applied with a generation prompt; otherwise the turns are joined as plain text (code
    completion prompts, base models).
    """
    if tokenizer is None:
        raise SpecbenchError("this model has no tokenizer; text prompts need one")
    if len(answers) != len(user_turns) - 1:
        raise ValueError("need one answer for every user turn but the last")
    if not user_turns or not any(t.strip() for t in user_turns):
        raise SpecbenchError("empty prompt")
    if chat and has_chat_template(tokenizer):
        messages = []
        for i, turn in enumerate(user_turns):
            messages.append({"role": "user", "content": turn})
            if i < len(answers):
                messages.append({"role": "assistant", "content": answers[i]})
        encoded = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(encoded["input_ids"])
    parts = []
    for i, turn in enumerate(user_turns):
        parts.append(turn)
        if i < len(answers):
            parts.append(answers[i])
    return list(tokenizer("\n\n".join(parts))["input_ids"])
