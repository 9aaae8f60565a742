"""Raw data: generated in the real layouts, downloaded from the real URLs, or
copied from a local directory (``data.<source>.source``). Either way the files
land in the same layout under resources/data/<source>/raw, so one parser reads
them all."""

ACS = CFG.data.acs
ACS_RAW = f"resources/data/acs/raw/{ACS.year}/{ACS.horizon}"
ACS_DICTIONARY = (
    f"{ACS_RAW}/PUMS_Data_Dictionary_"
    + (str(ACS.year) if ACS.horizon == "1-Year" else f"{ACS.year - 4}-{ACS.year}")
    + ".csv"
)
PROVO_NORMS = "resources/data/provo/raw/Provo_Corpus-Predictability_Norms.csv"
SNI_RAW = "resources/data/sni/raw"
# The label-bias study's summaries of every SNI task; studies.labelbias.task_info
# names this path in the paper config, so the rule below runs before its filter.
SNI_TASK_INFO = "resources/data/sni/task_info/full_task_info.csv"
# ... and its input templates, which its domain-context inputs follow (studies.labelbias.input_templates).
SNI_INPUT_TEMPLATES = (
    "resources/data/sni/task_info/classification_task_input_templates.csv"
)
MCQA_RAW = "resources/data/mcqa/raw"


wildcard_constraints:
    state="[a-z]{2}",
    benchmark="|".join(["anli", "hellaswag", "piqa", "siqa"]),


if ACS.source == "generated":

    rule acs_generate_state:
        output:
            f"{ACS_RAW}/csv_p{{state}}.zip",
        log:
            f"{LOGS}/data/acs_generate_state/{{state}}.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            year=ACS.year,
            rows=ACS.generated_rows_per_state,
            seed=CFG.seed,
        script:
            "../../scripts/data/acs_generate_state.py"

    rule acs_generate_dictionary:
        output:
            ACS_DICTIONARY,
        log:
            f"{LOGS}/data/acs_generate_dictionary.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            year=ACS.year,
        script:
            "../../scripts/data/acs_generate_dictionary.py"

else:

    rule acs_fetch_state:
        output:
            f"{ACS_RAW}/csv_p{{state}}.zip",
        log:
            f"{LOGS}/data/acs_fetch_state/{{state}}.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            year=ACS.year,
            horizon=ACS.horizon,
            local_dir=ACS.local_dir,
            mirror=ACS.mirror,
        script:
            "../../scripts/data/acs_fetch.py"

    rule acs_fetch_dictionary:
        output:
            ACS_DICTIONARY,
        log:
            f"{LOGS}/data/acs_fetch_dictionary.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            year=ACS.year,
            horizon=ACS.horizon,
            local_dir=ACS.local_dir,
            mirror=ACS.mirror,
        script:
            "../../scripts/data/acs_fetch.py"


if CFG.data.provo.source == "generated":

    rule provo_generate:
        output:
            PROVO_NORMS,
        log:
            f"{LOGS}/data/provo_generate.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            passages=CFG.data.provo.generated_passages,
            seed=CFG.seed,
        script:
            "../../scripts/data/provo_generate.py"

else:

    rule provo_fetch:
        output:
            PROVO_NORMS,
        log:
            f"{LOGS}/data/provo_fetch.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            local_dir=CFG.data.provo.local_dir,
            mirror=CFG.data.provo.mirror,
        script:
            "../../scripts/data/provo_fetch.py"


if CFG.data.sni.source == "generated":

    rule sni_generate:
        output:
            directory(SNI_RAW),
        log:
            f"{LOGS}/data/sni_generate.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            tasks=CFG.data.sni.generated_tasks,
            instances=CFG.data.sni.generated_instances_per_task,
            seed=CFG.seed,
        script:
            "../../scripts/data/sni_generate.py"

    # The generated tasks' input templates, in the study's layout (studies.labelbias.input_templates),
    # so that the demo's domain-context inputs take the multi-part inputs' markers as the real ones do.
    rule sni_generate_input_templates:
        output:
            SNI_INPUT_TEMPLATES,
        log:
            f"{LOGS}/data/sni_generate_input_templates.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            tasks=CFG.data.sni.generated_tasks,
        script:
            "../../scripts/data/sni_generate_input_templates.py"

else:

    rule sni_fetch:
        output:
            directory(SNI_RAW),
        log:
            f"{LOGS}/data/sni_fetch.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            tasks=CFG.data.sni.tasks,
            ref=CFG.data.sni.ref,
            local_dir=CFG.data.sni.local_dir,
            mirror=CFG.data.sni.mirror,
        script:
            "../../scripts/data/sni_fetch.py"

    rule sni_task_info:
        output:
            SNI_TASK_INFO,
        log:
            f"{LOGS}/data/sni_task_info.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            local_dir=CFG.data.sni.local_dir,
            mirror=CFG.data.sni.mirror,
        script:
            "../../scripts/data/sni_task_info.py"

    rule sni_input_templates:
        output:
            SNI_INPUT_TEMPLATES,
        log:
            f"{LOGS}/data/sni_input_templates.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            local_dir=CFG.data.sni.local_dir,
            mirror=CFG.data.sni.mirror,
        script:
            "../../scripts/data/sni_input_templates.py"


if CFG.data.mcqa.source == "generated":

    rule mcqa_generate:
        output:
            directory(f"{MCQA_RAW}/{{benchmark}}"),
        log:
            f"{LOGS}/data/mcqa_generate/{{benchmark}}.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            n_train=CFG.data.mcqa.generated_train,
            n_val=CFG.data.mcqa.generated_val,
            seed=CFG.seed,
        script:
            "../../scripts/data/mcqa_generate.py"

else:

    rule mcqa_fetch:
        output:
            directory(f"{MCQA_RAW}/{{benchmark}}"),
        log:
            f"{LOGS}/data/mcqa_fetch/{{benchmark}}.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            local_dir=CFG.data.mcqa.local_dir,
            mirror=CFG.data.mcqa.mirror,
        script:
            "../../scripts/data/mcqa_fetch.py"


rule data_all:
    input:
        expand(f"{ACS_RAW}/csv_p{{state}}.zip", state=[s.lower() for s in ACS.states]),
        ACS_DICTIONARY,
        PROVO_NORMS,
        SNI_RAW,
        SNI_INPUT_TEMPLATES,
        [] if CFG.data.sni.source == "generated" else SNI_TASK_INFO,
        expand(f"{MCQA_RAW}/{{benchmark}}", benchmark=CFG.data.mcqa.benchmarks),
