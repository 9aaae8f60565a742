"""Word sampling: first complete words, right for every tokenizer family, with the
exact word distribution of a model whose next-token distribution we construct."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import chisquare
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from unsure.config import ZooModel
from unsure.engine import WordSamplingRequest, decoding
from unsure.engine.hf import HFEngine
from unsure.engine.words import first_word
from unsure.zoo.build import build, training_texts


@pytest.mark.parametrize(
    ("text", "finished", "expected"),
    [
        (" cats are", False, ("cats", True)),
        (" cats", False, (None, False)),
        (" cats", True, ("cats", True)),
        ("cat.", False, ("cat", True)),
        (", and", False, (None, True)),
        (" don'", False, (None, False)),
        (" don't go", False, ("don't", True)),
        (" well-known fact", False, ("well-known", True)),
        ("   ", False, (None, False)),
        ("   ", True, (None, True)),
    ],
)
def test_first_word(text: str, finished: bool, expected: tuple[str | None, bool]) -> None:
    assert first_word(text, finished=finished) == expected


def fixed_distribution_model(tokenizer_dir: Path, out: Path, probs: dict[str, float]) -> Path:
    """A Llama whose next-token distribution is ``probs`` after every context.

    Attention and MLP outputs are zero, every token embeds to the same vector,
    so the final hidden state is constant and the output rows set the logits.
    """
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    vocab = tok.get_vocab()
    hidden = 8
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(config)
    logits = torch.full((len(tok),), -1e4)
    for token, p in probs.items():
        logits[vocab[token]] = float(np.log(p))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                param.zero_()
        model.model.embed_tokens.weight.fill_(1.0)
        model.lm_head.weight.copy_(logits[:, None].expand(-1, hidden) / hidden)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def exact_words(start: dict[str, str], cont: str, p: dict[str, float], max_tokens: int) -> dict[str, float]:
    """First-word probabilities for iid tokens: a word-start token, then ``cont`` pieces,
    then any token that is not ``cont`` ends it (within ``max_tokens`` tokens)."""
    out: dict[str, float] = {}
    p_cont = p[cont]
    for token, word in start.items():
        for k in range(max_tokens - 1):
            out[word + "s" * k] = out.get(word + "s" * k, 0.0) + p[token] * p_cont**k * (1 - p_cont)
    return out


FAMILIES = {
    # tokenizer family: word-start pieces, the piece that continues a word, punctuation
    "gpt2": ({"Ġdog": "dog", "Ġcat": "cat", "s": "s"}, "s", "."),
    "llama": ({"▁dog": "dog", "▁cat": "cat", "s": "s"}, "s", "."),
    "bert": ({"dog": "dog", "cat": "cat"}, "##s", "."),
}


@pytest.mark.parametrize(
    ("family", "temperature"),
    [*((f, 1.0) for f in FAMILIES), ("llama", 0.5)],
    ids=["gpt2", "llama", "bert", "llama-cold"],
)
def test_word_distribution_matches_the_exact_one(family: str, temperature: float, tmp_path: Path) -> None:
    spec = ZooModel(architecture=family, vocab_size=1000, hidden_size=16, layers=1, heads=2)  # type: ignore[arg-type]
    build(family, spec, training_texts(seed=0, n_sentences=2000), tmp_path / "tok", zoo_seed=0)
    starts, cont, punct = FAMILIES[family]
    model_probs = {**{t: 0.25 for t in starts if t != cont}, cont: 0.3, punct: 0.2}
    path = fixed_distribution_model(tmp_path / "tok", tmp_path / "model", model_probs)
    # what the samples must follow: the model's distribution sharpened by the temperature
    probs = {t: v ** (1 / temperature) for t, v in model_probs.items()}
    probs = {t: v / sum(probs.values()) for t, v in probs.items()}
    engine = HFEngine(str(path))
    n = 4000
    got = engine.sample_words([WordSamplingRequest("The", n=n, seed=3, max_new_tokens=10, temperature=temperature)])[0]
    exact = exact_words({t: w for t, w in starts.items() if t != cont}, cont, probs, 10)
    if family != "bert":  # a sample starting with the bare "s" piece is the word "s", "ss", ...
        for k in range(1, 10):
            exact["s" * k] = exact.get("s" * k, 0.0) + probs[cont] ** k * (1 - probs[cont])
    words, counts = np.unique(got.words, return_counts=True)
    assert set(words) <= set(exact)
    top = sorted(exact, key=exact.get, reverse=True)[:6]  # type: ignore[arg-type]
    observed = [int(counts[words == w].sum()) for w in top]
    expected = [exact[w] * n for w in top]
    observed.append(n - sum(observed))
    expected.append(n - sum(expected))
    assert chisquare(observed, expected).pvalue > 1e-3
    # rejected: samples starting with punctuation (and, for WordPiece, with "##s")
    p_reject = 1 - sum(exact.values())
    assert got.rejected == pytest.approx(p_reject * n, abs=5 * np.sqrt(n * p_reject * (1 - p_reject)) + 1)


def test_sampling_is_reproducible_and_leaves_the_cache_intact(tiny_models: dict[str, Path]) -> None:
    engine = HFEngine(str(tiny_models["llama"]))
    req = WordSamplingRequest("The old baker was", n=300, seed=11)
    a = engine.sample_words([req])[0]
    b = engine.sample_words([req, req])
    assert b[0] == a and b[1] == a
    c = engine.sample_words([WordSamplingRequest("The old baker was", n=300, seed=12)])[0]
    assert c.words != a.words
    assert len(a.words) + a.rejected == 300


def test_requests_sampled_together_draw_the_words_each_draws_alone(
    tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several requests decode as one batch (contexts of different lengths, left-padded;
    their own warpers, token limits and generators), and each draws what it draws alone;
    a batch's sample rows stay within the logits a step may hold."""
    engine = HFEngine(str(tiny_models["llama"]))
    requests = [
        WordSamplingRequest("The", n=300, seed=1, max_new_tokens=8),
        WordSamplingRequest("Once upon a time the old baker was", n=120, seed=2, temperature=0.7, max_new_tokens=3),
        WordSamplingRequest("In the morning she", n=90, seed=3, top_p=0.9, top_k=40, max_new_tokens=6),
    ]
    alone, passes_alone = [], 0
    for req in requests:
        before = engine.counters.forward_passes
        alone.append(engine.sample_words([req])[0])
        passes_alone += engine.counters.forward_passes - before
    before = engine.counters.forward_passes
    together = engine.sample_words(requests)
    assert together == alone
    assert engine.counters.forward_passes - before < passes_alone / 2
    batches: list[int] = []
    run = engine.decoder._sample_groups

    def spy(groups: list[decoding.SampleGroup]) -> list[tuple[list[str], int]]:
        batches.append(sum(g.size for g in groups))
        return run(groups)

    monkeypatch.setattr(engine.decoder, "_sample_groups", spy)
    monkeypatch.setattr(decoding, "SAMPLE_LOGITS", 1)  # a vocabulary too large for more than one chunk of rows per step
    assert engine.sample_words(requests) == alone
    assert max(batches) <= decoding.SAMPLE_CHUNK < sum(batches)
