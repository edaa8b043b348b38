package dataset

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/parquet-go/parquet-go"

	"github.com/ndtrace/ndtrace/schemas"
)

// describeArrowParquet flattens an arrow-go Parquet schema like DescribeSchema does a parquet-go one,
// spelling logical types the way parquet-go's format package does.
func describeArrowParquet(t *testing.T, g *schema.GroupNode, prefix string, out *[]SchemaColumn) {
	t.Helper()
	for i := range g.NumFields() {
		n := g.Field(i)
		p := n.Name()
		if prefix != "" {
			p = prefix + "." + p
		}
		col := SchemaColumn{Path: p, Repetition: strings.ToLower(n.RepetitionType().String()), Physical: "group"}
		if prim, ok := n.(*schema.PrimitiveNode); ok {
			col.Physical = prim.PhysicalType().String()
		}
		switch lt := n.LogicalType().(type) {
		case nil, schema.NoLogicalType:
		case schema.StringLogicalType:
			col.Logical = "STRING"
		case schema.ListLogicalType:
			col.Logical = "LIST"
		case schema.IntLogicalType:
			col.Logical = fmt.Sprintf("INT(%d,%t)", lt.BitWidth(), lt.IsSigned())
		case schema.TimestampLogicalType:
			unit := map[schema.TimeUnitType]string{schema.TimeUnitMillis: "MILLIS", schema.TimeUnitMicros: "MICROS", schema.TimeUnitNanos: "NANOS"}[lt.TimeUnit()]
			col.Logical = fmt.Sprintf("TIMESTAMP(isAdjustedToUTC=%t,unit=%s)", lt.IsAdjustedToUTC(), unit)
		default:
			t.Fatalf("%s: logical type %T (%s) not handled by the test", p, lt, lt)
		}
		*out = append(*out, col)
		if sub, ok := n.(*schema.GroupNode); ok {
			describeArrowParquet(t, sub, p, out)
		}
	}
}

// TestArrowSchemaMatchesParquet checks that the Arrow schema, converted to Parquet by arrow-go,
// is the Parquet schema parquet-go derives from schemas.Row: names, repetition, physical and
// logical types, column for column.
func TestArrowSchemaMatchesParquet(t *testing.T) {
	sc, err := pqarrow.ToParquet(ArrowSchema(), nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	var fromArrow []SchemaColumn
	describeArrowParquet(t, sc.Root(), "", &fromArrow)
	fromGo := DescribeSchema(parquet.SchemaOf(schemas.Row{}))
	if len(fromArrow) != len(fromGo) {
		t.Errorf("arrow gives %d nodes, parquet-go %d", len(fromArrow), len(fromGo))
	}
	for i := range min(len(fromArrow), len(fromGo)) {
		if fromArrow[i] != fromGo[i] {
			t.Errorf("node %d: arrow %+v, parquet-go %+v", i, fromArrow[i], fromGo[i])
		}
	}
	if t.Failed() {
		return
	}
	// The comparison is not vacuous: the list columns are 3-level LISTs with int32 and bool leaves.
	want := map[string]SchemaColumn{
		"input_ids":              {"input_ids", "required", "group", "LIST"},
		"input_ids.list.element": {"input_ids.list.element", "required", "INT32", "INT(32,true)"},
		"loss_mask.list.element": {"loss_mask.list.element", "required", "BOOLEAN", ""},
		"created_at":             {"created_at", "required", "INT64", "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)"},
		"text":                   {"text", "required", "BYTE_ARRAY", "STRING"},
	}
	for _, c := range fromGo {
		if w, ok := want[c.Path]; ok && c != w {
			t.Errorf("%s = %+v, want %+v", c.Path, c, w)
		}
		delete(want, c.Path)
	}
	if len(want) > 0 {
		t.Errorf("columns not found: %v", want)
	}
}

// TestArrowSchemaMetadata checks the ARROW:schema key-value metadata: it decodes to ArrowSchema.
func TestArrowSchemaMetadata(t *testing.T) {
	raw, err := base64.StdEncoding.DecodeString(arrowSchemaMetadata())
	if err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Schema().Equal(ArrowSchema()) {
		t.Errorf("ARROW:schema decodes to\n%s\nwant\n%s", r.Schema(), ArrowSchema())
	}
	if arrowSchemaMetadata() != arrowSchemaMetadata() {
		t.Error("ARROW:schema is not stable")
	}
}

// TestReadShardWithArrow reads a shard with arrow-go (which honours ARROW:schema) and compares the
// columns with the rows written.
func TestReadShardWithArrow(t *testing.T) {
	rows := makeRows(t, 0, 50)
	data, _, err := EncodeShard(rows)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := pqarrow.ReadTable(context.Background(), bytes.NewReader(data), pq.NewReaderProperties(memory.DefaultAllocator),
		pqarrow.ArrowReadProperties{BatchSize: 16}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.NumRows() != 50 {
		t.Fatalf("arrow read %d rows", tbl.NumRows())
	}
	for i, f := range tbl.Schema().Fields() {
		want := ArrowSchema().Field(i)
		if f.Name != want.Name || !arrow.TypeEqual(f.Type, want.Type) || f.Nullable != want.Nullable {
			t.Errorf("field %d read as %s, want %s", i, f, want)
		}
	}
	col := tbl.Column(tbl.Schema().FieldIndices("input_ids")[0])
	row := 0
	for _, chunk := range col.Data().Chunks() {
		lists := chunk.(*array.List)
		values := lists.ListValues().(*array.Int32)
		for j := range lists.Len() {
			start, end := lists.ValueOffsets(j)
			got := values.Int32Values()[start:end]
			if fmt.Sprint(got) != fmt.Sprint(rows[row].InputIDs) {
				t.Fatalf("row %d input_ids differ", row)
			}
			row++
		}
	}
	if row != 50 {
		t.Errorf("compared %d rows", row)
	}
}

// TestArrowReadsHeadFolder reads a folder holding three versions as pyarrow reads a dataset folder
// (pq.ParquetDataset("DIR/data")): every file of data/ whose name does not start with "." or "_"
// (pyarrow's default ignore_prefixes), each read as Parquet — here with arrow-go's pqarrow, the
// same Arrow schema from ARROW:schema (pyarrow itself is not installed on the project's machine).
// It gives exactly the head's rows: data/ holds no sidecar pyarrow would try to read.
func TestArrowReadsHeadFolder(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "ds")
	s := openTest(t, dir)
	var head []string
	for i, v := range threeVersions {
		_, rows := commitPooled(t, s, v, i+1)
		if _, err := Publish(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		head = head[:0]
		for _, r := range rows {
			head = append(head, r.ID)
		}
	}
	slices.Sort(head)
	entries, err := os.ReadDir(filepath.Join(dir, ShardDir))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || strings.HasPrefix(e.Name(), "_") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, ShardDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := pqarrow.ReadTable(ctx, bytes.NewReader(data), pq.NewReaderProperties(memory.DefaultAllocator),
			pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		if err != nil {
			t.Fatalf("data/%s: %v", e.Name(), err)
		}
		if tbl.Schema().NumFields() != ArrowSchema().NumFields() {
			t.Fatalf("data/%s: %d columns, want %d", e.Name(), tbl.Schema().NumFields(), ArrowSchema().NumFields())
		}
		for i, f := range tbl.Schema().Fields() {
			if want := ArrowSchema().Field(i); f.Name != want.Name || !arrow.TypeEqual(f.Type, want.Type) || f.Nullable != want.Nullable {
				t.Errorf("data/%s: field %d read as %s, want %s", e.Name(), i, f, want)
			}
		}
		col := tbl.Column(tbl.Schema().FieldIndices("id")[0])
		for _, chunk := range col.Data().Chunks() {
			strs := chunk.(*array.String)
			for j := range strs.Len() {
				ids = append(ids, strs.Value(j))
			}
		}
		tbl.Release()
	}
	slices.Sort(ids)
	if !slices.Equal(ids, head) {
		t.Errorf("data/ read as pyarrow discovers it: %d rows, want the head's %d", len(ids), len(head))
	}
}
