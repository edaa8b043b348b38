package schemas

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
