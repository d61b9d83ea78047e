"""The data layer: artefact layout and the pipeline steps (fetch, ingest, chunk, graph, index, candidates).

Every package that consumes artefacts (retrieval systems, answers, training, experiments, the API) reads
them through here; nothing here imports the orchestration in `fixgraph.experiment`.
"""
