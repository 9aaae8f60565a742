"""Deciding when to answer (Shen & Kejriwal): risk injection, decision rules, composite risk.

Per benchmark: instances (official files -> prompt, choices, gold; NQ/WQ/NRA
copies) -> encoder fine-tuned on the training split -> encoder confidences;
prompt-choice similarities; per (generative model, benchmark, shard):
log-likelihood and, for chat models, verbalised confidences on the
validation split. Then rules fitted on the encoder's training features decide
on every model's validation instances -> tables, figure, subgroups input."""

from pathlib import Path

from unsure.config import ZOO_DIR

DECISIONRISK = CFG.studies.decisionrisk
DR = "results/decisionrisk"
DR_LOGS = f"{DR}/logs"
DR_ENCODER = DECISIONRISK.encoder
DR_MODELS = list(DECISIONRISK.models)
DR_BENCHMARKS = list(DECISIONRISK.benchmarks) if DR_ENCODER else []
DR_SHARDS = DECISIONRISK.shards
DR_TABLES = ["table1", "table2", "verbal_parse", "reproduction"]
# Which models each table and figure is about, in the report.
DR_LABELS = {
    name: {"model": "encoder and all models"}
    for name in ["table1", "table2", "fig2", "reproduction"]
} | {"verbal_parse": {"model": "instruct models"}}
# A zoo path as embedder is built by the zoo rule first.
DR_EMBEDDER_FILES = (
    [DECISIONRISK.embedder]
    if Path(DECISIONRISK.embedder).parent.as_posix() == ZOO_DIR
    else []
)


rule decisionrisk_instances:
    input:
        f"{MCQA_RAW}/{{benchmark}}",
    output:
        f"{DR}/instances/{{benchmark}}.parquet",
    log:
        f"{DR_LOGS}/instances/{{benchmark}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        n_train=DECISIONRISK.n_train,
        n_val=DECISIONRISK.n_val,
        injections=list(DECISIONRISK.injections),
        seed=DECISIONRISK.seed,
    script:
        "../../scripts/decisionrisk/instances.py"


rule decisionrisk_encoder:
    input:
        instances=f"{DR}/instances/{{benchmark}}.parquet",
        model=model_files(DR_ENCODER) if DR_ENCODER else [],
    output:
        model=directory(f"{DR}/encoders/{{benchmark}}"),
        summary=f"{DR}/scores/encoder/{{benchmark}}_training.json",
        scores=f"{DR}/scores/encoder/{{benchmark}}.parquet",
    log:
        f"{DR_LOGS}/encoder/{{benchmark}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=model_gpus(DR_ENCODER) if DR_ENCODER else 0,
    params:
        model=CFG.models[DR_ENCODER].model_dump() if DR_ENCODER else {},
        settings=DECISIONRISK.finetune.model_dump(),
        folds=DECISIONRISK.crossfit_folds,
        chunk_rows=DECISIONRISK.chunk_rows,
        seed=DECISIONRISK.seed,
    script:
        "../../scripts/decisionrisk/encoder.py"


rule decisionrisk_similarity:
    input:
        instances=expand(
            f"{DR}/instances/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
        embedder=DR_EMBEDDER_FILES,
    output:
        f"{DR}/scores/similarity.parquet",
    log:
        f"{DR_LOGS}/similarity.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        # the zoo build itself when the embedder is a zoo path, else the hub id
        embedder=lambda wc, input: (
            input.embedder[0] if DR_EMBEDDER_FILES else DECISIONRISK.embedder
        ),
    script:
        "../../scripts/decisionrisk/similarity.py"


# One job per (model, shard) over every benchmark's validation instances: the
# model is loaded once per shard.
rule decisionrisk_generative:
    input:
        instances=expand(
            f"{DR}/instances/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
        model=lambda wc: model_files(wc.model),
    output:
        f"{DR}/scores/generative/{{model}}/shard-{{shard}}-of-{{n_shards}}.parquet",
    log:
        f"{DR_LOGS}/generative/{{model}}/shard-{{shard}}-of-{{n_shards}}.log",
    wildcard_constraints:
        model="|".join(DR_MODELS) or "(?!)",
        shard=r"\d+",
        n_shards=r"\d+",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.model),
    params:
        entry=lambda wc: CFG.models[wc.model].model_dump(),
        normalize=DECISIONRISK.normalize_loglik,
        max_new_tokens=DECISIONRISK.verbal_max_new_tokens,
        chunk_rows=DECISIONRISK.chunk_rows,
    script:
        "../../scripts/decisionrisk/score_generative.py"


rule decisionrisk_decide:
    input:
        instances=f"{DR}/instances/{{benchmark}}.parquet",
        encoder=f"{DR}/scores/encoder/{{benchmark}}.parquet",
        similarity=f"{DR}/scores/similarity.parquet",
        generative=expand(
            f"{DR}/scores/generative/{{model}}/shard-{{shard}}-of-{DR_SHARDS}.parquet",
            model=DR_MODELS,
            shard=range(DR_SHARDS),
        ),
    output:
        confidences=f"{DR}/scores/confidences/{{benchmark}}.parquet",
        decisions=f"{DR}/scores/decisions/{{benchmark}}.parquet",
    log:
        f"{DR_LOGS}/decide/{{benchmark}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        encoder=DR_ENCODER,
        models=DR_MODELS,
        injections=list(DECISIONRISK.injections),
        forest=DECISIONRISK.forest.model_dump(),
        seed=DECISIONRISK.seed,
        protocol=DECISIONRISK.protocol,
    script:
        "../../scripts/decisionrisk/decide.py"


rule decisionrisk_tables:
    input:
        decisions=expand(
            f"{DR}/scores/decisions/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
        confidences=expand(
            f"{DR}/scores/confidences/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
    output:
        report_outputs("decisionrisk", "tables", DR_TABLES, DR_LABELS),
    log:
        f"{DR_LOGS}/tables.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        benchmarks=DR_BENCHMARKS,
        injections=list(DECISIONRISK.injections),
        levels=list(DECISIONRISK.levels),
        rrr_level=DECISIONRISK.rrr_level,
        encoder=DR_ENCODER,
        protocol=DECISIONRISK.protocol,
    script:
        "../../scripts/decisionrisk/tables.py"


rule decisionrisk_figures:
    input:
        decisions=expand(
            f"{DR}/scores/decisions/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
        confidences=expand(
            f"{DR}/scores/confidences/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
    output:
        report_outputs("decisionrisk", "figures", ["fig2"], DR_LABELS),
    log:
        f"{DR_LOGS}/figures.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        benchmarks=DR_BENCHMARKS,
    script:
        "../../scripts/decisionrisk/figures.py"


rule decisionrisk_subgroups_input:
    input:
        instances=expand(
            f"{DR}/instances/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
        confidences=expand(
            f"{DR}/scores/confidences/{{benchmark}}.parquet", benchmark=DR_BENCHMARKS
        ),
    output:
        f"{DR}/scores/subgroups_input.parquet",
    log:
        f"{DR_LOGS}/subgroups_input.log",
    conda:
        "../../envs/unsure.yaml"
    script:
        "../../scripts/decisionrisk/subgroups_input.py"


rule decisionrisk_all:
    input:
        rules.decisionrisk_tables.output if DR_BENCHMARKS else [],
        rules.decisionrisk_figures.output if DR_BENCHMARKS else [],
        rules.decisionrisk_subgroups_input.output if DR_BENCHMARKS else [],
        "results/decisionrisk/provenance.json" if DR_BENCHMARKS else [],
