// Package dataset writes trajectories as Parquet shards with a manifest to object storage, validates
// datasets and computes their statistics.
package dataset
