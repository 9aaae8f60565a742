"""SUPER-NATURALINSTRUCTIONS task files, generated in the official layout with a stated labelling rule.

Layout (checked against the real files in ``shared/data/sni``, from
allenai/natural-instructions ``tasks/*.json`` and ``splits/default/*.txt``):

* ``tasks/<name>.json``: one JSON object with the keys ``Contributors``,
  ``Source``, ``URL``, ``Categories``, ``Reasoning``, ``Definition``,
  ``Input_language``, ``Output_language``, ``Instruction_language``,
  ``Domains``, ``Positive Examples``, ``Negative Examples``, ``Instances``,
  ``Instance License`` in that order, every value a list (of strings, or of
  ``{"input", "output", "explanation"}`` examples, or of
  ``{"id": "task<n>-<32 hex>", "input", "output": [str]}`` instances),
  serialized as ``json.dumps(obj, indent=4, ensure_ascii=False)`` with no
  final newline, exactly like the real files.
* ``splits/default/{train,test,excluded}_tasks.txt``: one task name per line,
  each line ending with a newline.

Tasks. ``n_tasks`` classification tasks cycle through the catalogue below
(label sets of several kinds: Yes/No, positive/negative, A/B, 1/0, three
topical labels, four imbalanced dialogue acts, A/B/C whose letters carry no
meaning, imbalanced True/False). Two more tasks are always added to the test
split for the study's task filter to reject: a Spanish sentiment task (input
and output language Spanish) and a free-text title-generation task. One
free-text task goes to the train split, so that file is not empty.

Signal. Every classification task has a deterministic rule ``f(input)``,
stated in :data:`RULES` and executable as :func:`rule_label`, and a noise rate
``eps``: an instance's rule label is drawn from the task's label prior, an
input with that rule label is generated, and the gold output is the rule label
with probability ``1 - eps``, otherwise a uniformly chosen other label. A
perfect reader of the rule therefore scores ``1 - eps``; the rules use only
the words of the input (keyword classes of the generator's lexicon).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unsure.generate import text as T
from unsure.io import write_text

_TOKEN = re.compile(r"[a-z]+")


def _tokens(s: str) -> list[str]:
    return _TOKEN.findall(s.lower())


def _cats(s: str) -> set[str]:
    return {T.NOUN_CATEGORY[w] for w in _tokens(s) if w in T.NOUN_CATEGORY}


def _spaced(sentence: str) -> str:
    """``The dog ran.`` as ``The dog ran .`` (DailyDialog / Rotten Tomatoes spacing)."""
    return re.sub(r"\s*([.,?])", r" \1", sentence).strip()


def _pick(rng: np.random.Generator, items: Sequence[str]) -> str:
    return items[int(rng.integers(len(items)))]


def _pronoun(name: str) -> str:
    return {"f": "She", "m": "He"}.get(T.NAME_GENDER.get(name, ""), "They")


def _verbs_for(noun: str) -> tuple[T.Verb, ...]:
    return T.VERBS_TAKING[noun]


def _clause(rng: np.random.Generator, noun: str, subject: str) -> str:
    """``<subject> <verb taking noun> the <noun>.``"""
    verb = _pick_verb(rng, noun)
    return f"{subject} {verb.past} the {noun}."


def _pick_verb(rng: np.random.Generator, noun: str) -> T.Verb:
    verbs = _verbs_for(noun)
    return verbs[int(rng.integers(len(verbs)))]


_OBJECT_CATEGORIES = tuple(
    c for c in T.NOUN_CATEGORIES if c not in ("time", "part") and any(_verbs_for(n) for n in T.NOUN_CATEGORIES[c])
)


_OBJECT_NOUNS = {c: tuple(n for n in T.NOUN_CATEGORIES[c] if _verbs_for(n)) for c in _OBJECT_CATEGORIES}


def _noun_of(rng: np.random.Generator, category: str) -> str:
    return _pick(rng, _OBJECT_NOUNS[category])


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskFamily:
    """A task family: labels, prior, noise, how inputs are made and the rule that labels them.

    ``make(rng, label)`` returns an input whose rule label is ``label``;
    ``rule(input)`` is the stated labelling rule (for free-text families, the
    reference output). ``noise`` is the chance that the gold output is another label.
    """

    slug: str
    labels: tuple[str, ...]
    prior: tuple[float, ...]
    noise: float
    rule_text: str
    definition: str
    category: str
    domains: tuple[str, ...]
    reasoning: tuple[str, ...]
    make: Callable[[np.random.Generator, str], str]
    rule: Callable[[str], str]
    explain: Callable[[str, str], str]
    input_language: str = "English"
    output_language: str = "English"
    classification: bool = True
    input_template: str = "{INPUT}"
    """The input's parts around its fixed text, one ``{INPUT}`` per part, as the label-bias study's
    ``classification_task_input_templates.csv`` writes them (the matching real task's, where there is one)."""


def _mention_template(
    slug: str,
    category_words: frozenset[str],
    what: str,
    labels: tuple[str, str],
    prior_yes: float,
    noise: float,
    topic: str,
) -> TaskFamily:
    yes, no = labels

    def rule(s: str) -> str:
        return yes if any(w in category_words for w in _tokens(s)) else no

    def make(rng: np.random.Generator, label: str) -> str:
        for _ in range(10_000):
            t = topic if label == yes and rng.random() < 0.7 else None
            s = T.sample_sentence(rng, t)
            if rule(s) == label:
                return s
        raise RuntimeError(f"{slug}: no sentence with label {label!r} in 10000 tries")  # pragma: no cover

    def explain(s: str, label: str) -> str:
        found = [w for w in _tokens(s) if w in category_words]
        if label == yes:
            return f"The sentence mentions '{found[0]}', which is {what}. So the answer is \"{yes}\"."
        return f'Nothing in the sentence is {what}, so the answer is "{no}".'

    return TaskFamily(
        slug=slug,
        labels=labels,
        prior=(prior_yes, 1 - prior_yes),
        noise=noise,
        rule_text=f'"{yes}" if the input contains a word for {what} (singular or plural), else "{no}"',
        definition=(
            f"In this task, you are given a sentence. Decide whether the sentence mentions {what}. "
            f'Classify your answers into "{yes}" and "{no}".'
        ),
        category="Text Categorization",
        domains=("Fiction",),
        reasoning=("Commonsense Reasoning",),
        make=make,
        rule=rule,
        explain=explain,
    )


def _words_of(*categories: str) -> frozenset[str]:
    return frozenset(w for w, c in T.NOUN_CATEGORY.items() if c in categories)


_REVIEW_NOUNS = (
    "movie",
    "film",
    "song",
    "show",
    "album",
    "story",
    "novel",
    "book",
    "soup",
    "cake",
    "cafe",
    "restaurant",
    "hotel",
    "game",
    "puzzle",
)
_NEUTRAL_ADJECTIVES = ("long", "short", "new", "old", "famous", "strange")


def _sentiment_rule(s: str) -> str:
    toks = _tokens(s)
    pos = sum(w in T.POSITIVE_ADJECTIVES for w in toks)
    neg = sum(w in T.NEGATIVE_ADJECTIVES for w in toks)
    return "positive" if pos > neg else "negative"


def _sentiment_make(rng: np.random.Generator, label: str) -> str:
    own, other = (
        (T.POSITIVE_ADJECTIVES, T.NEGATIVE_ADJECTIVES)
        if label == "positive"
        else (T.NEGATIVE_ADJECTIVES, T.POSITIVE_ADJECTIVES)
    )
    while True:
        k = 1 if rng.random() < 0.5 else 3
        adjs = [_pick(rng, own if rng.random() < 0.75 else other) for _ in range(k)]
        if rng.random() < 0.4:
            adjs.insert(int(rng.integers(len(adjs) + 1)), _pick(rng, _NEUTRAL_ADJECTIVES))
        clauses = [f"the {_pick(rng, _REVIEW_NOUNS)} was {a}" for a in adjs]
        joined = clauses[0] + "".join(f" {_pick(rng, ('and', ', but', ', and'))} {c}" for c in clauses[1:])
        s = f"{joined} ."
        if _sentiment_rule(s) == label:
            return s


def _sentiment_explain(s: str, label: str) -> str:
    words = [w for w in _tokens(s) if w in T.POSITIVE_ADJECTIVES or w in T.NEGATIVE_ADJECTIVES]
    return f"The review calls things {', '.join(repr(w) for w in words)}; on balance that is {label}."


def _copa_rule(s: str) -> str:
    m = re.match(r"^(.*?) \(A\) (.*?) \(B\) (.*?), Question: \w+$", s)
    if not m:
        raise ValueError(f"not a premise/options input: {s!r}")
    premise = _cats(m.group(1))
    return "A" if _cats(m.group(2)) & premise else "B"


def _copa_make(rng: np.random.Generator, label: str) -> str:
    cat = _pick(rng, _OBJECT_CATEGORIES)
    other = _pick(rng, [c for c in _OBJECT_CATEGORIES if c != cat])
    name = _pick(rng, T.NAMES)
    noun = _noun_of(rng, cat)
    premise = _clause(rng, noun, name)
    pron = _pronoun(name)
    kin = [n for n in _OBJECT_NOUNS[cat] if n != noun] or [noun]
    linked = _clause(rng, _pick(rng, kin), pron)
    unlinked = _clause(rng, _noun_of(rng, other), pron)
    a, b = (linked, unlinked) if label == "A" else (unlinked, linked)
    return f"{premise} (A) {a} (B) {b}, Question: {_pick(rng, ('cause', 'effect'))}"


def _copa_explain(s: str, label: str) -> str:
    question = s.rsplit(" ", 1)[-1]
    return f"Option {label} is about the same kind of thing as the premise, so it is the plausible {question}."


PARTS: dict[str, tuple[str, ...]] = {
    "car": ("wheel", "engine", "seat", "door", "window", "roof", "mirror", "trunk"),
    "house": ("roof", "wall", "floor", "door", "window", "chimney", "kitchen", "room"),
    "tree": ("branch", "leaf", "root", "trunk"),
    "flower": ("stem", "petal", "leaf", "root"),
    "bird": ("wing", "feather", "beak", "tail"),
    "dog": ("tail", "paw", "ear", "nose"),
    "cat": ("tail", "paw", "ear", "nose"),
    "horse": ("tail", "hoof", "ear", "leg"),
    "cow": ("horn", "tail", "hoof", "leg"),
    "elephant": ("trunk", "ear", "tail", "leg"),
    "book": ("page", "cover"),
    "bike": ("wheel", "seat", "chain", "handle"),
    "boat": ("sail", "engine", "seat"),
    "plane": ("wing", "engine", "seat", "window", "tail"),
    "bus": ("wheel", "seat", "door", "window", "engine"),
    "train": ("wheel", "engine", "seat", "door", "window"),
    "jacket": ("pocket", "sleeve", "collar", "button"),
    "shirt": ("pocket", "sleeve", "collar", "button"),
    "knife": ("blade", "handle"),
    "phone": ("screen", "button"),
    "guitar": ("string",),
    "violin": ("string",),
    "cup": ("handle",),
    "jar": ("lid",),
    "sofa": ("cushion",),
    "egg": ("shell",),
    "bucket": ("handle",),
    "man": ("hand", "head", "arm", "leg", "heart", "finger"),
}
"""Which object has which part: the knowledge behind the 1/0 part-whole task."""
_ALL_PARTS = tuple(sorted({p for ps in PARTS.values() for p in ps}))


def _part_rule(s: str) -> str:
    m = re.match(r"^(\w+) has (\w+)\?$", s)
    if not m:
        raise ValueError(f"not an '<object> has <part>?' input: {s!r}")
    return "1" if m.group(2) in PARTS.get(m.group(1), ()) else "0"


def _part_make(rng: np.random.Generator, label: str) -> str:
    obj = _pick(rng, tuple(PARTS))
    parts = PARTS[obj] if label == "1" else tuple(p for p in _ALL_PARTS if p not in PARTS[obj])
    return f"{obj} has {_pick(rng, parts)}?"


def _part_explain(s: str, label: str) -> str:
    obj, part = s[:-1].split(" has ")
    article = "an" if T.takes_an(part) else "a"
    verb = "has" if label == "1" else "does not have"
    return f"A {obj} {verb} {article} {part} as one of its parts, so the answer is {label}."


_SCENES = ("home", "city", "nature")


def _scene_words() -> dict[str, frozenset[str]]:
    nouns = {s: {w for w in T.TOPICS[s] if w in T.NOUN_CATEGORY} for s in _SCENES}
    out = {}
    for s in _SCENES:
        others = set().union(*(nouns[o] for o in _SCENES if o != s))
        own = nouns[s] - others
        out[s] = frozenset(own | {T.plural(w) for w in own if w not in T.MASS_NOUNS})
    return out


SCENE_WORDS = _scene_words()
"""Keywords of the three scene labels (disjoint)."""


def _scene_rule(s: str) -> str:
    toks = _tokens(s)
    counts = [sum(w in SCENE_WORDS[c] for w in toks) for c in _SCENES]
    return _SCENES[int(np.argmax(counts))]


def _scene_make(rng: np.random.Generator, label: str) -> str:
    while True:
        s = " ".join(T.sample_passage(rng, 2, label if rng.random() < 0.8 else None))
        toks = _tokens(s)
        counts = sorted(sum(w in SCENE_WORDS[c] for w in toks) for c in _SCENES)
        if counts[-1] > counts[-2] and _scene_rule(s) == label:  # a clear winner, never a tie
            return s


def _scene_explain(s: str, label: str) -> str:
    found = sorted({w for w in _tokens(s) if w in SCENE_WORDS[label]})
    return f"Words like {', '.join(repr(w) for w in found[:3])} place this passage in the {label} scene."


def _act_rule(s: str) -> str:
    low = s.lower().strip()
    if low.endswith("?"):
        return "question"
    if low.startswith("please "):
        return "directive"
    if " i will " in f" {low} " or " i promise to " in f" {low} ":
        return "commissive"
    return "information"


def _act_make(rng: np.random.Generator, label: str) -> str:
    noun = _noun_of(rng, _pick(rng, _OBJECT_CATEGORIES))
    verb = _pick_verb(rng, noun)
    if label == "information":
        return _spaced(T.sample_sentence(rng))
    forms: tuple[str, ...]
    if label == "question":
        forms = (
            f"did you {verb.base} the {noun} ?",
            f"where is the {noun} ?",
            f"can you {verb.base} the {noun} for me ?",
            f"do you like the {noun} ?",
        )
    elif label == "directive":
        forms = (f"please {verb.base} the {noun} .", f"please {verb.base} the {noun} {_pick(rng, T.ADVERBS)} .")
    else:
        forms = (
            f"i will {verb.base} the {noun} {_pick(rng, ('tomorrow', 'tonight', 'later', 'soon'))} .",
            f"ok , i promise to {verb.base} the {noun} .",
        )
    return _pick(rng, forms)


def _act_explain(s: str, label: str) -> str:
    why = {
        "question": "it asks for information",
        "directive": "it tells the listener to do something",
        "commissive": "the speaker commits to a future action",
        "information": "it states a piece of information",
    }[label]
    return f"The sentence is '{label}' because {why}."


_BLANK = re.compile(r"^Fill in the blank: (\w+) (\w+) the ___\.\nA\) (\w+)\nB\) (\w+)\nC\) (\w+)$")
_PAST_TRANSITIVE = {v.past: v for v in T.TRANSITIVE_VERBS}


def _blank_rule(s: str) -> str:
    m = _BLANK.match(s)
    if not m:
        raise ValueError(f"not a fill-in-the-blank input: {s!r}")
    verb = _PAST_TRANSITIVE[m.group(2)]
    fits = [letter for letter, noun in zip("ABC", m.groups()[2:], strict=True) if noun in verb.objects]
    return fits[0] if fits else "A"


def _blank_make(rng: np.random.Generator, label: str) -> str:
    while True:
        noun = _noun_of(rng, _pick(rng, _OBJECT_CATEGORIES))
        verb = _pick_verb(rng, noun)
        wrong_cats = [c for c in _OBJECT_CATEGORIES if not any(n in verb.objects for n in T.NOUN_CATEGORIES[c])]
        if len(wrong_cats) >= 2:
            break
    picked = rng.choice(len(wrong_cats), size=2, replace=False)
    wrong = [_noun_of(rng, wrong_cats[int(i)]) for i in picked]
    options = list(wrong)
    options.insert("ABC".index(label), noun)
    name = _pick(rng, T.NAMES)
    return f"Fill in the blank: {name} {verb.past} the ___.\nA) {options[0]}\nB) {options[1]}\nC) {options[2]}"


def _blank_explain(s: str, label: str) -> str:
    m = _BLANK.match(s)
    assert m is not None
    noun = m.group(3 + "ABC".index(label))
    return f"Only '{noun}' is something one {m.group(2)}, so the answer is {label}."


CATALOGUE: tuple[TaskFamily, ...] = (
    _mention_template(
        "food_mention_classification", _words_of("food", "drink"), "food or drink", ("Yes", "No"), 0.5, 0.08, "kitchen"
    ),
    TaskFamily(
        slug="review_sentiment_classification",
        labels=("positive", "negative"),
        prior=(0.5, 0.5),
        noise=0.10,
        rule_text='"positive" if the input has more positive than negative evaluative adjectives '
        '(POSITIVE_ADJECTIVES vs NEGATIVE_ADJECTIVES of unsure.generate.text), else "negative"',
        definition="Classify the given review into two categories: positive, or negative based on its content.",
        category="Sentiment Analysis",
        domains=("Reviews",),
        reasoning=(),
        make=_sentiment_make,
        rule=_sentiment_rule,
        explain=_sentiment_explain,
    ),
    TaskFamily(
        slug="premise_option_selection",
        labels=("A", "B"),
        prior=(0.5, 0.5),
        noise=0.10,
        rule_text='"A" if option A mentions a noun of the same semantic category as a noun of the premise, else "B"',
        definition=(
            "In this task, you are given a premise sentence, two possible options and a question word. "
            "Select the option that is a plausible cause or effect of the premise. "
            'Your answer must be either "A" or "B".'
        ),
        category="Cause Effect Classification",
        domains=("Fiction",),
        reasoning=("Causal Reasoning",),
        make=_copa_make,
        rule=_copa_rule,
        explain=_copa_explain,
        input_template="{INPUT} (A) {INPUT} (B) {INPUT}, Question: {INPUT}",  # task1393 (COPA)'s
    ),
    TaskFamily(
        slug="object_part_classification",
        labels=("1", "0"),
        prior=(0.5, 0.5),
        noise=0.05,
        rule_text='"1" if the part is in PARTS[object] of unsure.generate.sni, else "0"',
        definition=(
            "Given an object and a part, decide whether the object has that part. All inputs follow the "
            "template '<object> has <part>?'. The answer should be 1 or 0: 1 means the object has the part, "
            "0 means it does not."
        ),
        category="Word Relation Classification",
        domains=("Commonsense -> Concepts and Relations",),
        reasoning=("Reasoning on Objects",),
        make=_part_make,
        rule=_part_rule,
        explain=_part_explain,
        input_template="{INPUT} has {INPUT}",  # task1584 (meronyms)'s
    ),
    TaskFamily(
        slug="scene_topic_classification",
        labels=_SCENES,
        prior=(0.34, 0.33, 0.33),
        noise=0.10,
        rule_text="the scene label whose SCENE_WORDS occur most often in the input (ties: home, city, nature order)",
        definition=(
            "In this task, you are given a short passage. Classify where it takes place. "
            "Your answer must be one of 'home', 'city' or 'nature'."
        ),
        category="Text Categorization",
        domains=("Fiction",),
        reasoning=(),
        make=_scene_make,
        rule=_scene_rule,
        explain=_scene_explain,
    ),
    TaskFamily(
        slug="dialogue_act_classification",
        labels=("information", "question", "directive", "commissive"),
        prior=(0.45, 0.30, 0.15, 0.10),
        noise=0.08,
        rule_text="'question' if the input ends with '?', else 'directive' if it starts with 'please', "
        "else 'commissive' if it contains 'i will' or 'i promise to', else 'information'",
        definition=(
            "You have to predict the type of conversation sentence given as input. Your predictions can be one "
            "among: 'information' if the input statement states a piece of information, 'question' if the input "
            "statement asks for some information, 'directive' if the input sentence involves the management or "
            "guidance of operations, and 'commissive' when it constitutes a statement that commits the speaker "
            "to some future action."
        ),
        category="Dialogue Act Recognition",
        domains=("Dialogue",),
        reasoning=(),
        make=_act_make,
        rule=_act_rule,
        explain=_act_explain,
    ),
    TaskFamily(
        slug="blank_option_selection",
        labels=("A", "B", "C"),
        prior=(1 / 3, 1 / 3, 1 / 3),
        noise=0.10,
        rule_text="the letter of the option that the verb before the blank takes as its object (Verb.objects)",
        definition=(
            "You are given a sentence with a blank and three options labelled A, B and C. Choose the option "
            'that best fills the blank. Answer with "A", "B" or "C".'
        ),
        category="Fill in The Blank",
        domains=("Fiction",),
        reasoning=("Commonsense Reasoning",),
        make=_blank_make,
        rule=_blank_rule,
        explain=_blank_explain,
        input_template="Fill in the blank: {INPUT}\nA) {INPUT}\nB) {INPUT}\nC) {INPUT}",
    ),
    _mention_template(
        "animal_mention_classification", _words_of("animal"), "an animal", ("True", "False"), 0.2, 0.05, "farm"
    ),
)
"""The classification task families, in the order ``n_tasks`` takes them."""

RULES: dict[str, str] = {t.slug: t.rule_text for t in CATALOGUE}
"""The stated labelling rule of each classification task family (by slug)."""

# ---------------------------------------------------------------- tasks to reject

_ES_NOUNS = ("la película", "la canción", "la comida", "la historia", "la novela", "la música")
_ES_POSITIVE = ("buena", "excelente", "maravillosa", "divertida", "preciosa")
_ES_NEGATIVE = ("mala", "aburrida", "terrible", "horrible", "triste")


def _es_rule(s: str) -> str:
    return "positivo" if any(w in _ES_POSITIVE for w in s.split()) else "negativo"


def _es_make(rng: np.random.Generator, label: str) -> str:
    adj = _pick(rng, _ES_POSITIVE if label == "positivo" else _ES_NEGATIVE)
    noun = _pick(rng, _ES_NOUNS)
    return f"{noun[0].upper()}{noun[1:]} fue {adj} ."


SPANISH = TaskFamily(
    slug="spanish_review_sentiment_classification",
    labels=("positivo", "negativo"),
    prior=(0.5, 0.5),
    noise=0.10,
    rule_text="'positivo' if a positive Spanish adjective occurs, else 'negativo'",
    definition=(
        'In this task, you are given a review in Spanish. Classify it as "positivo" or "negativo" based on its content.'
    ),
    category="Sentiment Analysis",
    domains=("Reviews",),
    reasoning=(),
    make=_es_make,
    rule=_es_rule,
    explain=lambda s, label: f"The adjective in the review makes it {label}.",
    input_language="Spanish",
    output_language="Spanish",
)


def _last_noun(s: str) -> str:
    nouns = [w for w in _tokens(s) if w in T.NOUN_CATEGORY]
    return nouns[-1] if nouns else "day"


def _title_rule(s: str) -> str:
    first = s.split(". ", 1)[0]
    return "The " + T.SINGULAR.get(_last_noun(first), "day").capitalize()


TITLE = TaskFamily(
    slug="passage_title_generation",
    labels=(),
    prior=(),
    noise=0.0,
    rule_text="'The <Noun>' for the last noun of the first sentence",
    definition="In this task, you are given a short passage. Generate a short title for it.",
    category="Title Generation",
    domains=("Fiction",),
    reasoning=(),
    make=lambda rng, label: " ".join(T.sample_passage(rng, 2)),
    rule=_title_rule,
    explain=lambda s, label: "The title names what the first sentence is about.",
    classification=False,
)

NOUN_EXTRACTION = TaskFamily(
    slug="first_noun_extraction",
    labels=(),
    prior=(),
    noise=0.0,
    rule_text="the first noun of the sentence, in lower case",
    definition="In this task, you are given a sentence. Write the first noun that occurs in it.",
    category="Information Extraction",
    domains=("Fiction",),
    reasoning=(),
    make=lambda rng, label: T.sample_sentence(rng),
    rule=lambda s: next((w for w in _tokens(s) if w in T.NOUN_CATEGORY), "none"),
    explain=lambda s, label: f"'{label}' is the first noun in the sentence.",
    classification=False,
)

# ---------------------------------------------------------------------- writing

KEY_ORDER: tuple[str, ...] = (
    "Contributors", "Source", "URL", "Categories", "Reasoning", "Definition", "Input_language",
    "Output_language", "Instruction_language", "Domains", "Positive Examples", "Negative Examples",
    "Instances", "Instance License",
)  # fmt: skip
"""The keys of a task file, in the order the real files have them."""
FIRST_TASK_NUMBER = 2001
"""Generated tasks are numbered from here, clear of the 1,613 real task numbers."""


def draw_instance(rng: np.random.Generator, tpl: TaskFamily) -> tuple[str, str, str]:
    """(input, rule label, gold output) of one instance: the rule label from the family's
    prior, an input with that label, the output flipped with the family's noise rate."""
    if not tpl.classification:
        s = tpl.make(rng, "")
        return s, tpl.rule(s), tpl.rule(s)
    rule_label = tpl.labels[int(rng.choice(len(tpl.labels), p=np.asarray(tpl.prior) / sum(tpl.prior)))]
    s = tpl.make(rng, rule_label)
    if tpl.rule(s) != rule_label:  # pragma: no cover - the makers guarantee it
        raise RuntimeError(f"{tpl.slug}: generated input does not follow its rule: {s!r}")
    output = rule_label
    if rng.random() < tpl.noise:
        others = [lab for lab in tpl.labels if lab != rule_label]
        output = others[int(rng.integers(len(others)))]
    return s, rule_label, output


def _task_json(tpl: TaskFamily, number: int, n_instances: int, seed: Any) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    positives = []
    for j in range(3):
        s = tpl.make(rng, tpl.labels[j % len(tpl.labels)] if tpl.classification else "")
        out = tpl.rule(s)
        positives.append({"input": s, "output": out, "explanation": tpl.explain(s, out)})
    negatives = []
    for j in range(2):
        s, rule_label, _ = draw_instance(rng, tpl)
        if tpl.classification:
            wrong = [lab for lab in tpl.labels if lab != rule_label][j % (len(tpl.labels) - 1)]
            why = f'The correct answer is "{rule_label}", not "{wrong}". ' + tpl.explain(s, rule_label)
        else:
            wrong = s.split()[0]
            why = f"The output should be '{rule_label}'; copying a word of the input is not what is asked."
        negatives.append({"input": s, "output": wrong, "explanation": why})
    instances = []
    for _ in range(n_instances):
        s, _, output = draw_instance(rng, tpl)
        instances.append({"id": f"task{number}-{rng.bytes(16).hex()}", "input": s, "output": [output]})
    task = {
        "Contributors": ["unsure generator"],
        "Source": ["unsure_generated"],
        "URL": ["https://github.com/allenai/natural-instructions"],
        "Categories": [tpl.category],
        "Reasoning": list(tpl.reasoning),
        "Definition": [tpl.definition],
        "Input_language": [tpl.input_language],
        "Output_language": [tpl.output_language],
        "Instruction_language": ["English"],
        "Domains": list(tpl.domains),
        "Positive Examples": positives,
        "Negative Examples": negatives,
        "Instances": instances,
        "Instance License": ["Unknown"],
    }
    return {k: task[k] for k in KEY_ORDER}


def task_template(name: str) -> TaskFamily:
    """The family a generated task name belongs to (``task2003_unsure_<slug>[_<k>]``)."""
    m = re.match(r"^task\d+_unsure_(.+?)(?:_\d+)?$", name)
    slug = m.group(1) if m else ""
    for tpl in (*CATALOGUE, SPANISH, TITLE, NOUN_EXTRACTION):
        if tpl.slug == slug:
            return tpl
    raise KeyError(f"{name!r} is not a task name written by unsure.generate.sni")


def rule_label(name: str, input_text: str) -> str:
    """The noise-free label (or reference output) the task's stated rule gives ``input_text``."""
    return task_template(name).rule(input_text)


def task_plan(n_tasks: int) -> list[tuple[str, TaskFamily, int]]:
    """(name, family, repeat) of every task :func:`write_tasks` writes for ``n_tasks``, in order:
    ``n_tasks`` classification tasks, then the Spanish, the free-text and the train task."""
    plan = [(CATALOGUE[k % len(CATALOGUE)], k // len(CATALOGUE)) for k in range(n_tasks)]
    plan += [(SPANISH, 0), (TITLE, 0), (NOUN_EXTRACTION, 0)]
    return [
        (f"task{FIRST_TASK_NUMBER + i}_unsure_{tpl.slug}" + (f"_{rep + 1}" if rep else ""), tpl, rep)
        for i, (tpl, rep) in enumerate(plan)
    ]


def write_tasks(
    out_dir: str | os.PathLike[str], *, n_tasks: int = 6, instances_per_task: int = 400, seed: int = 0
) -> list[str]:
    """Write task files and default splits under ``out_dir``; return the names written (test split first).

    ``n_tasks`` counts classification tasks; the Spanish and the free-text
    test tasks and the one train task come on top. Each task has its own child
    seed, so task ``k`` does not change with ``n_tasks`` (its number aside).
    """
    if n_tasks < 1:
        raise ValueError(f"n_tasks must be at least 1, got {n_tasks}")
    if instances_per_task < 1:
        raise ValueError(f"instances_per_task must be at least 1, got {instances_per_task}")
    families = (*CATALOGUE, SPANISH, TITLE, NOUN_EXTRACTION)
    root = Path(out_dir)
    names = []
    for number, (name, tpl, rep) in enumerate(task_plan(n_tasks), start=FIRST_TASK_NUMBER):
        # The child seed depends on the family and its repeat, not on the position in the plan.
        child = np.random.SeedSequence([seed, families.index(tpl), rep])
        task = _task_json(tpl, number, instances_per_task, child)
        write_text(root / "tasks" / f"{name}.json", json.dumps(task, indent=4, ensure_ascii=False))
        names.append(name)
    test, train = names[:-1], names[-1:]
    splits = root / "splits" / "default"
    write_text(splits / "test_tasks.txt", "".join(f"{n}\n" for n in test))
    write_text(splits / "train_tasks.txt", "".join(f"{n}\n" for n in train))
    write_text(splits / "excluded_tasks.txt", "")
    return names


INPUT_TEMPLATES_HEADER = ("task", "template")
"""Columns of the label-bias study's ``classification_task_input_templates.csv``."""


def input_templates(n_tasks: int) -> list[tuple[str, str]]:
    """(task name, input template) of every classification task :func:`write_tasks` writes for
    ``n_tasks`` (the tasks the study's filter keeps; the rejected ones are not in the study's file)."""
    return [(name, tpl.input_template) for name, tpl, _ in task_plan(n_tasks) if tpl in CATALOGUE]


def write_input_templates(path: str | os.PathLike[str], *, n_tasks: int = 6) -> list[str]:
    """Write the generated tasks' input templates in the layout of the study's CSV (header
    ``task,template``, fields quoted only where needed, newlines inside a template kept), so that
    domain-context inputs under ``protocol: paper`` follow the multi-part inputs' markers as they
    do on the real tasks. Returns the task names written."""
    rows = input_templates(n_tasks)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(INPUT_TEMPLATES_HEADER)
    writer.writerows(rows)
    write_text(path, buf.getvalue())
    return [name for name, _ in rows]
