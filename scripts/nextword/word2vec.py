"""Download pretrained word vectors from the gensim-data release (word2vec binary, gzipped)."""

from unsure.forkserver import hand_off

hand_off()

from unsure.download import all_of, fetch, nonempty, not_html
from unsure.logs import logged

URL = "https://github.com/RaRe-Technologies/gensim-data/releases/download/{name}/{name}.gz"

with logged(snakemake.log[0]):
    fetch(
        URL.format(name=snakemake.params.name),
        snakemake.output[0],
        validate=all_of(nonempty, not_html),
        config_key="studies.nextword.word_vectors_path",
        timeout=600,
    )
