"""The local model zoo: tiny models of real architectures, briefly trained on the
generators' known truth when zoo.training (or the model's own training) is set
(lib/unsure/zoo_training.py)."""


# First of all jobs (priority): a 2-thread build waits for both cores, which a 2-core run
# of 1-thread jobs rarely frees, so it starved until the end (the CI shadow: a model
# nextword's chain waits on started at 1,252 of 1,318 s). An untrained build needs 1 thread.
rule zoo_model:
    output:
        directory("resources/models/{name}"),
    log:
        f"{LOGS}/models/{{name}}.log",
    priority: 50
    conda:
        "../../envs/unsure.yaml"
    threads: lambda wc: 1 if CFG.zoo_training(wc.name) is None else 2
    params:
        spec=lambda wc: CFG.zoo.models[wc.name].model_dump(),
        zoo_seed=CFG.zoo.seed,
        corpus_sentences=CFG.zoo.corpus_sentences,
        training=lambda wc: (
            None
            if CFG.zoo_training(wc.name) is None
            else CFG.zoo_training(wc.name).model_dump(mode="json")
        ),
        studies=lambda wc: CFG.zoo_training_studies(wc.name),
    script:
        "../../scripts/models/build_zoo_model.py"


rule models_all:
    input:
        expand("resources/models/{name}", name=zoo_models_in_use()),
