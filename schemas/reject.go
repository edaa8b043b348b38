package schemas

// Reject is an input item that gives no rows, and why: the one record of every place an item can
// be dropped (reading a source, planning, tracing, building rows). A version's rejects are these,
// one JSON object a line; statistics count them by Class, never by parsing Reason.
type Reject struct {
	// Source is where the item came from: a corpus path, a repository URL.
	Source string `json:"source"`
	// Key identifies the item within its source (an item's Key).
	Key string `json:"key"`
	// Class is why, as one of a fixed set (RejectClasses); Reason says it for a person.
	Class  RejectClass `json:"class"`
	Reason string      `json:"reason"`
	// EvalSet names, for a reject of class decontaminated, the evaluation set whose function the
	// item is.
	EvalSet string `json:"eval_set,omitempty"`
}

// RejectClass is the kind of reason an item gave no rows.
type RejectClass string

// Reject classes. A traced item whose run gives no trajectory (it timed out, ran out of memory,
// was killed...) is rejected with its run's status as the class: RejectClass(status).
const (
	// RejectMalformed: a source entry that is not an item (not JSON, no code, a bad list line).
	RejectMalformed RejectClass = "malformed"
	// RejectRepository: a repository that cannot be used (it does not resolve or check out, its
	// tests do not collect, a dependency is missing).
	RejectRepository RejectClass = "repository"
	// RejectEnvironment: a repository whose environment (its declared dependencies) cannot be
	// built: a refused requirement, a resolution or installation failure (the installer's reason).
	RejectEnvironment RejectClass = "environment"
	// RejectDuplicate: the same function and input as an earlier item (or one of a dataset named in
	// dedup_against).
	RejectDuplicate RejectClass = "duplicate"
	// RejectDecontaminated: a function of an evaluation set named in decontaminate.
	RejectDecontaminated RejectClass = "decontaminated"
	// RejectNoTrajectory: traced, but no trajectory fits (too long, the run cut off).
	RejectNoTrajectory RejectClass = "no_trajectory"
	// RejectPoison: the item crashed, hung or exhausted its worker on every attempt.
	RejectPoison RejectClass = "poison"
	// RejectBatchFailed: the item's batch failed on every attempt (the version lists the batch).
	RejectBatchFailed RejectClass = "batch_failed"
)

// RejectClasses lists the classes that are not run statuses.
var RejectClasses = []RejectClass{RejectMalformed, RejectRepository, RejectEnvironment, RejectDuplicate, RejectDecontaminated,
	RejectNoTrajectory, RejectPoison, RejectBatchFailed}

// StatusReject is the class of a traced item whose run ended with status s and gave no rows.
func StatusReject(s Status) RejectClass { return RejectClass(s) }
