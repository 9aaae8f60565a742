"""What decisionrisk asks a generative model, from its instances: one place that says it.

The scorer (:mod:`.infer`), the zoo's examples and the cost estimate take the requests and
prompts from here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from unsure.decisionrisk.confidences import LETTERS
from unsure.engine import ContinuationRequest, ReplyRequest


def continuation_request(prompt: str, choices: Sequence[str]) -> ContinuationRequest:
    """Each choice as a continuation of the prompt, after one space (as lm-evaluation-harness does)."""
    return ContinuationRequest(prompt, tuple(" " + c for c in choices))


def verbal_prompt(prompt: str, choices: Sequence[str]) -> str:
    """The user message asking a chat model for its confidence in each choice (0 to 100)."""
    if len(choices) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} choices can be lettered, got {len(choices)}")
    options = "\n".join(f"{LETTERS[i]}. {c}" for i, c in enumerate(choices))
    example = ", ".join(f"{LETTERS[i]}: <number>" for i in range(len(choices)))
    return (
        f"Question: {prompt}\nOptions:\n{options}\n\n"
        "For each option, how confident are you (0 to 100) that it is the correct answer? "
        f"Reply with one line per option and nothing else, in the form {example}."
    )


def likelihood_requests(prompts: Sequence[str], choices: Sequence[Sequence[str]]) -> list[ContinuationRequest]:
    """One request per instance: its choices' log-likelihoods after its prompt."""
    return [continuation_request(p, c) for p, c in zip(prompts, choices, strict=True)]


def verbal_requests(
    prompts: Sequence[str], choices: Sequence[Sequence[str]], *, chat: Callable[[str], str], max_new_tokens: int
) -> list[ReplyRequest]:
    """One greedy reply per instance to :func:`verbal_prompt`, through the model's chat template."""
    return [ReplyRequest(chat(verbal_prompt(p, c)), max_new_tokens) for p, c in zip(prompts, choices, strict=True)]
