// Reads the rows of an ndtrace dataset folder with DuckDB by several sources (globs, folders or
// file lists) and prints the row ids each gives, as one JSON object. Usage: node versions.mjs
// READS_JSON, where the file READS_JSON maps a name to a list of paths or globs, read together.
// The Go test dataset/duckdb_test.go (TestReadersAfterVersions) compares the ids with each
// version's rows.
import { DuckDBInstance } from '@duckdb/node-api';
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node versions.mjs READS_JSON');
  process.exit(2);
}
const reads = JSON.parse(readFileSync(file, 'utf8'));
const instance = await DuckDBInstance.create(':memory:', { threads: '1' });
const con = await instance.connect();
const quote = (s) => `'${s.replaceAll("'", "''")}'`;
const out = {};
for (const [name, sources] of Object.entries(reads)) {
  try {
    const list = `[${sources.map(quote).join(', ')}]`;
    const rows = (await con.runAndReadAll(`SELECT id FROM read_parquet(${list}) ORDER BY id`)).getRowObjectsJson();
    out[name] = { rows: rows.length, ids: rows.map((r) => r.id) };
  } catch (e) {
    out[name] = { error: String(e.message ?? e).split('\n')[0] };
  }
}
console.log(JSON.stringify(out));
