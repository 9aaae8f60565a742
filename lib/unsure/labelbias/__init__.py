"""Label bias of LLM classifiers on SUPER-NATURALINSTRUCTIONS (Reif & Schwartz, 2024).

:mod:`~unsure.labelbias.tasks` selects the classification tasks and draws the
evaluation, held-out and pool instances; :mod:`~unsure.labelbias.prompts`
builds the SNI prompts and every item to score; :mod:`~unsure.labelbias.scoring`
turns engine log-likelihoods into label probabilities;
:mod:`~unsure.labelbias.metrics` and :mod:`~unsure.labelbias.calibration` hold
the metrics (accuracy, macro-F1, RSD, BiasScore) and the calibration methods
(CC, DC, LOOC); :mod:`~unsure.labelbias.tables` applies them per task, model,
k and demonstration set; :mod:`~unsure.labelbias.plots` draws the figures.
"""
