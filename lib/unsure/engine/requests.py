"""Request and result types of the engine: plain frozen data, no model code."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ContinuationRequest:
    """Log-likelihoods of several continuations of one context.

    The context is encoded once per request, however many continuations it has.
    With ``eos``, the end-of-sequence token is scored after each continuation in
    the same pass (:attr:`ContinuationScores.eos_logprob`); the continuation's
    own scores are unchanged by it.
    """

    context: str
    continuations: tuple[str, ...]
    eos: bool = False


@dataclass(frozen=True)
class ContinuationScores:
    """Per continuation: summed log-probability, token count, and whether every
    token was the model's greedy choice (as lm-evaluation-harness reports);
    for a request with ``eos``, also log p(EOS | context, continuation)."""

    logprob: Floats
    n_tokens: npt.NDArray[np.int64]
    greedy: npt.NDArray[np.bool_]
    eos_logprob: Floats | None = None

    @property
    def normalized(self) -> Floats:
        """Length-normalised log-likelihood: mean log-probability per token."""
        return self.logprob / self.n_tokens

    def softmax(self, *, normalize: bool = False) -> Floats:
        """A distribution over the continuations (e.g. class labels)."""
        scores = self.normalized if normalize else self.logprob
        z: Floats = np.exp(scores - scores.max())
        out: Floats = z / z.sum()
        return out


@dataclass(frozen=True)
class ChoiceRequest:
    """Probabilities of answer options right after a prompt.

    Options that are one token long (``A``/``B``) are read from one forward
    pass, looking the token up under the tokenizer's space-marker variants;
    longer options are scored as continuations.
    """

    prompt: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ChoiceProbs:
    """The options' probabilities renormalised to sum to one, the raw mass the
    model put on them, and the space-marker prefix used (``None`` when the
    options were scored as continuations)."""

    probs: Floats
    mass: float
    prefix: str | None

    @classmethod
    def from_continuations(cls, scores: ContinuationScores) -> ChoiceProbs:
        """Options scored as whole continuations: their joint probabilities, renormalised."""
        p: Floats = np.exp(scores.logprob)
        return cls(probs=p / p.sum(), mass=float(p.sum()), prefix=None)


@dataclass(frozen=True)
class WordSamplingRequest:
    """``n`` ancestral samples from a context, reduced to their first complete word.

    Defaults are unbiased sampling (temperature 1, no top-k, no top-p). The
    same request (seed included) gives the same words on the same machine.
    """

    context: str
    n: int
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int = 0
    max_new_tokens: int = 12


@dataclass(frozen=True)
class WordSamples:
    """The first complete word of each accepted sample, and how many samples
    were rejected because no complete word appeared."""

    words: list[str] = field(default_factory=list)
    rejected: int = 0


@dataclass(frozen=True)
class NumericRequest:
    """folktexts' verbalised probability: the prompt ends in ``0.``; the likeliest digit
    token is appended ``steps`` times and ``0.<digits>`` read as the answer."""

    prompt: str
    steps: int = 2


@dataclass(frozen=True)
class ReplyRequest:
    """A greedy (temperature 0) free-form reply to a prompt, at most ``max_new_tokens`` long."""

    prompt: str
    max_new_tokens: int = 32


@dataclass(frozen=True)
class NumericReplyRequest:
    """The free-form variant of :class:`NumericRequest`: a greedy reply (e.g. to a chat
    prompt) parsed for a probability, NaN where it states none.

    ``max_new_tokens`` ``None`` is the backend's reply length for a probability: 24 tokens
    on a Hugging Face model, room for a sentence around the number on an API
    (:data:`unsure.engine.api.NUMERIC_REPLY_TOKENS`).
    """

    prompt: str
    max_new_tokens: int | None = None


@dataclass(frozen=True)
class TokenLogprobsRequest:
    """Next-token log-probabilities after a context given as token ids (as
    :meth:`~unsure.engine.hf.HFEngine.split_pair` splits it): those of ``read_ids``, and
    the model's modal token over the whole vocabulary."""

    context: tuple[int, ...]
    read_ids: tuple[int, ...]


@dataclass(frozen=True)
class TokenLogprobs:
    """Full-softmax log-probabilities of a request's ``read_ids`` (in its order), and the
    modal next token (the likeliest of the vocabulary, ties: the lowest id) with its own."""

    logprobs: Floats
    modal_token: int
    modal_logprob: float
