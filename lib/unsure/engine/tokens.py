"""Text to token ids as a model was trained to read it: BOS rules, lm-eval's context/continuation
split, chat templates, answer letters under their space markers."""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

SPACE_MARKERS = ("", " ", "_", "\u2581", "\u0120", "\u010a")
"""Prefixes under which tokenizers store an answer letter: none, a space,
SentencePiece's ``▁``, byte-level BPE's ``Ġ`` (space) and ``Ċ`` (newline)."""

PLAIN_CHAT_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] + '\n\n' }}"
    "{% elif m['role'] == 'user' %}{{ 'User: ' + m['content'] + '\n' }}"
    "{% else %}{{ 'Assistant: ' + m['content'] + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}"
)
"""The chat template of an instruct model whose tokenizer ships none (Falcon-instruct):
plain ``User:``/``Assistant:`` turns, a system prompt as the opening paragraph."""


LINE_SPLITTERS = (
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
)
"""Pre-tokenizer patterns that, like byte-level BPE's own (GPT-2's), end a piece at every newline that
other than whitespace follows, and decide the pieces before it from the text up to that character:
Llama-3's. No alternative matches a newline and then such a character, greedy runs stop at it, and the
one lookahead (``\\s+(?!\\S)``) reads one character."""
INERT_PIECES = ({"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated", "invert": False},)
"""Pre-tokenizer steps (besides Punctuation, Digits and Metaspace) that split pieces only at characters
that are neither a newline nor what follows one at a cut: Falcon's groups of three digits."""


def line_cuts_exact(backend: Any) -> bool:
    """Whether a Rust tokenizer tokenises the text from a line that begins with other than whitespace as
    it would the same text after a lone newline: ``ids(text) == ids(text[:c]) + tail`` where
    ``text[c - 1] == "\\n"`` and ``not text[c].isspace()``, ``tail`` being the ids of ``"\\n" + text[c:]``
    less those of ``"\\n"``. Then a text's ids are its lines' (:func:`line_pieces`), each found alone.

    It holds for BPE (no dropout, no word affixes) when (a) the normaliser only prepends or replaces
    strings without a newline; (b) the pre-tokenizer's steps split but never join; (c) one of them ends a
    piece at every such line start (byte-level BPE's GPT-2 pattern, :data:`LINE_SPLITTERS`), or, with no
    pre-tokenizer that splits there (SentencePiece-style BPE over the whole text, Llama-2's), no
    vocabulary token holds a newline followed by anything else, so that no merge crosses the line start
    and the merges on either side of it are that side's alone; and (d) no added token holds a newline or
    strips the whitespace beside it. Every real tokenizer of the papers' causal LMs qualifies (tested on
    their files); any other is tokenised whole."""
    model = backend.model
    if type(model).__name__ != "BPE" or model.dropout or model.continuing_subword_prefix or model.end_of_word_suffix:
        return False
    normaliser = json.loads(backend.normalizer.__getstate__()) if backend.normalizer is not None else None
    steps = [normaliser] if normaliser else []
    while steps and steps[-1]["type"] == "Sequence":
        steps = steps[:-1] + steps[-1]["normalizers"]
    for step in steps:
        if step["type"] == "Replace" and "String" in step["pattern"]:
            if "\n" in step["pattern"]["String"] + step["content"]:
                return False
        elif step["type"] != "Prepend" or "\n" in step["prepend"]:
            return False
    pre = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else None
    pieces = [] if pre is None else pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    cuts = byte_level = False
    for step in pieces:
        kind = step["type"]
        if kind == "ByteLevel":
            if step["add_prefix_space"]:
                return False
            byte_level = True
            cuts = cuts or step.get("use_regex", True)
        elif kind == "Split" and step["pattern"].get("Regex") in LINE_SPLITTERS and step["behavior"] == "Isolated":
            cuts = cuts or not step["invert"]
        elif kind == "Split" and "String" in step["pattern"]:
            if "\n" in step["pattern"]["String"]:  # a literal without one never spans a line start
                return False
        elif kind == "Metaspace":
            if step["prepend_scheme"] not in ("first", "never"):
                return False
        elif kind not in ("Punctuation", "Digits") and step not in INERT_PIECES:
            return False
    if not cuts:
        if byte_level:  # its vocabulary spells a newline as another character
            return False
        if any("\n" in token.rstrip("\n") for token in backend.get_vocab()):
            return False
    for added in backend.get_added_tokens_decoder().values():
        if "\n" in added.content or added.rstrip or added.lstrip:
            return False
    return True


ANCHOR = "\n"
"""What each line after a text's first is tokenised after (:meth:`Codec.tokens_many`), its ids then dropped."""


def line_pieces(text: str, kept: str = "") -> list[str]:
    """``text`` cut before every line that begins with a character other than whitespace and ``kept``
    (the first characters of added tokens: a text's pieces between them are tokenised apart, so what
    decides whether the newline ends a piece is the whole token); the newline stays with the text before
    it. The pieces join to ``text``."""
    *lines, last = _line_starts(kept).split(text)
    return [line + "\n" for line in lines] + [last]


@functools.cache
def _line_starts(kept: str) -> re.Pattern[str]:
    return re.compile(r"\n(?=[^\s" + re.escape(kept) + "])")


def last_line_start(text: str, kept: str = "") -> int:
    """Where the last of :func:`line_pieces` of ``text`` starts (0: it has one), found from the end."""
    end = len(text)
    while (cut := text.rfind("\n", 0, end)) >= 0:
        after = text[cut + 1 : cut + 2]
        if after and not after.isspace() and after not in kept:  # str.isspace is re's \s
            return cut + 1
        end = cut
    return 0


def family_bos(config: Any) -> int | None:
    """The BOS id a model was trained with first on every text: its config's
    ``bos_token_id`` where that is a token of its own. Where BOS is the EOS (GPT-2,
    Falcon: a document separator, not a start token) or absent, ``None``."""
    bos = getattr(config, "bos_token_id", None)
    eos = getattr(config, "eos_token_id", None)
    eos_ids = set(eos) if isinstance(eos, list) else {eos}
    return None if bos is None or bos in eos_ids else int(bos)


class Codec:
    """A model's tokenizer with the rules the engine reads text by.

    ``config`` is the model's (its BOS rule); ``add_special_tokens=False`` leaves
    plain text without BOS (a model entry's choice).
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        config: Any,
        *,
        model_id: str,
        add_special_tokens: bool = True,
    ) -> None:
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.add_special_tokens = add_special_tokens
        self._bos = family_bos(config)
        self._head: str | None = None
        self._system_turn: bool | None = None
        self._vocab: dict[str, int] | None = None
        self._digits: list[int] | None = None
        self._line_cuts: bool | None = None
        self._line_cuts_special = False
        self._added_starts = ""
        prefix = tokenizer.bos_token_id
        self.prefix_id: int | None = prefix if prefix is not None else tokenizer.eos_token_id
        """The token an empty context becomes (BOS, else EOS)."""

    @property
    def pad_id(self) -> int:
        """Any id for padding: attention masks hide it."""
        return int(self.tokenizer.pad_token_id or self.prefix_id or 0)

    def encode(self, text: str, *, special: bool | None = None) -> list[int]:
        """Token ids of a context (with the tokenizer's BOS unless told otherwise).

        An empty context becomes the BOS (or EOS) token alone, as in
        lm-evaluation-harness, so that the first token has something to follow.
        """
        ids = self.tokens(text, special)
        if ids:
            return ids
        if self.prefix_id is None:
            raise ValueError(f"{self.model_id}: empty context and the tokenizer has no BOS or EOS token")
        return [self.prefix_id]

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """:meth:`encode` of each text, the tokenizer called on the whole list at once."""
        return [ids or self.encode(text) for text, ids in zip(texts, self.tokens_many(texts), strict=True)]

    def tokens(self, text: str, special: bool | None = None) -> list[int]:
        """Token ids of ``text`` as the model reads it, possibly none."""
        return self.tokens_many([text], special)[0]

    def tokens_many(self, texts: Sequence[str], special: bool | None = None) -> list[list[int]]:
        """:meth:`tokens` of each text: one tokenizer call per kind of text (plain, chat-templated),
        whose Rust core splits the list over the host's cores; a repeated text is tokenised once, and
        so is a repeated line where the tokenizer allows (:meth:`_line_ids`)."""
        flags = [self._flag(t) for t in texts] if special is None else [special] * len(texts)
        out: list[list[int]] = [[] for _ in texts]
        for flag in (True, False):
            idx = [i for i, f in enumerate(flags) if f is flag]
            if not idx:
                continue
            distinct = list(dict.fromkeys(texts[i] for i in idx))
            ids = self._line_ids(distinct, special=flag)
            rows = {text: self._with_bos(row) if flag else row for text, row in zip(distinct, ids, strict=True)}
            for i in idx:
                out[i] = list(rows[texts[i]])
        return out

    def _ids(self, texts: list[str], *, special: bool) -> list[list[int]]:
        """The tokenizer's ids of ``texts``. A Rust tokenizer with no truncation or padding set is
        asked for the ids alone (``encode_batch_fast``: no character offsets), which gives the
        ids of ``tokenizer(texts)`` for a sixth less work; any other through ``tokenizer(texts)``."""
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        if backend is not None and backend.truncation is None and backend.padding is None:
            return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=special)]
        # the ids only: converting each text's attention mask and type ids to lists too cost a tenth more
        ids: list[list[int]] = self.tokenizer(
            texts, add_special_tokens=special, return_attention_mask=False, return_token_type_ids=False
        )["input_ids"]
        return ids

    def _line_ids(self, texts: list[str], *, special: bool) -> list[list[int]]:
        """:meth:`_ids` of ``texts``, each line that begins with other than whitespace tokenised once per
        call (exact where :func:`line_cuts_exact` says so): a census row's lines recur across rows, a
        task's demonstrations across its prompts and its labels' texts.

        A line is tokenised after a lone newline, and with the first character of the line after it
        (whether a newline ends a piece of text can depend on what follows it); the ids of both are then
        dropped. A text with a line whose ids do not begin and end with theirs is tokenised whole."""
        if not self._cuts_lines(special):
            return self._ids(texts, special=special)
        kept = self._added_starts
        firsts, rests = [], []  # per text: its first line, and its other lines after the newline
        # each first line's and each line's text: the next line's first character it ends with, if any
        head_ends: dict[str, str] = {}
        line_ends: dict[str, str] = {}
        for text in texts:
            pieces = line_pieces(text, kept)
            after = [p[0] for p in pieces[1:]] + [""]
            firsts.append(pieces[0] + after[0])
            head_ends[firsts[-1]] = after[0]
            rests.append([ANCHOR + p + a for p, a in zip(pieces[1:], after[1:], strict=True)])
            line_ends.update(zip(rests[-1], after[1:], strict=True))
        heads, lines = list(dict.fromkeys(firsts)), list(dict.fromkeys(chain.from_iterable(rests)))
        chars = list(dict.fromkeys(c for c in chain(head_ends.values(), line_ends.values()) if c))
        head_ids = self._ids(heads, special=special)
        anchor, *plain = self._ids([ANCHOR, *(ANCHOR + c for c in chars), *lines], special=False)
        n = len(anchor)
        after_ids = {c: ids[n:] for c, ids in zip(chars, plain[: len(chars)], strict=True) if ids[:n] == anchor}

        def kept_ids(keys: list[str], found: list[list[int]], ends: dict[str, str], front: int) -> dict[str, list[int]]:
            """Each key's ids without the newline's in front and the next line's character's after."""
            out = {}
            for key, ids in zip(keys, found, strict=True):
                end = ends[key]
                tail = after_ids.get(end, []) if end else []
                if (tail or not end) and ids[:front] == anchor[:front] and ids[len(ids) - len(tail) :] == tail:
                    out[key] = ids[front : len(ids) - len(tail)]
            return out

        head = kept_ids(heads, head_ids, head_ends, 0)
        line = kept_ids(lines, plain[len(chars) :], line_ends, n)
        out: list[list[int]] = []
        whole: list[int] = []  # texts with a line that did not keep its ids: tokenised whole
        for i, (first, rest) in enumerate(zip(firsts, rests, strict=True)):
            try:
                out.append(list(chain(head[first], *map(line.__getitem__, rest))))
            except KeyError:
                out.append([])
                whole.append(i)
        for i, ids in zip(whole, self._ids([texts[i] for i in whole], special=special), strict=True):
            out[i] = ids
        return out

    def _cuts_lines(self, special: bool) -> bool:
        """Whether texts may be tokenised line by line (:func:`line_cuts_exact`); with special tokens,
        only where the tokenizer adds them in front of a text, not after it."""
        if self._line_cuts is None:
            backend: Any = getattr(self.tokenizer, "backend_tokenizer", None)
            self._line_cuts = (
                backend is not None
                and backend.truncation is None
                and backend.padding is None
                and line_cuts_exact(backend)
            )
            if self._line_cuts:
                self._added_starts = "".join(
                    sorted({t.content[:1] for t in backend.get_added_tokens_decoder().values()})
                )
                plain, marked = self._ids([ANCHOR], special=False)[0], self._ids([ANCHOR], special=True)[0]
                self._line_cuts_special = marked[len(marked) - len(plain) :] == plain
        return self._line_cuts and (self._line_cuts_special or not special)

    def _with_bos(self, ids: list[int]) -> list[int]:
        if self._bos is not None and ids[:1] != [self._bos]:
            ids.insert(0, self._bos)  # e.g. Llama-3's April-2024 files add none to plain text
        return ids

    def split_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """Context and continuation ids, split as lm-evaluation-harness splits them.

        The pair is encoded whole and the context's ids are cut off its front,
        so a continuation starting with a space is tokenised as it would be in
        running text; trailing spaces of the context move to the continuation.
        """
        return self.split_pairs([(context, continuation)])[0]

    def split_pairs(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
        """:meth:`split_pair` of each pair, each distinct context tokenised once and each whole text's
        last line (:meth:`tokens_extended`)."""
        moved = []
        for context, continuation in pairs:
            n_spaces = len(context) - len(context.rstrip())
            if n_spaces:
                context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
            moved.append((context, continuation))
        distinct = list(dict.fromkeys(c for c, _ in moved))
        context_ids = dict(zip(distinct, self.tokens_many(distinct), strict=True))
        whole = self.tokens_extended(moved, context_ids)
        unknown = self._unknown_id()
        out = []
        for (context, continuation), full in zip(moved, whole, strict=True):
            ctx = context_ids[context]
            if ctx:
                cont = full[len(ctx) :]
            else:
                ctx, cont = self.encode(context), self.tokens(continuation, special=False)
            self._check_continuation(continuation, cont, unknown)
            out.append((list(ctx), cont))
        return out

    def tokens_extended(
        self, pairs: Sequence[tuple[str, str]], context_ids: Mapping[str, list[int]]
    ) -> list[list[int]]:
        """:meth:`tokens` of each ``context + more``, given each context's (``context_ids``).

        Where lines may be tokenised apart (:func:`line_cuts_exact`), only the context's last line is
        tokenised again, with ``more``, after a lone newline: the whole text's ids are the context's
        before that line and the new ones after the newline's. The context's own ids must end with
        its last line's, so tokenised (checked per context). A label after eight demonstrations is then
        tokenised with its prompt's last line, not with the whole prompt once per label.
        """
        out: list[list[int] | None] = [None] * len(pairs)
        if self._cuts_lines(False):
            cuts = {}  # each context's last line's start, where it has more than one
            for c in context_ids:
                if cut := last_line_start(c, self._added_starts):
                    cuts[c] = cut
            head = len(self._template_head())  # past it, more text cannot change whether a text is templated
            todo = [
                n
                for n, (c, k) in enumerate(pairs)
                if c in cuts and (len(c) >= head or self._flag(c + k) is self._flag(c))
            ]
            texts = [ANCHOR, *(ANCHOR + c[cut:] for c, cut in cuts.items())]
            texts += [ANCHOR + c[cuts[c] :] + k for c, k in (pairs[n] for n in todo)]
            distinct = list(dict.fromkeys(texts))
            tails = dict(zip(distinct, self._ids(distinct, special=False), strict=True))
            anchor = tails[ANCHOR]
            heads: dict[str, list[int]] = {}  # each context's ids before its last line, where its own agree
            for c, cut in cuts.items():
                ids, tail = context_ids[c], tails[ANCHOR + c[cut:]]
                own = len(tail) - len(anchor)  # the last line's ids
                if tail[: len(anchor)] == anchor and 0 < own < len(ids) and ids[-own:] == tail[len(anchor) :]:
                    heads[c] = ids[:-own]
            for n in todo:
                c, k = pairs[n]
                tail = tails[ANCHOR + c[cuts[c] :] + k]
                if c in heads and tail[: len(anchor)] == anchor:
                    out[n] = heads[c] + tail[len(anchor) :]
        rest = [n for n, ids in enumerate(out) if ids is None]
        for n, ids in zip(rest, self.tokens_many([pairs[n][0] + pairs[n][1] for n in rest]), strict=True):
            out[n] = ids
        return [ids for ids in out if ids is not None]

    def _flag(self, text: str) -> bool:
        """Whether ``text`` gets the tokenizer's special tokens (chat-templated text carries its own)."""
        return self.add_special_tokens and not self._is_templated(text)

    def _unknown_id(self) -> int | None:
        """The unknown token's id where text can encode to it (GPT-2's is its EOS, which text never
        encodes to); read once per call, as the tokenizer's special-token properties cost a lookup each."""
        tok = self.tokenizer
        unk = tok.unk_token_id
        return None if unk is None or unk in (tok.eos_token_id, tok.bos_token_id) else int(unk)

    def _check_continuation(self, continuation: str, cont: list[int], unknown: int | None) -> None:
        if not cont:
            raise ValueError(f"{self.model_id}: continuation {continuation!r} encodes to no tokens")
        if unknown is not None and unknown in cont:
            raise ValueError(  # else every unknown word would get the same probability
                f"{self.model_id}: continuation {continuation!r} holds text the tokenizer does not know (it "
                f"encodes to the unknown token {self.tokenizer.unk_token!r}); choose options the vocabulary can spell"
            )

    def chat_prompt(self, user: str, *, system: str | None = None, prefill: str = "") -> str:
        """A prompt through the model's chat template, ending where the reply begins."""
        if self.tokenizer.chat_template is None:
            raise ValueError(
                f"{self.model_id} has no chat template: set chat_template in its models: entry or instruct: false"
            )
        if system and not self._takes_system_turn():
            user, system = f"{system}\n\n{user}", None
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        return self._render(messages) + prefill

    def _render(self, messages: list[dict[str, str]]) -> str:
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    def _takes_system_turn(self) -> bool:
        """Whether the chat template accepts a system message; Gemma's and Mistral's raise,
        and a system prompt then opens the user turn instead (logged once)."""
        if self._system_turn is None:
            try:
                self._render([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
                self._system_turn = True
            except Exception as err:  # jinja2's TemplateError, raised by the template's raise_exception
                log.warning(
                    "%s: the chat template refuses a system turn (%s); it opens the user turn", self.model_id, err
                )
                self._system_turn = False
        return self._system_turn

    def _is_templated(self, prompt: str) -> bool:
        """Whether ``prompt`` came out of the chat template, which already holds every
        special token it needs (adding the BOS again would change the numbers)."""
        head = self._template_head()
        return bool(head) and prompt.startswith(head)

    def _template_head(self) -> str:
        """The text every rendering of the chat template starts with ("" without a template)."""
        if self._head is None:
            self._head = ""
            if self.tokenizer.chat_template is not None:
                probes = [[{"role": "user", "content": "\x00"}]]
                if self._takes_system_turn():
                    probes.append([{"role": "system", "content": "\x01"}, {"role": "user", "content": "\x00"}])
                renders = [self._render(m) for m in probes]
                self._head = os.path.commonprefix([r.split("\x00")[0].split("\x01")[0] for r in renders])  # noqa: RUF071
            bos = self.tokenizer.bos_token
            if not self._head and bos and self.tokenizer.chat_template is not None:
                self._head = str(bos)
        return self._head

    def decode_many(self, seqs: Sequence[tuple[int, ...]], memo: dict[tuple[int, ...], str]) -> list[str]:
        """Texts of token sequences, special tokens skipped, as ``tokenizer.decode`` gives them;
        sequences not in ``memo`` are decoded in one call of the Rust core, and added to it."""
        new = list(dict.fromkeys(s for s in seqs if s not in memo))
        if new:
            backend = getattr(self.tokenizer, "backend_tokenizer", None)
            if backend is None or self._decode_cleans_up(backend):
                texts = [self.tokenizer.decode(list(s), skip_special_tokens=True) for s in new]
            else:
                texts = backend.decode_batch([list(s) for s in new], skip_special_tokens=True)
            memo.update(zip(new, texts, strict=True))
        return [memo[s] for s in seqs]

    def _decode_cleans_up(self, backend: Any) -> bool:
        """Whether ``tokenizer.decode`` edits the Rust core's text: its WordPiece-era clean-up of
        spaces, which transformers skips for BPE models unless told to corrupt their output."""
        tok = self.tokenizer
        if not tok.clean_up_tokenization_spaces:
            return False
        forced = getattr(tok, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False)
        return type(backend.model).__name__ != "BPE" or bool(forced)

    def vocab(self) -> dict[str, int]:
        """The tokenizer's vocabulary, built once (``get_vocab`` copies it on every call)."""
        if self._vocab is None:
            self._vocab = self.tokenizer.get_vocab()
        return self._vocab

    def option_token_ids(self, options: Sequence[str]) -> dict[str, list[int | None]]:
        """Per space-marker prefix, each option's token id (``None`` if not one token).

        Empty when no prefix makes every option a single vocabulary token; such
        options are scored as continuations instead.
        """
        vocab = self.vocab()
        found = {prefix: [vocab.get(prefix + o) for o in options] for prefix in SPACE_MARKERS}
        usable = {p: ids for p, ids in found.items() if any(i is not None for i in ids)}
        if not any(all(i is not None for i in ids) for ids in usable.values()):
            return {}
        return usable

    def digit_ids(self) -> list[int]:
        """Ids of the vocabulary's digit tokens, ascending."""
        if self._digits is None:
            self._digits = sorted(i for tok, i in self.vocab().items() if tok.isdecimal())
        if not self._digits:
            raise ValueError(f"{self.model_id}: the vocabulary has no digit tokens for numeric answers")
        return self._digits

    def eos_id(self) -> int:
        """The EOS id, scored after a continuation on request."""
        eos = self.tokenizer.eos_token_id
        if eos is None:
            raise ValueError(f"{self.model_id}: the tokenizer has no EOS token to score after a continuation")
        return int(eos)
