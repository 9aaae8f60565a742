"""Task selection, instance draws and prompts: on generated tasks, and on the real SNI files when present."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from unsure import sources
from unsure.config import load_config
from unsure.generate import sni
from unsure.labelbias import prompts, tasks
from unsure.labelbias.scoring import ItemScorer, TaskPrompting
from unsure.rawdata import sni_task_list

REPO = Path(__file__).resolve().parents[1]

SIZES = {"n_eval": 50, "n_heldout": 8, "n_pool": 16, "min_eval_instances": 40, "max_labels": 49}
REAL = {
    "task1216_atomic_classification_causes": ("No", "Yes"),
    "task888_reviews_classification": ("negative", "positive"),
    "task1393_superglue_copa_text_completion": ("A", "B"),
    "task318_stereoset_classification_gender": ("anti-stereotype", "stereotype", "unrelated"),
    "task1531_daily_dialog_type_classification": ("commissive", "directive", "information", "question"),
    "task375_classify_type_of_sentence_in_debate": ("Fact", "Policy", "Testimony", "Value"),
    "task1584_evalution_meronym_classification": ("0", "1"),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sni")
    sni.write_tasks(root, n_tasks=6, instances_per_task=120, seed=0)
    return root


def test_filter_keeps_the_english_classification_tasks_only(generated: Path) -> None:
    table, drawn = tasks.select_tasks(generated, **SIZES, seed=0)
    kept = table.set_index("task")["selected"]
    assert kept.sum() == 6
    reasons = table.set_index("task")["reason"]
    assert reasons["task2007_unsure_spanish_review_sentiment_classification"] == "not English input and output"
    assert reasons["task2008_unsure_passage_title_generation"] == "not a classification or detection task"
    assert set(drawn["task"]) == set(kept[kept].index)


def test_too_few_instances_are_rejected(generated: Path) -> None:
    # 120 instances: 8 held out + 16 pool + 96 for evaluation is just enough, 97 is not
    table, _ = tasks.select_tasks(generated, **(SIZES | {"min_eval_instances": 96}), seed=0)
    assert table["selected"].sum() == 6
    with pytest.raises(ValueError, match="no task passes"):
        tasks.select_tasks(generated, **(SIZES | {"min_eval_instances": 97}), seed=0)


def test_draws_are_disjoint_sized_seeded_and_independent_of_other_tasks(generated: Path, tmp_path: Path) -> None:
    _, drawn = tasks.select_tasks(generated, **SIZES, seed=0)
    for _, part in drawn.groupby("task"):
        assert part["row_id"].is_unique
        assert part["split"].value_counts().to_dict() == {"eval": 50, "pool": 16, "heldout": 8}
    _, again = tasks.select_tasks(generated, **SIZES, seed=0)
    pd.testing.assert_frame_equal(drawn, again)
    _, other_seed = tasks.select_tasks(generated, **SIZES, seed=1)
    assert not drawn["row_id"].equals(other_seed["row_id"])
    # the same task alone in a directory draws the same instances
    name = "task2003_unsure_premise_option_selection"
    (tmp_path / "tasks").mkdir()
    shutil.copy(generated / "tasks" / f"{name}.json", tmp_path / "tasks")
    _, alone = tasks.select_tasks(tmp_path, **SIZES, seed=0)
    pd.testing.assert_frame_equal(alone, drawn[drawn["task"] == name].reset_index(drop=True))


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (("A", "B", "C"), True),
        (("1", "2", "3"), True),
        (("Option 1", "Option 2"), True),
        (("0", "1"), False),
        (("Yes", "No"), False),
        (("positive", "negative"), False),
    ],
)
def test_interchangeable_labels(labels: tuple[str, ...], expected: bool) -> None:
    assert tasks.interchangeable_labels(labels) is expected


def test_sni_prompt_is_the_studys_template() -> None:
    text = prompts.sni_prompt("Decide", [("good film", "positive"), ("bad?", "negative")], "fine film")
    assert text == (
        "Decide.\n\n"
        "Input: good film.\n Output: positive.\n\n"
        "Input: bad?\n Output: negative.\n\n"
        "Input: fine film.\n\nOutput:"
    )


def test_demonstration_sets_are_disjoint_slices_of_the_pool() -> None:
    pool = [(f"x{i}", "y") for i in range(12)]
    sets = [prompts.demonstrations(pool, 4, s) for s in range(3)]
    assert sorted(x for demo in sets for x, _ in demo) == sorted(x for x, _ in pool)
    train = prompts.training_examples(pool, 4, 1, 8)
    assert not set(train) & set(sets[1])
    with pytest.raises(ValueError):
        prompts.demonstrations(pool, 4, 3)


def test_looc_never_scores_a_demonstration_with_itself_in_the_context(generated: Path) -> None:
    table, drawn = tasks.select_tasks(generated, **SIZES, seed=0)
    items = prompts.build_items(
        drawn, shots=[0, 2, 4], sets=2, content_free=["N/A"], n_domain=3, seed=0, protocol="corrected"
    )
    pools = prompts.pools(drawn)
    prompting = {
        r.task: TaskPrompting(r.definition, tuple(r.labels), tuple(pools[r.task]))
        for r in table[table["selected"]].itertuples()
    }
    scorer = ItemScorer(engine=None, tasks=prompting, shots=[0, 2, 4], sets=2)  # type: ignore[arg-type]
    looc = items[items["kind"] == "looc"]
    assert len(looc) == 6 * 2 * (2 + 4)
    for item in looc.itertuples():
        [(k, s, context)] = scorer.contexts(pd.Series(item._asdict()))
        demos = prompts.demonstrations(pools[item.task], k, s)
        assert demos[item.left_out] == (item.input, item.gold)
        for j, (x, y) in enumerate(demos):
            block = prompts.sni_prompt("", [(x, y)], "")[: -len("Input: .\n\nOutput:")]
            assert (block in context) is (j != item.left_out)
        assert context.endswith(prompts.sni_prompt("", [], item.input))


def test_real_task_files_pass_the_filter(shared_data: Path, tmp_path: Path) -> None:
    sni_dir = shared_data / "sni"
    present = sorted(p.stem for p in (sni_dir / "tasks").glob("*.json"))
    if not present:
        pytest.skip(f"no real SNI task files under {sni_dir / 'tasks'}")
    (tmp_path / "tasks").symlink_to(sni_dir / "tasks")
    table, drawn = tasks.select_tasks(
        tmp_path,
        n_eval=1000,
        n_heldout=32,
        n_pool=64,
        min_eval_instances=300,
        max_labels=49,
        seed=0,
        task_info=sni_dir / "task_info" / "full_task_info.csv",
    )
    study = set((sni_dir / "splits" / "classification_tasks" / "test_tasks.txt").read_text().split())
    assert table["selected"].all(), table.loc[~table["selected"], ["task", "reason"]]
    assert set(table["task"]) <= study
    for row in table.itertuples():
        if row.task in REAL:
            assert tuple(row.labels) == REAL[row.task]
    sizes = drawn.groupby(["task", "split"]).size().unstack()
    assert (sizes["heldout"] == 32).all() and (sizes["pool"] == 64).all() and (sizes["eval"] >= 300).all()
    counts = table.set_index("task")["n_instances"]
    assert (sizes["eval"] == (counts - 96).clip(upper=1000)).all()


def test_metadata_filter_keeps_all_279_study_tasks(shared_data: Path) -> None:
    info = pd.read_csv(shared_data / "sni" / "task_info" / "full_task_info.csv")
    study = (shared_data / "sni" / "splits" / "classification_tasks" / "test_tasks.txt").read_text().split()
    assert len(study) == 279
    rows = info.set_index("Name").loc[study]
    assert (rows["Input Language"] == "English").all() and (rows["Output Language"] == "English").all()
    with_summary = [tasks.is_candidate(n, (r.Category,), r.Summary) for n, r in rows.iterrows()]
    without = [tasks.is_candidate(n, (r.Category,)) for n, r in rows.iterrows()]
    assert all(with_summary)
    assert sum(without) < 279  # some study tasks are only found through their summaries
    assert not set(study) & tasks.EXCLUDED_TASKS


def _metadata_facts(sni_dir: Path) -> dict[str, tasks.TaskFacts]:
    """The filter's inputs from the study's metadata alone (most task files are not here).

    Category and languages come from ``full_task_info.csv``; instance and label
    counts from the classification split's ``test_tasks_info.csv``, so only its
    tasks are described. That split lists only tasks that passed the study's
    one-output check, hence one output per instance.
    """
    info = pd.read_csv(sni_dir / "task_info" / "full_task_info.csv").set_index("Name")
    counts = pd.read_csv(sni_dir / "splits" / "classification_tasks" / "test_tasks_info.csv").set_index("Name")
    return {
        name: tasks.TaskFacts(
            name=name,
            categories=(str(info.at[name, "Category"]),),
            input_language=tuple(str(info.at[name, "Input Language"]).split(", ")),
            output_language=tuple(str(info.at[name, "Output Language"]).split(", ")),
            n_instances=int(counts.at[name, "# Instances"]),
            n_labels=int(counts.at[name, "# Answer Choices"]),
            mean_outputs=1.0,
        )
        for name in counts.index
    }


def test_paper_config_selects_exactly_the_studys_279_tasks(shared_data: Path) -> None:
    """What the paper config fetches (rule sni_fetch) and its filter keeps (rule labelbias_prepare)."""
    sni_dir = shared_data / "sni"
    study = (sni_dir / "splits" / "classification_tasks" / "test_tasks.txt").read_text().split()
    cfg = load_config(REPO / "config" / "config.yaml")
    lb = cfg.studies.labelbias
    fetched = sni_task_list(sni_dir, cfg.data.sni.tasks)
    # the paper config's task_info is the study's full_task_info.csv (a rule downloads it)
    summaries = tasks.read_summaries(sni_dir / "task_info" / "full_task_info.csv" if lb.task_info else None)
    facts = _metadata_facts(sni_dir)
    verdicts = {
        name: tasks.rejection(
            facts[name],
            summary=summaries.get(name, ""),
            min_instances=lb.min_eval_instances + lb.n_heldout + lb.n_pool,
            max_labels=lb.max_labels,
        )
        for name in fetched
        if name in facts
    }
    selected = [name for name, reason in verdicts.items() if not reason]
    lost = {name: verdicts.get(name, "not fetched") for name in study if name not in selected}
    assert len(selected) == len(study) == 279, f"{len(selected)} of 279 selected; lost: {lost}"
    assert sorted(selected) == sorted(study)
    unknown = sorted(set(fetched) - set(facts))
    assert not unknown, f"fetched tasks the study's metadata does not describe: {unknown[:5]}"


def test_task_info_source_is_the_studys_file_at_a_pinned_commit(shared_data: Path, tmp_path: Path) -> None:
    """Rule sni_task_info's source: the authors' metadata; a local copy in ../shared's layout passes."""
    source = sources.sni_task_info()
    assert source.url == (
        "https://raw.githubusercontent.com/schwartz-lab-NLP/label-bias/"
        f"{sources.LABEL_BIAS_REF}/src/superni/task_info/full_task_info.csv"
    )
    assert len(sources.LABEL_BIAS_REF) == 40
    got = sources.obtain(source, tmp_path / "full_task_info.csv", local_dir=shared_data / "sni")
    assert len(tasks.read_summaries(got)) == 1613


# ---------------------------------------------------------------- protocol: paper


def test_empty_input_renders_as_the_authors_collator_does_under_paper() -> None:
    assert prompts.sni_prompt("Decide", [], "").endswith("Input:\n\nOutput:")
    assert prompts.sni_prompt("Decide", [], "", paper=True) == "Decide.\n\nInput: .\n\nOutput:"
    demos = [("good film", "positive"), ("bad?", "negative")]
    assert prompts.sni_prompt("Decide", demos, "fine film", paper=True) == prompts.sni_prompt(
        "Decide", demos, "fine film"
    )


def _templates(shared_data: Path) -> dict[str, str]:
    return prompts.read_templates(shared_data / "sni" / "task_info" / "classification_task_input_templates.csv")


def test_paper_dc_inputs_keep_the_task_template_on_the_real_tasks(shared_data: Path) -> None:
    """task1216 inputs are ``Head: ... <sep>Tail: ...``: each DC input keeps both markers, in order."""
    templates = _templates(shared_data)
    assert len(templates) == 279
    task = tasks.read_task(shared_data / "sni" / "tasks" / "task1216_atomic_classification_causes.json")
    template = templates[prompts.task_number(task.name)]
    assert template.count("{INPUT}") >= 2
    texts = task.instances["input"].head(200).tolist()
    seed = tasks.task_seed(0, "x")
    made = prompts.domain_inputs_paper(texts, template, 20, seed)
    assert len(made) == 20 and made == prompts.domain_inputs_paper(texts, template, 20, tasks.task_seed(0, "x"))
    head, tail = [m for m in template.split("{INPUT}") if m.strip()][:2]
    for text in made:
        assert text.startswith(head) and tail in text
        assert text == text.lower() or head != head.lower()  # words are lower-cased; markers kept verbatim
        first, second = text[len(head) :].split(tail)
        # ceil of the mean word count per part, without replacement
        parts = [prompts.split_by_template(t, template.split("{INPUT}")) for t in texts]
        sizes = [[len(p.split()) for p in ps] for ps in parts]
        assert len(second.split()) == int(np.ceil(np.mean([s[-1] for s in sizes])))
        assert len(first.split()) == int(np.ceil(np.mean([s[1] for s in sizes])))
    # ours (corrected) scrambles the markers among the words
    ours = prompts.domain_inputs(texts, 20, seed)
    assert not all(t.startswith(head) and tail in t for t in ours)


def test_build_items_under_paper_follow_the_templates_of_every_real_multipart_task(shared_data: Path) -> None:
    templates = _templates(shared_data)
    for file in sorted((shared_data / "sni" / "tasks").glob("*.json")):
        task = tasks.read_task(file)
        template = templates.get(prompts.task_number(task.name))
        if template is None or template.count("{INPUT}") < 2:
            continue
        drawn = tasks.draw_instances(task, n_eval=100, n_heldout=8, n_pool=16, seed=0)
        items = prompts.build_items(
            drawn, shots=[0], sets=1, content_free=["N/A"], n_domain=5, seed=0, protocol="paper", templates=templates
        )
        markers = [m.strip() for m in template.split("{INPUT}") if m.strip()]
        for text in items.loc[items["kind"] == "dc", "input"]:
            at = [text.find(m) for m in markers]
            assert -1 not in at and at == sorted(at), (task.name, text)


PAPER_SEMANTICALLY_EQUIVALENT = {
    # sentence completion (category Text Completion)
    "task156_codah_classification_adversarial",
    "task213_rocstories_correct_ending_classification",
    "task214_rocstories_incorrect_ending_classification",
    "task221_rocstories_two_choice_classification",
    "task268_casehold_legal_answer_generation",
    "task296_storycloze_correct_end_classification",
    "task297_storycloze_incorrect_end_classification",
    "task1393_superglue_copa_text_completion",  # COPA: the more plausible continuation, A or B
    # multiple-choice question answering (category Question Answering, options as labels)
    "task073_commonsenseqa_answer_generation",
    "task104_semeval_2019_task10_closed_vocabulary_mathematical_answer_generation",
    "task228_arc_answer_generation_easy",
    "task229_arc_answer_generation_hard",
    "task230_iirc_passage_classification",
    "task231_iirc_link_classification",
    "task309_race_answer_generation",
    "task580_socialiqa_answer_generation",
    "task1135_xcsr_en_commonsense_mc_classification",
    "task1431_head_qa_answer_generation",
}


def test_semantically_equivalent_subset_is_the_papers_18_tasks_on_the_real_metadata(shared_data: Path) -> None:
    import ast

    sni_dir = shared_data / "sni"
    study = (sni_dir / "splits" / "classification_tasks" / "test_tasks.txt").read_text().split()
    categories = tasks.read_categories(sni_dir / "task_info" / "full_task_info.csv")
    info = pd.read_csv(sni_dir / "splits" / "classification_tasks" / "test_tasks_info.csv").set_index("Name")
    chosen = {
        name
        for name in study
        if tasks.semantically_equivalent(
            name, categories[name], tuple(ast.literal_eval(info.at[name, "Labels Distribution"]))
        )
    }
    assert len(PAPER_SEMANTICALLY_EQUIVALENT) == 18
    assert chosen == PAPER_SEMANTICALLY_EQUIVALENT


def test_task_table_markdown_keeps_the_labels_in_one_cell(tmp_path: Path) -> None:
    from unsure.report import write_table

    frame = pd.DataFrame({"task": ["t"], "labels": [tasks.label_list(["a|b", "c\nd", *map(str, range(9))])]})
    write_table(frame, tmp_path / "tasks")
    rows = [line for line in (tmp_path / "tasks.md").read_text().splitlines() if line.startswith("|")]
    cells = {len([c for c in re.split(r"(?<!\\)\|", line)]) for line in rows}
    assert cells == {4}  # two cells per row: task, labels


def _authors_source(tok: object, definition: str, demos: list[tuple[str, str]], query: str, limit: int) -> str:
    """The authors' collator, written from its description: definition, then demonstrations while
    ``definition + ' '.join(kept) + next + input`` is at most ``limit`` tokens (stop at the first that
    is not), then the input; a source still over the limit keeps its first ``limit`` tokens, decoded
    without special tokens."""
    import string as _string

    def stop(text: str) -> str:
        return text if text[-1] in _string.punctuation else text + "."

    def n(text: str) -> int:
        return len(tok(text)["input_ids"])  # type: ignore[operator]

    head = stop(definition.strip()) + "\n\n"
    tail = stop(f"Input: {query.strip()}") + "\n\nOutput:"
    kept: list[str] = []
    for x, y in demos:
        block = stop(f"Input: {x.strip()}") + "\n" + stop(f" Output: {y.strip()}") + "\n\n"
        if n(head + " ".join(kept) + block + tail) > limit:
            break
        kept.append(block)
    source = head + "".join(kept) + tail
    ids = tok(source)["input_ids"]  # type: ignore[operator]
    return source if len(ids) <= limit else str(tok.decode(ids[:limit], skip_special_tokens=True))  # type: ignore[attr-defined]


@pytest.mark.parametrize("limit", [2000, 400, 60])
def test_paper_prompts_fit_the_authors_token_limit_on_the_real_tasks(shared_data: Path, limit: int) -> None:
    """Under paper, every prompt of the seven real tasks (k = 16, LOOC, empty input) equals the
    authors' collator on Llama-2's tokenizer: demonstrations dropped from the first that overflows,
    a prompt still too long cut at its end."""
    from transformers import AutoTokenizer

    from unsure.labelbias.scoring import HFTokenCounter

    tok = AutoTokenizer.from_pretrained(shared_data / "tokenizers" / "llama-2-7b")
    fit = prompts.PromptFit(HFTokenCounter(tok), limit)
    dropped = cut = 0
    for file in sorted((shared_data / "sni" / "tasks").glob("*.json")):
        task = tasks.read_task(file)
        rows = task.instances
        pool = list(zip(rows["input"].head(32), rows["output"].head(32), strict=True))
        scorer = ItemScorer(
            object(),  # type: ignore[arg-type]
            {task.name: TaskPrompting(task.definition, task.labels, tuple(pool))},
            shots=[16],
            sets=2,
            paper_prompt=True,
            fit=fit,
        )
        queries = [*rows["input"].iloc[40:43], ""]
        for q in queries:
            item = pd.Series({"task": task.name, "kind": "eval", "input": q, "k": -1, "set": -1, "left_out": -1})
            for k, s, context in scorer.contexts(item):
                demos = prompts.demonstrations(pool, k, s)
                assert context == _authors_source(tok, task.definition, demos, q, limit)
                assert len(tok(context)["input_ids"]) <= limit + 1  # decoding may re-add one leading token
                full = prompts.sni_prompt(task.definition, demos, q, paper=True)
                dropped += context != full and context.endswith("Output:")
                cut += not context.endswith("Output:")
        looc = pd.Series({"task": task.name, "kind": "looc", "input": pool[3][0], "k": 16, "set": 0, "left_out": 3})
        [(_, _, context)] = scorer.contexts(looc)
        demos = prompts.leave_one_out(prompts.demonstrations(pool, 16, 0), 3)
        assert context == _authors_source(tok, task.definition, demos, pool[3][0], limit)
    if limit == 2000:
        assert cut == 0
    else:
        assert dropped > 0
    if limit == 60:
        assert cut > 0


@pytest.mark.parametrize(
    ("k", "s", "first"),
    # the authors' start index: 16·s for k = 0, k·(s+1) for k >= 16, k + 16·s otherwise; 64 wraps to 0
    [(0, 0, 0), (0, 2, 32), (4, 0, 4), (4, 1, 20), (8, 2, 40), (16, 1, 32), (16, 3, 0), (2, 3, 50)],
)
def test_paper_lora_examples_are_the_ones_the_authors_code_picks(k: int, s: int, first: int) -> None:
    pool = [(f"x{i}", f"y{i}") for i in range(64)]
    picked = prompts.training_examples_paper(pool, k, s, 16)
    assert [x for x, _ in picked] == [f"x{(first + i) % 64}" for i in range(16)]
    if s < 64 // max(k, 1):  # a set inside the pool: its demonstrations are never trained on
        assert not set(picked) & set(prompts.demonstrations(pool, k, s))
    if (k, s) == (4, 1):  # ours: the first 16 items besides the demonstrations (pool[4:8])
        assert [x for x, _ in prompts.training_examples(pool, k, s, 16)] == [
            f"x{i}" for i in (*range(4), *range(8, 20))
        ]
