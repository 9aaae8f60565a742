"""Language models as risk scores on US Census (ACS PUMS) tasks (Cruz et al., folktexts).

The pieces, each a plain module usable from a notebook:

* :mod:`.dictionary` reads the official PUMS data dictionary (Census CSV layout).
* :mod:`.tasks` defines the folktables tasks (and custom ones from config),
  reads the person files and makes the seeded training/evaluation split.
* :mod:`.text` turns a row into one bullet per feature in dictionary words.
* :mod:`.prompts` builds multiple-choice and verbalised-numeric prompts.
* :mod:`.scoring` asks the engine for risk scores.
* :mod:`.metrics`, :mod:`.baselines`, :mod:`.analysis`: calibration and
  discrimination metrics, logistic-regression and XGBoost baselines,
  permutation importance and increasing evidence.
* :mod:`.tables` and :mod:`.plots`: the paper's tables and figures.
"""
