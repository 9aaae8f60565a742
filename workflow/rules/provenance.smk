"""Which weights, code, packages and settings made each study's results.

One rule per study, written after the study's outputs (the rest of its
``<study>_all``, which asks for it too) and again whenever they or the study's
config slice change; the report files it under the study as ``provenance``.
"""

for _study in STUDIES:

    rule:
        name:
            f"{_study}_provenance"
        input:
            [
                f
                for f in getattr(rules, f"{_study}_all").input
                if f != f"results/{_study}/provenance.json"
            ],
        output:
            report(
                f"results/{_study}/provenance.json",
                caption="../report/provenance.rst",
                category=_study,
                subcategory="provenance",
                labels={"record": "provenance"},
            ),
        log:
            f"{LOGS}/provenance/{_study}.log",
        conda:
            "../../envs/unsure.yaml"
        params:
            study=_study,
            settings=json.dumps(study_settings(CFG, _study), sort_keys=True),
        script:
            "../../scripts/common/provenance.py"
