// Reads an ndtrace dataset folder with nodejs-polars the way a user would and prints what it sees
// as one JSON object. Usage: node check.mjs DATASET_DIR
//
// It scans the rows folder (data/) by glob, and the packed folder (packed/) if
// present, and reports row counts, token sums, column names and types. The Go test
// dataset/polars_test.go compares this with the manifest.
import pl from 'nodejs-polars';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node check.mjs DATASET_DIR');
  process.exit(2);
}

const scan = (source) => {
  const lf = pl.scanParquet(source);
  const df = lf.select(pl.len().alias('rows'), pl.col('num_tokens').cast(pl.Int64).sum().alias('tokens')).collectSync();
  const schema = lf.limit(1).collectSync().schema;
  return {
    rows: Number(df.getColumn('rows').get(0)),
    tokens: Number(df.getColumn('tokens').get(0)),
    columns: Object.keys(schema),
    types: Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, String(v)])),
  };
};

const out = {};
out.glob = scan(join(dir, 'data', '**', '*.parquet'));
// The bare folder (scanParquet('DIR/data/')) reads the same: data/ holds Parquet files only (no
// metadata sidecars; TestReadersAfterVersions reads it).
if (existsSync(join(dir, 'packed'))) out.packed_glob = scan(join(dir, 'packed', '**', '*.parquet'));
console.log(JSON.stringify(out));
