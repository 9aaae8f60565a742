"""The local model zoo, a part of its own: tiny models of real architectures, random or briefly trained.

- :mod:`unsure.zoo.build`: tokenizers, configs and seeded weights (what rule ``zoo_model`` runs);
- :mod:`unsure.zoo.training`: the brief training of a built causal LM on the studies' known truth;
- :mod:`unsure.zoo.corpus`: one module of training examples per study, in that study's request
  formats, and the registry the trainer reads them from;
- :mod:`unsure.zoo.seeds`: the per-model and per-study seeds both of them derive.

Imports run one way: the zoo uses the study rooms (their prompts and request builders), the
generators and the engine; none of them imports the zoo.
"""
