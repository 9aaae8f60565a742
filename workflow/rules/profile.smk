"""One uncertainty profile per model, across the studies (unsure.profile).

For every model that two or more active studies run: each study's headline
numbers, read by the study's own room from the outputs it already writes (no
inference runs again), side by side in one table and one figure, with the
rank correlations of the studies' calibration measures across those models."""

PROFILE = "results/profile"
# The files each study's `headline` reads (unsure.<study>), in the order it takes them.
PROFILE_FILES = {
    "riskscores": ["results/riskscores/scores/metrics.parquet"],
    "nextword": ["results/nextword/tables/table1.csv"],
    "labelbias": ["results/labelbias/tables/summary.csv"],
    "decisionrisk": [
        "results/decisionrisk/tables/table1.csv",
        "results/decisionrisk/tables/table2.csv",
    ],
    "subgroups": ["results/subgroups/scores/unit_metrics.parquet"],
}
# Subgroups sources read from generated files: rows named after a study's models, not its results.
PROFILE_STAND_INS = [
    s for s in SG_SOURCES if getattr(SUBGROUPS.inputs, s) == "generated"
]
# The models whose per-instance results the subgroups study reads, per source: a generated
# source answers with its study's models, a study's own per-instance file holds them; the
# models of any other file are not known before it is read, and do not count here.
PROFILE_SOURCE_MODELS = {
    source: (
        SG_GENERATED_MODELS[source]
        if getattr(SUBGROUPS.inputs, source) == "generated"
        else (
            list(getattr(CFG.studies, source).models)
            if getattr(SUBGROUPS.inputs, source)
            == f"results/{source}/scores/subgroups_input.parquet"
            else []
        )
    )
    for source in SG_SOURCES
}
# The models each active study runs.
PROFILE_MEMBERS = {
    study: (
        [m for ms in PROFILE_SOURCE_MODELS.values() for m in ms]
        if study == "subgroups"
        else list(getattr(CFG.studies, study).models)
    )
    for study in ACTIVE
}
# Models in two or more active studies, in order of first appearance.
PROFILE_MODELS = [
    model
    for model in dict.fromkeys(m for ms in PROFILE_MEMBERS.values() for m in ms)
    if sum(model in ms for ms in PROFILE_MEMBERS.values()) >= 2
]
PROFILE_STUDIES = [
    study for study in ACTIVE if set(PROFILE_MEMBERS[study]) & set(PROFILE_MODELS)
]
PROFILE_LABELS = {
    "profile": {"model": f"{len(PROFILE_MODELS)} models in two or more studies"},
    "correlations": {"model": f"{len(PROFILE_MODELS)} models in two or more studies"},
}


rule profile:
    input:
        **{study: PROFILE_FILES[study] for study in PROFILE_STUDIES},
    output:
        report_outputs("profile", "tables", ["profile", "correlations"], PROFILE_LABELS),
        report_outputs(
            "profile",
            "figures",
            ["profile"],
            PROFILE_LABELS,
            {"profile": "profile_figure"},
        ),
    log:
        f"{PROFILE}/logs/profile.log",
    conda:
        "../../envs/unsure.yaml"
    params:
        models=PROFILE_MODELS,
        studies=PROFILE_STUDIES,
        protocols={
            study: getattr(CFG.studies, study).protocol for study in PROFILE_STUDIES
        },
        nextword_models=list(CFG.studies.nextword.models),
        stand_ins=PROFILE_STAND_INS,
        # for the captions: which of the models each study runs
        members={
            study: [
                m for m in dict.fromkeys(PROFILE_MEMBERS[study]) if m in PROFILE_MODELS
            ]
            for study in PROFILE_STUDIES
        },
    script:
        "../../scripts/profile/profile.py"
