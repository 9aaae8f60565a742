"""The local model zoo: real architectures, real tokenizer families, reproducible bytes."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForMultipleChoice, AutoTokenizer

from unsure.config import ZooModel
from unsure.zoo.build import build, training_texts

SPECS = {
    "gpt2": ZooModel(architecture="gpt2", vocab_size=600, hidden_size=32, layers=1, heads=2),
    "llama": ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2),
    "llama-chat": ZooModel(architecture="llama", vocab_size=600, hidden_size=32, layers=1, heads=2, chat=True),
    "bert": ZooModel(architecture="bert", vocab_size=600, hidden_size=32, layers=1, heads=2),
}

BUILD = """
import sys
from unsure.config import ZooModel
from unsure.zoo.build import build, training_texts
spec = ZooModel.model_validate_json(sys.argv[1])
build(sys.argv[2], spec, training_texts(seed=0, n_sentences=2000), sys.argv[3], zoo_seed=0)
"""


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zoo")
    texts = training_texts(seed=0, n_sentences=2000)
    for name, spec in SPECS.items():
        build(name, spec, texts, root / name, zoo_seed=0)
    return {name: root / name for name in SPECS}


@pytest.mark.parametrize("name", list(SPECS))
def test_builds_are_byte_identical_across_processes(name: str, built: dict[str, Path], tmp_path: Path) -> None:
    # A fresh interpreter: hash seeds differ, as they do between two `make demo` runs.
    out = tmp_path / name
    subprocess.run([sys.executable, "-c", BUILD, SPECS[name].model_dump_json(), name, str(out)], check=True)
    assert digest(out) == digest(built[name])


def test_another_seed_gives_other_weights(built: dict[str, Path], tmp_path: Path) -> None:
    build("gpt2", SPECS["gpt2"], training_texts(seed=0, n_sentences=2000), tmp_path / "g", zoo_seed=1)
    assert digest(tmp_path / "g")["model.safetensors"] != digest(built["gpt2"])["model.safetensors"]


@pytest.mark.parametrize(("name", "marker"), [("gpt2", "Ġ"), ("llama", "▁"), ("bert", "##")])
def test_tokenizer_family(name: str, marker: str, built: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(built[name])
    pieces = tok.tokenize("The survey respondent answered quickly: unbelievably so.")
    assert any(marker in p for p in pieces), pieces
    ids = tok("Answer: A é")["input_ids"]
    if name != "bert":  # byte-level and byte-fallback tokenizers round-trip any text
        assert tok.decode(ids, skip_special_tokens=True).strip() == "Answer: A é"


@pytest.mark.parametrize("name", ["gpt2", "llama", "llama-chat"])
def test_causal_models_load_by_path_and_score(name: str, built: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(built[name])
    model = AutoModelForCausalLM.from_pretrained(built[name])
    ids = torch.tensor([tok("the house is")["input_ids"]])
    logits = model(ids).logits
    assert logits.shape == (1, ids.shape[1], len(tok))
    assert torch.isfinite(logits).all()


def test_llama_adds_bos_like_llama(built: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(built["llama"])
    assert tok("hello")["input_ids"][0] == tok.bos_token_id


def test_chat_variant_has_a_chat_template(built: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(built["llama-chat"])
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Is it A or B?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>assistant\n")
    assert tok.convert_tokens_to_ids("<|im_end|>") == tok.eos_token_id
    assert AutoTokenizer.from_pretrained(built["llama"]).chat_template is None


def test_instruct_variant_is_its_base_with_the_chat_template(built: dict[str, Path], tmp_path: Path) -> None:
    """A variant of a base model keeps its trained weights and vocabulary, and gains the chat
    template's two tokens (seeded: the same bytes twice), the end of turn as its end of text."""
    spec = ZooModel(base="llama", chat=True)
    for out in ("a", "b"):
        build("llama-chat", spec, [], tmp_path / out, zoo_seed=0, base=built["llama"])
    assert digest(tmp_path / "a") == digest(tmp_path / "b")
    tok = AutoTokenizer.from_pretrained(tmp_path / "a")
    base_tok = AutoTokenizer.from_pretrained(built["llama"])
    assert len(tok) == len(base_tok) + 2 and tok.get_vocab().items() >= base_tok.get_vocab().items()
    assert tok.apply_chat_template([{"role": "user", "content": "A or B?"}], tokenize=False).endswith("<|im_end|>\n")
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "a")
    base = AutoModelForCausalLM.from_pretrained(built["llama"])
    assert model.config.eos_token_id == model.generation_config.eos_token_id == tok.eos_token_id
    assert tok.eos_token == "<|im_end|>"
    for new, old in [(model.get_input_embeddings(), base.get_input_embeddings()), (model.lm_head, base.lm_head)]:
        assert torch.equal(new.weight[: len(base_tok)], old.weight)
        assert torch.isfinite(new.weight[len(base_tok) :]).all()
    assert torch.equal(model.model.layers[0].mlp.up_proj.weight, base.model.layers[0].mlp.up_proj.weight)
    with pytest.raises(ValueError, match="needs its built folder"):
        build("llama-chat", spec, [], tmp_path / "c", zoo_seed=0)


def test_encoder_is_a_multiple_choice_model(built: dict[str, Path]) -> None:
    tok = AutoTokenizer.from_pretrained(built["bert"])
    model = AutoModelForMultipleChoice.from_pretrained(built["bert"])
    enc = tok(["a dog", "a dog"], ["runs", "sleeps"], return_tensors="pt", padding=True)
    out = model(**{k: v.unsqueeze(0) for k, v in enc.items()})
    assert out.logits.shape == (1, 2)
