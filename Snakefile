"""unsure: five studies of how far language-model probabilities can be trusted.

snakemake --profile slurm all                     # paper scale, on SLURM
snakemake all --configfile config/demo.yaml       # the embedded demo, locally
snakemake results/<study>/figures/<name>.png      # one figure only
"""

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

from unsure.config import ConfigError, read_default_config

min_version("9.0")


# The paper config, unless --configfile names another: that one replaces it
# (never merged into it), in this process and in every cluster job. It is read
# first with the project's loader, which refuses YTE templates (Snakemake's
# loader runs them) and names a missing file's remedy. A --configfile is read
# by Snakemake before this file runs: `unsure run` checks those (unsure.run).
if not workflow.overwrite_configfiles:
    try:
        read_default_config()
    except ConfigError as err:
        raise WorkflowError(str(err)) from None

    configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/subgroups.smk"
include: "workflow/rules/riskscores.smk"
include: "workflow/rules/nextword.smk"
include: "workflow/rules/decisionrisk.smk"
include: "workflow/rules/labelbias.smk"
include: "workflow/rules/provenance.smk"


ACTIVE = CFG.active_studies()  # a study without models is skipped, with a warning


include: "workflow/rules/profile.smk"


rule all:
    default_target: True
    input:
        rules.data_all.input,
        rules.models_all.input,
        [getattr(rules, f"{study}_all").input for study in ACTIVE],
        expand("results/{study}/provenance.json", study=ACTIVE),
        rules.profile.output if PROFILE_MODELS else [],  # models in two or more studies
