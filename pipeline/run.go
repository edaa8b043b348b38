package pipeline

import (
	"fmt"
	"time"

	"github.com/ndtrace/ndtrace/schemas"
)

// Run is one run of a spec over its output: the version of the dataset it creates. Every object a
// run writes before its commit lives under its work area, WorkPrefix(), except what versions share
// (batch records, shards, which are content-addressed and reused by later runs).
type Run struct {
	Spec schemas.Spec
	// ID names the version (VersionID): the work area and the version's objects are under it.
	ID string
	// CreatedAt is the version's creation time, recorded in the rows the run builds.
	CreatedAt time.Time
	// PageItems is the planning page's size (0: PageItems; tests make it small).
	PageItems int `json:",omitempty"`
}

func (r Run) pageItems() int {
	if r.PageItems > 0 {
		return r.PageItems
	}
	return PageItems
}

// NewRun is the run of spec that creates the version of createdAt.
func NewRun(spec schemas.Spec, createdAt time.Time) Run {
	return Run{Spec: spec, ID: VersionID(spec, createdAt), CreatedAt: createdAt.UTC()}
}

// VersionID names the version a run creates: its creation time (to the microsecond) and the
// spec's hash, so that two runs of one output never share a name.
func VersionID(spec schemas.Spec, createdAt time.Time) string {
	return createdAt.UTC().Format("20060102T150405.000000Z") + "-" + spec.Hash()[:8]
}

// WorkPrefix is the run's work area.
func (r Run) WorkPrefix() string { return "work/runs/" + r.ID + "/" }

// Phase is one planning phase of a run: the spec's sources (PhaseSources), then the function-level
// items found in the repositories' tests (PhaseFunctions).
type Phase string

// Planning phases.
const (
	PhaseSources   Phase = "p1"
	PhaseFunctions Phase = "p2"
)

// phasePrefix is where a phase's plan lives.
func (r Run) phasePrefix(p Phase) string { return r.WorkPrefix() + string(p) + "/" }

func (r Run) pageItemsKey(p Phase, page int) string {
	return fmt.Sprintf("%sscan/page-%06d.items.jsonl", r.phasePrefix(p), page)
}
func (r Run) pageKeysKey(p Phase, page int) string {
	return fmt.Sprintf("%sscan/page-%06d.keys", r.phasePrefix(p), page)
}
func (r Run) pageRejectsKey(p Phase, page int) string {
	return fmt.Sprintf("%sscan/page-%06d.rejects.jsonl", r.phasePrefix(p), page)
}
func (r Run) pageDoneKey(p Phase, page int) string {
	return fmt.Sprintf("%sscan/page-%06d.done.json", r.phasePrefix(p), page)
}
func (r Run) dropPrefix(p Phase, page int) string {
	return fmt.Sprintf("%sdedup/drop-p%06d-", r.phasePrefix(p), page)
}
func (r Run) dropKey(p Phase, page, flush int) string {
	return fmt.Sprintf("%s%06d.jsonl", r.dropPrefix(p, page), flush)
}
func (r Run) mergeDoneKey(p Phase) string { return r.phasePrefix(p) + "dedup/done.json" }

// KeysShardKey is where shard k (its first byte) of a phase's dedup keys is written.
func (r Run) keysShardKey(p Phase, k int) string {
	return fmt.Sprintf("%sdedup/keys-%02x.bin", r.phasePrefix(p), k)
}
func (r Run) formRejectsKey(p Phase, page int) string {
	return fmt.Sprintf("%sform/page-%06d.rejects.jsonl", r.phasePrefix(p), page)
}
func (r Run) formCarryKey(p Phase, page int) string {
	return fmt.Sprintf("%sform/page-%06d.carry.jsonl", r.phasePrefix(p), page)
}
func (r Run) formDoneKey(p Phase, page int) string {
	return fmt.Sprintf("%sform/page-%06d.done.json", r.phasePrefix(p), page)
}

// BatchKind is the kind of a planned batch: one repository, or function-level items.
type BatchKind string

// Batch kinds.
const (
	BatchRepo BatchKind = "repo"
	BatchFunc BatchKind = "fn"
)

// BatchRef names one planned batch of a run: its phase, kind and index among the batches of that
// kind. The batches of a run are, in order: the sources' repositories, the sources' functions,
// then the functions found in the repositories.
type BatchRef struct {
	Phase Phase     `json:"phase"`
	Kind  BatchKind `json:"kind"`
	Index int       `json:"index"`
}

func (b BatchRef) String() string { return fmt.Sprintf("%s-%s-%06d", b.Phase, b.Kind, b.Index) }

// BatchKey is where a planned batch is stored.
func (r Run) BatchKey(b BatchRef) string {
	return fmt.Sprintf("%sbatches/%s-%08d.json", r.phasePrefix(b.Phase), b.Kind, b.Index)
}

// FailedKey is where a batch that failed on every attempt is recorded.
func (r Run) FailedKey(b BatchRef) string {
	return fmt.Sprintf("%sfailed/%s.json", r.WorkPrefix(), b)
}

// Beat reports a stage's progress: details is the cursor a retry resumes from (an activity
// records it as its heartbeat). It is safe to call often; nil Beats are allowed.
type Beat func(details any)

func (b Beat) beat(details any) {
	if b != nil {
		b(details)
	}
}
