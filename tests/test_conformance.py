"""Conformance of the engine with the papers' real tokenizers and chat templates.

For every folder of ``../shared/data/tokenizers`` a tiny model of that family is
built from its real ``config.json`` (shrunk sizes, the real vocabulary) beside
the real tokenizer files, and loaded through ``load_engine`` exactly as a hub id
is: as a base model and as an instruct model. Every request kind and every
study's prompt builder runs through it, and the numbers are checked against
plain forward passes of the same model.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import chisquare
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedModel

from unsure.config import Model, ZooModel
from unsure.engine import (
    ChoiceRequest,
    ContinuationRequest,
    NumericReplyRequest,
    NumericRequest,
    ReplyRequest,
    WordSamplingRequest,
    load_engine,
)
from unsure.engine.hf import HFEngine, family_bos
from unsure.engine.pretrained import TOKENIZER_FILES
from unsure.zoo.build import build

TOKENIZERS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tokenizers"

FAMILIES = {
    # folder: (space marker of a word-start token, the BOS id the family starts every text with)
    "gpt2": ("\u0120", None),
    "llama-2-7b": ("\u2581", 1),
    "llama-3-8b-instruct": ("\u0120", 128000),
    "mistral-7b-instruct": ("\u2581", 1),
    "falcon-7b-instruct": ("\u0120", None),
    "gemma-it-hybrid": ("\u2581", 2),
    "mixtral": ("\u2581", 1),
}
"""Every causal family of ``../shared/data/tokenizers`` (``roberta-base`` is the encoder; see below)."""

OTHER_ARCHITECTURES = {"mixtral": ("mistral-7b-instruct", "mixtral")}
"""Families built from another family's tokenizer folder (zoo ``model_type``): Mixtral's
mixture of experts with Mistral's tokenizer, as Mixtral 8x7B ships."""

ANSWER_PROMPT = "Question: Is the sky blue?\nA. Yes.\nB. No.\nAnswer:"


def _folder(name: str) -> Path:
    folder = TOKENIZERS / OTHER_ARCHITECTURES.get(name, (name, None))[0]
    if not folder.is_dir():
        pytest.skip(f"{folder} is absent (the real tokenizers live in ../shared/data/tokenizers)")
    return folder


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    name: str = request.param
    model_type = OTHER_ARCHITECTURES.get(name, (name, None))[1]
    spec = ZooModel(tokenizer=str(_folder(name)), model_type=model_type, hidden_size=32, layers=2, heads=4)
    out = tmp_path_factory.mktemp("families") / name
    build(name, spec, [], out, zoo_seed=0)
    if model_type is not None:
        assert AutoModelForCausalLM.from_pretrained(out).config.model_type == model_type
    return name, out


def _engine(path: Path, *, instruct: bool) -> HFEngine:
    engine = load_engine(Model(id=str(path), gpus=0, instruct=instruct))
    assert isinstance(engine, HFEngine)
    return engine


def _plain_model(path: Path) -> PreTrainedModel:
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model.eval()


def _log_softmax_rows(model: PreTrainedModel, ids: list[int]) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def test_the_tiny_model_keeps_the_real_tokenizer_byte_for_byte(family: tuple[str, Path]) -> None:
    name, path = family
    for real in _folder(name).iterdir():
        if real.name in TOKENIZER_FILES:
            assert (path / real.name).read_bytes() == real.read_bytes(), real.name
    config = AutoModelForCausalLM.from_pretrained(path).config
    assert config.vocab_size >= len(AutoTokenizer.from_pretrained(_folder(name)))


def test_the_tiny_model_is_tiny_in_every_dimension(family: tuple[str, Path]) -> None:
    """No weight keeps a size of the real model: apart from the vocabulary and position
    tables, every dimension is at most twice the spec's feed-forward width (4 x hidden; a fused
    gate and up projection holds two). Falcon's
    config derives ``ffn_hidden_size`` from the real hidden size when it is read, and the
    shadow run found its "tiny" model 20x slower than the others with an 18,176-wide MLP."""
    name, path = family
    model = _plain_model(path)
    config = model.config
    hidden = config.hidden_size
    tables = {config.vocab_size, getattr(config, "max_position_embeddings", None)}
    too_big = {
        param_name: tuple(param.shape)
        for param_name, param in model.named_parameters()
        if not tables & set(param.shape) and max(param.shape) > 2 * 4 * hidden
    }
    assert not too_big, (name, too_big)


def test_exactly_one_bos_where_the_family_uses_one(family: tuple[str, Path]) -> None:
    """Plain text, chat-templated text and the context of a continuation all start with
    the family's BOS exactly once, whatever the tokenizer revision adds by itself."""
    name, path = family
    _, bos = FAMILIES[name]
    engine = _engine(path, instruct=True)
    assert family_bos(engine.model.config) == bos
    texts = {
        "plain": "Hello world",
        "empty": "",
        "chat": engine.chat_prompt("Hello world"),
        "chat with system": engine.chat_prompt("Hello world", system="Be brief.", prefill="Answer:"),
    }
    for what, text in texts.items():
        ids = engine.encode(text)
        if bos is None:
            assert what == "empty" or ids[0] != engine.model.config.bos_token_id, what
        else:
            assert ids[0] == bos and ids.count(bos) == 1, (what, ids[:6])
    ctx, cont = engine.split_pair("The sky is", " blue")
    if bos is not None:
        assert ctx[0] == bos and ctx.count(bos) == 1 and bos not in cont


def test_templates_that_refuse_a_system_turn_fold_it_into_the_user_turn(family: tuple[str, Path]) -> None:
    name, path = family
    engine = _engine(path, instruct=True)
    prompt = engine.chat_prompt("What is two plus two?", system="You are terse.", prefill="Answer:")
    assert "You are terse." in prompt and "What is two plus two?" in prompt and prompt.endswith("Answer:")
    assert prompt.index("You are terse.") < prompt.index("What is two plus two?")
    if name in ("mistral-7b-instruct", "mixtral", "gemma-it-hybrid"):  # their templates raise on a system message
        assert "You are terse.\n\nWhat is two plus two?" in prompt
    if name == "llama-3-8b-instruct":  # takes a system turn of its own
        assert "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>" in prompt


def test_continuation_loglikelihoods_equal_a_plain_forward_pass(family: tuple[str, Path]) -> None:
    name, path = family
    plain = _plain_model(path)
    for instruct in (False, True):
        engine = _engine(path, instruct=instruct)
        context = engine.chat_prompt("Finish: the cat sat on the") if instruct else "The cat sat on the"
        conts = (" mat", " big red chair", "\n")
        got = engine.continuation_scores([ContinuationRequest(context, conts)])[0]
        for j, cont in enumerate(conts):
            ctx, ids = engine.split_pair(context, cont)
            logprobs = _log_softmax_rows(plain, ctx + ids)
            want = sum(float(logprobs[len(ctx) - 1 + i, t]) for i, t in enumerate(ids))
            assert got.logprob[j] == pytest.approx(want, abs=1e-4), (name, instruct, cont)
            assert got.n_tokens[j] == len(ids)


def test_answer_letters_under_the_family_space_marker(family: tuple[str, Path]) -> None:
    name, path = family
    marker, _ = FAMILIES[name]
    plain = _plain_model(path)
    for instruct in (False, True):
        engine = _engine(path, instruct=instruct)
        prompt = (
            engine.chat_prompt(ANSWER_PROMPT.removesuffix("\nAnswer:"), prefill="Answer:")
            if instruct
            else ANSWER_PROMPT
        )
        got = engine.choice_probs([ChoiceRequest(prompt, ("A", "B"))])[0]
        vocab = engine.tokenizer.get_vocab()
        ids = [vocab[marker + letter] for letter in "AB"]
        logprobs = _log_softmax_rows(plain, engine.encode(prompt))[-1]
        probs = {p: [math.exp(float(logprobs[vocab[p + c]])) for c in "AB"] for p in ("", marker)}
        best = max(probs, key=lambda p: sum(probs[p]))  # folktexts: the prefix holding the most mass
        assert got.prefix == best
        assert got.mass == pytest.approx(sum(probs[best]), rel=1e-5)
        want = np.array(probs[best]) / sum(probs[best])
        np.testing.assert_allclose(got.probs, want, rtol=1e-5)
        assert all(i is not None for i in ids)


def _greedy(
    plain: PreTrainedModel, ids: list[int], allowed: list[int] | None, steps: int, stops: set[int]
) -> list[int]:
    out: list[int] = []
    for _ in range(steps):
        logits = _log_softmax_rows(plain, ids + out)[-1]
        tok = allowed[int(logits[allowed].argmax())] if allowed is not None else int(logits.argmax())
        out.append(tok)
        if tok in stops:
            break
    return out


def test_numeric_generate_and_numeric_chat_equal_greedy_decoding(family: tuple[str, Path]) -> None:
    _, path = family
    plain = _plain_model(path)
    for instruct in (False, True):
        engine = _engine(path, instruct=instruct)
        ask = "What is the probability that the person earns more than $50,000? Answer (between 0 and 1): 0."
        prompt = engine.chat_prompt(ask.removesuffix(" 0."), prefill="0.") if instruct else ask
        digits = sorted(i for t, i in engine.tokenizer.get_vocab().items() if t.isdecimal())
        chosen = _greedy(plain, engine.encode(prompt), digits, 2, set())
        want = float("0." + "".join(engine.tokenizer.convert_ids_to_tokens(chosen)))
        assert engine.numeric([NumericRequest(prompt), NumericRequest(prompt + " ")])[0] == want
        reply = engine.generate([ReplyRequest(prompt, max_new_tokens=5)])[0]
        greedy = _greedy(plain, engine.encode(prompt), None, 5, engine.decoder.stop_ids())
        assert reply == engine.tokenizer.decode(
            [t for t in greedy if t not in engine.decoder.stop_ids()], skip_special_tokens=True
        )
        got = engine.numeric_chat([NumericReplyRequest(prompt, max_new_tokens=5)])
        assert len(got) == 1 and (math.isnan(got[0]) or 0 <= got[0] <= 1)


def test_every_study_prompt_builder_runs_through_the_family(family: tuple[str, Path]) -> None:
    """riskscores (both kinds), labelbias (plain and chat), nextword (samples, both chat
    modes) and decisionrisk (log-likelihoods and verbal replies), base and instruct."""
    from unsure.decisionrisk.infer import generative_scorer
    from unsure.labelbias.scoring import chat_wrapper as labelbias_chat
    from unsure.labelbias.scoring import plain as labelbias_plain
    from unsure.labelbias.scoring import score_contexts
    from unsure.nextword.inference import chat_scorer, sample_scorer
    from unsure.riskscores.scoring import make_scorer
    from unsure.riskscores.tasks import FOLKTABLES

    _, path = family
    rows = pd.DataFrame({"row_id": ["a", "b"], "text": ["- Age is: 50 years old.", "- Age is: 23 years old."]})
    mcqa = pd.DataFrame(
        {"row_id": ["q"], "prompt": ["Which is a fruit?"], "choices": [("apple", "stone")]},
    )
    positions = pd.DataFrame(
        {"row_id": ["1-1"], "text_id": [1], "word_num": [5], "context": ["There are now rumblings that"]}
    )
    for instruct in (False, True):
        engine = _engine(path, instruct=instruct)
        for kind in ("multiple_choice", "numeric"):
            scorer = make_scorer(
                engine,
                FOLKTABLES["ACSIncome"],
                kind,
                year=2018,
                instruct=instruct,
                both_orders=True,
                protocol="corrected",
            )
            p_hat = scorer(rows)["p_hat"].to_numpy()
            assert ((p_hat >= 0) & (p_hat <= 1)).all()
        wrap = labelbias_chat(engine) if instruct else labelbias_plain
        dists = score_contexts(engine, [wrap("Definition: Is it positive?\n\nInput: great.\nOutput:")], [("Yes", "No")])
        assert dists[0].sum() == pytest.approx(1.0)
        decided = generative_scorer(engine, instruct=instruct, normalize=True, max_new_tokens=6)(mcqa)
        assert sum(decided["loglik"][0]) == pytest.approx(1.0)
        if instruct:
            for mode in ("single", "list"):
                out = chat_scorer(engine, mode=mode, n=3, max_new_tokens=4)(positions)  # type: ignore[arg-type]
                assert len(out) == 1
        else:
            out = sample_scorer(engine, n=5, temperature=1.0, seed=0)(positions)
            assert len(out) == 1


# ------------------------------------------------------------------ word sampling, exact


def _fixed_distribution_model(tokenizer_dir: Path, out: Path, probs: dict[str, float]) -> Path:
    """A Llama whose next-token distribution is ``probs`` after every context, with the real tokenizer files."""
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
        for param_name, param in model.named_parameters():
            if param_name.endswith(("o_proj.weight", "down_proj.weight")):
                param.zero_()
        model.model.embed_tokens.weight.fill_(1.0)
        model.lm_head.weight.copy_(logits[:, None].expand(-1, hidden) / hidden)
    model.save_pretrained(out)
    for real in tokenizer_dir.iterdir():
        if real.name in TOKENIZER_FILES - {"generation_config.json"}:
            shutil.copyfile(real, out / real.name)
    return out


@pytest.mark.parametrize("name", list(FAMILIES))
def test_sampled_words_follow_the_exact_distribution(name: str, tmp_path: Path) -> None:
    """Word-start pieces `` dog``/`` cat``, the continuing piece ``s`` and ``.``, drawn iid:
    the first words and the rejected samples (those starting with ``.``) are exact."""
    folder = _folder(name)
    marker, _ = FAMILIES[name]
    starts = {marker + "dog": "dog", marker + "cat": "cat"}
    vocab = AutoTokenizer.from_pretrained(folder).get_vocab()
    assert all(t in vocab for t in [*starts, "s", "."]), name
    probs = {**dict.fromkeys(starts, 0.25), "s": 0.3, ".": 0.2}
    probs = {t: v / sum(probs.values()) for t, v in probs.items()}
    engine = HFEngine(str(_fixed_distribution_model(folder, tmp_path / "model", probs)))
    n, max_tokens = 3000, 10
    got = engine.sample_words([WordSamplingRequest("The", n=n, seed=3, max_new_tokens=max_tokens)])[0]
    exact: dict[str, float] = {}
    for token, word in [*starts.items(), ("s", "s")]:  # a sample starting with "s" is the word "s", "ss", ...
        head = word if token != "s" else ""
        for k in range(max_tokens - 1):
            w = head + "s" * (k + (token == "s"))
            exact[w] = exact.get(w, 0.0) + probs[token] * probs["s"] ** k * (1 - probs["s"])
    words, counts = np.unique(got.words, return_counts=True)
    assert set(words) <= set(exact), set(words) - set(exact)
    top = sorted(exact, key=lambda w: exact[w], reverse=True)[:6]
    observed = [int(counts[words == w].sum()) for w in top]
    expected = [exact[w] * n for w in top]
    observed.append(n - sum(observed) - got.rejected)
    expected.append(n * sum(exact.values()) - sum(expected))
    observed.append(got.rejected)
    expected.append(n * (1 - sum(exact.values())))
    assert chisquare(observed, expected).pvalue > 1e-3


# ------------------------------------------------------------------ the encoder family


def test_the_zoo_builds_roberta_from_its_tokenizer_folder_without_config_json(tmp_path: Path) -> None:
    """roberta-base's folder has no config.json: ``model_type: roberta`` makes a multiple-choice
    encoder with its vocabulary and roberta's special ids (padding 1, which its position ids
    count from), which the decisionrisk encoder fine-tunes and scores."""
    from unsure.engine.encoder import MultipleChoiceEncoder

    folder = _folder("roberta-base")
    spec = ZooModel(tokenizer=str(folder), model_type="roberta", hidden_size=32, layers=2, heads=4)
    build("roberta", spec, [], tmp_path / "roberta", zoo_seed=0)
    config = AutoConfig.from_pretrained(tmp_path / "roberta")
    assert config.architectures == ["RobertaForMultipleChoice"]
    assert (config.vocab_size, config.pad_token_id, config.bos_token_id, config.eos_token_id) == (50265, 1, 0, 2)
    for real in folder.iterdir():
        assert (tmp_path / "roberta" / real.name).read_bytes() == real.read_bytes(), real.name
    probs = MultipleChoiceEncoder(str(tmp_path / "roberta"), max_length=64).probs(
        ["Which is a fruit?", "Pick one."], [["apple", "stone"], ["x", "y"]]
    )
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
    with pytest.raises(FileNotFoundError, match="model_type"):
        build(
            "bare", ZooModel(tokenizer=str(folder), hidden_size=32, layers=2, heads=4), [], tmp_path / "b", zoo_seed=0
        )


def test_roberta_tokenizer_drives_the_multiple_choice_encoder(tmp_path: Path) -> None:
    """decisionrisk's discriminative model: the real roberta tokenizer with a tiny
    RobertaForMultipleChoice; every choice is scored and the pair encoding has
    roberta's ``<s> A </s></s> B </s>`` layout."""
    from transformers import RobertaConfig, RobertaForMultipleChoice

    from unsure.engine.encoder import MultipleChoiceEncoder

    folder = _folder("roberta-base")
    tok = AutoTokenizer.from_pretrained(folder)
    config = RobertaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=130,
    )
    torch.manual_seed(0)
    RobertaForMultipleChoice(config).save_pretrained(tmp_path)
    for real in folder.iterdir():
        shutil.copyfile(real, tmp_path / real.name)
    encoder = MultipleChoiceEncoder(str(tmp_path), max_length=64)
    batch = encoder.batch(["Which is a fruit?"], [["apple", "stone"]])
    ids = batch["input_ids"][0, 0].tolist()
    assert ids[0] == 0 and ids.count(2) >= 3  # <s> ... </s></s> ... </s>
    probs = encoder.probs(["Which is a fruit?", "Pick one."], [["apple", "stone"], ["x", "y"]])
    assert probs.shape == (2, 2)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0)
