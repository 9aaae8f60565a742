"""Label bias of LLM classifiers on SUPER-NATURALINSTRUCTIONS (Reif & Schwartz).

prepare (task filter, instance draws, items to score) -> infer (model x shard:
every item under every k / demonstration-set context) [+ lora (model x part: fine-tune
per task, k and set, score)] -> evaluate (per model: calibration, metrics)
-> differences (per model: each prompt difference of the protocols flipped alone; per
fine-tuned model: each LoRA difference) -> tables, figures, and the per-instance file for
the subgroups study."""

from unsure.labelbias.lineup import figure_lineup, model_table

LABELBIAS = CFG.studies.labelbias
# The label scoring the tables and figures lead with (both are computed from one inference run).
LB_SCORING = "paper" if LABELBIAS.protocol == "paper" else "corrected"
LB = "results/labelbias"
LB_LOGS = f"{LB}/logs"
LB_MODELS = list(LABELBIAS.models)
LB_MODEL_TABLE = model_table(
    LB_MODELS,
    {m: CFG.models[m].instruct for m in LB_MODELS},
    {m: (f.family, f.size) for m, f in LABELBIAS.families.items()},
)
try:
    LB_FIGURE_SPECS = figure_lineup(LB_MODEL_TABLE, LABELBIAS.figure_family)
except ValueError as err:
    raise WorkflowError(f"config key {err}") from None
LB_FIGURES = [spec.name for spec in LB_FIGURE_SPECS]
LB_TABLES = ["tasks", "per_task", "summary", "reproduction"]
# In the report: each figure is labelled with the family it draws; appendix figures share a caption.
LB_FIGURE_LABELS = {
    spec.name: {"model": spec.family or "every family"} for spec in LB_FIGURE_SPECS
}
LB_FIGURE_CAPTIONS = {spec.name: spec.caption for spec in LB_FIGURE_SPECS}
LB_LORA = LABELBIAS.lora
LB_LORA_MODELS = list(LABELBIAS.lora_models())
for i, name in enumerate(LB_LORA.models):
    if name not in LB_MODELS:
        raise WorkflowError(
            f"config key studies.labelbias.lora.models[{i}]: {name!r} is not one of the study's models"
        )
LB_LORA_RUNS = LABELBIAS.lora_runs()
# The LoRA score files each model's evaluation waits for (none when it is not fine-tuned).
LB_LORA_SCORES = {
    model: [
        f"{LB}/scores/lora/{model}/part{part}.parquet" for part in range(LB_LORA.shards)
    ]
    for model in LB_LORA_MODELS
}
LB_PREPARED = {
    "tasks": f"{LB}/data/tasks.parquet",
    "instances": f"{LB}/data/instances.parquet",
    "score_items": f"{LB}/data/items.parquet",
}


wildcard_constraints:
    lb_model="|".join(LB_MODELS) or "none",
    lb_shard=r"\d+",
    lb_part=r"\d+",


rule labelbias_prepare:
    input:
        raw=SNI_RAW,
        task_info=[LABELBIAS.task_info] if LABELBIAS.task_info else [],
        templates=[LABELBIAS.input_templates] if LABELBIAS.input_templates else [],
    output:
        **LB_PREPARED,
    log:
        f"{LB_LOGS}/prepare.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        sizes={
            k: getattr(LABELBIAS, k)
            for k in (
                "n_eval",
                "n_heldout",
                "n_pool",
                "min_eval_instances",
                "max_labels",
            )
        },
        shots=LABELBIAS.shots,
        sets=LABELBIAS.demonstration_sets,
        content_free=LABELBIAS.content_free_inputs,
        domain_inputs=LABELBIAS.domain_inputs,
        seed=LABELBIAS.seed,
        protocol=LABELBIAS.protocol,
    script:
        "../../scripts/labelbias/prepare.py"


rule labelbias_infer:
    input:
        **LB_PREPARED,
        model=lambda wc: model_files(wc.lb_model),
    output:
        f"{LB}/scores/shards/{{lb_model}}/shard{{lb_shard}}.parquet",
    log:
        f"{LB_LOGS}/infer/{{lb_model}}/shard{{lb_shard}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.lb_model),
    params:
        entry=lambda wc: CFG.models[wc.lb_model].model_dump(),
        shards=LABELBIAS.shards,
        shots=LABELBIAS.shots,
        sets=LABELBIAS.demonstration_sets,
        chat=LABELBIAS.chat_template,
        chunk_rows=LABELBIAS.chunk_rows,
        protocol=LABELBIAS.protocol,
        max_prompt_tokens=LABELBIAS.max_prompt_tokens,
    script:
        "../../scripts/labelbias/infer.py"


rule labelbias_lora:
    input:
        **LB_PREPARED,
        model=lambda wc: model_files(wc.lb_model),
    output:
        adapters=directory(f"{LB}/adapters/{{lb_model}}/part{{lb_part}}"),
        scores=f"{LB}/scores/lora/{{lb_model}}/part{{lb_part}}.parquet",
    log:
        f"{LB_LOGS}/lora/{{lb_model}}/part{{lb_part}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.lb_model),
    params:
        entry=lambda wc: CFG.models[wc.lb_model].model_dump(),
        lora=LB_LORA.model_dump(),
        runs=[[k, s] for k, s in LB_LORA_RUNS],
        parts=LB_LORA.shards,
        chat=LABELBIAS.chat_template,
        seed=LABELBIAS.seed,
        protocol=LABELBIAS.protocol,
        max_prompt_tokens=LABELBIAS.max_prompt_tokens,
    script:
        "../../scripts/labelbias/lora.py"


rule labelbias_evaluate:
    input:
        tasks=LB_PREPARED["tasks"],
        score_items=LB_PREPARED["score_items"],
        shards=expand(
            f"{LB}/scores/shards/{{{{lb_model}}}}/shard{{shard}}.parquet",
            shard=range(LABELBIAS.shards),
        ),
        lora=lambda wc: LB_LORA_SCORES.get(wc.lb_model, []),
    output:
        scores=f"{LB}/scores/{{lb_model}}.parquet",
        methods=f"{LB}/scores/{{lb_model}}_methods.parquet",
        metrics=f"{LB}/scores/{{lb_model}}_metrics.parquet",
    log:
        f"{LB_LOGS}/evaluate/{{lb_model}}.log",
    conda:
        "../../envs/unsure.yaml"
    script:
        "../../scripts/labelbias/evaluate.py"


# Each prompt-changing difference between the protocols flipped alone: only the prompts it
# changes are scored again, as the other protocol renders them (tables/reproduction).
rule labelbias_differences:
    input:
        **LB_PREPARED,
        scores=f"{LB}/scores/{{lb_model}}.parquet",
        templates=[LABELBIAS.input_templates] if LABELBIAS.input_templates else [],
        model=lambda wc: model_files(wc.lb_model),
    output:
        metrics=f"{LB}/scores/differences/{{lb_model}}_metrics.parquet",
        evidence=f"{LB}/scores/differences/{{lb_model}}_evidence.parquet",
    log:
        f"{LB_LOGS}/differences/{{lb_model}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.lb_model),
    params:
        entry=lambda wc: CFG.models[wc.lb_model].model_dump(),
        shots=LABELBIAS.shots,
        sets=LABELBIAS.demonstration_sets,
        content_free=LABELBIAS.content_free_inputs,
        domain_inputs=LABELBIAS.domain_inputs,
        seed=LABELBIAS.seed,
        protocol=LABELBIAS.protocol,
        chat=LABELBIAS.chat_template,
        max_prompt_tokens=LABELBIAS.max_prompt_tokens,
        scoring=LB_SCORING,
    script:
        "../../scripts/labelbias/differences.py"


# The two LoRA differences (targets, examples) flipped alone: each model that is fine-tuned is
# fine-tuned again, at one (k, set) per difference, the first the config fine-tunes where the
# difference changes the training examples (tables/reproduction).
rule labelbias_lora_differences:
    input:
        **LB_PREPARED,
        model=lambda wc: model_files(wc.lb_model),
    output:
        metrics=f"{LB}/scores/differences/lora/{{lb_model}}_metrics.parquet",
        evidence=f"{LB}/scores/differences/lora/{{lb_model}}_evidence.parquet",
    log:
        f"{LB_LOGS}/differences/lora/{{lb_model}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.lb_model),
    params:
        entry=lambda wc: CFG.models[wc.lb_model].model_dump(),
        lora=LB_LORA.model_dump(),
        runs=[[k, s] for k, s in LB_LORA_RUNS],
        chat=LABELBIAS.chat_template,
        seed=LABELBIAS.seed,
        protocol=LABELBIAS.protocol,
        max_prompt_tokens=LABELBIAS.max_prompt_tokens,
        scoring=LB_SCORING,
    script:
        "../../scripts/labelbias/lora_differences.py"


rule labelbias_tables:
    input:
        tasks=LB_PREPARED["tasks"],
        metrics=expand(f"{LB}/scores/{{model}}_metrics.parquet", model=LB_MODELS),
        flipped=expand(
            f"{LB}/scores/differences/{{model}}_metrics.parquet", model=LB_MODELS
        ),
        evidence=expand(
            f"{LB}/scores/differences/{{model}}_evidence.parquet", model=LB_MODELS
        ),
        lora_flipped=expand(
            f"{LB}/scores/differences/lora/{{model}}_metrics.parquet",
            model=LB_LORA_MODELS,
        ),
        lora_evidence=expand(
            f"{LB}/scores/differences/lora/{{model}}_evidence.parquet",
            model=LB_LORA_MODELS,
        ),
    output:
        report_outputs("labelbias", "tables", LB_TABLES),
    log:
        f"{LB_LOGS}/tables.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models=LB_MODEL_TABLE.to_dict("list"),
        protocol=LABELBIAS.protocol,
        scoring=LB_SCORING,
    script:
        "../../scripts/labelbias/tables.py"


rule labelbias_figures:
    input:
        tasks=LB_PREPARED["tasks"],
        metrics=expand(f"{LB}/scores/{{model}}_metrics.parquet", model=LB_MODELS),
    output:
        report_outputs(
            "labelbias",
            "figures",
            LB_FIGURES,
            LB_FIGURE_LABELS,
            LB_FIGURE_CAPTIONS,
        ),
    log:
        f"{LB_LOGS}/figures.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models=LB_MODEL_TABLE.to_dict("list"),
        protocol=LABELBIAS.protocol,
        scoring=LB_SCORING,
        figure_family=LABELBIAS.figure_family,
        seed=LABELBIAS.seed,
    script:
        "../../scripts/labelbias/figures.py"


rule labelbias_subgroups_input:
    input:
        score_items=LB_PREPARED["score_items"],
        methods=expand(f"{LB}/scores/{{model}}_methods.parquet", model=LB_MODELS),
    output:
        f"{LB}/scores/subgroups_input.parquet",
    log:
        f"{LB_LOGS}/subgroups_input.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models=LB_MODELS,
        k=LABELBIAS.subgroups_shots,
        set=LABELBIAS.subgroups_set,
        scoring=LB_SCORING,
    script:
        "../../scripts/labelbias/subgroups_input.py"


rule labelbias_all:
    input:
        rules.labelbias_tables.output,
        rules.labelbias_figures.output,
        rules.labelbias_subgroups_input.output,
        expand(f"{LB}/scores/{{model}}_methods.parquet", model=LB_MODELS),
        "results/labelbias/provenance.json",
