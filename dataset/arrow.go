package dataset

import (
	"bytes"
	"encoding/base64"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ArrowSchema returns the Arrow schema of a shard's rows: the columns of schemas.Row in order, all
// non-nullable; strings are utf8, input_ids list<element: int32 not null>, loss_mask
// list<element: bool not null>, created_at timestamp[us, tz=UTC]. A test checks that
// pqarrow.ToParquet(ArrowSchema()) equals the Parquet schema parquet-go derives from schemas.Row,
// column for column; it is also stored, IPC-serialized and base64-encoded, under ARROW:schema in every
// shard's key-value metadata, which pyarrow and arrow-go use to restore the exact Arrow types.
func ArrowSchema() *arrow.Schema {
	str := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.BinaryTypes.String} }
	i32 := func(name string) arrow.Field { return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int32} }
	list := func(name string, elem arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: arrow.ListOfField(arrow.Field{Name: "element", Type: elem})}
	}
	return arrow.NewSchema([]arrow.Field{
		str("id"),
		str("level"),
		str("repo_url"),
		str("commit"),
		str("path"),
		str("qualname"),
		str("source_id"),
		str("direction"),
		str("policy"),
		{Name: "seed", Type: arrow.PrimitiveTypes.Int64},
		str("text"),
		list("input_ids", arrow.PrimitiveTypes.Int32),
		list("loss_mask", arrow.FixedWidthTypes.Boolean),
		i32("num_tokens"),
		i32("num_learned"),
		i32("num_actions"),
		i32("num_states"),
		i32("act_step_into"),
		i32("act_step_over"),
		i32("act_step_return"),
		i32("act_breakpoint"),
		i32("act_continue"),
		i32("act_inv_step_into"),
		i32("act_inv_step_over"),
		i32("act_inv_step_call"),
		i32("ev_call"),
		i32("ev_line"),
		i32("ev_return"),
		i32("ev_exception"),
		str("exit"),
		i32("code_chars"),
		i32("code_omitted"),
		str("function_id"),
		str("split"),
		{Name: "truncated", Type: arrow.FixedWidthTypes.Boolean},
		i32("noisy_values"),
		{Name: "placeholder_gap", Type: arrow.FixedWidthTypes.Boolean},
		str("input_source"),
		str("tracer_version"),
		str("pipeline_version"),
		str("tokenizer"),
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
}

// arrowSchemaMetadata is the ARROW:schema value: ArrowSchema as an IPC stream (schema message and
// end-of-stream marker, as arrow's flight.SerializeSchema and pqarrow write it), base64-encoded.
var arrowSchemaMetadata = sync.OnceValue(func() string {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(ArrowSchema()), ipc.WithAllocator(memory.DefaultAllocator))
	if err := w.Close(); err != nil {
		panic("dataset: serialize the Arrow schema: " + err.Error())
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
})
