// Package dataset writes trajectories as Parquet shards with a manifest to object storage, validates
// datasets and computes their statistics. The pipeline writes every shard once into the pool
// (pool/data/, pool/packed/) and every version's manifest names its shards there; data/ and packed/
// hold copies of the head version's shards only (Publish), a Hugging Face dataset card (README.md,
// RenderCard) names both folders as configurations, and the bookkeeping is elsewhere (versions/,
// batches/, work/), so that a glob over a configuration's folder reads that data of one version and
// nothing else (docs/dataset.md, "Layout").
package dataset
