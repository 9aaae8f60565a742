"""Deciding when to answer (Shen & Kejriwal): risk injection, decision rules, composite risk.

:mod:`~unsure.decisionrisk.data` reads the four benchmarks' official files
into (prompt, choices, gold) and injects risk (NQ, WQ, NRA);
:mod:`~unsure.decisionrisk.confidences` turns model outputs into confidence
distributions; :mod:`~unsure.decisionrisk.rules` fits and applies the
decision rules; :mod:`~unsure.decisionrisk.metrics` scores them;
:mod:`~unsure.decisionrisk.tables` builds the decisions and tables and
:mod:`~unsure.decisionrisk.plots` the figure; :mod:`~unsure.decisionrisk.infer`
scores instances with the generative models.
"""
