"""Building the local model zoo: tiny models of real architectures, random or briefly trained.

No model hub is reachable in CI or on an air-gapped laptop, so the demo builds
its own: a GPT-2 (byte-level BPE), a Llama (SentencePiece-style BPE with byte
fallback, optionally with a chat template) and a BERT encoder (WordPiece) for
multiple choice. Each tokenizer is trained with ``tokenizers`` on text the
project generates, everything is saved with ``save_pretrained`` and is loaded
back through exactly the ``from_pretrained`` path a hub id uses. The same seed
gives byte-identical files.
"""

from __future__ import annotations

import json
import shutil
import string
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMultipleChoice,
    AutoTokenizer,
    BertConfig,
    BertTokenizer,
    GPT2Config,
    GPT2Tokenizer,
    LlamaConfig,
    LlamaTokenizer,
    PretrainedConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from unsure.config import CorpusStudy, ZooModel, ZooTraining
from unsure.engine.pretrained import TOKENIZER_FILES
from unsure.generate.text import sentences
from unsure.io import atomic_dir
from unsure.zoo.corpus.riskscores import tokenizer_texts
from unsure.zoo.seeds import model_seed
from unsure.zoo.training import train_folder

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""A ChatML template: what the zoo's instruct variants are "tuned" to."""

CHAT_TOKENS = ["<|im_start|>", "<|im_end|>"]


PROMPT_SNIPPETS = [
    "Answer: A",
    "Answer: B",
    "Answer (between 0 and 1): 0.",
    "A. Yes B. No",
    "0 1 2 3 4 5 6 7 8 9 10 25 50 75 100",
    "- Age is: 50 years old.",
    "Definition: Positive Example: Negative Example: Input: Output:",
]
"""Pieces of the studies' prompts, so that the tokenizers learn them as real ones do."""


def training_texts(*, seed: int, n_sentences: int) -> list[str]:
    """The tokenizer training text: generated English, the prompts' recurring pieces and
    risk-score prompts (one per 20 sentences), whose Census words generated English lacks."""
    prompts = tokenizer_texts(n=max(50, n_sentences // 20), seed=model_seed(seed, "tokenizer:riskscores"))
    return [*sentences(n_sentences, seed=seed), *PROMPT_SNIPPETS, *prompts]


def train_tokenizer(spec: ZooModel, texts: Sequence[str]) -> PreTrainedTokenizerBase:
    """Train the tokenizer family of ``spec.architecture`` on ``texts``."""
    if spec.architecture == "gpt2":
        tokenizer = GPT2Tokenizer().train_new_from_iterator(texts, vocab_size=spec.vocab_size)
    elif spec.architecture == "bert":
        tokenizer = _train_bert_tokenizer(texts, spec.vocab_size)
    else:
        tokenizer = _train_llama_tokenizer(texts, spec.vocab_size)
    if spec.chat:
        add_chat_template(tokenizer)
    return tokenizer


def add_chat_template(tokenizer: PreTrainedTokenizerBase) -> None:
    """The zoo's ChatML template, its two tokens, and its end of turn as the end of text."""
    tokenizer.add_special_tokens({"additional_special_tokens": CHAT_TOKENS})
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.eos_token = "<|im_end|>"


def instruct_variant(base: str | Path, out_dir: str | Path, *, seed: int) -> None:
    """A base model's trained weights and tokenizer with the chat template added, into ``out_dir``:
    the two new tokens' embeddings drawn around the trained ones' mean (transformers' resizing,
    seeded), and their end of turn the model's end of text."""
    tokenizer = AutoTokenizer.from_pretrained(base)
    if tokenizer.chat_template is not None:
        raise ValueError(f"zoo base model {base} already has a chat template")
    add_chat_template(tokenizer)
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    torch.manual_seed(seed)
    model.resize_token_embeddings(len(tokenizer))
    model.config.eos_token_id = model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.eval()
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def _train_bert_tokenizer(texts: Sequence[str], vocab_size: int) -> PreTrainedTokenizerBase:
    """WordPiece with BERT's normaliser and pre-tokeniser.

    The vocabulary is every character seen (word-initial and ``##`` forms) plus
    the most frequent words, ties broken alphabetically. ``tokenizers``'
    WordPiece trainer breaks frequency ties in hash order, which differs between
    processes and would make two builds differ.
    """
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend = BertTokenizer(vocab={t: i for i, t in enumerate(specials)}).backend_tokenizer
    assert backend.normalizer is not None and backend.pre_tokenizer is not None
    counts: Counter[str] = Counter()
    for text in texts:
        normalised = backend.normalizer.normalize_str(text)
        counts.update(word for word, _ in backend.pre_tokenizer.pre_tokenize_str(normalised))
    printable = backend.normalizer.normalize_str(string.ascii_letters + string.digits + string.punctuation)
    chars = sorted({c for word in counts for c in word} | set(printable))
    vocab: dict[str, int] = {}
    for token in [*specials, *chars, *(f"##{c}" for c in chars)]:
        vocab.setdefault(token, len(vocab))
    for word, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= vocab_size:
            break
        vocab.setdefault(word, len(vocab))
    return BertTokenizer(vocab=vocab)


def _train_llama_tokenizer(texts: Sequence[str], vocab_size: int) -> PreTrainedTokenizerBase:
    """SentencePiece-style BPE: merges never cross a word's leading ``▁``, and
    the 256 byte tokens come right after the specials, as in Llama 2."""
    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{i:02X}>" for i in range(256)]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=max(vocab_size - len(byte_tokens), len(specials) + 1), special_tokens=specials, show_progress=False
    )
    bpe.train_from_iterator(texts, trainer)
    trained = json.loads(bpe.to_str())["model"]
    vocab: dict[str, int] = {}
    for token in [*specials, *byte_tokens, *sorted(trained["vocab"], key=trained["vocab"].__getitem__)]:
        vocab.setdefault(token, len(vocab))
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    return LlamaTokenizer(vocab=vocab, merges=merges, add_bos_token=True)


def model_config(spec: ZooModel, tokenizer: PreTrainedTokenizerBase) -> PretrainedConfig:
    """The architecture's own config class, sized by ``spec``."""
    vocab = len(tokenizer)
    inner = spec.intermediate_size or 4 * spec.hidden_size
    if spec.architecture == "gpt2":
        eos = tokenizer.eos_token_id
        return GPT2Config(
            vocab_size=vocab,
            n_positions=spec.max_positions,
            n_embd=spec.hidden_size,
            n_layer=spec.layers,
            n_head=spec.heads,
            n_inner=inner,
            bos_token_id=eos,
            eos_token_id=eos,
        )
    if spec.architecture == "llama":
        return LlamaConfig(
            vocab_size=vocab,
            hidden_size=spec.hidden_size,
            intermediate_size=inner,
            num_hidden_layers=spec.layers,
            num_attention_heads=spec.heads,
            num_key_value_heads=max(1, spec.heads // 2),
            max_position_embeddings=spec.max_positions,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            tie_word_embeddings=False,
        )
    return BertConfig(
        vocab_size=vocab,
        hidden_size=spec.hidden_size,
        num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads,
        intermediate_size=inner,
        max_position_embeddings=spec.max_positions,
        pad_token_id=tokenizer.pad_token_id,
    )


ENCODER_TYPES = frozenset({"bert", "roberta", "xlm-roberta", "distilbert", "deberta", "deberta-v2", "electra"})
"""Model types a zoo entry builds as a multiple-choice encoder (every other type: a causal LM)."""


FEED_FORWARD_KEYS = ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim")
"""Config keys of the feed-forward width (GPT-2: ``n_inner``; Falcon: ``ffn_hidden_size``; OPT: ``ffn_dim``)."""


def real_config(folder: str | Path, spec: ZooModel) -> PretrainedConfig:
    """The full-size config of a tokenizer folder's model: its ``config.json``, as
    ``spec.model_type`` when that names another architecture (its options carried over,
    the new type's own defaults for the rest), or ``spec.model_type``'s defaults with the
    tokenizer's vocabulary and special token ids when the folder has no ``config.json``."""
    path = Path(folder) / "config.json"
    if path.is_file():
        if spec.model_type is None:
            return AutoConfig.from_pretrained(folder)
        raw = json.loads(path.read_text(encoding="utf-8"))
        for key in ("model_type", "architectures", "auto_map", "transformers_version"):
            raw.pop(key, None)
        return AutoConfig.for_model(spec.model_type, **raw)
    if spec.model_type is None:
        raise FileNotFoundError(f"tokenizer folder {folder} has no config.json: name the architecture with model_type")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = {f"{k}_token_id": getattr(tokenizer, f"{k}_token_id") for k in ("bos", "eos", "pad")}
    # a special token the tokenizer files leave undeclared keeps the architecture's default id
    return AutoConfig.for_model(
        spec.model_type, vocab_size=len(tokenizer), **{k: v for k, v in ids.items() if v is not None}
    )


def shrunk_config(folder: str | Path, spec: ZooModel) -> PretrainedConfig:
    """A real model's ``config.json`` (:func:`real_config`) at ``spec``'s sizes: same
    architecture, vocabulary, special token ids, attention layout (grouped or multi-query
    keys stay so) and options.

    ``auto_map`` is dropped: the model is transformers' own class of that ``model_type``,
    as the engine loads it without ``trust_remote_code``.
    """
    config = real_config(folder, spec)
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None)
    sizes: dict[str, Any] = {
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.layers,
        "num_attention_heads": spec.heads,
    }
    if kv is not None:
        sizes["num_key_value_heads"] = max(1, spec.heads * kv // heads)
    for key in FEED_FORWARD_KEYS:
        # also a width the config class derived from the real hidden size when it was read
        if getattr(config, key, None) is not None or (key == "n_inner" and config.model_type == "gpt2"):
            sizes[key] = spec.intermediate_size or 4 * spec.hidden_size
    if getattr(config, "head_dim", None) is not None and not isinstance(
        getattr(type(config), "head_dim", None), property
    ):
        sizes["head_dim"] = spec.hidden_size // spec.heads
    for key, value in sizes.items():
        setattr(config, key, value)
    if hasattr(config, "auto_map"):
        del config.auto_map
    config.architectures = None
    config._name_or_path = ""
    return config


def build_from_tokenizer(name: str, spec: ZooModel, out_dir: str | Path, *, zoo_seed: int) -> None:
    """A tiny model of a real family: its shrunk config, seeded weights, and the folder's
    tokenizer and generation files copied unchanged (re-saving could alter them), into
    ``out_dir`` (the caller makes it atomic)."""
    assert spec.tokenizer is not None
    folder = Path(spec.tokenizer)
    if not folder.is_dir():
        raise FileNotFoundError(f"zoo model {name!r}: tokenizer folder {folder} does not exist")
    if not (folder / "config.json").is_file() and spec.model_type is None:
        raise FileNotFoundError(
            f"zoo model {name!r}: tokenizer folder {folder} has no config.json (name the architecture with model_type)"
        )
    config = shrunk_config(folder, spec)
    torch.manual_seed(model_seed(zoo_seed, name))
    auto: Any = AutoModelForMultipleChoice if config.model_type in ENCODER_TYPES else AutoModelForCausalLM
    model: PreTrainedModel = auto.from_config(config, dtype=torch.float32)
    model.eval()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.name in TOKENIZER_FILES:
            shutil.copyfile(path, out / path.name)


def build(
    name: str,
    spec: ZooModel,
    texts: Sequence[str],
    out_dir: str | Path,
    *,
    zoo_seed: int,
    training: ZooTraining | None = None,
    studies: Sequence[CorpusStudy] = (),
    base: str | Path | None = None,
) -> None:
    """Train the tokenizer, initialise the model from a seed (or take the built ``base`` folder
    of ``spec.base``), train a causal LM briefly on ``studies``' known truth when ``training``
    is given (:mod:`unsure.zoo.training`), save everything atomically."""
    if (spec.base is None) != (base is None):
        raise ValueError(f"zoo model {name!r}: base {spec.base!r} needs its built folder (given: {base})")
    with atomic_dir(out_dir) as tmp:
        if base is not None:
            instruct_variant(base, tmp, seed=model_seed(zoo_seed, name))
        elif spec.tokenizer is not None:
            build_from_tokenizer(name, spec, tmp, zoo_seed=zoo_seed)
        else:
            tokenizer = train_tokenizer(spec, texts)
            config = model_config(spec, tokenizer)
            torch.manual_seed(model_seed(zoo_seed, name))
            auto: Any = AutoModelForMultipleChoice if spec.architecture == "bert" else AutoModelForCausalLM
            model: PreTrainedModel = auto.from_config(config, dtype=torch.float32)
            model.eval()
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
        if training is not None and studies and not is_encoder(tmp):
            train_folder(tmp, training, studies, seed=model_seed(zoo_seed, f"training:{name}"))


def is_encoder(folder: str | Path) -> bool:
    """Whether a saved zoo model is a multiple-choice encoder (not trained by the zoo)."""
    model_type = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))["model_type"]
    return model_type in ENCODER_TYPES
