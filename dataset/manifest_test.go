package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// exampleManifest is the manifest of docs/dataset.md.
func exampleManifest() Manifest {
	return Manifest{
		CreatedAt: time.Date(2026, 11, 22, 8, 30, 0, 0, time.FixedZone("CET", 3600)),
		Config:    json.RawMessage(`{"seed": 7, "policy": "paper", "mask": "states", "max_tokens": 8192, "corpus": {"name": "cruxeval", "partitions": 2}}`),
		Versions:  Versions{Tracer: "1", Pipeline: "0.3.0", Tokenizer: "cl100k_base"},
		Shards: []ShardInfo{
			{Path: "data/part-00001.parquet", Rows: 1024, Tokens: 2101760, LearnedTokens: 1310720, Bytes: 4194304, SHA256: strings.Repeat("b", 64)},
			{Path: "data/part-00000.parquet", Rows: 1000, Tokens: 2048000, LearnedTokens: 1280000, Bytes: 4096000, SHA256: strings.Repeat("a", 64)},
		},
		Counts: schemas.Counts{"rejects.timeout": 3, "rejects.syntax_error": 12, "dropped_too_long": 5},
	}
}

const exampleManifestJSON = `{
  "format": "ndtrace-dataset",
  "format_version": 2,
  "schema_version": "3",
  "created_at": "2026-11-22T07:30:00Z",
  "config": {
    "corpus": {
      "name": "cruxeval",
      "partitions": 2
    },
    "mask": "states",
    "max_tokens": 8192,
    "policy": "paper",
    "seed": 7
  },
  "versions": {
    "tracer": "1",
    "pipeline": "0.3.0",
    "tokenizer": "cl100k_base"
  },
  "shards": [
    {
      "path": "data/part-00000.parquet",
      "rows": 1000,
      "tokens": 2048000,
      "learned_tokens": 1280000,
      "bytes": 4096000,
      "sha256": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
    },
    {
      "path": "data/part-00001.parquet",
      "rows": 1024,
      "tokens": 2101760,
      "learned_tokens": 1310720,
      "bytes": 4194304,
      "sha256": "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
    }
  ],
  "totals": {
    "rows": 2024,
    "tokens": 4149760,
    "learned_tokens": 2590720,
    "shards": 2
  },
  "counts": {
    "dropped_too_long": 5,
    "rejects.syntax_error": 12,
    "rejects.timeout": 3
  }
}
`

func TestManifestCanonicalJSON(t *testing.T) {
	m := exampleManifest()
	if err := m.normalize(); err != nil {
		t.Fatal(err)
	}
	got, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != exampleManifestJSON {
		t.Fatalf("manifest JSON:\n%s\nwant\n%s", got, exampleManifestJSON)
	}
	// The shards' order and the config's key order do not matter.
	m2 := exampleManifest()
	m2.Shards[0], m2.Shards[1] = m2.Shards[1], m2.Shards[0]
	m2.Config = json.RawMessage(`{"corpus":{"partitions":2,"name":"cruxeval"},"seed":7,"max_tokens":8192,"mask":"states","policy":"paper"}`)
	if err := m2.normalize(); err != nil {
		t.Fatal(err)
	}
	got2, err := m2.Marshal()
	if err != nil || !bytes.Equal(got, got2) {
		t.Fatalf("reordered input gave other JSON (%v):\n%s", err, got2)
	}
	p, err := ParseManifest(got)
	if err != nil {
		t.Fatal(err)
	}
	if p.Totals != (Totals{Rows: 2024, Tokens: 4149760, LearnedTokens: 2590720, Shards: 2}) || !p.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("parsed %+v", p)
	}
}

func TestWriteManifestComputedFields(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	a, err := WriteShard(ctx, s, "part-00001", makeRows(t, 0, 3))
	if err != nil {
		t.Fatal(err)
	}
	b, err := WriteShard(ctx, s, "part-00000", makeRows(t, 3, 2))
	if err != nil {
		t.Fatal(err)
	}
	m, err := WriteManifest(ctx, s, Manifest{
		Format:        "bogus", // overwritten
		CreatedAt:     time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("X", -7200)),
		Shards:        []ShardInfo{a, b},
		SchemaVersion: "bogus",
	})
	if err != nil {
		t.Fatal(err)
	}
	if m.Format != Format || m.FormatVersion != 2 || m.SchemaVersion != schemas.RowSchemaVersion ||
		m.Shards[0].Path != "data/part-00000.parquet" || m.Totals.Rows != 5 || m.Totals.Shards != 2 ||
		m.Totals.Tokens != a.Tokens+b.Tokens || string(m.Config) != "null" ||
		!m.CreatedAt.Equal(time.Date(2026, 1, 2, 5, 4, 5, 6000, time.UTC)) {
		t.Errorf("committed manifest = %+v", m)
	}
}

func TestWriteManifestRejects(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	info, err := WriteShard(ctx, s, "part-00000", makeRows(t, 0, 2))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		m    Manifest
		want string
	}{
		{"no created_at", Manifest{Shards: []ShardInfo{info}}, "created_at"},
		{"duplicate shard", Manifest{CreatedAt: testCreated, Shards: []ShardInfo{info, info}}, "listed twice"},
		{"bad config", Manifest{CreatedAt: testCreated, Config: json.RawMessage(`{"a":`), Shards: []ShardInfo{info}}, "config"},
		{"wrong sha", Manifest{CreatedAt: testCreated, Shards: []ShardInfo{func() ShardInfo {
			i := info
			i.SHA256 = strings.Repeat("0", 64)
			return i
		}()}}, "stored shard differs"},
		{"negative count", Manifest{CreatedAt: testCreated, Shards: []ShardInfo{info}, Counts: schemas.Counts{"x": -1}}, "counts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := WriteManifest(ctx, s, tc.m)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteManifest = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if ok, _ := s.Exists(ctx, ManifestKey); ok {
		t.Error("a rejected manifest was written")
	}
}

func TestParseManifestErrors(t *testing.T) {
	valid := exampleManifestJSON
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown field", `"format": "ndtrace-dataset",`, `"format": "ndtrace-dataset", "extra": 1,`, "unknown field"},
		{"wrong format", `"format": "ndtrace-dataset"`, `"format": "other"`, "format"},
		{"future version", `"format_version": 2`, `"format_version": 4`, "not supported"},
		{"no schema version", `"schema_version": "3"`, `"schema_version": ""`, "schema_version"},
		{"bad time", `"2026-11-22T07:30:00Z"`, `"yesterday"`, "malformed"},
		{"bad sha", `"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"`, `"AA"`, "sha256"},
		{"escaping path", `"data/part-00000.parquet"`, `"data/../manifest.json"`, "bad path"},
		{"nested path", `"data/part-00000.parquet"`, `"data/a/b.parquet"`, "bad path"},
		{"absolute path", `"data/part-00000.parquet"`, `"/etc/passwd"`, "bad path"},
		{"duplicate", `"data/part-00001.parquet"`, `"data/part-00000.parquet"`, "twice"},
		{"other folder", `"data/part-00000.parquet"`, `"versions/part-00000.parquet"`, "bad path"},
		{"zero rows", `"rows": 1000,`, `"rows": 0,`, "rows is 0"},
		{"learned > tokens", `"learned_tokens": 1280000,`, `"learned_tokens": 99999999,`, "inconsistent"},
		{"totals", `"shards": 2`, `"shards": 3`, "totals"},
		{"negative count", `"dropped_too_long": 5`, `"dropped_too_long": -5`, "counts"},
		{"wrong type", `"rows": 1000,`, `"rows": "1000",`, "malformed"},
		{"trailing data", "}\n", "} {}", "trailing"},
		{"not json", valid, "manifest", "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Replace(valid, tc.old, tc.new, 1)
			if in == valid {
				t.Fatalf("%q not found in the example", tc.old)
			}
			if tc.name == "trailing data" {
				in = valid + "{}"
			}
			_, err := ParseManifest([]byte(in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseManifest = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestReadManifestLimit(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, "mem://")
	if err := s.Put(ctx, ManifestKey, bytes.Repeat([]byte(" "), MaxManifestBytes+1), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadManifest(ctx, s); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("ReadManifest of an oversized manifest: %v", err)
	}
}

// FuzzParseManifest checks that ParseManifest never panics and that whatever it accepts marshals to
// canonical JSON that parses back to the same canonical JSON.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(exampleManifestJSON))
	f.Add([]byte(`{"format":"ndtrace-dataset","format_version":1,"schema_version":"1","created_at":"2026-01-01T00:00:00Z","config":null,"versions":{"tracer":"","pipeline":"","tokenizer":""},"shards":[],"totals":{"rows":0,"tokens":0,"learned_tokens":0,"shards":0}}`))
	f.Add([]byte(`{"format":"ndtrace-dataset","format_version":1,"schema_version":"1","created_at":"2026-01-01T00:00:00+05:30","config":[1,{"b":2,"a":1e400}],"shards":[{"path":"shards/x.parquet","rows":9223372036854775807,"tokens":1,"learned_tokens":1,"bytes":1,"sha256":"` + strings.Repeat("0", 64) + `"},{"path":"shards/y.parquet","rows":1,"tokens":1,"learned_tokens":0,"bytes":1,"sha256":"` + strings.Repeat("1", 64) + `"}]}`))
	f.Add([]byte(`{"format":"ndtrace-dataset","format_version":2,"schema_version":"1","created_at":"2026-01-01T00:00:00Z","config":null,"versions":{"tracer":"","pipeline":"","tokenizer":""},"shards":[],"totals":{"rows":0,"tokens":0,"learned_tokens":0,"shards":0},"packing":{"length":2048,"pad_id":7,"shards":[{"path":"packed/p.parquet","rows":2,"tokens":9,"learned_tokens":3,"bytes":10,"sha256":"` + strings.Repeat("2", 64) + `"}],"totals":{"rows":2,"tokens":9,"learned_tokens":3,"shards":1}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			// A config the decoder accepted but that does not re-encode is not possible.
			t.Fatalf("Marshal of a parsed manifest: %v", err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("canonical JSON does not parse: %v\n%s", err, out)
		}
		out2, err := m2.Marshal()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("canonical JSON is not stable:\n%s\n%s", out, out2)
		}
	})
}
