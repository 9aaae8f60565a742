"""Human next-word variability vs language models on the Provo Corpus (Ilia & Aziz).

prepare (positions, human counts, oracle splits) -> per model and mode: sample
shard k of K (engine) -> merge into a samples file (JSON Lines, the same format
a pre-collected file has) -> evaluate every system -> analyses -> tables and
figures. Side branches: the biased estimator (appendix A), the token level
(appendix D) and fine-tuning over passage folds (appendix F)."""

NW = CFG.studies.nextword
NWR = "results/nextword"
NW_LOGS = f"{NWR}/logs"
NW_MODELS = CFG.study_models("nextword")
NW_SHARDS = list(range(NW.shards))
NW_TABLES = ["table1", "table2", "table3", "table4", "reproduction"]
NW_FIGURES = [
    "fig1",
    "fig2",
    "fig3",
    "fig4",
    "fig5",
    "fig10",
    "fig12",
    "appB_predictors",
    "appC_sample_size",
    "appD_tokens",
    "appE_improvement",
    "appF_finetune",
]
NW_FOLDS = list(range(NW.finetune.folds)) if NW.finetune.model else []


# Instruct models: the chat prompting modes; others: one sampling run per temperature.
NW_MODES = {
    m: list(NW.chat_modes) if e.instruct else [f"t{t:g}" for t in NW.temperatures]
    for m, e in NW_MODELS.items()
}
NW_RUNS = [(m, mode) for m in NW_MODELS for mode in NW_MODES[m]]
# A system's name in the tables: the model for unbiased sampling, else model-mode.
NW_SYSTEMS = {
    (m if mode == "t1" else f"{m}-{mode}"): f"{NWR}/samples/{m}/{mode}.jsonl"
    for m, mode in NW_RUNS
}
NW_SYSTEMS.update(NW.sample_files)
# Table 1's GPT2_F: the fine-tuned model's samples of each held-out fold, one system like any other.
NW_FINETUNED = f"{NWR}/samples/{NW.finetune.model}/finetuned.jsonl"
if NW.finetune.model:
    NW_SYSTEMS[f"{NW.finetune.model}-ft"] = NW_FINETUNED
# The model every follow-up analysis looks at: the first non-instruct model sampled without bias.
NW_MAIN = next((m for m, mode in NW_RUNS if mode == "t1"), next(iter(NW_SYSTEMS)))
# Which systems each table and figure shows, in the report.
NW_TABLE_LABELS = {
    "table1": {"model": "all systems"},
    "table2": {"model": ", ".join(NW.biased_models) or "none configured"},
    "table3": {"model": NW_MAIN},
    "table4": {"model": ", ".join(NW.token_models) or "none configured"},
    "reproduction": {"model": "all systems"},
}
NW_FIGURE_LABELS = {
    **{fig: {"model": NW_MAIN} for fig in NW_FIGURES},
    "fig2": {"model": "all systems"},
    "fig5": {"model": ", ".join(NW.biased_models) or "none configured"},
    "fig12": {"model": "all systems"},
    "appD_tokens": {"model": ", ".join(NW.token_models) or "none configured"},
    "appF_finetune": {"model": NW.finetune.model or "none configured"},
}
NW_NLTK = NW.nltk_data or "resources/nextword/nltk_data"
NW_VECTORS = (
    NW.word_vectors_path or "resources/nextword/word2vec-google-news-300.bin.gz"
)


wildcard_constraints:
    mode="t[0-9.]+|single|list",
    shard=r"\d+",
    fold=r"\d+",


rule nextword_prepare:
    input:
        PROVO_NORMS,
    output:
        positions=f"{NWR}/scores/positions.parquet",
        human=f"{NWR}/scores/human.parquet",
        corpus=f"{NWR}/scores/corpus.parquet",
        splits=f"{NWR}/scores/splits.parquet",
        typed=f"{NWR}/scores/typed.parquet",
    log:
        f"{NW_LOGS}/prepare.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        passages=list(NW.passages),
        splits=NW.oracle_splits,
        seed=NW.seed,
    script:
        "../../scripts/nextword/prepare.py"


rule nextword_sample:
    input:
        positions=f"{NWR}/scores/positions.parquet",
        model=lambda wc: model_files(wc.model),
    output:
        f"{NWR}/samples/{{model}}/{{mode}}/shard{{shard}}.parquet",
    log:
        f"{NW_LOGS}/sample/{{model}}/{{mode}}/shard{{shard}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.model),
    params:
        entry=lambda wc: CFG.models[wc.model].model_dump(),
        n=lambda wc: (
            NW.n_samples_large if wc.model in NW.large_models else NW.n_samples
        ),
        n_shards=NW.shards,
        seed=NW.seed,
        max_new_tokens=NW.max_new_tokens,
    script:
        "../../scripts/nextword/sample.py"


rule nextword_merge_samples:
    input:
        expand(
            f"{NWR}/samples/{{{{model}}}}/{{{{mode}}}}/shard{{shard}}.parquet",
            shard=NW_SHARDS,
        ),
    output:
        samples=f"{NWR}/samples/{{model}}/{{mode}}.jsonl",
        stats=f"{NWR}/samples/{{model}}/{{mode}}_stats.json",
    log:
        f"{NW_LOGS}/merge/{{model}}/{{mode}}.log",
    conda:
        "../../envs/unsure.yaml"
    script:
        "../../scripts/nextword/merge_samples.py"


rule nextword_biased:
    input:
        positions=f"{NWR}/scores/positions.parquet",
        typed=f"{NWR}/scores/typed.parquet",
        samples=f"{NWR}/samples/{{model}}/t1.jsonl",
        model=lambda wc: model_files(wc.model),
    output:
        f"{NWR}/biased/{{model}}/shard{{shard}}.parquet",
    log:
        f"{NW_LOGS}/biased/{{model}}/shard{{shard}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.model),
    params:
        entry=lambda wc: CFG.models[wc.model].model_dump(),
        n_shards=NW.shards,
        nucleus=list(NW.nucleus),
        nucleus_samples=NW.nucleus_samples,
        seed=NW.seed,
        max_new_tokens=NW.max_new_tokens,
    script:
        "../../scripts/nextword/biased.py"


rule nextword_tokens:
    input:
        positions=f"{NWR}/scores/positions.parquet",
        human=f"{NWR}/scores/human.parquet",
        model=lambda wc: model_files(wc.model),
    output:
        f"{NWR}/tokens/{{model}}.parquet",
    log:
        f"{NW_LOGS}/tokens/{{model}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.model),
    params:
        entry=lambda wc: CFG.models[wc.model].model_dump(),
    script:
        "../../scripts/nextword/tokens.py"


rule nextword_finetune:
    input:
        norms=PROVO_NORMS,
        model=lambda wc: model_files(NW.finetune.model),
    output:
        model=directory(f"{NWR}/finetune/fold{{fold}}/model"),
        losses=f"{NWR}/finetune/fold{{fold}}/losses.parquet",
    log:
        f"{NW_LOGS}/finetune/fold{{fold}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(NW.finetune.model),
    params:
        entry=CFG.models[NW.finetune.model].model_dump() if NW.finetune.model else None,
        settings=NW.finetune.model_dump(),
        protocol=NW.protocol,
    script:
        "../../scripts/nextword/finetune.py"


rule nextword_finetune_sample:
    input:
        positions=f"{NWR}/scores/positions.parquet",
        tuned=f"{NWR}/finetune/fold{{fold}}/model",
        model=lambda wc: model_files(NW.finetune.model),
    output:
        base=f"{NWR}/finetune/fold{{fold}}/base.jsonl",
        tuned=f"{NWR}/finetune/fold{{fold}}/tuned.jsonl",
    log:
        f"{NW_LOGS}/finetune/sample_fold{{fold}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(NW.finetune.model),
    params:
        entry=CFG.models[NW.finetune.model].model_dump() if NW.finetune.model else None,
        settings=NW.finetune.model_dump(),
        seed=NW.seed,
        max_new_tokens=NW.max_new_tokens,
    script:
        "../../scripts/nextword/finetune_sample.py"


rule nextword_finetune_merge:
    input:
        expand(f"{NWR}/finetune/fold{{fold}}/tuned.jsonl", fold=NW_FOLDS),
    output:
        NW_FINETUNED,
    log:
        f"{NW_LOGS}/finetune/merge.log",
    conda:
        "../../envs/unsure.yaml"
    script:
        "../../scripts/nextword/finetune_merge.py"


if NW.pos_tagger == "nltk" and not NW.nltk_data:

    rule nextword_nltk_data:
        output:
            directory(NW_NLTK),
        log:
            f"{NW_LOGS}/nltk_data.log",
        conda:
            "../../envs/unsure.yaml"
        script:
            "../../scripts/nextword/nltk_data.py"


if NW.word_vectors != "generated" and not NW.word_vectors_path:

    rule nextword_word2vec:
        output:
            NW_VECTORS,
        log:
            f"{NW_LOGS}/word2vec.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            name=NW.word_vectors,
        script:
            "../../scripts/nextword/word2vec.py"


NW_SCORES = dict(
    positions=f"{NWR}/scores/positions.parquet",
    human=f"{NWR}/scores/human.parquet",
    corpus=f"{NWR}/scores/corpus.parquet",
    splits=f"{NWR}/scores/splits.parquet",
)


rule nextword_evaluate:
    input:
        **NW_SCORES,
        systems=list(NW_SYSTEMS.values()),
    output:
        metrics=f"{NWR}/scores/metrics.parquet",
        tvd=f"{NWR}/scores/tvd.parquet",
    log:
        f"{NW_LOGS}/evaluate.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        systems=list(NW_SYSTEMS),
        n_bins=NW.ece_bins,
    script:
        "../../scripts/nextword/evaluate.py"


rule nextword_analysis:
    input:
        **NW_SCORES,
        model=NW_SYSTEMS[NW_MAIN],
        nltk=[NW_NLTK] if NW.pos_tagger == "nltk" else [],
        vectors=[NW_VECTORS] if NW.word_vectors != "generated" else [],
    output:
        improvement=f"{NWR}/scores/improvement.parquet",
        hardness=f"{NWR}/scores/hardness.parquet",
        ard=f"{NWR}/scores/ard.parquet",
        sample_size=f"{NWR}/scores/sample_size.parquet",
        groups=f"{NWR}/scores/group_tvd.parquet",
        notes=f"{NWR}/scores/analysis_notes.json",
    log:
        f"{NW_LOGS}/analysis.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        system=NW_MAIN,
        options=NW.model_dump(),
        nltk_data=lambda wc, input: input.nltk[0] if input.nltk else None,
        vectors=lambda wc, input: input.vectors[0] if input.vectors else None,
    script:
        "../../scripts/nextword/analysis.py"


rule nextword_tables:
    input:
        **NW_SCORES,
        metrics=f"{NWR}/scores/metrics.parquet",
        ard=f"{NWR}/scores/ard.parquet",
        norms=PROVO_NORMS,
        systems=list(NW_SYSTEMS.values()),
        samples=[f"{NWR}/samples/{m}/t1.jsonl" for m in NW.biased_models],
        biased=expand(
            f"{NWR}/biased/{{model}}/shard{{shard}}.parquet",
            model=NW.biased_models,
            shard=NW_SHARDS,
        ),
        tokens=[f"{NWR}/tokens/{m}.parquet" for m in NW.token_models],
    output:
        report_outputs("nextword", "tables", NW_TABLES, NW_TABLE_LABELS),
        tokens=f"{NWR}/scores/token_tvd.parquet",
        biased_tvd=f"{NWR}/scores/biased_tvd.parquet",
    log:
        f"{NW_LOGS}/tables.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        systems=list(NW_SYSTEMS),
        biased_models=list(NW.biased_models),
        token_models=list(NW.token_models),
        n_bins=NW.ece_bins,
        protocol=NW.protocol,
        passages=list(NW.passages),
        # the printed values only beside the real norms (generated ones are not the paper's)
        printed=CFG.data.provo.source != "generated",
    script:
        "../../scripts/nextword/tables.py"


rule nextword_figures:
    input:
        **NW_SCORES,
        tvd=f"{NWR}/scores/tvd.parquet",
        model=NW_SYSTEMS[NW_MAIN],
        improvement=f"{NWR}/scores/improvement.parquet",
        hardness=f"{NWR}/scores/hardness.parquet",
        ard=f"{NWR}/scores/ard.parquet",
        sample_size=f"{NWR}/scores/sample_size.parquet",
        groups=f"{NWR}/scores/group_tvd.parquet",
        tokens=f"{NWR}/scores/token_tvd.parquet",
        biased_tvd=f"{NWR}/scores/biased_tvd.parquet",
        losses=expand(f"{NWR}/finetune/fold{{fold}}/losses.parquet", fold=NW_FOLDS),
        base=expand(f"{NWR}/finetune/fold{{fold}}/base.jsonl", fold=NW_FOLDS),
        tuned=expand(f"{NWR}/finetune/fold{{fold}}/tuned.jsonl", fold=NW_FOLDS),
    output:
        report_outputs("nextword", "figures", NW_FIGURES, NW_FIGURE_LABELS),
    log:
        f"{NW_LOGS}/figures.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        system=NW_MAIN,
        systems=list(NW_SYSTEMS),
        protocol=NW.protocol,
        seed=NW.seed,
    script:
        "../../scripts/nextword/figures.py"


rule nextword_all:
    input:
        rules.nextword_tables.output,
        rules.nextword_figures.output,
        "results/nextword/provenance.json",
