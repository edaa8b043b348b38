// Reads the rows of an ndtrace dataset folder with nodejs-polars by several sources (globs, folders
// or file lists) and prints the row ids each gives, as one JSON object. Usage: node versions.mjs
// READS_JSON, where the file READS_JSON maps a name to a list of paths, globs or folders, read
// together. The Go test dataset/duckdb_test.go (TestReadersAfterVersions) compares the ids with
// each version's rows.
import pl from 'nodejs-polars';
import { readFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) {
  console.error('usage: node versions.mjs READS_JSON');
  process.exit(2);
}
const reads = JSON.parse(readFileSync(file, 'utf8'));
const out = {};
for (const [name, sources] of Object.entries(reads)) {
  try {
    const frames = sources.map((s) => pl.scanParquet(s).select('id').collectSync());
    const ids = (frames.length === 1 ? frames[0] : pl.concat(frames)).getColumn('id').toArray().sort();
    out[name] = { rows: ids.length, ids };
  } catch (e) {
    out[name] = { error: String(e.message ?? e).split('\n')[0] };
  }
}
console.log(JSON.stringify(out));
