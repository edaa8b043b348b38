package rows

import (
	"fmt"

	"github.com/ndtrace/ndtrace/execute"
	"github.com/ndtrace/ndtrace/schemas"
)

// Decontamination of rows (Options.Decontaminate): every function that appears in a row's CODE is
// checked against the spec's evaluation sets, at both levels. A function-level item whose module
// holds a function of a set (any of its functions, not only the whole module, which planning
// checks exactly) is a reject of class decontaminated naming the set and the item matched; a
// repository row whose CODE context holds one is not built and is counted
// (schemas.CountDecontaminated).

// DecontaminatedError is the error of building a row whose CODE holds a function of an
// evaluation set.
type DecontaminatedError struct {
	// Set names the evaluation set; Item the item of the set matched.
	Set, Item string
}

func (e *DecontaminatedError) Error() string {
	return fmt.Sprintf("decontaminated: %s matches %s", e.Set, e.Item)
}

// decontaminated returns a *DecontaminatedError when the CODE context code of a repository row
// holds a function of an evaluation set. A function-level row's CODE is its item's module, checked
// once per item (decontaminatedItem).
func decontaminated(src Source, code string, o Options) error {
	if o.Decontaminate == nil || src.Level == "function" {
		return nil
	}
	if set, item, hit := o.Decontaminate(code); hit {
		return &DecontaminatedError{Set: set, Item: item}
	}
	return nil
}

// decontaminatedItem is the reject of a function-level item whose module holds a function of an
// evaluation set, or nil.
func decontaminatedItem(t *execute.TracedItem, o Options) *schemas.Reject {
	if o.Decontaminate == nil {
		return nil
	}
	set, item, hit := o.Decontaminate(t.Item.Code)
	if !hit {
		return nil
	}
	e := DecontaminatedError{Set: set, Item: item}
	return &schemas.Reject{Source: t.Item.Origin(), Key: t.Item.Key, Class: schemas.RejectDecontaminated,
		Reason: cutText(e.Error(), MaxRejectReason), EvalSet: set}
}
