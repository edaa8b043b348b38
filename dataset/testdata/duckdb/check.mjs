// Reads an ndtrace dataset with DuckDB the way a user would and prints what it sees as one JSON
// object. Usage: node check.mjs DATASET_DIR
//
// It reads manifest.json and only the shards it names (readers never list the store), then reports
// the column types, per-shard and total row and token counts, rows whose list lengths disagree with
// num_tokens or num_learned, the Parquet key-value metadata and the compression codecs. The Go test
// dataset/duckdb_test.go compares this with the manifest. Packed shards, if any, are checked too.
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node check.mjs DATASET_DIR');
  process.exit(2);
}
const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
const files = manifest.shards.map((s) => join(dir, s.path));
const quote = (s) => `'${s.replaceAll("'", "''")}'`;
const list = `[${files.map(quote).join(', ')}]`;

const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await instance.connect();
const all = async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJson();

const out = {};
out.columns = Object.fromEntries(
  (await all(`DESCRIBE SELECT * FROM read_parquet(${list})`)).map((r) => [r.column_name, r.column_type]),
);
out.shards = [];
for (const [i, f] of files.entries()) {
  const [r] = await all(
    `SELECT count(*)::INTEGER AS rows, sum(num_tokens)::INTEGER AS tokens,
            sum(num_learned)::INTEGER AS learned_tokens FROM read_parquet(${quote(f)})`,
  );
  out.shards.push({ path: manifest.shards[i].path, ...r });
}
[out.total] = await all(
  `SELECT count(*)::INTEGER AS rows, sum(num_tokens)::INTEGER AS tokens,
          count(*) FILTER (WHERE len(input_ids) <> num_tokens)::INTEGER AS bad_input_ids,
          count(*) FILTER (WHERE len(loss_mask) <> num_tokens)::INTEGER AS bad_loss_mask,
          count(*) FILTER (WHERE len(list_filter(loss_mask, m -> m)) <> num_learned)::INTEGER AS bad_learned,
          min(list_min(input_ids))::INTEGER AS min_id
     FROM read_parquet(${list})`,
);
// The globs a user would type over the folder of a configuration (the dataset card's data_files):
// every row and nothing else, equal to the manifest's totals when no stray shard is present.
const globOf = async (folder, sum) => {
  const g = quote(join(dir, folder, '**', '*.parquet'));
  const [r] = await all(`SELECT count(*)::INTEGER AS rows, sum(${sum})::BIGINT AS tokens,
                                count(DISTINCT filename)::INTEGER AS files FROM read_parquet(${g}, filename = true)`);
  r.tokens = Number(r.tokens);
  r.columns = (await all(`DESCRIBE SELECT * FROM read_parquet(${g})`)).map((c) => c.column_name);
  return r;
};
out.glob = await globOf('data', 'num_tokens');
if (manifest.packing) out.packed_glob = await globOf('packed', 'num_tokens');
// The first attempt of many users: every Parquet file under the root.
try {
  const [r] = await all(`SELECT count(*)::INTEGER AS rows FROM read_parquet(${quote(join(dir, '**', '*.parquet'))})`);
  out.root_glob = { rows: r.rows };
} catch (e) {
  out.root_glob = { error: String(e.message ?? e).split('\n')[0] };
}
out.kv = {};
for (const r of await all(
  `SELECT decode(key) AS key, decode(value) AS value FROM parquet_kv_metadata(${quote(files[0])})`,
)) {
  out.kv[r.key] = r.value;
}
out.compression = (await all(`SELECT DISTINCT compression FROM parquet_metadata(${list}) ORDER BY 1`)).map(
  (r) => r.compression,
);
out.row_groups = (
  await all(`SELECT file_name, count(DISTINCT row_group_id)::INTEGER AS n FROM parquet_metadata(${list}) GROUP BY 1 ORDER BY 1`)
).map((r) => r.n);
// Packed sequences, if the dataset has them: every sequence has the packing length and its segments
// name rows of the shards.
if (manifest.packing) {
  const packed = `[${manifest.packing.shards.map((s) => quote(join(dir, s.path))).join(', ')}]`;
  [out.packed] = await all(
    `SELECT count(*)::INTEGER AS sequences, sum(num_tokens)::INTEGER AS tokens,
            count(*) FILTER (WHERE len(input_ids) <> ${Number(manifest.packing.length)})::INTEGER AS bad_length,
            count(*) FILTER (WHERE len(segment_starts) <> len(row_ids))::INTEGER AS bad_segments,
            (SELECT count(*) FROM (SELECT unnest(row_ids) AS id FROM read_parquet(${packed}))
              WHERE id NOT IN (SELECT id FROM read_parquet(${list})))::INTEGER AS unknown_rows
       FROM read_parquet(${packed})`,
  );
}
console.log(JSON.stringify(out));
con.closeSync();
instance.closeSync();
