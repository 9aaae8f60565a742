"""Precise per-subgroup performance from few observations (Fogliato et al.).

Inputs are the per-instance results of the source studies (schema in
unsure.subgroups.schema): studies.subgroups.inputs.<source> names each file,
or `generated` writes one with known subgroup means. Then, per source:
prepare (subgroups, truths, features) -> evaluate (repeated draws, every
estimator); across sources: summarize -> tables and figures."""

SUBGROUPS = CFG.studies.subgroups
SG = "results/subgroups"
SG_LOGS = f"{SG}/logs"
SG_SOURCES = list(type(SUBGROUPS.inputs).model_fields)
SG_TABLES = ["table1", "table2", "table3", "separately", "loco", "reproduction"]
SG_FIGURES = ["fig1", "fig2", "fig3", "fig4", "fig7"]
# what each figure is about, in the report (fig1: one model of the first source)
SG_FIGURE_LABELS = {
    "fig1": {"source": SG_SOURCES[0]},
    **{f: {"source": "all sources"} for f in ["fig2", "fig3", "fig4"]},
    "fig7": {"source": "riskscores"},
}
SG_PROTOCOL_KEYS = (
    "repetitions",
    "equal_sizes",
    "alpha",
    "min_eval_rows",
    "floor_subgroup_rows",
    "folds",
    "sr_trees",
    "sr_depths",
    "sr_learning_rate",
    "lasso_lambdas",
    "protocol",
    "seed",
)
SG_PREPARE_KEYS = (
    "embedding_dim",
    "max_clusters",
    "min_cluster_rows",
    "min_intersection_rows",
    "seed",
)
SG_PROTOCOL = {k: v for k, v in SUBGROUPS.model_dump().items() if k in SG_PROTOCOL_KEYS}
SG_PREPARE = {k: v for k, v in SUBGROUPS.model_dump().items() if k in SG_PREPARE_KEYS}


wildcard_constraints:
    source="|".join(SG_SOURCES),


# Models a generated source answers with: the source study's models, XGBoost for ACS.
SG_GENERATED_MODELS = {
    source: (
        ["xgboost"]
        if source == "riskscores"
        else list(getattr(CFG.studies, source).models) or ["model-a", "model-b"]
    )
    for source in SG_SOURCES
}


rule subgroups_generate:
    output:
        instances=f"{SG}/inputs/{{source}}.parquet",
        means=f"{SG}/inputs/{{source}}_means.parquet",
    log:
        f"{SG_LOGS}/generate/{{source}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models=lambda wc: SG_GENERATED_MODELS[wc.source],
        rows=SUBGROUPS.generated_rows,
        subgroups=SUBGROUPS.generated_subgroups,
        seed=CFG.seed,
    script:
        "../../scripts/subgroups/generate.py"


rule subgroups_prepare:
    input:
        # the configured per-instance file of the source, or the generated one
        lambda wc: (
            f"{SG}/inputs/{wc.source}.parquet"
            if getattr(SUBGROUPS.inputs, wc.source) == "generated"
            else getattr(SUBGROUPS.inputs, wc.source)
        ),
    output:
        rows=f"{SG}/scores/{{source}}_rows.parquet",
        units=f"{SG}/scores/{{source}}_units.parquet",
    log:
        f"{SG_LOGS}/prepare/{{source}}.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        options=SG_PREPARE,
    script:
        "../../scripts/subgroups/prepare.py"


rule subgroups_evaluate:
    input:
        rows=f"{SG}/scores/{{source}}_rows.parquet",
        units=f"{SG}/scores/{{source}}_units.parquet",
    output:
        estimates=f"{SG}/scores/{{source}}_estimates.parquet",
        problems=f"{SG}/scores/{{source}}_problems.parquet",
        importance=f"{SG}/scores/{{source}}_importance.parquet",
    log:
        f"{SG_LOGS}/evaluate/{{source}}.log",
    conda:
        "../../envs/unsure.yaml"
    threads: SUBGROUPS.threads
    params:
        protocol=SG_PROTOCOL,
    script:
        "../../scripts/subgroups/evaluate.py"


rule subgroups_summarize:
    input:
        expand(f"{SG}/scores/{{source}}_estimates.parquet", source=SG_SOURCES),
    output:
        f"{SG}/scores/unit_metrics.parquet",
    log:
        f"{SG_LOGS}/summarize.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        sources=SG_SOURCES,
    script:
        "../../scripts/subgroups/summarize.py"


rule subgroups_tables:
    input:
        units=f"{SG}/scores/unit_metrics.parquet",
        importance=expand(
            f"{SG}/scores/{{source}}_importance.parquet", source=SG_SOURCES
        ),
    output:
        report_outputs("subgroups", "tables", SG_TABLES),
    log:
        f"{SG_LOGS}/tables.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        sources=SG_SOURCES,
        small_n=SUBGROUPS.small_subgroup,
        protocol=SUBGROUPS.protocol,
        # the paper's Tables 2 and 3 are about LLM results; riskscores is tabular (its Fig. 7)
        ledger_sources=[s for s in SG_SOURCES if s != "riskscores"],
    script:
        "../../scripts/subgroups/tables.py"


rule subgroups_figures:
    input:
        units=f"{SG}/scores/unit_metrics.parquet",
        estimates=f"{SG}/scores/{SG_SOURCES[0]}_estimates.parquet",
    output:
        report_outputs("subgroups", "figures", SG_FIGURES, SG_FIGURE_LABELS),
    log:
        f"{SG_LOGS}/figures.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        small_n=SUBGROUPS.small_subgroup,
        alpha=SUBGROUPS.alpha,
        seed=SUBGROUPS.seed,
    script:
        "../../scripts/subgroups/figures.py"


rule subgroups_all:
    input:
        rules.subgroups_tables.output,
        rules.subgroups_figures.output,
        "results/subgroups/provenance.json",
