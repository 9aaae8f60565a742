"""Language models as risk scores on ACS PUMS tasks (Cruz et al., folktexts).

persons (all state zips, once) -> task rows (population, label, seeded split,
feature text) -> inference, one job per model and shard (every task and prompting) -> all per-row
scores in one file and the metrics; baselines (LR, XGBoost), permutation
importance, increasing evidence -> tables (paper numbering) and figures; plus
the per-instance file the subgroups study reads."""

from unsure.riskscores.tasks import person_columns

RISK = CFG.studies.riskscores
RS = "results/riskscores"
RS_LOGS = f"{RS}/logs"
RS_TASK_TABLES = {
    "ACSIncome": "table1",
    "ACSEmployment": "tableA1",
    "ACSMobility": "tableA2",
    "ACSTravelTime": "tableA3",
    "ACSPublicCoverage": "tableA4",
}
RS_TABLES = [RS_TASK_TABLES.get(t, f"table_{t}") for t in RISK.tasks]
RS_FIGURES = [
    "fig2",
    "fig3",
    "fig4",
    "fig5",
    "fig6",
    "figA1",
    "figA2",
    "figA3",
    "figA4",
    "figA5",
    "figA6",
    "figA7",
    "figA8",
    "figA9",
]
RS_IMPORTANCE = [
    (m, t)
    for t in RISK.analysis_tasks("importance")
    for m in [*RISK.analysis_models("importance"), "xgboost"]
]
RS_EVIDENCE = [
    (m, t)
    for t in RISK.analysis_tasks("evidence")
    for m in [*RISK.analysis_models("evidence"), "xgboost"]
]

# Importance files whose mean orders a task's evidence features (least important first): every
# model whose importance is computed on the task anyway (XGBoost always), so that ordering
# never asks for an LLM analysis the config did not.
RS_ORDER = {
    t: [
        f"{RS}/analysis/importance/{m}/{t}.parquet"
        for m in ([m for m, task in RS_IMPORTANCE if task == t] or ["xgboost"])
    ]
    for t in RISK.tasks
}
# figure A4: a web-API model's subgroup calibration (the paper: GPT-4o mini); else the first model
# (a study without models is skipped by `all`: any defined model fills the unused figure parameter)
RS_API_MODEL = next(
    (m for m in RISK.models if CFG.models[m].backend == "openai"),
    (RISK.models or tuple(CFG.models) or (None,))[0],
)
# What each table and figure is about, in the report; one-task figures show the first task.
RS_TABLE_LABELS = {table: {"task": t} for t, table in zip(RISK.tasks, RS_TABLES)} | {
    # one task: that task's name, so that the label does not become a report toggle
    "metrics": {"task": "all tasks" if len(RISK.tasks) > 1 else RISK.tasks[0]},
    "reproduction": {"task": "all tasks" if len(RISK.tasks) > 1 else RISK.tasks[0]},
}
RS_ANALYSIS_LABELS = {
    key: {
        "task": (
            "all tasks"
            if RISK.analysis_tasks(key) == RISK.tasks
            else ", ".join(RISK.analysis_tasks(key))
        ),
        "model": (
            "all models"
            if RISK.analysis_models(key) == RISK.models
            else ", ".join(RISK.analysis_models(key))
        )
        + ", XGBoost",
    }
    for key in ("importance", "evidence")
}
RS_FIGURE_LABELS = {
    "fig2": {"task": "all tasks", "model": "instruct models"},
    "fig3": {"task": RISK.tasks[0], "model": "base vs instruct"},
    "fig4": {"task": RISK.tasks[0], "model": "all models, LR, XGBoost"},
    "fig5": {"task": RISK.tasks[0], "model": "base vs instruct, XGBoost"},
    "fig6": {"task": RISK.tasks[0], "model": "largest subgroup gap"},
    "figA1": {"task": "all tasks", "model": "all models"},
    "figA2": {"task": "all tasks", "model": "all models"},
    "figA3": {"task": RISK.tasks[0], "model": "all models, XGBoost"},
    "figA4": {"task": RISK.tasks[0], "model": RS_API_MODEL},
    "figA5": {"task": RISK.tasks[0], "model": "all models"},
    "figA6": {"task": RISK.tasks[0], "model": "all models"},
    "figA7": RS_ANALYSIS_LABELS["evidence"],
    "figA8": RS_ANALYSIS_LABELS["evidence"],
    "figA9": RS_ANALYSIS_LABELS["importance"],
}
# Tables of custom tasks (table_<name>) share one caption.
RS_TABLE_CAPTIONS = {t: "table_custom" for t in RS_TABLES if t.startswith("table_")}
# what a job needs of a task: its custom_tasks entry (None for a folktables task)
RS_SPECS = {
    t: (RISK.custom_tasks[t].model_dump() if t in RISK.custom_tasks else None)
    for t in RISK.tasks
}
# what one inference job scores, in its outputs' order: every task and prompting, so that a
# job loads its model once (a 70B model loads in minutes) and runs all of them on its shard
RS_SCORED = [(t, p) for t in RISK.tasks for p in RISK.prompting]
RS_RUNS = [
    {
        "model": m,
        "task": t,
        "prompting": p,
        "shards": [
            f"{RS}/scores/shards/{m}/{t}/{p}/{k}.parquet" for k in range(RISK.shards)
        ],
    }
    for m in RISK.models
    for t, p in RS_SCORED
]


wildcard_constraints:
    rs_task="|".join(RISK.tasks),
    rs_model="[A-Za-z0-9][A-Za-z0-9._-]*",
    rs_prompting="multiple_choice|numeric",
    rs_shard=r"\d+",


rule riskscores_persons:
    input:
        zips=expand(
            f"{ACS_RAW}/csv_p{{state}}.zip", state=[s.lower() for s in ACS.states]
        ),
        dictionary=ACS_DICTIONARY,
    output:
        f"{RS}/data/persons.parquet",
    log:
        f"{RS_LOGS}/persons.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        columns=person_columns(RISK.custom_tasks.values(), [RISK.subgroup_column]),
    script:
        "../../scripts/riskscores/persons.py"


rule riskscores_task:
    input:
        persons=f"{RS}/data/persons.parquet",
        dictionary=ACS_DICTIONARY,
    output:
        f"{RS}/data/{{rs_task}}.parquet",
    log:
        f"{RS_LOGS}/task/{{rs_task}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        spec=lambda wc: RS_SPECS[wc.rs_task],
        n_train=RISK.n_train,
        n_eval=RISK.n_eval,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/task.py"


rule riskscores_infer:
    input:
        rows=expand(f"{RS}/data/{{task}}.parquet", task=RISK.tasks),
        dictionary=ACS_DICTIONARY,
        model=lambda wc: model_files(wc.rs_model),
    output:
        [
            f"{RS}/scores/shards/{{rs_model}}/{t}/{p}/{{rs_shard}}.parquet"
            for t, p in RS_SCORED
        ],
    log:
        f"{RS_LOGS}/infer/{{rs_model}}/{{rs_shard}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: model_gpus(wc.rs_model),
    params:
        model=lambda wc: CFG.models[wc.rs_model].model_dump(),
        tasks=list(RISK.tasks),
        prompting=list(RISK.prompting),
        specs=RS_SPECS,
        year=ACS.year,
        shards=RISK.shards,
        chunk_rows=RISK.chunk_rows,
        threshold_rows=RISK.threshold_rows,
        both_orders=RISK.both_orders,
        protocol=RISK.protocol,
        few_shot=RISK.few_shot,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/infer.py"


rule riskscores_baselines:
    input:
        rows=f"{RS}/data/{{rs_task}}.parquet",
        dictionary=ACS_DICTIONARY,
    output:
        f"{RS}/scores/baselines/{{rs_task}}.parquet",
    log:
        f"{RS_LOGS}/baselines/{{rs_task}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        spec=lambda wc: RS_SPECS[wc.rs_task],
        threshold_rows=RISK.threshold_rows,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/baselines.py"


rule riskscores_importance:
    input:
        rows=f"{RS}/data/{{rs_task}}.parquet",
        dictionary=ACS_DICTIONARY,
        model=lambda wc: [] if wc.rs_model == "xgboost" else model_files(wc.rs_model),
    output:
        f"{RS}/analysis/importance/{{rs_model}}/{{rs_task}}.parquet",
    log:
        f"{RS_LOGS}/importance/{{rs_model}}/{{rs_task}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: 0 if wc.rs_model == "xgboost" else model_gpus(wc.rs_model),
    params:
        model=lambda wc: (
            None if wc.rs_model == "xgboost" else CFG.models[wc.rs_model].model_dump()
        ),
        spec=lambda wc: RS_SPECS[wc.rs_task],
        rows=RISK.importance.rows,
        year=ACS.year,
        both_orders=RISK.both_orders,
        protocol=lambda wc: None if wc.rs_model == "xgboost" else RISK.protocol,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/importance.py"


rule riskscores_evidence:
    input:
        rows=f"{RS}/data/{{rs_task}}.parquet",
        dictionary=ACS_DICTIONARY,
        order=lambda wc: RS_ORDER[wc.rs_task],
        model=lambda wc: [] if wc.rs_model == "xgboost" else model_files(wc.rs_model),
    output:
        f"{RS}/analysis/evidence/{{rs_model}}/{{rs_task}}.parquet",
    log:
        f"{RS_LOGS}/evidence/{{rs_model}}/{{rs_task}}.log",
    conda:
        "../../envs/unsure.yaml"
    resources:
        gpu=lambda wc: 0 if wc.rs_model == "xgboost" else model_gpus(wc.rs_model),
    params:
        model=lambda wc: (
            None if wc.rs_model == "xgboost" else CFG.models[wc.rs_model].model_dump()
        ),
        spec=lambda wc: RS_SPECS[wc.rs_task],
        rows=RISK.evidence.rows,
        year=ACS.year,
        both_orders=RISK.both_orders,
        protocol=lambda wc: None if wc.rs_model == "xgboost" else RISK.protocol,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/evidence.py"


rule riskscores_metrics:
    input:
        shards=[path for run in RS_RUNS for path in run["shards"]],
        rows=expand(f"{RS}/data/{{task}}.parquet", task=RISK.tasks),
        baselines=expand(f"{RS}/scores/baselines/{{task}}.parquet", task=RISK.tasks),
    output:
        scores=f"{RS}/scores/scores.parquet",
        metrics=f"{RS}/scores/metrics.parquet",
        table=report_outputs("riskscores", "tables", ["metrics"], RS_TABLE_LABELS),
    log:
        f"{RS_LOGS}/metrics.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        runs=RS_RUNS,
        tasks=list(RISK.tasks),
    script:
        "../../scripts/riskscores/metrics.py"


rule riskscores_tables:
    input:
        f"{RS}/scores/metrics.parquet",
    output:
        report_outputs(
            "riskscores",
            "tables",
            [*RS_TABLES, "reproduction"],
            RS_TABLE_LABELS,
            RS_TABLE_CAPTIONS,
        ),
    log:
        f"{RS_LOGS}/tables.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        tables=dict(zip(RISK.tasks, RS_TABLES)),
        protocol=RISK.protocol,
    script:
        "../../scripts/riskscores/tables.py"


rule riskscores_figures:
    input:
        metrics=f"{RS}/scores/metrics.parquet",
        scores=f"{RS}/scores/scores.parquet",
        rows=expand(f"{RS}/data/{{task}}.parquet", task=RISK.tasks),
        dictionary=ACS_DICTIONARY,
        importance=[
            f"{RS}/analysis/importance/{m}/{t}.parquet" for m, t in RS_IMPORTANCE
        ],
        evidence=[f"{RS}/analysis/evidence/{m}/{t}.parquet" for m, t in RS_EVIDENCE],
    output:
        report_outputs("riskscores", "figures", RS_FIGURES, RS_FIGURE_LABELS),
    log:
        f"{RS_LOGS}/figures.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models={m: CFG.models[m].instruct for m in RISK.models},
        tasks=list(RISK.tasks),
        subgroup_column=RISK.subgroup_column,
        api_model=RS_API_MODEL,
        api_model_is_api=CFG.models[RS_API_MODEL].backend == "openai",
        protocol=RISK.protocol,
        seed=RISK.seed,
    script:
        "../../scripts/riskscores/figures.py"


rule riskscores_subgroups_input:
    input:
        rows=expand(f"{RS}/data/{{task}}.parquet", task=RISK.tasks),
        scores=f"{RS}/scores/scores.parquet",
        dictionary=ACS_DICTIONARY,
    output:
        f"{RS}/scores/subgroups_input.parquet",
    log:
        f"{RS_LOGS}/subgroups_input.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        tasks=list(RISK.tasks),
        specs=RS_SPECS,
        protocol=RISK.protocol,
    script:
        "../../scripts/riskscores/subgroups_input.py"


rule riskscores_all:
    input:
        rules.riskscores_tables.output,
        rules.riskscores_figures.output,
        rules.riskscores_metrics.output,
        rules.riskscores_subgroups_input.output,
        "results/riskscores/provenance.json",
