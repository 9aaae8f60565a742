"""Download NLTK's averaged perceptron tagger and the universal tagset mapping into one folder."""

from unsure.forkserver import hand_off

hand_off()

import nltk

from unsure.io import atomic_dir
from unsure.logs import logged

PACKAGES = ("averaged_perceptron_tagger_eng", "universal_tagset")

with logged(snakemake.log[0]) as log, atomic_dir(snakemake.output[0]) as tmp:
    for package in PACKAGES:
        if not nltk.download(package, download_dir=str(tmp), quiet=True, raise_on_error=True):
            raise RuntimeError(
                f"could not download NLTK package {package!r}; set studies.nextword.nltk_data to a folder holding it"
            )
        log.info("downloaded %s", package)
