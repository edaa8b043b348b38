package schemas

import "time"

// ReplayOutcome is what replaying one row's actions on Python's own debugger (bdb, the engine of
// pdb) inside the sandbox found (`ndtrace verify`, issue 16).
type ReplayOutcome struct {
	// Replayed is false for a row that is not replayed: an inverse row (pdb does not run
	// backwards), or a row whose item cannot be run again; Detail says which.
	Replayed bool `json:"replayed"`
	// Agreed is true when every landing state matched the row's next state.
	Agreed bool `json:"agreed"`
	// Kind classifies a disagreement: a named difference between the paper's tree semantics and
	// pdb's that docs/debugger.md documents, counted separately, or "mismatch". Empty when Agreed.
	Kind string `json:"kind,omitempty"`
	// Detail says, for a person, the first state that differs (action number, what the row shows,
	// what pdb showed), or why the row was not replayed.
	Detail string `json:"detail,omitempty"`
}

// VerifyFormat is the format field of a verification certificate (verify.json).
const VerifyFormat = "ndtrace-verify"

// Kinds of a re-executed row that does not agree with the stored one (Verification.Differences).
const (
	// DiffText: the rebuilt trajectory's text differs; the example names the first differing state.
	DiffText = "text"
	// DiffInputIDs: the text is the same but its token ids differ (the tokenizer changed).
	DiffInputIDs = "input_ids"
	// DiffStatus: the re-executed run ended in a status that gives no trajectory (a timeout, an
	// error of the sandbox), though the stored row was built from a complete run.
	DiffStatus = "status"
	// DiffRebuild: the trajectory could not be rebuilt from the new trace with the row's seed and
	// policy (no tree in the row's direction, an unknown policy, a trajectory now too long).
	DiffRebuild = "rebuild"
	// DiffItemMissing: the row's input item is no longer in the sources of the run's spec (or,
	// for a function found in a repository's tests, no longer found there).
	DiffItemMissing = "item_missing"
)

// Reasons a sampled row is not re-executed (Verification.NotReExecuted) or not replayed
// (VerifyReplay.NotReplayed).
const (
	// NotRunRepositoryMoved: a row of a repository whose ref now resolves to another commit than
	// the row's (the repository's rows and the function-level rows found in its tests).
	NotRunRepositoryMoved = "repository_moved"
	// NotReplayedNotRun: replay on bdb was off (--replay=false) or this ndtrace has none.
	NotReplayedNotRun = "not_run"
	// NotReplayedInverse: an inverse row (pdb does not run backwards).
	NotReplayedInverse = "inverse"
	// NotReplayedNotReExecuted: the row's item was not re-executed (see NotReExecuted).
	NotReplayedNotReExecuted = "not_re_executed"
	// NotReplayedNoEntry: a repository-level row whose entry call the re-executed trace of its
	// test does not give (its seed now picks another function, or the trace has no call).
	NotReplayedNoEntry = "entry_not_found"
	// NotReplayedOther: the replayer declined the row without naming a kind (its detail says why).
	NotReplayedOther = "not_replayable"
)

// Verification is a dataset version's certificate (verify.json, docs/verify.md): what
// `ndtrace verify` found when it re-executed a sample of the version's rows and, where it could,
// replayed them on Python's own debugger.
type Verification struct {
	// Format is VerifyFormat.
	Format string `json:"format"`
	// Version is the dataset version verified (empty for a dataset written before versions);
	// DatasetCreatedAt its created_at, Rows its rows.
	Version          string    `json:"version,omitempty"`
	DatasetCreatedAt time.Time `json:"dataset_created_at"`
	Rows             int64     `json:"rows"`
	// Sample says how the rows were picked.
	Sample VerifySample `json:"sample"`
	// Checked counts the sampled rows re-executed and compared, Agreed those whose text and
	// input_ids equal the stored row's, Agreement is Agreed/Checked (0 when nothing was checked).
	Checked   int     `json:"checked"`
	Agreed    int     `json:"agreed"`
	Agreement float64 `json:"agreement"`
	// Differences counts the checked rows that did not agree, by kind (Diff*).
	Differences map[string]int `json:"differences"`
	// NotReExecuted counts the sampled rows that were not re-executed, by reason
	// (NotRunRepositoryMoved): neither agreement nor difference.
	NotReExecuted map[string]int `json:"not_re_executed"`
	// Replay counts the replays on bdb.
	Replay VerifyReplay `json:"replay"`
	// MinAgreement is the threshold asked for; Passed is true when Checked > 0 and Agreement is at
	// least MinAgreement.
	MinAgreement float64 `json:"min_agreement"`
	Passed       bool    `json:"passed"`
	// Verifier is the ndtrace that verified (its tracer and pipeline versions); DatasetVersions
	// those the dataset's manifest records.
	Verifier        VerifyVersions `json:"verifier"`
	DatasetVersions VerifyVersions `json:"dataset_versions"`
	// StartedAt is when the verification started, Seconds how long it took.
	StartedAt time.Time `json:"started_at"`
	Seconds   float64   `json:"seconds"`
	// Examples are the first differences and replay disagreements (at most 50), in sample order.
	Examples []VerifyExample `json:"examples,omitempty"`
}

// VerifySample describes a verification's sample: its seed, the size asked for (Requested, or
// Fraction of the rows), the rows taken (Size) and the strata they were drawn from.
type VerifySample struct {
	Seed      uint64  `json:"seed"`
	Requested int     `json:"requested,omitempty"`
	Fraction  float64 `json:"fraction,omitempty"`
	Size      int     `json:"size"`
	Strata    int     `json:"strata"`
}

// VerifyReplay counts the replays on bdb: Run rows replayed, Agreed those whose every landing
// state matched, Differences the others by kind (schemas.ReplayOutcome.Kind), NotReplayed the
// sampled rows not replayed, by reason.
type VerifyReplay struct {
	Run         int            `json:"run"`
	Agreed      int            `json:"agreed"`
	Differences map[string]int `json:"differences"`
	NotReplayed map[string]int `json:"not_replayed"`
}

// VerifyVersions are the tracer and pipeline versions of an ndtrace.
type VerifyVersions struct {
	Tracer   string `json:"tracer"`
	Pipeline string `json:"pipeline"`
}

// VerifyExample is one row that did not agree: its id, what kind of difference, "reexec" or
// "replay", the first differing state (its index among the text's frames, 0 being the CODE
// context; -1 when not a text difference) and a detail for a person.
type VerifyExample struct {
	RowID  string `json:"row_id"`
	Check  string `json:"check"`
	Kind   string `json:"kind"`
	State  int    `json:"state"`
	Detail string `json:"detail"`
}
