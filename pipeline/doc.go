// Package pipeline holds the stages of a dataset run that read and write the store, and the
// records that pass between them (plan pages, batches, trace chunks, batch records, page
// summaries). An item is traced by package execute and turned into rows by package rows; the
// stages plan, store and gather. It imports neither Temporal nor any storage driver: the stages
// read and write a store.Store, report progress through a Beat, and the activities package calls
// each of them in a line or two.
//
// The stages of a dataset run, in order (docs/operations.md has the sizes and ceilings):
//
//   - ScanPage reads the next page of the spec's sources from a cursor: it writes the page's items,
//     the sorted run of their dedup keys and the page's rejects (malformed rows, repositories that
//     do not resolve, decontaminated functions), and returns the cursor of the next page.
//   - MergeKeys merges the key runs of every page (and of the datasets named in dedup_against) in
//     one streaming pass: it writes, per page, which items duplicate an earlier one, and the run's
//     dedup keys, sharded by prefix, for later datasets.
//   - FormBatches turns each page's items, minus its duplicates, into batches: a repository is a
//     batch of its own, functions go BatchSize to a batch in source order. Each batch is one object:
//     a batch workflow receives only its key.
//   - TraceBatch traces a batch's items in the sandbox into write-once chunks, resumable from a
//     cursor; an item that kills its attempts repeatedly becomes a `poison` reject.
//   - BuildShard turns the traces into rows, writes the batch's shard, its packed shard and its
//     record with the batch's statistics.
//   - ScanFunctions, then MergeKeys and FormBatches again, plan the function-level items found in
//     the repositories' tests.
//   - FinalizePage gathers the records of a page of batches (shards, rejects, statistics) into
//     per-version objects; Commit merges the pages, writes the version's manifest and commits it.
//
// Every stage is idempotent: its outputs are written once (a retry finds them), and a stage that
// may run long takes a cursor to resume from and reports its progress to a Beat.
package pipeline
