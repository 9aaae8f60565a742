"""The local model zoo: tiny models of real architectures, briefly trained on the
generators' known truth when zoo.training (or the model's own training) is set
(lib/unsure/zoo/training.py)."""


# First of all jobs (priority), on one thread: a tiny model trains as fast on one thread as
# on two (measured on 2 cores), so two builds run side by side where a 2-thread build held
# both cores, and the bytes do not depend on how many cores the machine has.
rule zoo_model:
    input:
        base=zoo_base,
    output:
        directory("resources/models/{name}"),
    log:
        f"{LOGS}/models/{{name}}.log",
    priority: 50
    conda:
        "../../envs/unsure.yaml"
    threads: 1
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
