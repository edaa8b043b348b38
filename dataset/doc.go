// Package dataset writes trajectories as Parquet shards with a manifest to object storage, validates
// datasets and computes their statistics. A dataset folder holds the rows in data/, packed
// sequences in packed/, a Hugging Face dataset card (README.md, RenderCard) naming both as
// configurations, and its bookkeeping elsewhere (versions/, batches/, work/), so that a glob over a
// configuration's folder reads that data and nothing else (docs/dataset.md, "Layout").
package dataset
